//! Typed methods declared once, served and called over TCP, and described
//! by `rpc.discover`: each marker type names a method, its params and its
//! result; the router holds handlers to those types, the client calls
//! through them, and the OpenRPC document comes from the same types.
//!
//! ```sh
//! cargo run --example typed_methods             # serve, call, discover
//! cargo run --example typed_methods -- document # print the OpenRPC document
//! ```

use jrpc::client::Client;
use jrpc::openrpc::{Info, MethodDoc};
use jrpc::server::Server;
use jrpc::typed::{Method, Notification};
use jrpc::{Caller, Error, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The params of `subtract`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SubtractParams {
    /// The number to subtract from.
    minuend: i64,
    /// The number to subtract.
    subtrahend: i64,
}

/// `subtract`: the minuend less the subtrahend.
struct Subtract;

impl Method for Subtract {
    const NAME: &'static str = "subtract";
    type Params = SubtractParams;
    type Result = i64;

    fn doc() -> Option<MethodDoc> {
        Some(
            MethodDoc::typed::<Self>()
                .summary("Subtracts the subtrahend from the minuend")
                .error(-32602, "Invalid params"),
        )
    }
}

/// A directory tree: a recursive type, whose schema refers to itself.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct Tree {
    name: String,
    children: Vec<Tree>,
}

/// `tree`: a tree `depth` levels deep.
struct MakeTree;

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct TreeParams {
    depth: u8,
    /// The name of the root (default `root`).
    #[serde(default)]
    name: Option<String>,
}

impl Method for MakeTree {
    const NAME: &'static str = "tree";
    type Params = TreeParams;
    type Result = Tree;

    fn doc() -> Option<MethodDoc> {
        Some(MethodDoc::typed::<Self>().summary("Builds a tree of the given depth"))
    }
}

/// `log`: a line for the server's log; no reply.
struct Log;

impl Notification for Log {
    const NAME: &'static str = "log";
    type Params = (String,);

    fn doc() -> Option<MethodDoc> {
        Some(MethodDoc::typed_notification::<Self>().summary("Writes a line to the server's log"))
    }
}

fn tree(name: String, depth: u8) -> Tree {
    let children = if depth == 0 {
        Vec::new()
    } else {
        (0..2).map(|i| tree(format!("{name}.{i}"), depth - 1)).collect()
    };
    Tree { name, children }
}

fn router() -> Router {
    Router::new()
        .typed_sync_method::<Subtract, _>(|p: SubtractParams| {
            p.minuend
                .checked_sub(p.subtrahend)
                .ok_or_else(|| Error::invalid_params().with_data("the difference overflows"))
        })
        .typed_sync_method::<MakeTree, _>(|p: TreeParams| {
            if p.depth > 8 {
                return Err(Error::invalid_params().with_data("depth is at most 8"));
            }
            Ok(tree(p.name.unwrap_or_else(|| "root".to_owned()), p.depth))
        })
        .typed_sync_notification::<Log, _>(|(line,): (String,)| println!("server log: {line}"))
        .discover(Info::new("typed example", "1.0.0"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("document") {
        println!("{}", serde_json::to_string_pretty(&router().openrpc())?);
        return Ok(());
    }
    let serving = Server::new(router()).bind_tcp("127.0.0.1:0").await?;
    let client = Client::builder().connect(serving.local_addr()).await?;

    let difference = client
        .typed_call::<Subtract>(SubtractParams {
            minuend: 42,
            subtrahend: 23,
        })
        .await?;
    println!("subtract: {difference}");
    let tree = client
        .typed_call::<MakeTree>(TreeParams { depth: 1, name: None })
        .await?;
    println!("tree: {} with {} children", tree.name, tree.children.len());
    client.typed_notify::<Log>(("hello".to_owned(),)).await?;

    let document: jrpc::openrpc::Document = client.call("rpc.discover", ()).await?;
    for method in &document.methods {
        let params: Vec<&str> = method.params.iter().map(|p| p.name.as_str()).collect();
        println!(
            "{}({})  {}",
            method.name,
            params.join(", "),
            method.summary.as_deref().unwrap_or("")
        );
    }

    drop(client);
    serving.shutdown().await;
    Ok(())
}
