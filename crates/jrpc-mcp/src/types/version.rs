//! Protocol revisions: the modern one (per-request `_meta`, 2026-07-28) and
//! the legacy ones (an `initialize` handshake, 2025-11-25 and before), and
//! how a legacy handshake settles on one.

/// The newest revision this crate speaks (modern: every request carries its
/// version, capabilities and client in `_meta`).
pub const LATEST_PROTOCOL_VERSION: &str = "2026-07-28";

/// The newest revision with an `initialize` handshake.
pub const LATEST_LEGACY_VERSION: &str = "2025-11-25";

/// The modern revisions, served statelessly, newest first.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// The legacy revisions, served in sessions opened by `initialize`, newest
/// first.
pub const LEGACY_PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Every revision this crate speaks, newest first (`supportedVersions` of
/// `server/discover`).
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// Whether `version` is a modern revision (served statelessly).
pub fn is_modern(version: &str) -> bool {
    MODERN_PROTOCOL_VERSIONS.contains(&version)
}

/// The revision a server answers a client's `initialize` with: the same one
/// when it is a legacy revision it speaks, else the newest legacy one (a
/// modern revision has no handshake, so an `initialize` naming one is
/// answered as legacy too; the client then decides whether it can go on).
///
/// ```
/// use jrpc_mcp::types::negotiate_version;
///
/// assert_eq!(negotiate_version("2025-03-26"), "2025-03-26");
/// assert_eq!(negotiate_version("2026-07-28"), "2025-11-25");
/// assert_eq!(negotiate_version("1999-01-01"), "2025-11-25");
/// ```
pub fn negotiate_version(offered: &str) -> &'static str {
    LEGACY_PROTOCOL_VERSIONS
        .iter()
        .copied()
        .find(|v| *v == offered)
        .unwrap_or(LATEST_LEGACY_VERSION)
}
