//! One function written against `Caller`, used two ways: with a TCP
//! client, and inside a server handler to call back the client that is
//! calling it.
//!
//! ```sh
//! cargo run --example caller_generic
//! ```

use jrpc::caller::Caller;
use jrpc::client::Client;
use jrpc::server::Server;
use jrpc::{CallError, Error, RequestContext, Router};

/// Adds up numbers on whatever is at the other end of `caller`.
async fn total(caller: &impl Caller, numbers: &[i64]) -> Result<i64, CallError> {
    caller.call("sum", numbers).await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server's `audit` asks the client to add up its numbers.
    let router = jrpc::demo::router().method("audit", |numbers: Vec<i64>, ctx: RequestContext| async move {
        let client = ctx.peer().ok_or_else(|| Error::new(-32000, "no connection"))?;
        let sum = total(&client, &numbers)
            .await
            .map_err(|e| Error::new(-32000, "the client could not add").with_data(&e.to_string()))?;
        Ok(format!("the client says {sum}"))
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await?;

    // The client serves `sum` too, so the server can call it back.
    let client = Client::builder()
        .router(Router::new().sync_method("sum", |numbers: Vec<i64>| Ok(numbers.iter().sum::<i64>())))
        .connect(serving.local_addr())
        .await?;

    // The same function, used with the client...
    println!("the server says {}", total(&client, &[1, 2, 3]).await?);
    // ...and by the server, inside a handler.
    let audit: String = client.call("audit", [4, 5, 6]).await?;
    println!("{audit}");

    drop(client);
    serving.shutdown().await;
    Ok(())
}
