//! The servers under test, each run as its own process (`jrpc-compare serve
//! KIND`) pinned to one core, so that its CPU time and memory can be read
//! from `/proc` apart from the load generator's.
//!
//! jrpc and jsonrpsee expose the same two methods with the same types:
//! `add [a, b]` → `a + b` over `i64`, and `echo [s]` → `s` over `String`.
//! Both run with their defaults, except that the connection limit is raised
//! so that the 10 000-connection case fits. The ceilings answer every
//! request with a constant reply and parse no JSON: the most any JSON-RPC
//! server could do over the same transport on the same core.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Connection limit for every server: above the idle case's 10 000.
const MAX_CONNECTIONS: u32 = 20_000;

/// The constant reply of the ceilings. Its `id` is null, which tells the
/// load generator to match replies to requests in order.
pub const CONSTANT_REPLY: &[u8] = br#"{"jsonrpc":"2.0","result":3,"id":null}"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// jrpc's `HttpServer`: HTTP and WebSocket on one port.
    Jrpc,
    /// jsonrpsee's `Server`: HTTP and WebSocket on one port.
    Jsonrpsee,
    /// jrpc's stream `Server` over TCP, newline-delimited JSON.
    JrpcTcp,
    /// The `jrpc` command's server, `jrpc serve --http` (stderr to
    /// /dev/null), from the release build.
    CliHttp,
    /// `jrpc serve --http --log-calls --metrics`.
    CliHttpLogged,
    /// `jrpc serve --tcp`.
    CliTcp,
    /// `jrpc serve --tcp --log-calls --metrics-addr 127.0.0.1:0`.
    CliTcpLogged,
    /// hyper HTTP/1.1 answering every request with a constant body.
    RawHttp,
    /// A WebSocket server answering every message with a constant message.
    RawWs,
    /// A TCP server answering every line with a constant line.
    RawLine,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Jrpc => "jrpc",
            Kind::Jsonrpsee => "jsonrpsee",
            Kind::JrpcTcp => "jrpc-tcp",
            Kind::CliHttp => "jrpc-serve-http",
            Kind::CliHttpLogged => "jrpc-serve-http-logged",
            Kind::CliTcp => "jrpc-serve-tcp",
            Kind::CliTcpLogged => "jrpc-serve-tcp-logged",
            Kind::RawHttp => "raw-http",
            Kind::RawWs => "raw-ws",
            Kind::RawLine => "raw-line",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        [
            Kind::Jrpc,
            Kind::Jsonrpsee,
            Kind::JrpcTcp,
            Kind::RawHttp,
            Kind::RawWs,
            Kind::RawLine,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }

    /// Whether this is a reference ceiling rather than a JSON-RPC server.
    pub fn is_ceiling(self) -> bool {
        matches!(self, Kind::RawHttp | Kind::RawWs | Kind::RawLine)
    }

    /// Whether this is the `jrpc` command rather than a server of this
    /// process.
    pub fn is_cli(self) -> bool {
        matches!(
            self,
            Kind::CliHttp | Kind::CliHttpLogged | Kind::CliTcp | Kind::CliTcpLogged
        )
    }

    /// Whether this is `jrpc serve` with the call log and metrics on.
    pub fn is_logged(self) -> bool {
        matches!(self, Kind::CliHttpLogged | Kind::CliTcpLogged)
    }

    /// `jrpc serve`'s arguments for this kind, listening on `port`.
    pub fn cli_args(self, port: u16) -> Vec<String> {
        let listener = match self {
            Kind::CliTcp | Kind::CliTcpLogged => "--tcp",
            _ => "--http",
        };
        let mut args = vec![
            "serve".to_owned(),
            listener.to_owned(),
            format!("127.0.0.1:{port}"),
            "--max-connections".to_owned(),
            MAX_CONNECTIONS.to_string(),
        ];
        match self {
            Kind::CliHttpLogged => args.extend(["--log-calls", "--metrics"].map(String::from)),
            // /metrics on a port of its own, there being no HTTP listener.
            Kind::CliTcpLogged => {
                args.extend(["--log-calls", "--metrics-addr", "127.0.0.1:0"].map(String::from))
            }
            _ => {}
        }
        args
    }
}

/// Binds 127.0.0.1:0, prints `PORT n` on stdout, and serves until killed.
pub async fn serve(kind: Kind) -> io::Result<()> {
    // As `jrpc serve` does: memory goes back after waves of closes.
    jrpc::server::trim_memory_after_closes(true);
    let port = match kind {
        Kind::Jrpc => {
            let server =
                jrpc::server::http::HttpServer::new(jrpc_router()).max_connections(MAX_CONNECTIONS as usize);
            keep_serving(server.bind("127.0.0.1:0").await?)
        }
        Kind::JrpcTcp => {
            let server = jrpc::server::Server::new(jrpc_router()).max_connections(MAX_CONNECTIONS as usize);
            keep_serving(server.bind_tcp("127.0.0.1:0").await?)
        }
        Kind::CliHttp | Kind::CliHttpLogged | Kind::CliTcp | Kind::CliTcpLogged => {
            return Err(io::Error::other(
                "the jrpc command is started by the runner, not served here",
            ))
        }
        Kind::Jsonrpsee => jsonrpsee_server().await?.port(),
        Kind::RawHttp | Kind::RawWs | Kind::RawLine => {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let port = listener.local_addr()?.port();
            tokio::spawn(accept_raw(listener, kind));
            port
        }
    };
    println!("PORT {port}");
    std::future::pending::<()>().await;
    Ok(())
}

