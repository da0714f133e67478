//! LSP-style framing: `Content-Length: N` headers, a blank line, N bytes.

use std::io;

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::inbound::Inbound;

/// The longest header section accepted before it is treated as garbage.
const MAX_HEADER_LEN: usize = 8 * 1024;

/// `Content-Length` framing, bounded by a maximum body size.
///
/// Each frame is a header section (`Name: value` lines ending in `\r\n`, of
/// which `Content-Length` is required and `Content-Type` is allowed), an
/// empty line, and exactly `Content-Length` bytes of body.
///
/// Bad input never ends the stream by itself:
/// - a body longer than the limit is reported ([`Inbound::Oversized`]) and
///   skipped as it arrives, without being buffered;
/// - a header section without a valid `Content-Length` (or longer than 8 KiB)
///   is reported ([`Inbound::Malformed`]); the decoder then skips ahead to the
///   next line that starts with `Content-Length:` and goes on from there.
///
/// ```
/// use bytes::BytesMut;
/// use jrpc::codec::{ContentLengthCodec, Inbound};
/// use tokio_util::codec::Decoder;
///
/// let mut codec = ContentLengthCodec::new(1024);
/// let mut buf = BytesMut::from(&b"Content-Length: 2\r\n\r\n{}"[..]);
/// assert_eq!(codec.decode(&mut buf).unwrap(), Some(Inbound::Frame("{}".into())));
/// ```
#[derive(Debug, Clone)]
pub struct ContentLengthCodec {
    max_len: usize,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a complete header section.
    Headers,
    /// Headers read; waiting for a body of this many bytes.
    Body(usize),
    /// Dropping the rest of an oversized body: this many bytes remain.
    Skipping(usize),
    /// After garbage: dropping bytes up to the next `Content-Length:` line.
    Resync,
}

impl ContentLengthCodec {
    /// The default maximum body size: 8 MiB, the router's default frame limit.
    pub const DEFAULT_MAX_LEN: usize = crate::message::Limits::DEFAULT_MAX_FRAME_LEN;

    /// A codec accepting bodies of up to `max_len` bytes.
    pub fn new(max_len: usize) -> Self {
        ContentLengthCodec {
            max_len,
            state: State::Headers,
        }
    }

    /// The maximum body size.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

impl Default for ContentLengthCodec {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_LEN)
    }
}

