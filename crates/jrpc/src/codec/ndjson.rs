//! Newline-delimited JSON: one JSON text per line.

use std::io;

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use super::inbound::Inbound;

/// Newline-delimited JSON framing, bounded by a maximum line length.
///
/// Lines end with `\n` (a `\r` before it is dropped too); blank lines are
/// skipped; a last line without a newline at end of stream still counts.
/// When encoding, any `\r` or `\n` byte in a frame is turned into a space:
/// in valid JSON such bytes can only be insignificant whitespace, so this
/// keeps one frame on one line without changing its meaning.
///
/// ```
/// use bytes::BytesMut;
/// use jrpc::codec::{Inbound, NdjsonCodec};
/// use tokio_util::codec::Decoder;
///
/// let mut codec = NdjsonCodec::new(16);
/// let mut buf = BytesMut::from(&b"{\"a\":1}\r\n\n"[..]);
/// assert_eq!(codec.decode(&mut buf).unwrap(), Some(Inbound::Frame("{\"a\":1}".into())));
/// assert_eq!(codec.decode(&mut buf).unwrap(), None);
/// ```
#[derive(Debug, Clone)]
pub struct NdjsonCodec {
    max_len: usize,
    /// How far the current partial line has been searched for a newline.
    scanned: usize,
    /// Inside an oversized line, dropping bytes until its newline.
    discarding: bool,
}

impl NdjsonCodec {
    /// The default maximum line length: 8 MiB, the router's default frame
    /// limit.
    pub const DEFAULT_MAX_LEN: usize = crate::message::Limits::DEFAULT_MAX_FRAME_LEN;

    /// A codec that accepts lines of up to `max_len` bytes (line ending not
    /// counted).
    pub fn new(max_len: usize) -> Self {
        NdjsonCodec {
            max_len,
            scanned: 0,
            discarding: false,
        }
    }

    /// The maximum line length.
    pub fn max_len(&self) -> usize {
        self.max_len
    }
}

impl Default for NdjsonCodec {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_LEN)
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

impl Decoder for NdjsonCodec {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        loop {
            if self.discarding {
                match memchr::memchr(b'\n', buf) {
                    Some(pos) => {
                        buf.advance(pos + 1);
                        self.discarding = false;
                    }
                    None => {
                        buf.clear();
                        return Ok(None);
                    }
                }
            }
            match memchr::memchr(b'\n', &buf[self.scanned..]) {
                Some(offset) => {
                    let end = self.scanned + offset;
                    self.scanned = 0;
                    let mut line = buf.split_to(end + 1);
                    line.truncate(end);
                    if line.last() == Some(&b'\r') {
                        line.truncate(end - 1);
                    }
                    if line.len() > self.max_len {
                        return Ok(Some(Inbound::Oversized { limit: self.max_len }));
                    }
                    if is_blank(&line) {
                        continue;
                    }
                    return Ok(Some(Inbound::Frame(line.freeze())));
                }
                None if buf.len() > self.max_len + 1 => {
                    // Past the limit (allowing for a `\r`) with no end in
                    // sight: report now and drop the rest as it arrives.
                    buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Ok(Some(Inbound::Oversized { limit: self.max_len }));
                }
                None => {
                    self.scanned = buf.len();
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        if let Some(item) = self.decode(buf)? {
            return Ok(Some(item));
        }
        self.scanned = 0;
        if self.discarding || buf.is_empty() {
            buf.clear();
            return Ok(None);
        }
        let line = buf.split();
        if is_blank(&line) {
            return Ok(None);
        }
        if line.len() > self.max_len {
            return Ok(Some(Inbound::Oversized { limit: self.max_len }));
        }
        Ok(Some(Inbound::Frame(line.freeze())))
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for NdjsonCodec {
    type Error = io::Error;

    fn encode(&mut self, frame: T, dst: &mut BytesMut) -> Result<(), io::Error> {
        let frame = frame.as_ref();
        dst.reserve(frame.len() + 1);
        if memchr::memchr2(b'\n', b'\r', frame).is_none() {
            dst.put_slice(frame);
        } else {
            dst.extend(
                frame
                    .iter()
                    .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
            );
        }
        dst.put_u8(b'\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode_all, frame};

    #[test]
    fn splits_lines_across_chunks() {
        let mut codec = NdjsonCodec::new(100);
        let got = decode_all(&mut codec, &[b"[1", b",2]\n  \n{\"a\"", b":1}\r\n", b"last"]);
        assert_eq!(got, vec![frame("[1,2]"), frame("{\"a\":1}"), frame("last")]);
    }

    #[test]
    fn oversized_line_is_reported_once_and_skipped() {
        let mut codec = NdjsonCodec::new(8);
        let long = [b'x'; 20];
        let got = decode_all(&mut codec, &[b"[1]\n", &long, &long, b"yy\n[2]\n"]);
        assert_eq!(
            got,
            vec![frame("[1]"), Inbound::Oversized { limit: 8 }, frame("[2]")]
        );
    }

    #[test]
    fn oversized_line_within_one_chunk() {
        let mut codec = NdjsonCodec::new(4);
        let got = decode_all(&mut codec, &[b"123456\n1234\n12345"]);
        assert_eq!(
            got,
            vec![
                Inbound::Oversized { limit: 4 },
                frame("1234"),
                Inbound::Oversized { limit: 4 }
            ]
        );
    }

    #[test]
    fn line_at_the_limit_with_crlf_is_accepted() {
        let mut codec = NdjsonCodec::new(4);
        let got = decode_all(&mut codec, &[b"1234", b"\r", b"\n"]);
        assert_eq!(got, vec![frame("1234")]);
    }

    #[test]
    fn encoder_keeps_a_frame_on_one_line() {
        let mut codec = NdjsonCodec::default();
        let mut dst = BytesMut::new();
        codec.encode(&b"[1,\r\n2]"[..], &mut dst).unwrap();
        codec.encode(&b"{}"[..], &mut dst).unwrap();
        assert_eq!(&dst[..], b"[1,  2]\n{}\n");
    }
}
