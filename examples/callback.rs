//! A server that calls back its client in the middle of a request: the
//! handler asks the client for its name over the same connection, then
//! answers. Works over any connection-oriented transport (here TCP).
//!
//! ```sh
//! cargo run --example callback
//! ```

use jrpc::client::Client;
use jrpc::server::Server;
use jrpc::{Error, RequestContext, Router};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The server's method calls `whoami` on whoever called it.
    let router = Router::new().method("greet", |(): (), ctx: RequestContext| async move {
        let client = ctx
            .peer()
            .ok_or_else(|| Error::new(-32000, "no connection to call back"))?;
        let name: String = client
            .call("whoami", ())
            .await
            .map_err(|e| Error::new(-32000, "callback failed").with_data(&e.to_string()))?;
        Ok(format!("hello, {name}"))
    });
    let serving = Server::new(router).bind_tcp("127.0.0.1:0").await?;

    // The client serves `whoami` to the server while it calls `greet`.
    let client = Client::builder()
        .router(Router::new().sync_method("whoami", || Ok("ann")))
        .connect(serving.local_addr())
        .await?;
    let greeting: String = client.call("greet", ()).await?;
    println!("{greeting}");

    drop(client);
    serving.shutdown().await;
    Ok(())
}
