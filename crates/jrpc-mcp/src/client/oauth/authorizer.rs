//! The browser step of the authorization code flow: an [`Authorizer`]
//! takes the user to the authorization server and hands back where it
//! sent them afterwards. [`LoopbackAuthorizer`] is the one for programs
//! on the user's machine (RFC 8252 §7.3): it listens on 127.0.0.1, asks
//! the user to open the URL, and reads the redirect.

use std::sync::Mutex;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use super::error::{BoxFuture, OAuthError};

/// Takes the user through the authorization server's page.
///
/// [`redirect_uri`](Authorizer::redirect_uri) is asked first (it is
/// registered with the server, and sent in the authorization request);
/// then [`authorize`](Authorizer::authorize) gets the authorization URL
/// and returns the URL the server redirected to, query and all
/// (`…/callback?code=…&state=…`). The client checks `state` and `iss`.
pub trait Authorizer: Send + Sync + 'static {
    /// The redirect URI this authorizer receives at.
    fn redirect_uri(&self) -> BoxFuture<'_, Result<String, OAuthError>>;
    /// Sends the user to `url`; the redirect URL they came back to.
    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, OAuthError>>;
}

type Show = Box<dyn Fn(&str) + Send + Sync>;

/// Receives the redirect on `http://127.0.0.1:PORT/callback`, the port
/// random unless set; shows the user the URL to open (on stderr unless
/// [`on_url`](LoopbackAuthorizer::on_url) says otherwise) and waits for
/// them, up to 5 minutes by default.
pub struct LoopbackAuthorizer {
    port: u16,
    timeout: Duration,
    show: Show,
    listener: tokio::sync::Mutex<Option<TcpListener>>,
    uri: Mutex<Option<String>>,
}

impl std::fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("port", &self.port)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for LoopbackAuthorizer {
    fn default() -> Self {
        LoopbackAuthorizer::new()
    }
}

const CALLBACK_PATH: &str = "/callback";
const MAX_REQUEST: usize = 16 * 1024;

impl LoopbackAuthorizer {
    /// On a random port, the URL shown on stderr.
    pub fn new() -> Self {
        LoopbackAuthorizer {
            port: 0,
            timeout: Duration::from_secs(300),
            show: Box::new(|url| {
                eprintln!("Open this URL in your browser to log in:\n\n  {url}\n\nWaiting for the authorization server to send you back…");
            }),
            listener: tokio::sync::Mutex::new(None),
            uri: Mutex::new(None),
        }
    }

    /// On this port (a client pre-registered with one redirect URI).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// How long to wait for the user.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// What to do with the URL the user must open (print it, open a
    /// browser).
    pub fn on_url(mut self, show: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.show = Box::new(show);
        self
    }

    async fn bind(&self) -> Result<String, OAuthError> {
        if let Some(uri) = self.uri.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Ok(uri);
        }
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|e| OAuthError::Authorizer(format!("cannot listen on 127.0.0.1:{}: {e}", self.port)))?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Authorizer(e.to_string()))?
            .port();
        let uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
        *self.listener.lock().await = Some(listener);
        *self.uri.lock().unwrap_or_else(|p| p.into_inner()) = Some(uri.clone());
        Ok(uri)
    }

    async fn wait(&self, url: String) -> Result<String, OAuthError> {
        let base = self.bind().await?;
        // One flow per listener: the next one binds afresh, so nothing
        // queued for this one (a reload, a stray request) reaches it.
        let taken = self.listener.lock().await.take();
        *self.uri.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let Some(listener) = taken else {
            return Err(OAuthError::Authorizer("the loopback listener is gone".into()));
        };
        // Only the answer to this request counts: a callback with another
        // state (forged by a local process or a web page) is turned away,
        // not taken for the login's end.
        let expected = url::Url::parse(&url).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        });
        (self.show)(&url);
        let waiting = async {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                let Some(target) = read_target(&mut stream).await else {
                    continue;
                };
                let Some(query) = target
                    .strip_prefix(CALLBACK_PATH)
                    .and_then(|rest| rest.strip_prefix('?'))
                    .filter(|q| {
                        q.split('&')
                            .any(|p| p.starts_with("code=") || p.starts_with("error="))
                    })
                    .filter(|q| {
                        let state = url::form_urlencoded::parse(q.as_bytes())
                            .find(|(k, _)| k == "state")
                            .map(|(_, v)| v.into_owned());
                        expected.is_none() || state == expected
                    })
                else {
                    // A favicon, a probe, another login's answer: not the
                    // redirect.
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    continue;
                };
                let page = "<!doctype html><title>jrpc</title><p>Done: you can close this tab and go back to the terminal.</p>";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                    page.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
                let _ = stream.shutdown().await;
                return format!("{base}?{query}");
            }
        };
        tokio::time::timeout(self.timeout, waiting)
            .await
            .map_err(|_| OAuthError::Authorizer(format!("no redirect came back within {:?}", self.timeout)))
    }
}

/// The request-target of an HTTP/1 `GET`, read from the start of a
/// connection (bounded).
async fn read_target(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let reading = async {
        while !buffer.windows(4).any(|w| w == b"\r\n\r\n") && buffer.len() < MAX_REQUEST {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buffer.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(Duration::from_secs(10), reading)
        .await
        .ok()??;
    let line = buffer.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    (parts.next()? == "GET").then_some(())?;
    Some(parts.next()?.to_owned())
}

impl Authorizer for LoopbackAuthorizer {
    fn redirect_uri(&self) -> BoxFuture<'_, Result<String, OAuthError>> {
        Box::pin(self.bind())
    }

    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, OAuthError>> {
        Box::pin(self.wait(url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_loopback_authorizer_returns_the_redirect_it_receives() {
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let authorizer = LoopbackAuthorizer::new().on_url(move |url| tx.send(url.to_owned()).unwrap());
        let redirect = authorizer.redirect_uri().await.unwrap();
        assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"));
        let address = redirect
            .trim_start_matches("http://")
            .trim_end_matches("/callback")
            .to_owned();
        let browser = tokio::spawn(async move {
            let visit = |target: &'static str| {
                let address = address.clone();
                async move {
                    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
                    stream
                        .write_all(format!("GET {target} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
                        .await
                        .unwrap();
                    let mut answer = String::new();
                    stream.read_to_string(&mut answer).await.unwrap();
                    answer
                }
            };
            assert!(visit("/favicon.ico").await.starts_with("HTTP/1.1 404"));
            assert!(visit("/callback?code=abc&state=xyz")
                .await
                .starts_with("HTTP/1.1 200"));
        });
        let back = authorizer
            .authorize("https://as.example/authorize?x=1".into())
            .await
            .unwrap();
        assert_eq!(back, format!("{redirect}?code=abc&state=xyz"));
        assert_eq!(rx.recv().unwrap(), "https://as.example/authorize?x=1");
        browser.await.unwrap();
    }
}
