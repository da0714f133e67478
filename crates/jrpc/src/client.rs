//! The calling side: connect to a server over TCP, a Unix socket or a child
//! process's stdio, then call it.
//!
//! ```no_run
//! use jrpc::client::Client;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder().connect_tcp("127.0.0.1:4000").await?;
//! let difference: i64 = client.call("subtract", (42, 23)).await?;
//!
//! // Or run the server as a child process and talk over its stdin/stdout.
//! let mut command = tokio::process::Command::new("jrpc");
//! command.args(["serve", "--stdio"]);
//! let child = Client::builder().spawn(command)?;
//! let sum: i64 = child.call("sum", [1, 2, 3]).await?;
//! # Ok(()) }
//! ```

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::codec::Framing;
use crate::peer::{Batch, CallError, CancelProtocol, Peer, PeerBuilder};
pub use crate::transport::child::StderrMode;
use crate::Router;

/// Settings for a [`Client`], and the ways to connect one.
pub struct ClientBuilder {
    peer: PeerBuilder,
    framing: Framing,
    stderr: StderrMode,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            peer: Peer::builder(),
            framing: Framing::Ndjson,
            stderr: StderrMode::Inherit,
        }
    }
}

impl ClientBuilder {
    /// The framing (default newline-delimited JSON).
    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    /// The timeout of calls that do not set their own (default 30 s).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.peer = self.peer.call_timeout(timeout);
        self
    }

    /// Cancellation across the connection (off by default).
    pub fn cancellation(mut self, protocol: CancelProtocol) -> Self {
        self.peer = self.peer.cancellation(protocol);
        self
    }

    /// Methods the server may call on this client (none by default).
    pub fn router(mut self, router: Router) -> Self {
        self.peer = self.peer.router(router);
        self
    }

    /// What to do with a spawned child's stderr (default: inherit).
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// Connects over TCP.
    pub async fn connect_tcp(self, addr: impl tokio::net::ToSocketAddrs) -> io::Result<Client> {
        let stream = tokio::net::TcpStream::connect(addr).await?;
        let (read, write, info) = crate::transport::tcp::split(stream);
        Ok(finish(
            self.peer.extension(info),
            (read, write, self.framing),
            None,
            None,
        ))
    }

    /// Connects to a Unix domain socket.
    #[cfg(unix)]
    pub async fn connect_unix(self, path: impl AsRef<std::path::Path>) -> io::Result<Client> {
        let stream = tokio::net::UnixStream::connect(path).await?;
        let (read, write, info) = crate::transport::unix::split(stream);
        Ok(finish(
            self.peer.extension(info),
            (read, write, self.framing),
            None,
            None,
        ))
    }

    /// Spawns `command` and talks to it over its stdin and stdout. The child
    /// is killed when the client is dropped; if it dies first, pending calls
    /// fail at once with its exit status.
    pub fn spawn(self, command: impl Into<tokio::process::Command>) -> io::Result<Client> {
        let spawned = crate::transport::child::spawn(command.into(), self.stderr)?;
        let peer = self.peer.extension(spawned.info).eof_reason(spawned.eof_reason);
        let pid = spawned.pid;
        let mut client = finish(
            peer,
            (spawned.stdout, spawned.stdin, self.framing),
            Some(spawned.monitor),
            spawned.stderr,
        );
        if let Some(owner) = Arc::get_mut(&mut client.owner) {
            owner.pid = pid;
        }
        Ok(client)
    }

    /// Runs the client over any reader/writer pair.
    pub fn over<R, W>(self, reader: R, writer: W) -> Client
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        finish(self.peer, (reader, writer, self.framing), None, None)
    }
}

/// Starts the peer and wraps it in a client that owns the connection.
fn finish<R, W>(
    builder: PeerBuilder,
    (reader, writer, framing): (R, W, Framing),
    child: Option<JoinHandle<()>>,
    stderr: Option<Arc<Mutex<String>>>,
) -> Client
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let peer = builder.start(reader, writer, framing);
    Client {
        owner: Arc::new(Owner {
            peer: peer.clone(),
            child,
            stderr,
            pid: None,
        }),
        peer,
    }
}

/// Closes the connection (and kills a spawned child) when the last clone of
/// a [`Client`] goes.
struct Owner {
    peer: Peer,
    child: Option<JoinHandle<()>>,
    stderr: Option<Arc<Mutex<String>>>,
    pid: Option<u32>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.peer.close();
        if let Some(child) = &self.child {
            // The task owns the child; dropping it kills the child.
            child.abort();
        }
    }
}

/// The calling side of a connection. Cheap to clone; the connection closes
/// (and a spawned child is killed) when the last clone is dropped.
#[derive(Clone)]
pub struct Client {
    peer: Peer,
    owner: Arc<Owner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("peer", &self.peer).finish()
    }
}

impl Client {
    /// Settings for a new client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Calls `method` and decodes the result into `R`. See [`Peer::call`].
    pub async fn call<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> Result<R, CallError> {
        self.peer.call(method, params).await
    }

    /// Calls `method` with its own timeout.
    pub async fn call_with_timeout<R: DeserializeOwned>(
        &self,
        method: &str,
        params: impl Serialize,
        timeout: Duration,
    ) -> Result<R, CallError> {
        self.peer.call_with_timeout(method, params, timeout).await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: impl Serialize) -> Result<(), CallError> {
        self.peer.notify(method, params).await
    }

    /// Starts a batch. See [`Peer::batch`].
    pub fn batch(&self) -> Batch {
        self.peer.batch()
    }

    /// The underlying peer, for raw calls and connection state.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// What a spawned child wrote to stderr (the last 64 KiB), when it was
    /// spawned with [`StderrMode::Capture`].
    pub fn captured_stderr(&self) -> Option<String> {
        let buffer = self.owner.stderr.as_ref()?;
        Some(buffer.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// The process id of a spawned child.
    pub fn child_id(&self) -> Option<u32> {
        self.owner.pid
    }

    /// Closes the connection gracefully; see [`Peer::close`].
    pub async fn close(self) -> Arc<str> {
        self.peer.close();
        self.peer.closed().await
    }
}
