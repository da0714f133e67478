//! The load generator: many connections on one single-threaded runtime,
//! speaking just enough HTTP/1.1, WebSocket or newline-delimited JSON to
//! keep requests in flight and match replies, so that its own cost per
//! request stays far below any server's.
//!
//! Every request is pre-encoded; only its `id` changes. HTTP keeps one
//! request in flight per keep-alive connection (as wrk does); WebSocket and
//! lines keep `in_flight` per connection, write every refill of one read as
//! one write, and match replies by `id` (or in order when the reply carries
//! a null id, as the ceilings' constant reply does).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use hdrhistogram::Histogram;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Http,
    Ws,
    Line,
}

/// One request, as the bytes before and after its `id`.
#[derive(Clone, Debug)]
pub struct Payload {
    pub before_id: Vec<u8>,
    pub after_id: Vec<u8>,
    /// JSON-RPC items per request (a batch counts each entry).
    pub items: u64,
    /// Payload bytes per reply counted as throughput (echo cases).
    pub bytes: u64,
}

impl Payload {
    pub fn single(method: &str, params: &str) -> Payload {
        Payload {
            before_id: format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":"#)
                .into_bytes(),
            after_id: b"}".to_vec(),
            items: 1,
            bytes: 0,
        }
    }

    /// A batch of `n` copies of one call; the `id` goes on the last entry.
    pub fn batch(method: &str, params: &str, n: usize) -> Payload {
        let mut before = String::from("[");
        for i in 0..n - 1 {
            before.push_str(&format!(
                r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":{i}}},"#
            ));
        }
        before.push_str(&format!(
            r#"{{"jsonrpc":"2.0","method":"{method}","params":{params},"id":"#
        ));
        Payload {
            before_id: before.into_bytes(),
            after_id: b"}]".to_vec(),
            items: n as u64,
            bytes: 0,
        }
    }

    fn write(&self, id: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.before_id);
        out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
        out.extend_from_slice(&self.after_id);
    }

    fn len(&self, id: u64) -> usize {
        self.before_id.len() + itoa::Buffer::new().format(id).len() + self.after_id.len()
    }
}

pub struct Load {
    pub proto: Proto,
    pub addr: SocketAddr,
    pub connections: usize,
    pub in_flight: usize,
    pub warmup: Duration,
    pub duration: Duration,
    pub payload: Payload,
    /// The server's process, sampled for CPU time over the measured window.
    pub server_pid: u32,
    /// The cores the server and the load generator are pinned to, if they
    /// are: each core's busy share is sampled over the window too.
    pub cores: Option<(usize, usize)>,
}

#[derive(Debug)]
pub struct Outcome {
    /// Replies received in the measured window.
    pub replies: u64,
    pub errors: u64,
    pub seconds: f64,
    pub latency: Histogram<u64>,
    /// Replies per connection, for fairness.
    pub per_connection: Vec<u64>,
    /// Server CPU seconds (user + system) over the window.
    pub server_cpu: f64,
    /// This process's (the load generator's) CPU seconds over the window:
    /// near the window's length, the load generator is the bottleneck.
    pub load_cpu: f64,
    /// The busy share of the server's and the load generator's cores over
    /// the window, from /proc/stat. Unlike the processes' CPU times these
    /// include the kernel's network work done in interrupt context
    /// (softirq), which is charged to no process.
    pub cores_busy: Option<(f64, f64)>,
    /// The last reply of the first connection, for a correctness check.
    pub sample: Vec<u8>,
}

/// Per-connection state shared with the runner (single-threaded runtime).
struct Tally {
    window_start: Instant,
    window_end: Instant,
    replies: u64,
    errors: u64,
    latency: Histogram<u64>,
}

impl Tally {
    /// Records one reply that arrived now for a request sent at `sent`.
    fn record(&mut self, now: Instant, sent: Instant, ok: bool) -> bool {
        if now < self.window_start || now > self.window_end {
            return false;
        }
        if ok {
            self.replies += 1;
            let _ = self.latency.record(now.duration_since(sent).as_nanos() as u64);
        } else {
            self.errors += 1;
        }
        ok
    }
}

