//! A gzip-encoded body decoded as it comes, a little at a time.
//!
//! Each step feeds the decoder at most [`STEP`] encoded bytes and flushes
//! what they decode to, so one frame of a stream is readable as soon as it
//! has arrived (a server that flushes its compressor after each event is
//! heard event by event), and one step's output stays bounded however
//! well the bytes compress (gzip can expand a thousandfold: a 400 KiB
//! frame would otherwise decode to hundreds of megabytes at once). Members
//! that follow one another are all decoded, as concatenated gzip files are.
//! Both of jrpc's HTTP clients read a reply's `Content-Encoding` here: the
//! streaming body ([`ResponseBody`](super::ResponseBody)) and the calls'
//! whole replies.

use std::io::{self, Write as _};

use bytes::{Buf as _, Bytes};
use flate2::write::MultiGzDecoder;

/// The most encoded bytes decoded in one step: at most about half a
/// megabyte of output.
const STEP: usize = 512;

/// How a reply's body is encoded, as its `Content-Encoding` fields say
/// (each a list; `identity` is no encoding).
pub(super) enum Encoding {
    Identity,
    Gzip,
    /// Anything else, named: this client does not decode it.
    Other(String),
}

impl Encoding {
    pub(super) fn of(headers: &http::HeaderMap) -> Self {
        let mut codings = Vec::new();
        for field in headers.get_all(http::header::CONTENT_ENCODING) {
            for coding in String::from_utf8_lossy(field.as_bytes()).split(',') {
                let coding = coding.trim().to_ascii_lowercase();
                if !coding.is_empty() && coding != "identity" {
                    codings.push(coding);
                }
            }
        }
        match &codings[..] {
            [] => Encoding::Identity,
            [one] if one == "gzip" || one == "x-gzip" => Encoding::Gzip,
            _ => Encoding::Other(codings.join(", ")),
        }
    }

    /// Why a body so encoded cannot be read.
    pub(super) fn unreadable(named: &str) -> String {
        format!("the reply is encoded {named:?}, which this client does not decode (it reads gzip)")
    }
}

/// All of `encoded`, decoded, if it decodes to at most `limit` bytes.
pub(super) fn whole(encoded: Bytes, limit: usize) -> io::Result<Bytes> {
    let mut gunzip = Gunzip::new();
    gunzip.push(encoded);
    let mut out = Vec::new();
    let mut keep = |part: Bytes| {
        if out.len() + part.len() > limit {
            let why = format!("the reply decodes to more than {limit} bytes");
            return Err(io::Error::new(io::ErrorKind::InvalidData, why));
        }
        out.extend_from_slice(&part);
        Ok(())
    };
    while let Some(step) = gunzip.step()? {
        keep(step)?;
    }
    keep(gunzip.finish()?)?;
    Ok(Bytes::from(out))
}

pub(super) struct Gunzip {
    decoder: MultiGzDecoder<Vec<u8>>,
    /// Encoded bytes come but not decoded yet.
    pending: Bytes,
    /// Whether any encoded byte came (an empty body is not a gzip stream,
    /// just an empty one).
    fed: bool,
}

impl Gunzip {
    pub(super) fn new() -> Self {
        Gunzip {
            decoder: MultiGzDecoder::new(Vec::new()),
            pending: Bytes::new(),
            fed: false,
        }
    }

    /// Encoded bytes to decode: the ones before must all have been taken.
    pub(super) fn push(&mut self, data: Bytes) {
        debug_assert!(self.pending.is_empty());
        self.fed |= !data.is_empty();
        self.pending = data;
    }

