//! A child process as the other side: talk over its stdin and stdout.

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};

use tokio::io::AsyncReadExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::context::ConnectionInfo;
use crate::transport::CloseReason as EofReason;

/// What happens to a child's stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StderrMode {
    /// Shares this process's stderr (the default).
    #[default]
    Inherit,
    /// Kept: the last 64 KiB are available from
    /// [`Client::captured_stderr`](crate::client::Client::captured_stderr),
    /// and the last line is part of the reason calls fail with when the
    /// child dies.
    Capture,
    /// Discarded.
    Null,
}

/// The most stderr kept in [`StderrMode::Capture`].
const CAPTURE_LIMIT: usize = 64 * 1024;

/// A spawned child, ready to carry a peer.
pub(crate) struct Spawned {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) info: ConnectionInfo,
    /// Gives why the stream ended: the exit status, and stderr's last line.
    pub(crate) eof_reason: EofReason,
    /// Owns the child: aborting it kills the child.
    pub(crate) monitor: JoinHandle<()>,
    /// Resolves with the exit reason once the child has exited.
    pub(crate) exited: EofReason,
    pub(crate) stderr: Option<Arc<Mutex<String>>>,
    pub(crate) pid: Option<u32>,
    /// Set once the child has exited.
    pub(crate) exit: ExitWatch,
}

/// Whether (and how) a child has exited; `None` while it runs.
pub(crate) type ExitWatch = watch::Receiver<Option<io::Result<ExitStatus>>>;

pub(crate) fn spawn(mut command: Command, stderr: StderrMode) -> io::Result<Spawned> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(match stderr {
            StderrMode::Inherit => Stdio::inherit(),
            StderrMode::Capture => Stdio::piped(),
            StderrMode::Null => Stdio::null(),
        })
        .kill_on_drop(true);
    let program = command.as_std().get_program().to_string_lossy().into_owned();
    let mut child = command.spawn()?;
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| io::Error::other("child stdin was not piped"))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| io::Error::other("child stdout was not piped"))?;
    let captured = child.stderr.take().map(|mut pipe| {
        let buffer = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&buffer);
        // Raw reads, so that no line, however long and whatever its bytes,
        // ever stops the draining (a full pipe would freeze the child).
        tokio::spawn(async move {
            let mut chunk = vec![0u8; 8192];
            loop {
                let n = match pipe.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
                text.push_str(&String::from_utf8_lossy(&chunk[..n]));
                if text.len() > CAPTURE_LIMIT {
                    let cut = text.len() - CAPTURE_LIMIT;
                    let cut = (cut..text.len())
                        .find(|&i| text.is_char_boundary(i))
                        .unwrap_or(text.len());
                    text.drain(..cut);
                }
            }
        });
        buffer
    });
    let pid = child.id();
    let info = ConnectionInfo {
        transport: "child",
        peer_addr: pid.map(|pid| format!("pid {pid}")),
        local_addr: None,
    };
    let (status_tx, status_rx) = watch::channel::<Option<io::Result<ExitStatus>>>(None);
    let monitor = tokio::spawn(async move {
        let status = child.wait().await;
        let _ = status_tx.send(Some(status));
        // Keep `child` owned here until it has been reaped.
    });
    let exit_reason = |mut status_rx: watch::Receiver<Option<io::Result<ExitStatus>>>,
                       last_line: Option<Arc<Mutex<String>>>,
                       program: String|
     -> EofReason {
        Box::pin(async move {
            let status = loop {
                if let Some(status) = status_rx.borrow_and_update().as_ref() {
                    break match status {
                        Ok(status) => status.to_string(),
                        Err(e) => format!("unknown status ({e})"),
                    };
                }
                status_rx.changed().await.ok()?;
            };
            let mut reason = format!("child process {program} exited ({status})");
            if let Some(buffer) = last_line {
                // Give the stderr reader a moment to take the final lines.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let text = buffer.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(line) = text.lines().rev().find(|l| !l.trim().is_empty()) {
                    reason.push_str(": ");
                    reason.push_str(line.trim());
                }
            }
            Some(reason)
        })
    };
    let eof_reason = exit_reason(status_rx.clone(), captured.clone(), program.clone());
    let exited = exit_reason(status_rx.clone(), captured.clone(), program);
    Ok(Spawned {
        stdin,
        stdout,
        info,
        eof_reason,
        monitor,
        exited,
        stderr: captured,
        pid,
        exit: status_rx,
    })
}

impl Spawned {
    /// The child's stdout and stdin as a connection that says, once it
    /// ends, how the child exited. The caller keeps what else it needs
    /// (the monitor owning the child, its pid, captured stderr).
    pub(crate) fn connection(
        self,
        framing: crate::codec::Framing,
        max_frame_len: usize,
    ) -> (crate::transport::Connection, SpawnedRest) {
        let connection =
            crate::transport::Connection::over_io(self.stdout, self.stdin, framing, max_frame_len, self.info)
                .with_close_reason(self.eof_reason);
        let rest = SpawnedRest {
            monitor: self.monitor,
            exited: self.exited,
            stderr: self.stderr,
            pid: self.pid,
            exit: self.exit,
        };
        (connection, rest)
    }
}

/// What a spawned child leaves besides its connection.
pub(crate) struct SpawnedRest {
    /// Owns the child: aborting it kills the child.
    pub(crate) monitor: JoinHandle<()>,
    /// Resolves with the exit reason once the child has exited.
    pub(crate) exited: EofReason,
    pub(crate) stderr: Option<Arc<Mutex<String>>>,
    pub(crate) pid: Option<u32>,
    pub(crate) exit: ExitWatch,
}

/// Kills the child it owns when dropped.
struct KillOnDrop(JoinHandle<()>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // The monitor task owns the child; aborting it drops (kills) it.
        self.0.abort();
    }
}

/// Spawns a command for each connection and talks over its stdin and
/// stdout. The child lives as long as its connection: it is killed once the
/// connection has closed.
pub struct ChildDialer {
    make: Box<dyn Fn() -> Command + Send + Sync>,
    stderr: StderrMode,
    framing: crate::codec::Framing,
    max_frame_len: usize,
}

impl ChildDialer {
    /// Spawns the command `make` builds, each time it dials.
    pub fn new(make: impl Fn() -> Command + Send + Sync + 'static) -> Self {
        ChildDialer {
            make: Box::new(make),
            stderr: StderrMode::Inherit,
            framing: crate::codec::Framing::Ndjson,
            max_frame_len: crate::message::Limits::DEFAULT_MAX_FRAME_LEN,
        }
    }

    /// What happens to the child's stderr (default: inherited).
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// The framing on the child's stdio (default newline-delimited JSON).
    pub fn framing(mut self, framing: crate::codec::Framing, max_frame_len: usize) -> Self {
        self.framing = framing;
        self.max_frame_len = max_frame_len;
        self
    }
}

impl std::fmt::Debug for ChildDialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildDialer")
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

impl crate::transport::Dialer for ChildDialer {
    async fn dial(&self) -> io::Result<crate::transport::Connection> {
        let spawned = spawn((self.make)(), self.stderr)?;
        let (connection, rest) = spawned.connection(self.framing, self.max_frame_len);
        Ok(connection.owning(KillOnDrop(rest.monitor)))
    }
}
