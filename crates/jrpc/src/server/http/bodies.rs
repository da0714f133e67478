//! The response bodies a connection sends: plain, layered, or a route's
//! stream that keeps its connection busy until it ends.

use bytes::Bytes;
use http_body::Body;
use http_body_util::Full;

use super::activity::RequestGuard;
use super::route;

/// A route's body, keeping its connection busy until it ends.
pub(super) struct Guarded {
    pub(super) body: route::RouteBody,
    pub(super) _answering: RequestGuard,
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A response body: plain, or from the compression and CORS layers.
pub(super) enum ReplyBody {
    Plain(Full<Bytes>),
    Layered(http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>),
}

pub(super) type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ReplyBody::Plain(body) => std::pin::Pin::new(body)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            ReplyBody::Layered(body) => std::pin::Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ReplyBody::Plain(body) => body.is_end_stream(),
            ReplyBody::Layered(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ReplyBody::Plain(body) => body.size_hint(),
            ReplyBody::Layered(body) => body.size_hint(),
        }
    }
}