    /// What the next step decodes to; `None` once every byte pushed has
    /// been decoded (a step may decode to nothing: a gzip header).
    pub(super) fn step(&mut self) -> io::Result<Option<Bytes>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let step = self.pending.len().min(STEP);
        self.decoder.write_all(&self.pending[..step])?;
        self.pending.advance(step);
        // The decoder keeps output back until flushed.
        self.decoder.flush()?;
        Ok(Some(Bytes::from(std::mem::take(self.decoder.get_mut()))))
    }

    /// The end of the encoded bytes: what is left of the output, or why
    /// the stream is incomplete.
    pub(super) fn finish(&mut self) -> io::Result<Bytes> {
        debug_assert!(self.pending.is_empty());
        if self.fed {
            self.decoder.try_finish()?;
        }
        Ok(Bytes::from(std::mem::take(self.decoder.get_mut())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// Everything `pieces` decode to, and the largest output of one step.
    fn decode(pieces: &[&[u8]]) -> io::Result<(Vec<u8>, usize)> {
        let mut gunzip = Gunzip::new();
        let (mut out, mut largest) = (Vec::new(), 0);
        for piece in pieces {
            gunzip.push(Bytes::copy_from_slice(piece));
            while let Some(step) = gunzip.step()? {
                largest = largest.max(step.len());
                out.extend_from_slice(&step);
            }
        }
        out.extend_from_slice(&gunzip.finish()?);
        Ok((out, largest))
    }

    #[test]
    fn decodes_in_any_pieces_and_concatenated_members() {
        let text = b"data: {\"n\":1}\n\n".repeat(200);
        let encoded = gzip(&text);
        for size in [1, 7, 512, 513, encoded.len()] {
            let pieces: Vec<&[u8]> = encoded.chunks(size).collect();
            assert_eq!(decode(&pieces).unwrap().0, text, "pieces of {size}");
        }
        let two = [gzip(b"first "), gzip(b"second")].concat();
        for size in [1, 3, 10, two.len()] {
            let pieces: Vec<&[u8]> = two.chunks(size).collect();
            assert_eq!(
                decode(&pieces).unwrap().0,
                b"first second",
                "members in pieces of {size}"
            );
        }
        assert_eq!(decode(&[]).unwrap().0, b"", "an empty body");
        assert_eq!(decode(&[b""]).unwrap().0, b"", "an empty frame");
    }

    /// Output is bounded per step however well the input compresses.
    #[test]
    fn a_step_decodes_a_bounded_amount() {
        let zeros = vec![0u8; 4 << 20];
        let encoded = gzip(&zeros);
        let (out, largest) = decode(&[&encoded]).unwrap();
        assert_eq!(out.len(), zeros.len());
        assert!(largest <= 1 << 20, "{largest} bytes from one step");
    }

    /// What arrived is readable before the rest comes: a compressor
    /// flushed after each event is heard event by event.
    #[test]
    fn a_flushed_piece_decodes_before_the_next() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(b"data: 1\n\n").unwrap();
        encoder.flush().unwrap();
        let first = std::mem::take(encoder.get_mut());
        let mut gunzip = Gunzip::new();
        gunzip.push(Bytes::from(first));
        let mut heard = Vec::new();
        while let Some(step) = gunzip.step().unwrap() {
            heard.extend_from_slice(&step);
        }
        assert_eq!(heard, b"data: 1\n\n");
    }

    /// A whole reply decodes in one call, within its bound.
    #[test]
    fn a_whole_reply_decodes_within_its_bound() {
        let text = b"{\"jsonrpc\":\"2.0\",\"result\":\"x\",\"id\":1}".repeat(100);
        let encoded = Bytes::from([gzip(&text[..10]), gzip(&text[10..])].concat());
        assert_eq!(whole(encoded.clone(), text.len()).unwrap(), &text[..]);
        let error = whole(encoded, text.len() - 1).unwrap_err();
        assert!(error.to_string().contains("more than"), "{error}");
        assert!(whole(Bytes::from_static(b"not gzip"), 1 << 20).is_err());
    }

    #[test]
    fn what_is_not_gzip_is_an_error() {
        assert!(decode(&[b"not gzip at all"]).is_err());
        let encoded = gzip(b"cut short");
        assert!(decode(&[&encoded[..encoded.len() - 4]]).is_err(), "truncated");
    }
}
