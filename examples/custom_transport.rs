//! A transport of your own in one file: an in-memory pipe that implements
//! jrpc's `Listener` and `Dialer`. A `Server` serves it and a `Client`
//! dials it, exactly as they do TCP. A message broker or a serial line
//! would be written the same way.
//!
//! ```sh
//! cargo run --example custom_transport
//! ```

use std::io;

use bytes::Bytes;
use jrpc::client::Client;
use jrpc::codec::Inbound;
use jrpc::context::ConnectionInfo;
use jrpc::server::Server;
use jrpc::transport::{Connection, Dialer, Listener};
use tokio::sync::mpsc;

/// One end of a pipe: frames from the other end come in, ours go out.
fn end(incoming: mpsc::Receiver<Bytes>, outgoing: mpsc::Sender<Bytes>) -> Connection {
    let frames_in = futures_util::stream::unfold(incoming, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok(Inbound::Frame(frame)), rx))
    });
    let frames_out = futures_util::sink::unfold(outgoing, |tx, frame: Bytes| async move {
        tx.send(frame)
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
        Ok::<_, io::Error>(tx)
    });
    let info = ConnectionInfo {
        transport: "memory",
        peer_addr: None,
        local_addr: None,
    };
    Connection::new(frames_in, frames_out, info)
}

/// Takes the server ends of the pipes dialers open.
struct MemoryListener(mpsc::Receiver<Connection>);

impl Listener for MemoryListener {
    async fn accept(&mut self) -> io::Result<Connection> {
        match self.0.recv().await {
            Some(connection) => Ok(connection),
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> String {
        "memory:".into()
    }
}

/// Opens a pipe: one end to the listener, the other for the client.
struct MemoryDialer(mpsc::Sender<Connection>);

impl Dialer for MemoryDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let (to_server, server_in) = mpsc::channel(64);
        let (to_client, client_in) = mpsc::channel(64);
        self.0
            .send(end(server_in, to_client))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::ConnectionRefused))?;
        Ok(end(client_in, to_server))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (connections, accepted) = mpsc::channel(8);
    let serving = Server::new(jrpc::demo::router()).serve(MemoryListener(accepted));
    let client = Client::builder().connect_with(MemoryDialer(connections)).await?;

    let difference: i64 = client.call("subtract", (42, 23)).await?;
    println!("subtract over {}: {difference}", serving.local_addr());

    drop(client);
    serving.shutdown().await;
    Ok(())
}
