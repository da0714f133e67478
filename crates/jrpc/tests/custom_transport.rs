//! A transport of one's own, from outside the crate: an in-memory pipe
//! implementing the public `Listener` and `Dialer` traits, served by a
//! `Server` and dialed by a `Client`, with calls both ways over it.

use std::future::IntoFuture;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use jrpc::caller::Caller;
use jrpc::client::{Client, Retry};
use jrpc::codec::Inbound;
use jrpc::context::ConnectionInfo;
use jrpc::server::Server;
use jrpc::transport::{Connection, Dialer, Listener, OutFrame, OutKind};
use jrpc::{Error, RequestContext, Router};
use tokio::sync::mpsc;

/// One direction of a pipe as a connection's frames: what one end sends,
/// the other receives.
fn pipe_end(
    incoming: mpsc::Receiver<Bytes>,
    outgoing: mpsc::Sender<Bytes>,
    transport: &'static str,
) -> Connection {
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
        transport,
        peer_addr: Some("memory".into()),
        local_addr: None,
    };
    Connection::new(frames_in, frames_out, info)
}

/// Accepts the server ends of pipes that dialers open.
struct MemoryListener(mpsc::Receiver<Connection>);

impl Listener for MemoryListener {
    async fn accept(&mut self) -> io::Result<Connection> {
        match self.0.recv().await {
            Some(connection) => Ok(connection),
            // No dialer is left: nothing will ever come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> String {
        "memory:".into()
    }
}

/// Opens a pipe, hands one end to the listener, keeps the other.
#[derive(Clone)]
struct MemoryDialer {
    listener: mpsc::Sender<Connection>,
    dials: Arc<AtomicUsize>,
}

impl Dialer for MemoryDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let (to_server, server_in) = mpsc::channel(64);
        let (to_client, client_in) = mpsc::channel(64);
        self.listener
            .send(pipe_end(server_in, to_client, "memory"))
            .await
            .map_err(|_| io::Error::from(io::ErrorKind::ConnectionRefused))?;
        self.dials.fetch_add(1, Ordering::SeqCst);
        Ok(pipe_end(client_in, to_server, "memory"))
    }
}

fn memory() -> (MemoryListener, MemoryDialer) {
    let (tx, rx) = mpsc::channel(8);
    let dialer = MemoryDialer {
        listener: tx,
        dials: Arc::new(AtomicUsize::new(0)),
    };
    (MemoryListener(rx), dialer)
}

async fn bounded<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish"))
}

/// Works with anything that calls: a client, or the peer a handler gets.
async fn ask_name(caller: &impl Caller) -> Result<String, jrpc::CallError> {
    caller.call("whoami", ()).await
}

#[tokio::test]
async fn calls_go_both_ways_over_a_transport_defined_outside_the_crate() {
    let router = Router::new()
        .method("greet", |(): (), ctx: RequestContext| async move {
            let client = ctx.peer().expect("served on a peer");
            let name = ask_name(&client)
                .await
                .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
            let transport = ctx.connection_info().map(|i| i.transport);
            Ok(format!("hello, {name}, over {}", transport.unwrap_or("?")))
        })
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let (listener, dialer) = memory();
    let serving = Server::new(router).serve(listener);
    assert_eq!(serving.local_addr(), "memory:");

    let client = Client::builder()
        .router(Router::new().sync_method("whoami", || Ok("ann")))
        .connect_with(dialer.clone())
        .await
        .unwrap();
    let greeting: String = bounded("greet", client.call("greet", ())).await.unwrap();
    assert_eq!(greeting, "hello, ann, over memory");

    let mut batch = client.batch();
    let sum = batch.call::<i64>("add", (2, 3));
    let unknown = batch.call::<i64>("nope", ());
    bounded("batch", batch.send()).await.unwrap();
    assert_eq!(sum.await.unwrap(), 5);
    assert_eq!(unknown.await.unwrap_err().rpc().map(Error::code), Some(-32601));

    drop(client);
    bounded("shutdown", serving.shutdown()).await;
}

