//! An HTTP client with a header on every request, gzip, and retries for
//! requests refused with 429 or 503, against a server that requires a
//! bearer token and limits each client's rate.
//!
//! ```sh
//! cargo run --example http_client
//! ```

use jrpc::client::{Client, HttpError, Retry};
use jrpc::middleware::RateLimit;
use jrpc::server::http::HttpServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serving = HttpServer::new(jrpc::demo::router())
        .auth_tokens(["s3cret"])
        .rate_limit(RateLimit::per_second(5, 2))
        .bind("127.0.0.1:0")
        .await?;
    let url = serving.local_addr().to_owned();

    // Without the token: the server's 401 comes back as an HttpError.
    let anonymous = Client::connect(&url).await?;
    let refused = anonymous.call::<i64>("add", (1, 2)).await.unwrap_err();
    if let Some(http) = refused.transport_error::<HttpError>() {
        println!("without a token: HTTP {}", http.status);
    }

    // With the token, and up to 5 retries (backoff with jitter, honouring
    // Retry-After) when the rate limit refuses a request.
    let client = Client::builder()
        .header("Authorization", "Bearer s3cret")
        .retry(Retry::attempts(5))
        .connect(&url)
        .await?;
    for i in 0..6 {
        let sum: i64 = client.call("add", (i, 1)).await?;
        println!("add {i} 1 = {sum}");
    }

    serving.shutdown().await;
    Ok(())
}
