//! Typed methods and OpenRPC: typed registration and calls in both
//! directions over a real socket, the document `rpc.discover` answers, and
//! how `rpc.discover` behaves as a call (params, notifications, batches,
//! middleware, a router that changes).

mod common;

use std::sync::{Arc, Mutex};

use common::reply;
use jrpc::client::Client;
use jrpc::middleware::{layer_fn, service_fn, BoxCallService, Call, ServiceExt};
use jrpc::openrpc::{ContentDescriptor, Document, Info, MethodDoc, ParamStructure};
use jrpc::router::RegisterError;
use jrpc::server::Server;
use jrpc::typed::{Method, Notification};
use jrpc::{CallError, Caller, Error, RequestContext, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

const DISCOVER: &str = r#"{"jsonrpc":"2.0","method":"rpc.discover","id":1}"#;

async fn document(router: &Router) -> Value {
    let reply = reply(router, DISCOVER).await.expect("a reply");
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

fn method<'a>(document: &'a Value, name: &str) -> &'a Value {
    document["methods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {document}"))
}

#[tokio::test]
async fn rpc_discover_describes_the_demo_methods() {
    let router = jrpc::demo::router().discover(Info::new("demo", "1.2.3"));
    let document = document(&router).await;
    assert_eq!(document["openrpc"], "1.3.2");
    assert_eq!(document["info"], json!({"title": "demo", "version": "1.2.3"}));
    let names: Vec<&str> = document["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "add",
            "echo",
            "get_data",
            "notify_hello",
            "notify_sum",
            "sleep",
            "subtract",
            "sum",
            "update"
        ]
    );

    let subtract = method(&document, "subtract");
    let params: Vec<(&str, bool)> = subtract["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["required"] == true))
        .collect();
    assert_eq!(params, [("minuend", true), ("subtrahend", true)]);
    assert_eq!(subtract["paramStructure"], "either");
    assert_eq!(subtract["result"]["schema"], json!({"type": "number"}));
    assert_eq!(subtract["errors"][0]["code"], -32602);

    assert_eq!(method(&document, "sum")["paramStructure"], "by-position");
    assert_eq!(method(&document, "sum")["x-variadic"], true);
    // A notification: no result, any params.
    let update = method(&document, "update");
    assert!(update.get("result").is_none(), "{update}");
    assert_eq!(update["x-any-params"], true);

    // It reads back as a Document.
    let typed: Document = serde_json::from_value(document).unwrap();
    assert_eq!(typed.method("sleep").unwrap().params[0].name, "ms");
}

#[tokio::test]
async fn rpc_discover_is_off_until_enabled_and_cannot_be_registered() {
    let router = jrpc::demo::router();
    let reply = reply(&router, DISCOVER).await.unwrap();
    assert_eq!(reply["error"]["code"], -32601);
    let taken = Router::new().try_sync_method("rpc.discover", || Ok(0));
    assert!(matches!(taken, Err(RegisterError::Reserved(_))));
}