/// Runs the load and returns what was measured in the window after warmup.
pub async fn run(load: Load) -> io::Result<Outcome> {
    let start = Instant::now();
    let window_start = start + load.warmup + connect_allowance(load.connections);
    let window_end = window_start + load.duration;
    let tally = Rc::new(std::cell::RefCell::new(Tally {
        window_start,
        window_end,
        replies: 0,
        errors: 0,
        latency: Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid bounds"),
    }));
    let payload = Rc::new(load.payload.clone());
    let local = tokio::task::LocalSet::new();
    let mut tasks = Vec::new();
    for i in 0..load.connections {
        let (tally, payload) = (tally.clone(), payload.clone());
        let (proto, addr, in_flight) = (load.proto, load.addr, load.in_flight);
        tasks.push(local.spawn_local(async move {
            let stream = connect(addr, proto).await?;
            let mut conn = Conn {
                stream,
                payload,
                tally,
                deadline: window_end,
                sample: i == 0,
                last: Vec::new(),
                count: 0,
            };
            match proto {
                Proto::Http => conn.http().await?,
                Proto::Ws | Proto::Line => conn.pipelined(proto, in_flight).await?,
            }
            Ok::<_, io::Error>((conn.count, conn.last))
        }));
    }
    let pid = load.server_pid;
    let this = std::process::id();
    let cores = load.cores;
    let (cpu, load_cpu, cores_busy, results) = local
        .run_until(async move {
            tokio::time::sleep_until(window_start.into()).await;
            let (cpu_start, load_start) = (cpu_seconds(pid), cpu_seconds(this));
            let cores_start = cores.map(|(server, load)| (core_ticks(server), core_ticks(load)));
            tokio::time::sleep_until(window_end.into()).await;
            let (cpu_end, load_end) = (cpu_seconds(pid), cpu_seconds(this));
            let cores_busy = cores.zip(cores_start).map(|((server, load), (server_start, load_start))| {
                (busy_share(server_start, core_ticks(server)), busy_share(load_start, core_ticks(load)))
            });
            let mut results = Vec::new();
            for task in tasks {
                results.push(task.await.map_err(io::Error::other)?);
            }
            Ok::<_, io::Error>((cpu_end - cpu_start, load_end - load_start, cores_busy, results))
        })
        .await?;
    let mut per_connection = Vec::new();
    let mut sample = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let (count, last) = result?;
        per_connection.push(count);
        if i == 0 {
            sample = last;
        }
    }
    let tally = Rc::try_unwrap(tally)
        .ok()
        .expect("connections finished")
        .into_inner();
    Ok(Outcome {
        replies: tally.replies,
        errors: tally.errors,
        seconds: load.duration.as_secs_f64(),
        latency: tally.latency,
        per_connection,
        server_cpu: cpu,
        load_cpu,
        cores_busy,
        sample,
    })
}

/// Extra warmup while many connections are set up.
fn connect_allowance(connections: usize) -> Duration {
    Duration::from_millis(connections as u64)
}

/// Opens a connection and, for WebSocket, completes the handshake.
pub async fn connect(addr: SocketAddr, proto: Proto) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    if proto == Proto::Ws {
        let request = format!(
            "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        // Byte by byte, so that nothing after the head is consumed.
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await? == 0 {
                return Err(io::Error::other("closed during the WebSocket handshake"));
            }
            head.push(byte[0]);
        }
        if !head.starts_with(b"HTTP/1.1 101") {
            return Err(io::Error::other(format!(
                "WebSocket handshake refused: {}",
                String::from_utf8_lossy(&head).lines().next().unwrap_or("")
            )));
        }
    }
    Ok(stream)
}

struct Conn {
    stream: TcpStream,
    payload: Rc<Payload>,
    tally: Rc<std::cell::RefCell<Tally>>,
    deadline: Instant,
    sample: bool,
    last: Vec<u8>,
    count: u64,
}