#[tokio::test]
async fn a_client_reconnects_through_its_dialer() {
    let router = Router::new().sync_method("add", |(a, b): (i64, i64)| Ok(a + b));
    let (listener, dialer) = memory();
    let serving = Server::new(router).serve(listener);
    let client = Client::builder()
        .reconnect(Retry::attempts(3))
        .connect_with(dialer.clone())
        .await
        .unwrap();
    assert_eq!(
        bounded("add", client.call::<i64>("add", (1, 2))).await.unwrap(),
        3
    );
    // Drop the connection under the client; the next call dials again.
    let peer = client.peer().expect("a connection");
    peer.close();
    bounded("close", peer.closed()).await;
    assert_eq!(
        bounded("add again", client.call::<i64>("add", (2, 2)))
            .await
            .unwrap(),
        4
    );
    assert_eq!(dialer.dials.load(Ordering::SeqCst), 2);
    drop(client);
    bounded("shutdown", serving.shutdown()).await;
}

/// One end of a pipe whose sink is told what each frame carries
/// (`Connection::with_kinds`), recording the kinds it was told.
fn kinded_end(
    incoming: mpsc::Receiver<Bytes>,
    outgoing: mpsc::Sender<Bytes>,
    seen: Arc<std::sync::Mutex<Vec<OutKind>>>,
) -> Connection {
    let frames_in = futures_util::stream::unfold(incoming, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok(Inbound::Frame(frame)), rx))
    });
    let frames_out = futures_util::sink::unfold(outgoing, move |tx, frame: OutFrame| {
        seen.lock().unwrap().push(frame.kind.clone());
        async move {
            tx.send(frame.bytes)
                .await
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
            Ok::<_, io::Error>(tx)
        }
    });
    let info = ConnectionInfo {
        transport: "kinded",
        peer_addr: None,
        local_addr: None,
    };
    Connection::with_kinds(frames_in, frames_out, info)
}

/// What each side writes is told to a sink that asks: the client's
/// requests with their ids, notifications, batches of calls; the server's
/// replies with the ids they answer, and its batch replies.
#[tokio::test]
async fn a_sink_that_asks_is_told_what_each_frame_carries() {
    let (to_server, server_in) = mpsc::channel(64);
    let (to_client, client_in) = mpsc::channel(64);
    let (client_seen, server_seen) = (Arc::default(), Arc::default());
    let router = Router::new()
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b))
        .method("later", |(n,): (i64,)| async move {
            tokio::task::yield_now().await;
            Ok::<_, Error>(n)
        })
        .sync_notification("note", |_: ()| {});
    let server = jrpc::Peer::builder().router(router).connect(kinded_end(
        server_in,
        to_client,
        Arc::clone(&server_seen),
    ));
    let client =
        Client::builder().over_connection(kinded_end(client_in, to_server, Arc::clone(&client_seen)));
    assert_eq!(
        bounded("add", client.call::<i64>("add", (1, 2))).await.unwrap(),
        3
    );
    assert_eq!(
        bounded("later", client.call::<i64>("later", (5,))).await.unwrap(),
        5
    );
    bounded("note", client.notify("note", ())).await.unwrap();
    let mut batch = client.batch();
    let sum = batch.call::<i64>("add", (2, 2));
    batch.notify("note", ());
    bounded("batch", batch.send()).await.unwrap();
    assert_eq!(bounded("batch reply", sum.into_future()).await.unwrap(), 4);
    let client_seen = client_seen.lock().unwrap().clone();
    let ids: Vec<_> = client_seen
        .iter()
        .filter_map(|kind| match kind {
            OutKind::Request(id) => Some(id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2, "{client_seen:?}");
    assert!(client_seen.contains(&OutKind::Notification), "{client_seen:?}");
    assert!(
        client_seen
            .iter()
            .any(|kind| matches!(kind, OutKind::Calls(ids) if ids.len() == 1)),
        "{client_seen:?}"
    );
    // The server's replies, each under the id of the request it answers
    // (the first inline, the second from a task of its own).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let server_seen = loop {
        let seen = server_seen.lock().unwrap().clone();
        if seen.len() >= 3 || tokio::time::Instant::now() > deadline {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        &server_seen[..2],
        &[OutKind::Reply(ids[0].clone()), OutKind::Reply(ids[1].clone())]
    );
    assert_eq!(server_seen[2..], [OutKind::Replies]);
    server.close();
}