/// The port a jrpc server listens on; the server runs until the process
/// is killed.
fn keep_serving(serving: jrpc::server::Serving) -> u16 {
    let addr: SocketAddr = serving
        .local_addr()
        .rsplit("://")
        .next()
        .and_then(|a| a.parse().ok())
        .expect("jrpc reports tcp://host:port or http://host:port");
    std::mem::forget(serving);
    addr.port()
}

pub fn jrpc_router() -> jrpc::Router {
    jrpc::Router::new()
        .sync_method("add", |(a, b): (i64, i64)| Ok(a + b))
        .sync_method("echo", |(s,): (String,)| Ok(s))
}

async fn jsonrpsee_server() -> io::Result<SocketAddr> {
    use jsonrpsee::server::{Server, ServerConfig};

    let config = ServerConfig::builder().max_connections(MAX_CONNECTIONS).build();
    let server = Server::builder().set_config(config).build("127.0.0.1:0").await?;
    let addr = server.local_addr()?;
    let handle = server.start(jsonrpsee_module());
    std::mem::forget(handle);
    Ok(addr)
}

pub fn jsonrpsee_module() -> jsonrpsee::RpcModule<()> {
    use jsonrpsee::types::ErrorObjectOwned;

    let mut module = jsonrpsee::RpcModule::new(());
    module
        .register_method("add", |params, _, _| {
            let (a, b): (i64, i64) = params.parse()?;
            Ok::<i64, ErrorObjectOwned>(a + b)
        })
        .expect("a new name");
    module
        .register_method("echo", |params, _, _| {
            let (s,): (String,) = params.parse()?;
            Ok::<String, ErrorObjectOwned>(s)
        })
        .expect("a new name");
    module
}

async fn accept_raw(listener: TcpListener, kind: Kind) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let _ = match kind {
                Kind::RawHttp => raw_http(stream).await,
                Kind::RawWs => raw_ws(stream).await,
                _ => raw_line(stream).await,
            };
        });
    }
}

/// hyper's HTTP/1.1 server: reads each body, answers with a constant one.
async fn raw_http(stream: TcpStream) -> io::Result<()> {
    use http_body_util::{BodyExt, Full};
    use hyper::{Request, Response};

    let service = hyper::service::service_fn(|request: Request<hyper::body::Incoming>| async move {
        let _ = request.into_body().collect().await;
        let mut response = Response::new(Full::new(Bytes::from_static(CONSTANT_REPLY)));
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
        Ok::<_, Infallible>(response)
    });
    hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
        .await
        .map_err(io::Error::other)
}

/// One constant line per line read, written back per read.
async fn raw_line(mut stream: TcpStream) -> io::Result<()> {
    let mut line = CONSTANT_REPLY.to_vec();
    line.push(b'\n');
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        for _ in memchr::memchr_iter(b'\n', &buf[..n]) {
            out.extend_from_slice(&line);
        }
        stream.write_all(&out).await?;
        out.clear();
    }
}

/// A WebSocket server that parses frames and answers each complete message
/// with a constant text message, written back per read.
async fn raw_ws(mut stream: TcpStream) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    // The handshake: read the request head, answer 101.
    let head_end = loop {
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
        if let Some(i) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let key = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("sec-websocket-key")
                .then(|| value.trim().to_owned())
        })
        .ok_or_else(|| io::Error::other("no Sec-WebSocket-Key"))?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let reply = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(reply.as_bytes()).await?;
    buf.advance(head_end);

    let mut frame = vec![0x81, CONSTANT_REPLY.len() as u8];
    frame.extend_from_slice(CONSTANT_REPLY);
    let mut out = Vec::new();
    loop {
        while let Some((opcode, total)) = client_frame(&buf) {
            if opcode == 0x8 {
                return Ok(());
            }
            if opcode == 0x1 || opcode == 0x2 {
                out.extend_from_slice(&frame);
            }
            buf.advance(total);
        }
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        if stream.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

/// The opcode and total length of the complete (masked, unfragmented)
/// client frame at the start of `buf`, if it is all there.
fn client_frame(buf: &[u8]) -> Option<(u8, usize)> {
    if buf.len() < 2 {
        return None;
    }
    let opcode = buf[0] & 0x0f;
    let masked = buf[1] & 0x80 != 0;
    let (len, header) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().ok()?) as usize, 10),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    let total = header + if masked { 4 } else { 0 } + len;
    (buf.len() >= total).then_some((opcode, total))
}
