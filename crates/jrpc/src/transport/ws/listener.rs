//! A listener of its own for WebSocket connections: a TCP port where every
//! connection is upgraded (whatever the path) and carried as one
//! [`Connection`], for [`Server::serve`](crate::server::Server::serve) and
//! [`Server::serve_with`](crate::server::Server::serve_with). (The HTTP
//! server upgrades on its own port beside its POST endpoint.)

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};

use super::{pump, WsOptions};
use crate::context::ConnectionInfo;
use crate::transport::{Connection, Listener};

/// How long a client has to complete its upgrade.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Upgrades in progress at once, at most: a client that connects and says
/// nothing holds one slot until its timeout, never the accepting.
const HANDSHAKES: usize = 64;

/// Accepts WebSocket connections on a TCP port, one JSON text per message.
///
/// Upgrades run on tasks of their own (bounded in number and time), so a
/// slow or silent client never holds up the others; dropping the listener
/// stops accepting.
///
/// ```no_run
/// use jrpc::server::Server;
/// use jrpc::transport::ws::{WsListener, WsOptions};
///
/// # async fn run() -> std::io::Result<()> {
/// let router = jrpc::Router::new().sync_method("ping", || Ok("pong"));
/// let listener = WsListener::bind("127.0.0.1:0", WsOptions::default()).await?;
/// let serving = Server::new(router).serve(listener);
/// println!("listening on {}", serving.local_addr()); // ws://127.0.0.1:PORT
/// # Ok(()) }
/// ```
pub struct WsListener {
    accepted: mpsc::Receiver<Connection>,
    local_addr: String,
}

impl std::fmt::Debug for WsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsListener")
            .field("local_addr", &self.local_addr)
            .finish()
    }
}

impl WsListener {
    /// Listens on `addr` (`host:port`; port 0 picks a free one).
    pub async fn bind(addr: impl tokio::net::ToSocketAddrs, options: WsOptions) -> io::Result<Self> {
        let listener = crate::transport::tcp::listen(addr).await?;
        let local_addr = format!("ws://{}", listener.local_addr()?);
        let (tx, accepted) = mpsc::channel(HANDSHAKES);
        tokio::spawn(accept(listener, options, tx));
        Ok(WsListener { accepted, local_addr })
    }
}

impl Listener for WsListener {
    async fn accept(&mut self) -> io::Result<Connection> {
        match self.accepted.recv().await {
            Some(connection) => Ok(connection),
            // The accepting task is gone: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> String {
        self.local_addr.clone()
    }
}

/// Accepts TCP connections and upgrades each on a task of its own, until
/// the listener is dropped.
async fn accept(listener: tokio::net::TcpListener, options: WsOptions, tx: mpsc::Sender<Connection>) {
    let upgrades = Arc::new(Semaphore::new(HANDSHAKES));
    let inherited = crate::transport::tcp::inherits(&listener);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = tx.closed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                tracing::warn!(error = %e, "websocket: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&upgrades).try_acquire_owned() else {
            tracing::warn!("websocket: too many upgrades in progress, connection dropped");
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            crate::transport::tcp::tune_accepted(&stream, inherited);
            let info = ConnectionInfo {
                transport: "websocket",
                ..crate::transport::tcp::accepted_info(&stream, peer)
            };
            let upgrade = tokio_tungstenite::accept_async_with_config(stream, Some(options.config()));
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, upgrade).await {
                Ok(Ok(ws)) => {
                    let (frames_in, frames_out) = pump(ws, options);
                    let _ = tx.send(Connection::unkinded(frames_in, frames_out, info)).await;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, peer = ?info.peer_addr, "websocket: upgrade failed")
                }
                Err(_) => tracing::debug!(peer = ?info.peer_addr, "websocket: no upgrade in time"),
            }
        });
    }
}
