//! Unix domain sockets: [`UnixListener`] for a [`Server`](crate::server::Server)
//! (or [`Server::bind_unix`](crate::server::Server::bind_unix)), [`UnixDialer`] for a
//! [`Client`](crate::client::Client) (or `Client::connect("unix:…")`).

use std::io;
use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

use super::connection::{Connection, Dialer, Listener};
use crate::codec::{BufferBudget, Framing};
use crate::context::ConnectionInfo;

pub(crate) fn info(stream: &UnixStream) -> ConnectionInfo {
    let path = |a: io::Result<tokio::net::unix::SocketAddr>| {
        a.ok()
            .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
    };
    ConnectionInfo {
        transport: "unix",
        peer_addr: path(stream.peer_addr()),
        local_addr: path(stream.local_addr()),
    }
}

/// `SCHEME+unix://PATH`, the path percent-encoded as the URL's host (as
/// Docker-style clients write it).
pub(crate) fn url(scheme: &str, path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut url = format!("{scheme}+unix://");
    // Bytes, not text: a path need not be UTF-8.
    for &byte in path.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => url.push(byte as char),
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

/// The socket path and the rest (path and query) of a `SCHEME+unix://`
/// URL, the percent-encoded path as its host: `None` when `url` is not
/// one, an error when its path is missing or badly escaped.
///
/// ```
/// use std::path::Path;
/// use jrpc::transport::unix::parse_url;
///
/// let (socket, rest) = parse_url("http", "http+unix://%2Frun%2Fapp.sock/mcp").unwrap().unwrap();
/// assert_eq!((socket.as_path(), rest), (Path::new("/run/app.sock"), "/mcp"));
/// assert!(parse_url("http", "http://localhost/mcp").is_none());
/// ```
pub fn parse_url<'u>(scheme: &str, url: &'u str) -> Option<io::Result<(PathBuf, &'u str)>> {
    use std::os::unix::ffi::OsStringExt as _;
    let rest = url.strip_prefix(scheme)?.strip_prefix("+unix://")?;
    let (host, rest) = rest.find(['/', '?']).map_or((rest, ""), |at| rest.split_at(at));
    let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let mut path = Vec::with_capacity(host.len());
    let mut bytes = host.bytes();
    while let Some(byte) = bytes.next() {
        if byte != b'%' {
            path.push(byte);
            continue;
        }
        let hex = [bytes.next(), bytes.next()];
        let decoded = match hex {
            [Some(a), Some(b)] => std::str::from_utf8(&[a, b])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok()),
            _ => None,
        };
        match decoded {
            Some(byte) => path.push(byte),
            None => return Some(Err(invalid("a bad %-escape in the socket path".into()))),
        }
    }
    if path.is_empty() {
        return Some(Err(invalid(format!(
            "no socket path: write it percent-encoded as the host ({scheme}+unix://%2Frun%2Fapp.sock/mcp)"
        ))));
    }
    Some(Ok((PathBuf::from(std::ffi::OsString::from_vec(path)), rest)))
}

/// A connection over a connected Unix socket.
pub fn connection(stream: UnixStream, framing: Framing, max_frame_len: usize) -> Connection {
    let info = info(&stream);
    let (read, write) = stream.into_split();
    Connection::over_io(read, write, framing, max_frame_len, info)
}

/// Accepts connections on a Unix domain socket, each framed with one
/// [`Framing`]. The socket file is removed when the listener is dropped.
#[derive(Debug)]
pub struct UnixListener {
    listener: tokio::net::UnixListener,
    path: PathBuf,
    framing: Framing,
    max_frame_len: usize,
    budget: Option<BufferBudget>,
}

impl UnixListener {
    /// Listens at `path`. A stale socket file (one nobody listens on) is
    /// replaced; a live one, or a file that is not a socket, is an error.
    pub async fn bind(path: impl AsRef<Path>, framing: Framing, max_frame_len: usize) -> io::Result<Self> {
        let path = path.as_ref();
        let listener = match tokio::net::UnixListener::bind(path) {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                use std::os::unix::fs::FileTypeExt;
                let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
                if !is_socket {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} exists and is not a socket", path.display()),
                    ));
                }
                if UnixStream::connect(path).await.is_ok() {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("{} is in use by a live server", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
                tokio::net::UnixListener::bind(path)?
            }
            other => other?,
        };
        Ok(UnixListener {
            listener,
            path: path.to_owned(),
            framing,
            max_frame_len,
            budget: None,
        })
    }

    /// Sets the socket file's permission bits (`0o600`: only this user may
    /// connect; `0o660`: this user's group too).
    pub fn mode(self, mode: u32) -> io::Result<Self> {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(mode))?;
        Ok(self)
    }

    /// The socket file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Charges every connection's unfinished frame to `budget`, shared with
    /// other listeners (see [`BufferBudget`]); without one, each connection
    /// is bounded only by the frame limit.
    pub fn buffer_budget(mut self, budget: BufferBudget) -> Self {
        self.budget = Some(budget);
        self
    }
}

