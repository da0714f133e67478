//! The library snippets of the README and of docs/guide/library.md, each run
//! as written. A test (`tests/readme.rs`) checks that every ```rust block of
//! those pages appears
//! here line for line, so the README cannot drift from code that compiles.
//!
//! ```sh
//! cargo run --example readme
//! ```

use std::error::Error as StdError;

/// What each snippet's function returns: the snippets use `?` freely.
type Outcome = Result<(), Box<dyn StdError>>;

#[tokio::main]
async fn main() -> Outcome {
    typed_params().await?;
    calling_back().await?;
    middleware()?;
    client_cache_and_batching().await?;
    caller_generic().await?;
    typed_methods().await?;
    own_transport().await?;
    mcp_server().await?;
    mcp_ask_once().await?;
    println!("every README snippet ran");
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn typed_params() -> Outcome {
    // README: the first library snippet.
    use jrpc::{Error, Router};
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Transfer { from: String, to: String, amount: u64 }

    let router = Router::new()
        // Typed params: a struct accepts named params ({"from": ..}) and
        // positional ones (["alice", "bob", 5]); trailing Options may be left out.
        .method("transfer", |t: Transfer| async move {
            if t.amount == 0 {
                return Err(Error::new(-32050, "Nothing to transfer"));
            }
            Ok(format!("{} -> {}: {}", t.from, t.to, t.amount))
        })
        // Plain functions run inline: no task, no future.
        .sync_method("ping", || Ok("pong"))
        .notification("log", |(line,): (String,)| async move { eprintln!("{line}") });

    // One whole frame in (a message or a batch), the whole reply frame out,
    // or None when no reply is due.
    let reply = router.handle(br#"{"jsonrpc":"2.0","method":"ping","id":1}"#).await;

    assert_eq!(reply.as_deref(), Some(&br#"{"jsonrpc":"2.0","result":"pong","id":1}"#[..]));
    let reply = router
        .handle(br#"{"jsonrpc":"2.0","method":"transfer","params":["alice","bob",5],"id":2}"#)
        .await
        .expect("a reply");
    assert!(std::str::from_utf8(&reply)?.contains("alice -> bob: 5"));
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn calling_back() -> Outcome {
    // README: calling a server, and letting it call back.
    use jrpc::client::Client;
    use jrpc::{Error, RequestContext, Router};

    // A server method that asks the client something mid-request.
    let router = Router::new().method("greet", |(): (), ctx: RequestContext| async move {
        let name: String = ctx.peer().unwrap().call("whoami", ()).await
            .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
        Ok(format!("hello, {name}"))
    });
    let serving = jrpc::server::Server::new(router).bind_tcp("127.0.0.1:0").await?;

    let client = Client::builder()
        .router(Router::new().sync_method("whoami", || Ok("ann")))   // what the server may call
        .connect_tcp(serving.local_addr().trim_start_matches("tcp://"))
        .await?;
    let greeting: String = client.call("greet", ()).await?;        // "hello, ann"
    serving.shutdown().await;                                       // in-flight calls finish first

    assert_eq!(greeting, "hello, ann");
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
fn middleware() -> Outcome {
    // README: middleware.
    use std::time::Duration;
    use jrpc::middleware::{CallLog, CallTimeout, Metrics, RateLimit};

    let metrics = Metrics::new();
    let router = jrpc::demo::router()
        .layer(CallTimeout::new(Duration::from_secs(10)))     // -32006 after 10 s
        .layer(RateLimit::per_second(100, 200).layer())       // -32005 past the budget
        .layer(metrics.layer())                               // jrpc_calls_total, latency, ...
        .layer(CallLog::new());                               // one tracing line per call
    // metrics.render() is the Prometheus text page; HttpServer::metrics serves it.

    assert!(router.has_layers());
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn client_cache_and_batching() -> Outcome {
    // README: the client's cache and automatic batching.
    let serving = jrpc::server::http::HttpServer::new(jrpc::demo::router())
        .bind("127.0.0.1:0")
        .await?;
    let url = serving.local_addr();
    use std::time::Duration;
    use jrpc::client::{AutoBatch, Client, ResponseCache, Retry, RetryPolicy};
    
    let cache = ResponseCache::builder()
        .methods(["get_data"])                     // only these results are kept
        .ttl(Duration::from_secs(30))
        .build();
    let client = Client::builder()
        .layer(cache.layer())                      // a fresh result: no request at all
        .retry(RetryPolicy::new(Retry::exponential(3, Duration::from_millis(50), Duration::from_secs(1)))
            .idempotent(["get_data"])              // may run twice: also after a lost connection
            .on_connection_lost(true))             // refusals and unsent calls: always
        .auto_batch(AutoBatch::new(32))            // calls made together: one frame
        .connect(url)
        .await?;
    let (a, b) = tokio::join!(client.call::<i64>("add", (1, 2)), client.call::<i64>("add", (3, 4)));
    let data: (String, u32) = client.call("get_data", ()).await?;  // a request
    let same: (String, u32) = client.call("get_data", ()).await?;  // from the cache
    assert_eq!((a?, b?, cache.stats().hits), (3, 7, 1));
    assert_eq!(data, same);
    serving.shutdown().await;
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn caller_generic() -> Outcome {
    // README: code written against `Caller`.
    use jrpc::caller::Caller;

    async fn total(caller: &impl Caller, numbers: &[i64]) -> Result<i64, jrpc::CallError> {
        caller.call("sum", numbers).await
    }

    let serving = jrpc::server::Server::new(jrpc::demo::router())
        .bind_tcp("127.0.0.1:0")
        .await?;
    let client = jrpc::Client::connect(serving.local_addr()).await?;
    assert_eq!(total(&client, &[1, 2, 3]).await?, 6);
    serving.shutdown().await;
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn typed_methods() -> Outcome {
    // README: typed methods and OpenRPC.
    use jrpc::openrpc::{Info, MethodDoc};
    use jrpc::typed::Method;
    use jrpc::{Caller, Router};

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    struct Operands { minuend: i64, subtrahend: i64 }

    /// Declared once: the name, the params and the result.
    struct Subtract;
    impl Method for Subtract {
        const NAME: &'static str = "subtract";
        type Params = Operands;
        type Result = i64;
        fn doc() -> Option<MethodDoc> { Some(MethodDoc::typed::<Self>()) }   // schemas (feature `schemars`)
    }

    let router = Router::new()
        .typed_sync_method::<Subtract, _>(|p: Operands| Ok(p.minuend - p.subtrahend))  // held to Subtract's types
        .discover(Info::new("calculator", "1.0.0"));                                    // rpc.discover answers OpenRPC
    let serving = jrpc::server::Server::new(router).bind_tcp("127.0.0.1:0").await?;
    let client = jrpc::client::Client::builder().connect(serving.local_addr()).await?;
    let difference = client.typed_call::<Subtract>(Operands { minuend: 42, subtrahend: 23 }).await?;  // 19
    assert_eq!(difference, 19);
    let document: jrpc::openrpc::Document = client.call("rpc.discover", ()).await?;
    assert_eq!(document.methods[0].params[1].name, "subtrahend");
    drop(client);
    serving.shutdown().await;
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn own_transport() -> Outcome {
    use jrpc::codec::Framing;
    use jrpc::transport::tcp::{TcpDialer, TcpListener};
    use jrpc::transport::Listener;

    let router = jrpc::demo::router();
    let max = jrpc::message::Limits::DEFAULT_MAX_FRAME_LEN;
    let my_listener = TcpListener::bind("127.0.0.1:0", Framing::Ndjson, max).await?;
    let addr = my_listener.local_addr().trim_start_matches("tcp://").to_owned();
    let my_dialer = TcpDialer::new(addr, Framing::Ndjson, max);

    // README: a transport of your own.
    let serving = jrpc::server::Server::new(router).serve(my_listener);        // impl Listener
    let client = jrpc::client::Client::builder()
        .reconnect(jrpc::client::Retry::attempts(5))                          // dial again if it drops
        .connect_with(my_dialer)                                               // impl Dialer
        .await?;

    let sum: i64 = client.call("add", (2, 40)).await?;
    assert_eq!(sum, 42);
    serving.shutdown().await;
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn mcp_server() -> Outcome {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(theirs);
    let info = jrpc::router::ConnectionInfo { transport: "pipe", peer_addr: None, local_addr: None };
    let connection = jrpc::transport::Connection::over_io(read, write, jrpc::codec::Framing::Ndjson, 1 << 16, info);

    // README: an MCP server.
    use jrpc_mcp::{McpContext, McpServer, Structured, ToolError};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Add { a: i64, b: i64 }

    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct Sum { result: i64 }

    let server = McpServer::builder("calculator", "1.0.0")
        .tool("add", "Adds two numbers", |args: Add, cx: McpContext| async move {
            cx.progress(1.0, Some(1.0), None).await;           // sent if the client asked for progress
            Ok::<_, ToolError>(Structured::new(Sum { result: args.a + args.b }))
        })
        .build();
    let session = server.connect(connection);   // any jrpc Connection; serve_stdio() for stdin/stdout

    // A client on the other end of the pipe: initialize, then call add.
    let (read, mut write) = tokio::io::split(ours);
    let mut lines = tokio::io::BufReader::new(read).lines();
    write.write_all(concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"readme","version":"1"}}}"#, "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":40}}}"#, "\n",
    ).as_bytes()).await?;
    let mut replies = Vec::new();
    while replies.len() < 2 {
        let line = lines.next_line().await?.ok_or("the session ended")?;
        replies.push(serde_json::from_str::<serde_json::Value>(&line)?);
    }
    // An integer, as the demo server answers: 42, not 42.0.
    assert_eq!(replies[1]["result"]["structuredContent"]["result"], serde_json::json!(42));
    session.close();
    Ok(())
}

// Kept as the README shows it, not as rustfmt would.
#[rustfmt::skip]
async fn mcp_ask_once() -> Outcome {
    use std::sync::atomic::{AtomicU32, Ordering};
    use jrpc_mcp::types::ElicitAction;
    use jrpc_mcp::{McpContext, McpServer, ToolError};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Table { when: String }

    static BOOKED: AtomicU32 = AtomicU32::new(0);
    async fn book(args: Table) -> String {
        format!("{} #{}", args.when, BOOKED.fetch_add(1, Ordering::SeqCst) + 1)
    }

    // README: a tool that asks, written once for both revisions.
    let server = McpServer::builder("bookings", "1.0.0")
        .tool("book", "Books a table", |args: Table, cx: McpContext| async move {
            let schema = serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
            let answer = cx.input("confirm").elicit(format!("Book {}?", args.when), schema.as_object().cloned().unwrap_or_default()).await?;
            if answer.action != ElicitAction::Accept {
                return Ok::<_, ToolError>("not booked".to_owned());
            }
            let id: String = cx.once("booking", book(args)).await;   // runs in one round only
            Ok(format!("booked: {id}"))
        })
        .build();

    // A 2026-07-28 client over a pipe: the first call gets the question,
    // the second (with the answer and the state echoed) the booking.
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(theirs);
    let info = jrpc::router::ConnectionInfo { transport: "pipe", peer_addr: None, local_addr: None };
    let session = server.connect(jrpc::transport::Connection::over_io(read, write, jrpc::codec::Framing::Ndjson, 1 << 16, info));
    let (read, mut write) = tokio::io::split(ours);
    let mut lines = tokio::io::BufReader::new(read).lines();
    let envelope = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let mut params = serde_json::json!({"name": "book", "arguments": {"when": "noon"}, "_meta": envelope});
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    write.write_all(format!("{request}\n").as_bytes()).await?;
    let first: serde_json::Value = serde_json::from_str(&lines.next_line().await?.ok_or("no reply")?)?;
    assert_eq!(first["result"]["resultType"], "input_required");
    params["inputResponses"] = serde_json::json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    params["requestState"] = first["result"]["requestState"].clone();
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
    write.write_all(format!("{request}\n").as_bytes()).await?;
    let done: serde_json::Value = serde_json::from_str(&lines.next_line().await?.ok_or("no reply")?)?;
    assert_eq!(done["result"]["content"][0]["text"], "booked: noon #1");
    session.close();
    assert_eq!(BOOKED.load(Ordering::SeqCst), 1);
    Ok(())
}
