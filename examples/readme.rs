//! The README's library snippets, each run as written. A test
//! (`tests/readme.rs`) checks that every ```rust block of the README appears
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
    caller_generic().await?;
    own_transport().await?;
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
