//! Framing: splitting a byte stream into frames and joining frames back into
//! one, as [`tokio_util::codec`] decoders and encoders.

mod ndjson;

pub use ndjson::{Inbound, NdjsonCodec};
