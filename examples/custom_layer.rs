//! A call middleware layer of your own: it stamps every call with a request
//! number that handlers can read, and refuses `admin.*` methods to callers
//! without an identity. The same layer serves TCP and HTTP alike.
//!
//! ```sh
//! cargo run --example custom_layer
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use jrpc::client::Client;
use jrpc::middleware::{BoxCallService, Call, Layer, RawResult, Service, ServiceExt};
use jrpc::server::http::HttpServer;
use jrpc::server::Server;
use jrpc::{Error, RequestContext, Router};

/// What the layer tells handlers about a call.
#[derive(Debug, Clone, Copy)]
struct CallNumber(u64);

/// The layer: built once, it wraps the router's handlers.
#[derive(Clone, Default)]
struct Stamp {
    next: Arc<AtomicU64>,
}

impl Layer<BoxCallService> for Stamp {
    type Service = StampService;

    fn layer(&self, inner: BoxCallService) -> StampService {
        StampService {
            next: Arc::clone(&self.next),
            inner,
        }
    }
}

/// The service it makes: one per router, called for every call.
#[derive(Clone)]
struct StampService {
    next: Arc<AtomicU64>,
    inner: BoxCallService,
}

impl Service<Call> for StampService {
    type Response = RawResult;
    type Error = Error;
    type Future = jrpc::middleware::CallFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: Call) -> Self::Future {
        if call.method().starts_with("admin.") && call.identity().is_none() {
            return Box::pin(async { Err(Error::new(-32004, "Unauthorized")) });
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        call.extensions_mut().insert(CallNumber(number));
        // The usual tower way: call the inner service that was polled ready.
        let inner = self.inner.clone();
        Box::pin(inner.oneshot(call))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let router = Router::new()
        .method("whoami", |(): (), ctx: RequestContext| async move {
            let number = ctx.get::<CallNumber>().map(|n| n.0);
            let transport = ctx.connection_info().map(|info| info.transport);
            Ok(serde_json::json!({"call": number, "transport": transport}))
        })
        .sync_method("admin.reset", || Ok(true))
        .layer(Stamp::default());

    let tcp = Server::new(router.clone()).bind_tcp("127.0.0.1:0").await?;
    let http = HttpServer::new(router).bind("127.0.0.1:0").await?;
    for url in [tcp.local_addr(), http.local_addr()] {
        let client = Client::connect(url).await?;
        let me: serde_json::Value = client.call("whoami", ()).await?;
        println!("{url}: whoami -> {me}");
        let reset = client.call::<bool>("admin.reset", ()).await;
        println!(
            "{url}: admin.reset -> {}",
            reset.map_or_else(|e| e.to_string(), |ok| ok.to_string())
        );
    }
    tcp.shutdown().await;
    http.shutdown().await;
    Ok(())
}