impl Conn {
    fn record(&mut self, sent: Instant, body: &[u8]) {
        let ok = memchr::memmem::find(body, b"\"result\"").is_some();
        if self.tally.borrow_mut().record(Instant::now(), sent, ok) {
            self.count += 1;
        }
        if self.sample {
            self.last.clear();
            self.last.extend_from_slice(body);
        }
    }

    /// HTTP/1.1 keep-alive, one request at a time.
    async fn http(&mut self) -> io::Result<()> {
        let mut request = format!(
            "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.payload.len(1)
        )
        .into_bytes();
        self.payload.write(1, &mut request);
        let mut buf = BytesMut::with_capacity(64 * 1024);
        while Instant::now() < self.deadline {
            let sent = Instant::now();
            self.stream.write_all(&request).await?;
            let (status_ok, body_start, body_len) = loop {
                if let Some(head) = http_head(&buf)? {
                    if buf.len() >= head.1 + head.2 {
                        break head;
                    }
                    buf.reserve(head.1 + head.2 - buf.len());
                }
                if self.stream.read_buf(&mut buf).await? == 0 {
                    return Err(io::Error::other("server closed the connection"));
                }
            };
            let body = &buf[body_start..body_start + body_len];
            if status_ok {
                self.record(sent, body);
            } else {
                self.tally.borrow_mut().record(Instant::now(), sent, false);
            }
            buf.advance(body_start + body_len);
        }
        Ok(())
    }

    /// WebSocket or lines, `in_flight` requests outstanding at all times.
    async fn pipelined(&mut self, proto: Proto, in_flight: usize) -> io::Result<()> {
        let mut outstanding: VecDeque<(u64, Instant)> = VecDeque::with_capacity(in_flight);
        let mut next_id = 0u64;
        let mut out = Vec::new();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let payload = self.payload.clone();
        let mut send = |out: &mut Vec<u8>, outstanding: &mut VecDeque<(u64, Instant)>, now: Instant| {
            let id = next_id;
            next_id += 1;
            match proto {
                Proto::Ws => {
                    ws_client_header(payload.len(id), out);
                    payload.write(id, out);
                }
                _ => {
                    payload.write(id, out);
                    out.push(b'\n');
                }
            }
            outstanding.push_back((id, now));
        };
        let now = Instant::now();
        for _ in 0..in_flight {
            send(&mut out, &mut outstanding, now);
        }
        self.stream.write_all(&out).await?;
        out.clear();
        loop {
            if self.stream.read_buf(&mut buf).await? == 0 {
                return Err(io::Error::other("server closed the connection"));
            }
            let now = Instant::now();
            let stop = now >= self.deadline;
            while let Some((start, len, total)) = next_message(proto, &buf)? {
                if len == usize::MAX {
                    buf.advance(total);
                    continue;
                }
                let body = &buf[start..start + len];
                let sent = match reply_id(body).and_then(|id| outstanding.iter().position(|(i, _)| *i == id))
                {
                    Some(at) => outstanding.remove(at),
                    None => outstanding.pop_front(),
                };
                let Some((_, sent)) = sent else {
                    return Err(io::Error::other("a reply nobody asked for"));
                };
                self.record(sent, body);
                buf.advance(total);
                if !stop {
                    send(&mut out, &mut outstanding, now);
                }
            }
            if stop && outstanding.is_empty() {
                return Ok(());
            }
            if stop && now >= self.deadline + Duration::from_secs(5) {
                return Err(io::Error::other("replies still missing 5 s after the run"));
            }
            if !out.is_empty() {
                self.stream.write_all(&out).await?;
                out.clear();
            }
        }
    }
}

/// Parses a response head: (status is 200, body offset, body length).
fn http_head(buf: &[u8]) -> io::Result<Option<(bool, usize, usize)>> {
    let Some(end) = memchr::memmem::find(buf, b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(io::Error::other)?;
    let status_ok = head.starts_with("HTTP/1.1 200");
    let mut length = None;
    for line in head.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse::<usize>().ok();
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(io::Error::other(
                "chunked responses are not supported by this load generator",
            ));
        }
    }
    let length =
        length.ok_or_else(|| io::Error::other(format!("response without Content-Length: {head}")))?;
    Ok(Some((status_ok, end + 4, length)))
}