impl Drop for UnixListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl super::StreamListener for UnixListener {
    type Stream = UnixStream;

    async fn accept_stream(&mut self) -> io::Result<(UnixStream, ConnectionInfo)> {
        let (stream, _) = self.listener.accept().await?;
        let info = info(&stream);
        Ok((stream, info))
    }

    fn url(&self, scheme: &str) -> String {
        url(scheme, &self.path)
    }
}

impl Listener for UnixListener {
    async fn accept(&mut self) -> io::Result<Connection> {
        let (stream, _) = self.listener.accept().await?;
        let Some(budget) = &self.budget else {
            return Ok(connection(stream, self.framing, self.max_frame_len));
        };
        let info = info(&stream);
        let (read, write) = stream.into_split();
        Ok(Connection::over_io_budgeted(
            read,
            write,
            self.framing,
            self.max_frame_len,
            budget,
            info,
        ))
    }

    fn local_addr(&self) -> String {
        format!("unix:{}", self.path.display())
    }
}

/// Opens connections to a Unix domain socket.
#[derive(Debug, Clone)]
pub struct UnixDialer {
    path: PathBuf,
    framing: Framing,
    max_frame_len: usize,
}

impl UnixDialer {
    /// Dials the socket at `path`, framing with `framing`.
    pub fn new(path: impl Into<PathBuf>, framing: Framing, max_frame_len: usize) -> Self {
        UnixDialer {
            path: path.into(),
            framing,
            max_frame_len,
        }
    }
}

impl Dialer for UnixDialer {
    async fn dial(&self) -> io::Result<Connection> {
        let stream = UnixStream::connect(&self.path).await?;
        Ok(connection(stream, self.framing, self.max_frame_len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_path_is_percent_encoded_as_the_host() {
        assert_eq!(
            url("http", Path::new("/run/app.sock")),
            "http+unix://%2Frun%2Fapp.sock"
        );
        assert_eq!(
            url("https", Path::new("/tmp/a b~c")),
            "https+unix://%2Ftmp%2Fa%20b~c"
        );
        use std::os::unix::ffi::OsStrExt as _;
        let latin1 = Path::new(std::ffi::OsStr::from_bytes(b"/tmp/caf\xe9"));
        assert_eq!(url("http", latin1), "http+unix://%2Ftmp%2Fcaf%E9");
    }

    #[test]
    fn a_socket_url_reads_back_to_its_path_and_rest() {
        use std::os::unix::ffi::OsStrExt as _;
        let cases: &[(&str, &[u8], &str)] = &[
            ("http+unix://%2Frun%2Fapp.sock/mcp", b"/run/app.sock", "/mcp"),
            ("http+unix://%2Frun%2Fapp.sock", b"/run/app.sock", ""),
            ("http+unix://%2Ftmp%2Fa%20b~c/x?y=1", b"/tmp/a b~c", "/x?y=1"),
            ("http+unix://%2ftmp%2fcaf%E9/", b"/tmp/caf\xe9", "/"),
            ("http+unix://relative.sock/rpc", b"relative.sock", "/rpc"),
        ];
        for (url, path, rest) in cases {
            let (got, got_rest) = parse_url("http", url).unwrap().unwrap();
            assert_eq!(got.as_os_str().as_bytes(), *path, "{url}");
            assert_eq!(got_rest, *rest, "{url}");
        }
        // Round trip.
        let path = Path::new("/tmp/jrpc test/é.sock");
        let (back, _) = parse_url("http", &url("http", path)).unwrap().unwrap();
        assert_eq!(back, path);
        // Not one of ours, or broken.
        assert!(parse_url("http", "http://localhost/mcp").is_none());
        assert!(parse_url("http", "https+unix://%2Fa").is_none());
        for bad in ["http+unix:///mcp", "http+unix://%2", "http+unix://%zz/"] {
            assert!(parse_url("http", bad).unwrap().is_err(), "{bad}");
        }
    }
}
