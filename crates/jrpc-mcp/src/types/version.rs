//! Protocol revisions and their negotiation.

/// The newest revision this crate speaks.
pub const LATEST_PROTOCOL_VERSION: &str = "2025-11-25";

/// Every revision this crate speaks, newest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The revision a server answers a client's offer with: the same one when
/// it is supported, else the newest (the client then decides whether it can
/// go on).
///
/// ```
/// use jrpc_mcp::types::negotiate_version;
///
/// assert_eq!(negotiate_version("2025-03-26"), "2025-03-26");
/// assert_eq!(negotiate_version("1999-01-01"), "2025-11-25");
/// ```
pub fn negotiate_version(offered: &str) -> &'static str {
    SUPPORTED_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .find(|v| *v == offered)
        .unwrap_or(LATEST_PROTOCOL_VERSION)
}
