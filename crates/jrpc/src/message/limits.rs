//! The bounds a frame is parsed within.

/// Bounds applied while parsing a frame. Each exceeded bound yields its own
/// error (see [`parse_frame`](super::parse_frame)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame, in bytes. Default 8 MiB.
    pub max_frame_len: usize,
    /// Most entries in one batch. Default 10 000.
    pub max_batch_len: usize,
    /// Deepest nesting of arrays and objects, counting the frame's own
    /// top-level array or object as 1. Default 128, the depth serde_json
    /// itself decodes to, so any params a handler can decode are accepted.
    pub max_depth: usize,
    /// Accept JSON-RPC 1.0 messages (no `"jsonrpc"` member). Default `false`.
    pub accept_v1: bool,
}

impl Limits {
    /// The default maximum frame size: 8 MiB.
    pub const DEFAULT_MAX_FRAME_LEN: usize = 8 * 1024 * 1024;
    /// The default maximum batch length: 10 000 entries.
    pub const DEFAULT_MAX_BATCH_LEN: usize = 10_000;
    /// The default maximum nesting depth: 128.
    pub const DEFAULT_MAX_DEPTH: usize = 128;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_len: Self::DEFAULT_MAX_FRAME_LEN,
            max_batch_len: Self::DEFAULT_MAX_BATCH_LEN,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            accept_v1: false,
        }
    }
}
