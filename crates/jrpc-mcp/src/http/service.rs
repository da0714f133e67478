//! The Streamable HTTP endpoint as a `tower::Service` over HTTP requests,
//! so that it mounts in an app of your own at a path of your choosing (an
//! axum `Router::route_service`, say) beside your own routes.
//!
//! ```no_run
//! use jrpc_mcp::http::{HttpOptions, StreamableHttp};
//!
//! # fn app(server: jrpc_mcp::McpServer) {
//! let endpoint = StreamableHttp::new(server, HttpOptions::default());
//! // axum: Router::new().route_service("/api/mcp", endpoint)
//! # let _ = endpoint;
//! # }
//! ```
//!
//! Requests see the endpoint's [`context`](StreamableHttp::context); the
//! host names it accepts (DNS-rebinding protection) are localhost's and
//! those given with [`HttpOptions::allow_host`](super::HttpOptions::allow_host),
//! since a service does not know the address it is served on.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use http::{Request, Response};
use http_body_util::BodyExt;
use jrpc::server::http::route::RouteBody;
use jrpc::server::http::HttpBody;

use super::StreamableHttp;

impl<B> jrpc::middleware::Service<Request<B>> for StreamableHttp
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<RouteBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RouteBody>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let request = request.map(|body| HttpBody::new(body.map_err(Into::into)));
        Box::pin(self.handle(request, self.context.clone()).map(Ok))
    }
}
