//! Real message brokers for the tests: Debian's `nats-server`, `mosquitto`
//! and `rabbitmq-server`, each started on free ports with a data directory
//! of its own, and stopped (with everything it started) when dropped.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Nats,
    Mosquitto,
    RabbitMq,
}

/// A broker process of the test's own.
pub struct Broker {
    kind: Kind,
    /// The port clients connect to.
    pub port: u16,
    /// The Erlang port mapper's port (RabbitMQ only).
    epmd_port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Launches tried again after losing a port race.
    port_retries: u32,
}

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Finds a broker's program on PATH or in the sbin directories Debian
/// installs them to.
fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/lib/rabbitmq/bin".into()])
        .map(|dir: PathBuf| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} is not installed (apt-get install nats-server mosquitto rabbitmq-server)")
        })
}

impl Broker {
    pub fn start(kind: Kind) -> Broker {
        let dir = std::env::temp_dir().join(format!(
            "jrpc-broker-{}-{}-{:?}",
            std::process::id(),
            free_port(),
            kind
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut broker = Broker {
            kind,
            port: free_port(),
            epmd_port: free_port(),
            dir,
            child: None,
            port_retries: 0,
        };
        broker.launch();
        broker
    }

    /// The URL of the broker, as the transports take it.
    pub fn url(&self) -> String {
        match self.kind {
            Kind::Nats => format!("nats://127.0.0.1:{}", self.port),
            Kind::Mosquitto => format!("mqtt://127.0.0.1:{}", self.port),
            Kind::RabbitMq => format!("amqp://127.0.0.1:{}/%2f", self.port),
        }
    }

    fn launch(&mut self) {
        let log = std::fs::File::create(self.dir.join("broker.log")).unwrap();
        let mut command = match self.kind {
            Kind::Nats => {
                let mut c = Command::new(program("nats-server"));
                c.args(["-a", "127.0.0.1", "-p", &self.port.to_string()]);
                c
            }
            Kind::Mosquitto => {
                let config = self.dir.join("mosquitto.conf");
                std::fs::write(
                    &config,
                    format!(
                        "listener {} 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 100000\n",
                        self.port
                    ),
                )
                .unwrap();
                let mut c = Command::new(program("mosquitto"));
                c.arg("-c").arg(&config);
                c
            }
            Kind::RabbitMq => self.rabbitmq_command(),
        };
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        self.child = Some(command.spawn().unwrap());
        self.wait_until_up();
    }

    /// Whether the broker died because a port it was given (RabbitMQ's
    /// distribution port, picked free a moment before) was taken meanwhile
    /// by another process, or because its port mapper (epmd, started by
    /// the broker's own script on a port of its own) was not up yet when
    /// the node registered with it (`nodistribution`, seen on a loaded
    /// machine with two brokers starting at once): worth another try with
    /// fresh ports.
    fn lost_a_port_race(&self) -> bool {
        let log = self.log();
        self.kind == Kind::RabbitMq
            && (log.contains("dist_port_already_used")
                || log.contains("eaddrinuse")
                || log.contains("nodistribution"))
    }

    fn rabbitmq_command(&self) -> Command {
        let dir = &self.dir;
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        // Not /usr/sbin's wrapper, which switches to the rabbitmq user.
        let script = Path::new("/usr/lib/rabbitmq/bin/rabbitmq-server");
        let script = if script.is_file() {
            script.to_path_buf()
        } else {
            program("rabbitmq-server")
        };
        let mut c = Command::new("sh");
        c.arg(script)
            .current_dir(dir)
            .env("HOME", dir)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.port.to_string())
            .env("RABBITMQ_DIST_PORT", free_port().to_string())
            .env("ERL_EPMD_PORT", self.epmd_port.to_string())
            .env("RABBITMQ_NODENAME", format!("jrpc{}@localhost", self.port))
            .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", dir.join("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
            .env("RABBITMQ_PID_FILE", dir.join("pid"));
        c
    }

    fn wait_until_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                // RabbitMQ listens a while before it takes connections (on a
                // loaded machine, seconds): up once it answers a client's
                // greeting.
                if self.kind != Kind::RabbitMq || amqp_greets(stream) {
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                if self.lost_a_port_race() && self.port_retries < 3 {
                    self.port_retries += 1;
                    self.child = None;
                    // Its port mapper may have lost the race too.
                    self.epmd_port = free_port();
                    return self.launch();
                }
                panic!("{:?} exited ({status}): {}", self.kind, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "{:?} did not come up: {}",
                self.kind,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("broker.log")).unwrap_or_default()
    }

    /// Kills the broker (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // The whole process group: RabbitMQ's script starts the VM.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            let deadline = Instant::now() + Duration::from_secs(10);
            while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Kills the broker and starts it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
        if self.kind == Kind::RabbitMq {
            // The Erlang port mapper the broker started leaves its group.
            // It refuses while the killed node is still registered.
            for _ in 0..20 {
                let killed = Command::new("epmd")
                    .args(["-port", &self.epmd_port.to_string(), "-kill"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                if killed.is_ok_and(|s| s.success()) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the AMQP broker on `stream` answers the protocol header with
/// its first frame (`Connection.Start`, a method frame: type 1), as it does
/// once it takes connections; before that it closes or aborts them.
fn amqp_greets(mut stream: TcpStream) -> bool {
    use std::io::{Read, Write};
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut first = [0u8; 1];
    stream.write_all(b"AMQP\x00\x00\x09\x01").is_ok()
        && stream.read_exact(&mut first).is_ok()
        && first[0] == 1
}
