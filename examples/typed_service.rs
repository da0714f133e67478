//! One trait, written once with `#[jrpc::rpc]`: three methods and a
//! notification, served over TCP and WebSocket, called with the generated
//! client, and calling back — the server asks its client through a second
//! trait, over the same connection. `rpc.discover` describes it all.
//!
//! ```sh
//! cargo run --example typed_service
//! ```

use std::sync::{Arc, Mutex};

use jrpc::openrpc::Info;
use jrpc::server::http::HttpServer;
use jrpc::server::Server;
use jrpc::{Client, Error, RequestContext};

/// A shared notebook.
#[jrpc::rpc(namespace = "notes")]
pub trait Notebook {
    /// Adds a note; returns how many there are.
    async fn add(&self, text: String, cx: RequestContext) -> Result<usize, Error>;

    /// The notes, newest first, at most `limit` of them.
    fn list(&self, limit: Option<usize>) -> Result<Vec<String>, Error>;

    /// Forgets every note; returns how many there were.
    fn clear(&self) -> Result<usize, Error>;

    /// Someone is looking at the notebook.
    #[rpc(notification)]
    fn touch(&self, who: String);
}

/// What the notebook asks whoever is adding a note.
#[jrpc::rpc]
pub trait Author {
    /// The author's signature.
    fn signature(&self) -> Result<String, Error>;
}

#[derive(Default)]
struct Shared {
    notes: Mutex<Vec<String>>,
    touches: Mutex<Vec<String>>,
}

#[derive(Clone, Default)]
struct Notes(Arc<Shared>);

impl Notebook for Notes {
    async fn add(&self, text: String, cx: RequestContext) -> Result<usize, Error> {
        // Ask the caller to sign, over the connection the call came on.
        let peer = cx.peer().ok_or_else(|| Error::new(-32000, "no one to ask"))?;
        let signature = AuthorClient::new(&peer)
            .signature()
            .await
            .map_err(|e| Error::new(-32000, "the author did not sign").with_data(&e.to_string()))?;
        let mut notes = self.0.notes.lock().unwrap();
        notes.push(format!("{text} — {signature}"));
        Ok(notes.len())
    }

    fn list(&self, limit: Option<usize>) -> Result<Vec<String>, Error> {
        let notes = self.0.notes.lock().unwrap();
        Ok(notes
            .iter()
            .rev()
            .take(limit.unwrap_or(usize::MAX))
            .cloned()
            .collect())
    }

    fn clear(&self) -> Result<usize, Error> {
        Ok(std::mem::take(&mut *self.0.notes.lock().unwrap()).len())
    }

    fn touch(&self, who: String) {
        self.0.touches.lock().unwrap().push(who);
    }
}

struct Signer(&'static str);

impl Author for Signer {
    fn signature(&self) -> Result<String, Error> {
        Ok(self.0.to_owned())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let notes = Notes::default();
    let router = notes
        .clone()
        .into_router()
        .discover(Info::new("notebook", "1.0.0"));
    let tcp = Server::new(router.clone()).bind_tcp("127.0.0.1:0").await?;
    let http = HttpServer::new(router).bind("127.0.0.1:0").await?;
    let ws_url = http.local_addr().replace("http://", "ws://");

    // Two clients, one per transport, each answering the server's question.
    let ann = Client::builder()
        .router(Signer("ann").into_router())
        .connect(tcp.local_addr())
        .await?;
    let bob = Client::builder()
        .router(Signer("bob").into_router())
        .connect(&ws_url)
        .await?;

    let notebook = NotebookClient::new(&ann);
    notebook.touch("ann".to_owned()).await?;
    notebook.add("buy milk".to_owned()).await?;
    let count = NotebookClient::new(&bob).add("call home".to_owned()).await?;
    println!("{count} notes:");
    for note in NotebookClient::new(&bob).list(Some(10)).await? {
        println!("  {note}");
    }
    assert_eq!(notebook.list(None).await?, ["call home — bob", "buy milk — ann"]);

    let document: jrpc::openrpc::Document = ann.call("rpc.discover", ()).await?;
    for method in &document.methods {
        let params: Vec<&str> = method.params.iter().map(|p| p.name.as_str()).collect();
        println!(
            "{}({})  {}",
            method.name,
            params.join(", "),
            method.summary.as_deref().unwrap_or("")
        );
    }
    assert_eq!(notebook.clear().await?, 2);
    assert_eq!(*notes.0.touches.lock().unwrap(), ["ann"]);

    drop((ann, bob));
    tcp.shutdown().await;
    http.shutdown().await;
    Ok(())
}