#[tokio::test]
async fn rpc_discover_as_a_call() {
    let router = jrpc::demo::router().discover(Info::default());
    // No params, [] and {} are all "none"; anything else is -32602.
    for params in ["[]", "{}"] {
        let input = format!(r#"{{"jsonrpc":"2.0","method":"rpc.discover","params":{params},"id":2}}"#);
        let reply = reply(&router, &input).await.unwrap();
        assert_eq!(reply["result"]["openrpc"], "1.3.2", "{params}: {reply}");
    }
    let input = r#"{"jsonrpc":"2.0","method":"rpc.discover","params":[1],"id":3}"#;
    assert_eq!(reply(&router, input).await.unwrap()["error"]["code"], -32602);
    // A notification gets no reply.
    assert!(reply(&router, r#"{"jsonrpc":"2.0","method":"rpc.discover"}"#)
        .await
        .is_none());
    // In a batch, beside another call.
    let batch = r#"[{"jsonrpc":"2.0","method":"rpc.discover","id":"d"},{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":"s"}]"#;
    let replies = reply(&router, batch).await.unwrap();
    assert_eq!(replies[0]["result"]["openrpc"], "1.3.2");
    assert_eq!(replies[1]["result"], 19);
}

#[tokio::test]
async fn rpc_discover_passes_through_middleware() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let router =
        jrpc::demo::router()
            .discover(Info::default())
            .layer(layer_fn(move |inner: BoxCallService| {
                let record = Arc::clone(&record);
                service_fn(move |call: Call| {
                    record.lock().unwrap().push(call.method().to_owned());
                    inner.clone().oneshot(call)
                })
            }));
    assert_eq!(document(&router).await["openrpc"], "1.3.2");
    assert_eq!(*seen.lock().unwrap(), ["rpc.discover"]);
}

#[tokio::test]
async fn the_document_follows_the_router() {
    let before = Router::new().sync_method("a", || Ok(1)).discover(Info::default());
    assert_eq!(document(&before).await["methods"].as_array().unwrap().len(), 1);
    let after = before.clone().sync_method("b", || Ok(2)).describe(
        "a",
        MethodDoc::new()
            .summary("one")
            .result(ContentDescriptor::new("one", json!({"const": 1})))
            .param_structure(ParamStructure::ByName),
    );
    let document_after = document(&after).await;
    assert_eq!(document_after["methods"].as_array().unwrap().len(), 2);
    assert_eq!(method(&document_after, "a")["summary"], "one");
    assert!(method(&document_after, "b").get("x-any-params").is_some());
    // The first router still says what it said.
    assert_eq!(document(&before).await["methods"].as_array().unwrap().len(), 1);
    assert!(method(&document(&before).await, "a").get("summary").is_none());

    let unknown = Router::new().try_describe("nope", MethodDoc::new());
    assert!(matches!(unknown, Err(RegisterError::NotRegistered(name)) if name == "nope"));
}

// ---- typed methods, both directions ----

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct SubtractParams {
    /// The number to subtract from.
    minuend: i64,
    subtrahend: i64,
}

struct Subtract;
impl Method for Subtract {
    const NAME: &'static str = "subtract";
    type Params = SubtractParams;
    type Result = i64;
    fn doc() -> Option<MethodDoc> {
        Some(MethodDoc::typed::<Self>().summary("minuend - subtrahend"))
    }
}

/// Asks the caller its name: the server calls it back on its client.
struct WhoAmI;
impl Method for WhoAmI {
    const NAME: &'static str = "whoami";
    type Params = ();
    type Result = String;
}

struct Greet;
impl Method for Greet {
    const NAME: &'static str = "greet";
    type Params = ();
    type Result = String;
}

struct Said;
impl Notification for Said {
    const NAME: &'static str = "said";
    type Params = (String,);
}

#[tokio::test]
async fn typed_methods_serve_and_call_both_ways_over_tcp() {
    let (said_tx, mut said_rx) = tokio::sync::mpsc::unbounded_channel();
    let server = Router::new()
        .typed_sync_method::<Subtract, _>(|p: SubtractParams| Ok(p.minuend - p.subtrahend))
        .typed_method::<Greet, _>(|(), cx: RequestContext| async move {
            let client = cx.peer().ok_or_else(|| Error::new(-32000, "no peer"))?;
            let name = client
                .typed_call::<WhoAmI>(())
                .await
                .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
            Ok(format!("hello, {name}"))
        })
        .typed_sync_notification::<Said, _>(move |(text,): (String,)| {
            let _ = said_tx.send(text);
        })
        .discover(Info::new("typed", "1"));
    let serving = Server::new(server).bind_tcp("127.0.0.1:0").await.unwrap();
    let client = Client::builder()
        .router(Router::new().typed_sync_method::<WhoAmI, _>(|| Ok("ann".to_owned())))
        .connect(serving.local_addr())
        .await
        .unwrap();

    let difference = client
        .typed_call::<Subtract>(SubtractParams {
            minuend: 42,
            subtrahend: 23,
        })
        .await
        .unwrap();
    assert_eq!(difference, 19);
    assert_eq!(client.typed_call::<Greet>(()).await.unwrap(), "hello, ann");
    client.typed_notify::<Said>(("hi".to_owned(),)).await.unwrap();
    assert_eq!(said_rx.recv().await.unwrap(), "hi");

    // The typed description is what rpc.discover says.
    let document: Document = client.call("rpc.discover", ()).await.unwrap();
    let subtract = document.method("subtract").unwrap();
    assert_eq!(subtract.summary.as_deref(), Some("minuend - subtrahend"));
    assert_eq!(
        subtract.params[0].description.as_deref(),
        Some("The number to subtract from.")
    );
    assert_eq!(
        subtract.result.as_ref().unwrap().schema,
        json!({"type": "integer"})
    );
    // A typed method without a description is listed by name.
    assert!(document.method("greet").unwrap().any_params);

    // Typed params are still checked by the server.
    let wrong: Result<i64, CallError> = client.call("subtract", json!({"minuend": "x"})).await;
    assert!(matches!(wrong, Err(CallError::Rpc(e)) if e.code() == -32602));
    drop(client);
    serving.shutdown().await;
}
