//! Serving over this process's stdin and stdout.

use std::sync::Arc;

use crate::codec::Framing;
use crate::peer::{ConnectionInfo, Peer, PeerBuilder};
use crate::Router;

/// The connection info recorded for stdio.
pub(crate) fn info() -> ConnectionInfo {
    ConnectionInfo {
        transport: "stdio",
        peer_addr: None,
        local_addr: None,
    }
}

/// Serves `router` on stdin/stdout, one JSON text per line, until stdin
/// ends; returns once everything read has been answered and written.
/// Nothing else may write to stdout meanwhile (send logs to stderr).
///
/// For other framings and settings, see
/// [`Server::serve_stdio`](crate::transport::Server::serve_stdio).
pub async fn serve_stdio(router: Router) -> Arc<str> {
    serve(Peer::builder().router(router), Framing::Ndjson).await
}

pub(crate) async fn serve(builder: PeerBuilder, framing: Framing) -> Arc<str> {
    let peer = builder
        .extension(info())
        .start(tokio::io::stdin(), tokio::io::stdout(), framing);
    peer.closed().await
}
