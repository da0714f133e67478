//! The playground: a page at `GET /playground` for trying a server from a
//! browser. It connects to the RPC path over WebSocket, asks `rpc.discover`
//! for the server's OpenRPC document, lists the methods, builds a form per
//! method from its param schemas, and shows each request and response,
//! the server's own notifications and requests, and a history. Raw JSON
//! editing covers anything a form cannot express (batches, malformed
//! input, methods the document does not list).
//!
//! Everything the page needs is in the binary: one HTML page, one script
//! and one style sheet, served with a content security policy that lets
//! the page load nothing from anywhere else.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use super::exchange::HttpBody;
use super::route::{self, RouteContext, RouteHandler};

/// Where the page is served.
pub(crate) const PATH: &str = "/playground";

const PAGE: &str = include_str!("playground/index.html");
const SCRIPT: &str = include_str!("playground/playground.js");
const STYLE: &str = include_str!("playground/playground.css");

/// The page may load its own script and style sheet, and connect to
/// WebSocket servers (its own, or another the user types in); nothing else.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                      connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The playground's routes for a server whose RPC path is `rpc_path`.
pub(crate) fn routes(rpc_path: &str) -> Vec<(String, RouteHandler)> {
    // The page learns the RPC path from a meta tag.
    let page = Bytes::from(PAGE.replace("{{rpc_path}}", &escape_attribute(rpc_path)));
    let html = "text/html; charset=utf-8";
    vec![
        (PATH.to_owned(), asset(page.clone(), html)),
        (format!("{PATH}/"), asset(page, html)),
        (
            format!("{PATH}/playground.js"),
            asset(
                Bytes::from_static(SCRIPT.as_bytes()),
                "text/javascript; charset=utf-8",
            ),
        ),
        (
            format!("{PATH}/playground.css"),
            asset(Bytes::from_static(STYLE.as_bytes()), "text/css; charset=utf-8"),
        ),
    ]
}

/// A route answering `GET` and `HEAD` with `body`.
fn asset(body: Bytes, content_type: &'static str) -> RouteHandler {
    route::handler(move |request: Request<HttpBody>, _cx: RouteContext| {
        let body = body.clone();
        async move {
            let method = request.method();
            if method != Method::GET && method != Method::HEAD {
                let mut response = Response::new(route::empty_body());
                *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                response
                    .headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
                return response;
            }
            // HEAD gets the body too, which the server does not send: its
            // headers are then those of GET (the length, or the encoding
            // when the reply is compressed).
            let length = body.len();
            let mut response = Response::new(route::full_body(body));
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
            // The assets change with the binary: always revalidate.
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
            response
        }
    })
}

/// `text` safe inside a double-quoted HTML attribute.
fn escape_attribute(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '"' => escaped.push_str("&quot;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rpc_path_is_escaped_into_the_page() {
        assert_eq!(escape_attribute(r#"/a"b<c>&"#), "/a&quot;b&lt;c&gt;&amp;");
        assert!(PAGE.contains(r#"content="{{rpc_path}}""#));
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        for asset in ["/playground/playground.js", "/playground/playground.css"] {
            assert!(PAGE.contains(asset), "{asset}");
        }
        for text in [PAGE, SCRIPT, STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://") && !text.contains("//cdn"));
        }
    }
}
