//! A TCP server whose every call is logged (with secrets redacted) and
//! rate limited per client, then a client that calls it faster than the
//! limit allows.
//!
//! ```sh
//! cargo run --example logging_and_rate_limit
//! ```

use jrpc::client::Client;
use jrpc::middleware::{CallLog, LogDetail, RateLimit};
use jrpc::server::Server;
use jrpc::Router;
use serde::Deserialize;

#[derive(Deserialize)]
struct Login {
    user: String,
    password: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Call log lines are INFO events of target `jrpc::call`, on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();

    let router = Router::new()
        .sync_method("login", |p: Login| {
            let ok = !p.password.is_empty();
            Ok(if ok {
                format!("welcome, {}", p.user)
            } else {
                "no".to_owned()
            })
        })
        .sync_method("ping", || Ok("pong"))
        // Two calls a second per client, bursts of three: the fourth call in
        // a row is refused with -32005 at once.
        .layer(RateLimit::per_second(2, 3).layer())
        // Added last, so it runs first and also logs the refused calls.
        // Full detail logs params and results, with `password` redacted.
        .layer(CallLog::new().detail(LogDetail::Full));

    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await?;
    println!("serving on {}", serving.local_addr());

    let client = Client::connect(serving.local_addr()).await?;
    let welcome: String = client
        .call("login", serde_json::json!({"user": "ann", "password": "hunter2"}))
        .await?;
    println!("login: {welcome}");
    for i in 1..=4 {
        match client.call::<String>("ping", ()).await {
            Ok(pong) => println!("ping {i}: {pong}"),
            Err(e) => println!("ping {i}: refused: {e}"),
        }
    }

    drop(client);
    serving.shutdown().await;
    Ok(())
}
