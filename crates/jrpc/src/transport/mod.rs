//! Carriers of frames.

pub mod stdio;

pub use stdio::{serve_ndjson, serve_stdio, ServeOptions};