/// Parses a header section (without its terminating blank line) into the
/// content length, or says what is wrong with it.
fn content_length(headers: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(headers).map_err(|_| "header section is not UTF-8".to_owned())?;
    let mut length = None;
    for line in text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("not a header line: {:?}", truncate(line)));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            let n = value
                .parse::<usize>()
                .ok()
                .filter(|_| value.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| format!("bad Content-Length value {:?}", truncate(value)))?;
            if length.replace(n).is_some() {
                return Err("Content-Length given twice".to_owned());
            }
        }
    }
    length.ok_or_else(|| "missing Content-Length header".to_owned())
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(40) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Where the header section ends and how long its terminating blank line
/// is: the first `\r\n\r\n` or `\n\n`.
fn header_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = find(buf, b"\r\n\r\n").map(|p| (p, 4));
    let lf = find(buf, b"\n\n").map(|p| (p, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// Finds `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

impl Decoder for ContentLengthCodec {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        loop {
            match self.state {
                State::Headers => {
                    // Tolerate stray line breaks between frames.
                    let blank = buf.iter().take_while(|b| matches!(b, b'\r' | b'\n')).count();
                    buf.advance(blank);
                    // A JSON text on a line where headers belong: the other
                    // side frames by lines. Say so, and drop the line.
                    if matches!(buf.first(), Some(b'{' | b'[')) {
                        if let Some(end) = memchr::memchr(b'\n', buf) {
                            buf.advance(end + 1);
                            return Ok(Some(Inbound::Malformed(format!(
                                "{}: a JSON text on a line where Content-Length headers belong (the other side frames one JSON text per line)",
                                super::inbound::FRAMING_MISMATCH
                            ))));
                        }
                    }
                    // The header section ends with an empty line: CRLF per
                    // the protocol, bare LF tolerated.
                    let found = header_end(buf).filter(|(end, _)| *end <= MAX_HEADER_LEN);
                    let Some((end, terminator)) = found else {
                        // Decide only once any terminator that could start
                        // within the limit would be whole (4 bytes), so
                        // that the outcome does not depend on how the
                        // stream was cut into reads.
                        if buf.len() >= MAX_HEADER_LEN + 4 {
                            // Drop one byte, so that the search for the
                            // next `Content-Length:` makes progress past
                            // this one without skipping a later one.
                            buf.advance(1);
                            self.state = State::Resync;
                            return Ok(Some(Inbound::Malformed(format!(
                                "no end of headers within {MAX_HEADER_LEN} bytes"
                            ))));
                        }
                        return Ok(None);
                    };
                    let parsed = content_length(&buf[..end]);
                    let first_line = buf[..end].split(|b| *b == b'\n').next().unwrap_or_default();
                    let junk_first = !first_line.contains(&b':');
                    if let (Err(reason), true) = (&parsed, junk_first) {
                        // Junk before a real header section (a stray line
                        // on stdout, say): drop only the junk.
                        let lower = buf[..end].to_ascii_lowercase();
                        if let Some(pos) = find(&lower, b"\ncontent-length:") {
                            buf.advance(pos + 1);
                            return Ok(Some(Inbound::Malformed(reason.clone())));
                        }
                    }
                    buf.advance(end + terminator);
                    match parsed {
                        Ok(n) if n > self.max_len => {
                            self.state = State::Skipping(n);
                            return Ok(Some(Inbound::Oversized { limit: self.max_len }));
                        }
                        Ok(n) => self.state = State::Body(n),
                        Err(reason) => {
                            self.state = State::Resync;
                            return Ok(Some(Inbound::Malformed(reason)));
                        }
                    }
                }
                State::Body(n) => {
                    if buf.len() < n {
                        // Grow with the data, not by the announced size.
                        buf.reserve((n - buf.len()).min(64 * 1024));
                        return Ok(None);
                    }
                    self.state = State::Headers;
                    return Ok(Some(Inbound::Frame(buf.split_to(n).freeze())));
                }
                State::Skipping(remaining) => {
                    let drop = remaining.min(buf.len());
                    buf.advance(drop);
                    if drop < remaining {
                        self.state = State::Skipping(remaining - drop);
                        return Ok(None);
                    }
                    self.state = State::Headers;
                }
                State::Resync => {
                    // The next frame starts with `Content-Length:`; keep a
                    // tail that might be its start split across reads.
                    let at_start = buf.len() >= 15 && buf[..15].eq_ignore_ascii_case(b"content-length:");
                    if at_start {
                        self.state = State::Headers;
                        continue;
                    }
                    // Anywhere, not only at a line start: a body rarely ends
                    // with a line break, so the next frame often follows it
                    // directly.
                    let lower = buf.to_ascii_lowercase();
                    match find(&lower, b"content-length:") {
                        Some(pos) => {
                            buf.advance(pos);
                            self.state = State::Headers;
                        }
                        None => {
                            let keep = buf.len().min(16);
                            buf.advance(buf.len() - keep);
                            return Ok(None);
                        }
                    }
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        if let Some(item) = self.decode(buf)? {
            return Ok(Some(item));
        }
        let leftover = !buf.iter().all(|b| b.is_ascii_whitespace());
        let state = std::mem::replace(&mut self.state, State::Headers);
        buf.clear();
        match state {
            State::Body(n) => Ok(Some(Inbound::Malformed(format!(
                "stream ended inside a {n}-byte body"
            )))),
            State::Headers if leftover => {
                Ok(Some(Inbound::Malformed("stream ended inside headers".to_owned())))
            }
            _ => Ok(None),
        }
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for ContentLengthCodec {
    type Error = io::Error;

    fn encode(&mut self, frame: T, dst: &mut BytesMut) -> Result<(), io::Error> {
        let frame = frame.as_ref();
        dst.reserve(frame.len() + 32);
        dst.put_slice(b"Content-Length: ");
        dst.put_slice(itoa::Buffer::new().format(frame.len()).as_bytes());
        dst.put_slice(b"\r\n\r\n");
        dst.put_slice(frame);
        Ok(())
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::codec::{decode_all, frame};

    /// Found by the `codec_content_length` fuzz target: near the header
    /// bound, the outcome depended on where the stream was cut.
    #[test]
    fn header_overflow_decodes_the_same_however_cut() {
        let mut junk_then_frame = vec![b'a'; 9000];
        junk_then_frame.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        let mut headers_at_the_bound = b"Content-Length: 2\r\nX: ".to_vec();
        headers_at_the_bound.resize(MAX_HEADER_LEN, b'b');
        headers_at_the_bound.extend_from_slice(b"\r\n\r\n{}");
        for stream in [junk_then_frame, headers_at_the_bound] {
            let whole = decode_all(&mut ContentLengthCodec::new(64), &[&stream]);
            assert_eq!(whole.last(), Some(&frame("{}")), "{whole:?}");
            for split in (MAX_HEADER_LEN - 8..MAX_HEADER_LEN + 6).chain([1, 100, stream.len() - 1]) {
                let cut = decode_all(
                    &mut ContentLengthCodec::new(64),
                    &[&stream[..split], &stream[split..]],
                );
                assert_eq!(cut, whole, "split at {split}");
            }
        }
    }

    #[test]
    fn frames_split_anywhere() {
        let mut codec = ContentLengthCodec::new(100);
        let stream = b"Content-Length: 7\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{\"a\":1}content-length:2\r\n\r\n[]";
        for split in 1..stream.len() {
            let got = decode_all(&mut codec, &[&stream[..split], &stream[split..]]);
            assert_eq!(got, vec![frame("{\"a\":1}"), frame("[]")], "split at {split}");
        }
    }

    #[test]
    fn oversized_body_is_skipped_without_buffering() {
        let mut codec = ContentLengthCodec::new(4);
        let body = vec![b'x'; 10_000];
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"Content-Length: 10000\r\n\r\n");
        assert_eq!(
            codec.decode(&mut buf).unwrap(),
            Some(Inbound::Oversized { limit: 4 })
        );
        for chunk in body.chunks(1000) {
            buf.extend_from_slice(chunk);
            assert_eq!(codec.decode(&mut buf).unwrap(), None);
            assert!(buf.is_empty(), "skipped bytes are not kept");
        }
        buf.extend_from_slice(b"Content-Length: 2\r\n\r\n{}");
        assert_eq!(codec.decode(&mut buf).unwrap(), Some(frame("{}")));
    }

    #[test]
    fn garbage_headers_are_reported_and_the_stream_resynchronises() {
        let mut codec = ContentLengthCodec::new(100);
        let got = decode_all(
            &mut codec,
            &[
                b"Content-Length: abc\r\n\r\n{}garbage\r\nContent-Length: 2\r\n\r\n[]",
                b"Hello\r\n\r\n",
                b"Content-Length: 1\r\n\r\n1",
            ],
        );
        assert!(
            matches!(&got[0], Inbound::Malformed(r) if r.contains("bad Content-Length")),
            "{got:?}"
        );
        assert_eq!(got[1], frame("[]"));
        assert!(
            matches!(&got[2], Inbound::Malformed(r) if r.contains("not a header line")),
            "{got:?}"
        );
        assert_eq!(got[3], frame("1"));
        assert_eq!(got.len(), 4);
    }

    #[test]
    fn missing_and_duplicate_lengths() {
        for headers in [
            "Content-Type: x\r\n\r\n",
            "Content-Length: 1\r\nContent-Length: 1\r\n\r\n",
            "Content-Length: -1\r\n\r\n",
            "Content-Length: +1\r\n\r\n",
        ] {
            let mut codec = ContentLengthCodec::new(100);
            let got = decode_all(&mut codec, &[headers.as_bytes()]);
            assert!(
                matches!(got.first(), Some(Inbound::Malformed(_))),
                "{headers:?}: {got:?}"
            );
        }
    }

    #[test]
    fn overlong_headers_starting_like_a_frame_do_not_loop() {
        let mut codec = ContentLengthCodec::new(100);
        let mut input = b"Content-Length: 1\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_HEADER_LEN + 10));
        input.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\n[]");
        let got = decode_all(&mut codec, &[&input]);
        assert!(matches!(&got[0], Inbound::Malformed(_)), "{got:?}");
        assert_eq!(got.last(), Some(&frame("[]")));
        assert!(got.len() <= 3, "{got:?}");
    }

    #[test]
    fn json_lines_where_headers_belong_are_named_a_framing_mismatch() {
        let mut codec = ContentLengthCodec::new(100);
        let got = decode_all(
            &mut codec,
            &[b"{\"jsonrpc\":\"2.0\",\"result\":1,\"id\":1}\n[1]\nContent-Length: 2\r\n\r\n{}"],
        );
        assert!(
            matches!(&got[0], Inbound::Malformed(r) if r.starts_with(super::super::inbound::FRAMING_MISMATCH)),
            "{got:?}"
        );
        assert!(matches!(&got[1], Inbound::Malformed(_)), "{got:?}");
        assert_eq!(got[2..], [frame("{}")]);
    }

    #[test]
    fn a_stray_line_before_a_frame_loses_only_the_line() {
        let mut codec = ContentLengthCodec::new(100);
        let got = decode_all(&mut codec, &[b"Starting server...\nContent-Length: 2\r\n\r\n{}"]);
        assert!(matches!(&got[0], Inbound::Malformed(_)), "{got:?}");
        assert_eq!(got[1..], [frame("{}")]);
    }

    #[test]
    fn resynchronises_on_a_frame_right_after_a_bad_one() {
        for bad in [
            &b"Content-Lenght: 5\r\n\r\nhello"[..],
            b"Content-Length: 5\r\nContent-Length: 7\r\n\r\n[1,2]",
            b"\x00\xff\x00\xff\r\n\r\n",
        ] {
            let mut codec = ContentLengthCodec::new(100);
            let got = decode_all(
                &mut codec,
                &[
                    bad,
                    b"Content-Length: 2\r\n\r\n[]",
                    b"Content-Length: 2\r\n\r\n{}",
                ],
            );
            assert!(matches!(&got[0], Inbound::Malformed(_)), "{got:?}");
            assert_eq!(got[1..], [frame("[]"), frame("{}")], "after {bad:?}");
        }
    }

    #[test]
    fn bare_lf_header_endings_are_tolerated() {
        let mut codec = ContentLengthCodec::new(100);
        let got = decode_all(
            &mut codec,
            &[b"Content-Length: 5\n\n[1,2]Content-Length: 2\r\n\r\n[]"],
        );
        assert_eq!(got, vec![frame("[1,2]"), frame("[]")]);
    }

    #[test]
    fn endless_headers_are_malformed() {
        let mut codec = ContentLengthCodec::new(100);
        // Undecided while a terminator starting within the bound could
        // still be completing.
        let mut buf = BytesMut::from(&vec![b'a'; MAX_HEADER_LEN + 3][..]);
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        buf.extend_from_slice(b"a");
        assert!(matches!(
            codec.decode(&mut buf).unwrap(),
            Some(Inbound::Malformed(_))
        ));
        assert_eq!(codec.decode(&mut buf).unwrap(), None);
        assert!(buf.len() <= 16, "garbage is not accumulated");
    }

    #[test]
    fn truncated_body_at_eof_is_reported() {
        let mut codec = ContentLengthCodec::new(100);
        let got = decode_all(&mut codec, &[b"Content-Length: 10\r\n\r\n{}"]);
        assert!(matches!(&got[..], [Inbound::Malformed(_)]), "{got:?}");
    }

    #[test]
    fn encodes_header_and_body() {
        let mut dst = BytesMut::new();
        ContentLengthCodec::default()
            .encode(&b"{\"a\":1}"[..], &mut dst)
            .unwrap();
        assert_eq!(&dst[..], b"Content-Length: 7\r\n\r\n{\"a\":1}");
    }
}
