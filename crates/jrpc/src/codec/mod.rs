//! Framing: splitting a byte stream into frames and joining frames back into
//! one, as [`tokio_util::codec`] decoders and encoders.
//!
//! Two framings, picked with [`Framing`]:
//! - [`NdjsonCodec`]: newline-delimited JSON, one JSON text per line;
//! - [`ContentLengthCodec`]: LSP-style `Content-Length:` headers.
//!
//! Both are bounded by a maximum frame size and survive bad input: an
//! oversized frame is reported and skipped without being buffered, and the
//! stream goes on.

mod budget;
mod content_length;
mod inbound;
mod ndjson;
mod out_frame;

use std::fmt;
use std::io;
use std::str::FromStr;

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

pub use budget::{Budgeted, BufferBudget, Charge, OverBudget};
pub use content_length::ContentLengthCodec;
pub use inbound::Inbound;
pub(crate) use inbound::FRAMING_MISMATCH;
pub use ndjson::NdjsonCodec;
pub use out_frame::{OutFrame, OutKind};

/// Which framing a byte stream uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Framing {
    /// Newline-delimited JSON.
    #[default]
    Ndjson,
    /// `Content-Length:` headers (LSP-style).
    ContentLength,
}

impl Framing {
    /// A codec for this framing with the given maximum frame size.
    pub fn codec(self, max_len: usize) -> FrameCodec {
        match self {
            Framing::Ndjson => FrameCodec::Ndjson(NdjsonCodec::new(max_len)),
            Framing::ContentLength => FrameCodec::ContentLength(ContentLengthCodec::new(max_len)),
        }
    }
}

impl fmt::Display for Framing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Framing::Ndjson => "ndjson",
            Framing::ContentLength => "content-length",
        })
    }
}

impl FromStr for Framing {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ndjson" | "lines" | "newline" => Ok(Framing::Ndjson),
            "content-length" | "lsp" => Ok(Framing::ContentLength),
            other => Err(format!("unknown framing {other:?}: use ndjson or content-length")),
        }
    }
}

/// Either framing's codec, so that transports need no type parameter for it.
#[derive(Debug, Clone)]
pub enum FrameCodec {
    /// Newline-delimited JSON.
    Ndjson(NdjsonCodec),
    /// `Content-Length:` headers.
    ContentLength(ContentLengthCodec),
}

impl Decoder for FrameCodec {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        match self {
            FrameCodec::Ndjson(c) => c.decode(buf),
            FrameCodec::ContentLength(c) => c.decode(buf),
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        match self {
            FrameCodec::Ndjson(c) => c.decode_eof(buf),
            FrameCodec::ContentLength(c) => c.decode_eof(buf),
        }
    }
}

impl<T: AsRef<[u8]>> Encoder<T> for FrameCodec {
    type Error = io::Error;

    // Inlined into the sink's `start_send` (one per reply on a busy
    // connection), as it was before frames carried their kinds.
    #[inline]
    fn encode(&mut self, frame: T, dst: &mut BytesMut) -> Result<(), io::Error> {
        match self {
            FrameCodec::Ndjson(c) => c.encode(frame, dst),
            FrameCodec::ContentLength(c) => c.encode(frame, dst),
        }
    }
}

/// Frames with their kinds encode as their bytes: a byte stream's
/// `FramedWrite` is a sink of them with nothing in between.
impl Encoder<OutFrame> for FrameCodec {
    type Error = io::Error;

    #[inline]
    fn encode(&mut self, frame: OutFrame, dst: &mut BytesMut) -> Result<(), io::Error> {
        self.encode(frame.into_bytes(), dst)
    }
}

/// Feeds `chunks` to `decoder` one by one, then ends the stream; returns
/// everything decoded.
#[cfg(test)]
pub(crate) fn decode_all(
    decoder: &mut impl Decoder<Item = Inbound, Error = io::Error>,
    chunks: &[&[u8]],
) -> Vec<Inbound> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(item) = decoder.decode(&mut buf).unwrap() {
            out.push(item);
        }
    }
    while let Some(item) = decoder.decode_eof(&mut buf).unwrap() {
        out.push(item);
    }
    out
}

/// A decoded frame holding `text`.
#[cfg(test)]
pub(crate) fn frame(text: &str) -> Inbound {
    Inbound::Frame(bytes::Bytes::copy_from_slice(text.as_bytes()))
}
