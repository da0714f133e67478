//! `ContentLengthCodec` decoding a byte stream fed whole and fed in chunks.

#![no_main]

use bytes::BytesMut;
use jrpc::codec::{ContentLengthCodec, Inbound};
use jrpc_fuzz::stream::{decode_pieces, frames, Input};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Encoder;

/// The codec's bound on a header section (`MAX_HEADER_LEN`, private).
const MAX_HEADER_LEN: usize = 8 * 1024;

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::split(data) else { return };
    let max_len = input.max_len;
    // Between reads the decoder keeps at most a header section still
    // without its end (8 KiB and up to 3 bytes of a terminator it waits
    // for), a body still short of its length (under `max_len`), or a
    // 16-byte tail while resynchronising.
    let bound = (MAX_HEADER_LEN + 3).max(max_len);

    let whole = decode_pieces(&mut ContentLengthCodec::new(max_len), &[input.stream], bound);
    let cut = decode_pieces(&mut ContentLengthCodec::new(max_len), &input.pieces(), bound);
    assert_eq!(
        whole, cut,
        "same stream, different items when cut as {:?}",
        input.chunks
    );

    for items in [&whole, &cut] {
        for frame in frames(items) {
            assert!(
                frame.len() <= max_len,
                "frame of {} bytes, limit {max_len}",
                frame.len()
            );
        }
    }

    // Frames survive the encoder byte for byte, however the encoded
    // stream is cut.
    let mut encoded = BytesMut::new();
    let mut codec = ContentLengthCodec::new(max_len);
    for frame in frames(&whole) {
        codec.encode(frame, &mut encoded).unwrap();
    }
    let expected: Vec<Inbound> = whole
        .iter()
        .filter(|i| matches!(i, Inbound::Frame(_)))
        .cloned()
        .collect();
    let again = decode_pieces(&mut ContentLengthCodec::new(max_len), &[&encoded], bound);
    assert_eq!(again, expected, "frames do not survive encoding");
    let bytewise: Vec<&[u8]> = encoded.chunks(1).collect();
    let again = decode_pieces(&mut ContentLengthCodec::new(max_len), &bytewise, bound);
    assert_eq!(
        again, expected,
        "frames do not survive encoding, fed byte by byte"
    );
});
