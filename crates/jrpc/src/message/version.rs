//! Which protocol an item speaks.

/// Which protocol an item speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// JSON-RPC 1.0: no `"jsonrpc"` member; accepted only when the
    /// compatibility mode is on (see [`Limits::accept_v1`](super::Limits::accept_v1)).
    V1,
    /// JSON-RPC 2.0: `"jsonrpc": "2.0"`.
    V2,
}