/// The next complete message: (payload offset, payload length, bytes used);
/// a length of `usize::MAX` marks a control frame to skip.
fn next_message(proto: Proto, buf: &[u8]) -> io::Result<Option<(usize, usize, usize)>> {
    match proto {
        Proto::Line => Ok(memchr::memchr(b'\n', buf).map(|i| (0, i, i + 1))),
        _ => {
            if buf.len() < 2 {
                return Ok(None);
            }
            if buf[0] & 0x80 == 0 {
                return Err(io::Error::other("fragmented WebSocket message"));
            }
            let opcode = buf[0] & 0x0f;
            if opcode == 0x8 {
                return Err(io::Error::other("the server closed the WebSocket"));
            }
            let (len, header) = match buf[1] & 0x7f {
                126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
                127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize, 10),
                126 | 127 => return Ok(None),
                n => (n as usize, 2),
            };
            if buf.len() < header + len {
                return Ok(None);
            }
            if opcode != 0x1 && opcode != 0x2 {
                // Pings and pongs are not replies: skipped (a length of
                // usize::MAX says so).
                return Ok(Some((header, usize::MAX, header + len)));
            }
            Ok(Some((header, len, header + len)))
        }
    }
}

/// A masked client text frame header; the mask key is zero, so the payload
/// goes out unchanged.
fn ws_client_header(len: usize, out: &mut Vec<u8>) {
    out.push(0x81);
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= u16::MAX as usize {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&[0, 0, 0, 0]);
}

/// The numeric `id` of a single reply, if it has one.
fn reply_id(body: &[u8]) -> Option<u64> {
    let at = memchr::memmem::rfind(body, b"\"id\":")? + 5;
    let digits = body[at..]
        .iter()
        .skip_while(|b| **b == b' ')
        .take_while(|b| b.is_ascii_digit());
    let mut id = 0u64;
    let mut any = false;
    for d in digits {
        id = id.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        any = true;
    }
    any.then_some(id)
}

/// User plus system CPU seconds of a process so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may contain spaces), from field 3.
    let rest = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

/// A core's (busy, total) clock ticks so far, from /proc/stat: busy is
/// everything but idle and I/O wait, interrupts and softirq included.
pub fn core_ticks(cpu: usize) -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let name = format!("cpu{cpu}");
    let Some(line) = stat.lines().find(|line| line.split_whitespace().next() == Some(name.as_str())) else {
        return (0, 0);
    };
    // user nice system idle iowait irq softirq steal (guest time is
    // already counted in user).
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// The busy share of a core between two readings of [`core_ticks`].
fn busy_share((busy_start, total_start): (u64, u64), (busy_end, total_end): (u64, u64)) -> f64 {
    let total = total_end.saturating_sub(total_start);
    if total == 0 {
        return 0.0;
    }
    busy_end.saturating_sub(busy_start) as f64 / total as f64
}

/// A memory figure (`VmRSS`, `VmHWM`) of a process, in bytes.
pub fn memory(pid: u32, field: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_in_either_member_order() {
        assert_eq!(reply_id(br#"{"jsonrpc":"2.0","result":3,"id":17}"#), Some(17));
        assert_eq!(reply_id(br#"{"jsonrpc":"2.0","id":5,"result":3}"#), Some(5));
        assert_eq!(reply_id(br#"{"jsonrpc":"2.0","result":3,"id":null}"#), None);
    }

    #[test]
    fn batches_put_the_id_on_the_last_entry() {
        let payload = Payload::batch("add", "[1,2]", 3);
        let mut out = Vec::new();
        payload.write(9, &mut out);
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value.as_array().unwrap().len(), 3);
        assert_eq!(value[2]["id"], 9);
        assert_eq!(payload.len(9), out.len());
    }
}
