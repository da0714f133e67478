//! `NdjsonCodec` decoding a byte stream fed whole and fed in chunks.

#![no_main]

use bytes::{Bytes, BytesMut};
use jrpc::codec::{Inbound, NdjsonCodec};
use jrpc_fuzz::stream::{decode_pieces, frames, Input};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Encoder;

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::split(data) else { return };
    let max_len = input.max_len;
    // Between reads the decoder keeps at most one partial line: `max_len`
    // bytes and a `\r` that may turn out to precede the newline.
    let bound = max_len + 1;

    let whole = decode_pieces(&mut NdjsonCodec::new(max_len), &[input.stream], bound);
    let cut = decode_pieces(&mut NdjsonCodec::new(max_len), &input.pieces(), bound);
    assert_eq!(
        whole, cut,
        "same stream, different items when cut as {:?}",
        input.chunks
    );

    // The documented behaviour, modelled line by line.
    assert_eq!(
        whole,
        model(input.stream, max_len),
        "decoded items differ from the model"
    );

    for frame in frames(&whole) {
        assert!(
            frame.len() <= max_len,
            "frame of {} bytes, limit {max_len}",
            frame.len()
        );
        assert!(!frame.contains(&b'\n'));
    }

    // Frames survive the encoder: encoded and decoded again they come back,
    // with `\r` turned into a space.
    let mut encoded = BytesMut::new();
    let mut codec = NdjsonCodec::new(max_len);
    for frame in frames(&whole) {
        codec.encode(frame, &mut encoded).unwrap();
    }
    let again = decode_pieces(&mut NdjsonCodec::new(max_len), &[&encoded], bound);
    let expected: Vec<Inbound> = frames(&whole)
        .into_iter()
        .map(|f| Inbound::Frame(f.iter().map(|&b| if b == b'\r' { b' ' } else { b }).collect()))
        .collect();
    assert_eq!(again, expected, "frames do not survive encoding");
});

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| b" \t\r\n".contains(b))
}

/// Lines end with `\n`, one `\r` before it dropped. A line longer than
/// `max_len` is one `Oversized`; a blank line is skipped; any other line is
/// a frame. A last line without its `\n` is taken as it is (no `\r`
/// dropped), except that one more than `max_len + 1` bytes long is reported
/// before it is known to be blank.
fn model(stream: &[u8], max_len: usize) -> Vec<Inbound> {
    let mut out = Vec::new();
    let mut lines: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let last = lines.pop().unwrap_or_default();
    for raw in lines {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.len() > max_len {
            out.push(Inbound::Oversized { limit: max_len });
        } else if !is_blank(line) {
            out.push(Inbound::Frame(Bytes::copy_from_slice(line)));
        }
    }
    if last.len() > max_len + 1 {
        out.push(Inbound::Oversized { limit: max_len });
    } else if is_blank(last) {
    } else if last.len() > max_len {
        out.push(Inbound::Oversized { limit: max_len });
    } else {
        out.push(Inbound::Frame(Bytes::copy_from_slice(last)));
    }
    out
}
