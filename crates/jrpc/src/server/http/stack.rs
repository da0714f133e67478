//! The RPC service as a connection calls it: bare (one boxed future per
//! request) or wrapped in the server's layers.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use tower::util::BoxCloneSyncService;
use tower::{Service, ServiceExt};

use super::exchange::HttpBody;
use super::service::RpcService;

/// The RPC service with its layers, as one cloneable service.
pub type HttpService = BoxCloneSyncService<Request<HttpBody>, Response<Full<Bytes>>, Infallible>;

/// The RPC service as served: bare when no layer wraps it (one boxed
/// future per request), else with its layers.
#[derive(Clone)]
pub(super) enum Stack {
    Bare(RpcService),
    Layered(HttpService),
}

impl Stack {
    pub(super) fn call<B>(&self, request: Request<B>) -> <HttpService as Service<Request<HttpBody>>>::Future
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let request = request.map(|body| HttpBody::new(body.map_err(Into::into)));
        match self {
            // Always ready: it does its work in the future.
            Stack::Bare(service) => service.clone().call(request),
            // Layers given by the user may wait in `poll_ready`.
            Stack::Layered(service) => Box::pin(service.clone().oneshot(request)),
        }
    }
}

/// Boxes whatever body the outer layers produce into [`HttpBody`].
#[derive(Clone)]
pub(super) struct BoxBody(pub(super) Stack);

impl<B> Service<Request<B>> for BoxBody
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = <HttpService as Service<Request<HttpBody>>>::Future;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        // `Stack::call` waits for readiness itself, in the future it returns.
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.0.call(request)
    }
}
