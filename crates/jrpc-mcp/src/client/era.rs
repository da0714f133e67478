//! Which era a server speaks, found once per connection: modern
//! (2026-07-28: every request carries the client's version, capabilities
//! and identity in `_meta`; no handshake) or legacy (the `initialize`
//! handshake).
//!
//! Over a connection (stdio, TCP, ...) the client probes with
//! `server/discover`; over Streamable HTTP it sends the same request as a
//! modern POST. A `DiscoverResult`, or a recognised modern error (an
//! unsupported version, a missing capability, a header mismatch), means
//! modern; any other error, or no answer within the probe's bound, means
//! legacy (the specification's `basic/versioning`).

use std::fmt;
use std::str::FromStr;

use jrpc::{CallError, Error};

use crate::types::{
    codes as error_codes, DiscoverResult, Implementation, InitializeResult, ServerCapabilities,
    UnsupportedVersionData, LEGACY_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS,
};

/// Which revision a client speaks to its server: found out (`auto`, the
/// default), the legacy handshake whatever the server offers (`legacy`), or
/// one revision (`2026-07-28`, `2025-06-18`, ...).
///
/// ```
/// use jrpc_mcp::client::ProtocolChoice;
///
/// assert_eq!("auto".parse::<ProtocolChoice>().unwrap(), ProtocolChoice::Auto);
/// assert_eq!("legacy".parse::<ProtocolChoice>().unwrap(), ProtocolChoice::Legacy);
/// assert_eq!(
///     "2026-07-28".parse::<ProtocolChoice>().unwrap(),
///     ProtocolChoice::Version("2026-07-28".into())
/// );
/// assert!("1999-01-01".parse::<ProtocolChoice>().is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProtocolChoice {
    /// Modern when the server is, else legacy.
    #[default]
    Auto,
    /// The `initialize` handshake, at the latest legacy revision.
    Legacy,
    /// This revision, and no other.
    Version(String),
}

impl FromStr for ProtocolChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(ProtocolChoice::Auto),
            "legacy" => Ok(ProtocolChoice::Legacy),
            version
                if MODERN_PROTOCOL_VERSIONS.contains(&version)
                    || LEGACY_PROTOCOL_VERSIONS.contains(&version) =>
            {
                Ok(ProtocolChoice::Version(version.to_owned()))
            }
            other => Err(format!(
                "unknown protocol version {other:?}: expected auto, legacy, or one of {}",
                MODERN_PROTOCOL_VERSIONS
                    .iter()
                    .chain(LEGACY_PROTOCOL_VERSIONS)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolChoice::Auto => f.write_str("auto"),
            ProtocolChoice::Legacy => f.write_str("legacy"),
            ProtocolChoice::Version(version) => f.write_str(version),
        }
    }
}

impl ProtocolChoice {
    /// The modern revision to try first, if any.
    pub(crate) fn modern(&self) -> Option<&str> {
        match self {
            ProtocolChoice::Auto => MODERN_PROTOCOL_VERSIONS.first().copied(),
            ProtocolChoice::Version(v) if MODERN_PROTOCOL_VERSIONS.contains(&v.as_str()) => Some(v),
            _ => None,
        }
    }

    /// The legacy revision to offer in `initialize`, if legacy is allowed.
    pub(crate) fn legacy(&self) -> Option<&str> {
        match self {
            ProtocolChoice::Auto | ProtocolChoice::Legacy => LEGACY_PROTOCOL_VERSIONS.first().copied(),
            ProtocolChoice::Version(v) if LEGACY_PROTOCOL_VERSIONS.contains(&v.as_str()) => Some(v),
            _ => None,
        }
    }
}

/// What the client knows of its server after the probe or the handshake.
#[derive(Debug, Clone)]
pub(crate) struct ServerFacts {
    /// The revision every request is sent in.
    pub(crate) version: String,
    /// Whether it is a modern one.
    pub(crate) modern: bool,
    pub(crate) info: Implementation,
    pub(crate) capabilities: ServerCapabilities,
    pub(crate) instructions: Option<String>,
}

impl ServerFacts {
    pub(crate) fn legacy(result: InitializeResult) -> Self {
        ServerFacts {
            version: result.protocol_version,
            modern: false,
            info: result.server_info,
            capabilities: result.capabilities,
            instructions: result.instructions,
        }
    }

    pub(crate) fn modern(version: String, result: DiscoverResult) -> Self {
        let info = result
            .meta
            .as_ref()
            .and_then(|meta| meta.get(crate::types::meta_keys::SERVER_INFO))
            .and_then(|info| serde_json::from_value::<Implementation>(info.clone()).ok())
            .unwrap_or_else(|| Implementation::new("unknown", ""));
        ServerFacts {
            version,
            modern: true,
            info,
            capabilities: result.capabilities,
            instructions: result.instructions,
        }
    }
}

/// What a probe's error says of the server.
#[derive(Debug, PartialEq)]
pub(crate) enum ProbeError {
    /// A modern server that does not take this version: retry in this one.
    Retry(String),
    /// A modern server, refusing for another reason (or offering no version
    /// this client speaks): it cannot be fallen back from.
    Modern,
    /// Not a modern answer: a legacy server.
    Legacy,
}

/// Whether `error` is one only a modern server gives.
pub(crate) fn is_modern_error(error: &Error) -> bool {
    matches!(
        error.code(),
        error_codes::UNSUPPORTED_PROTOCOL_VERSION
            | error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY
            | error_codes::HEADER_MISMATCH
    )
}

/// Reads a failed modern request: retry in another version, give up, or
/// fall back to the handshake.
pub(crate) fn read_probe_error(error: &CallError, tried: &str) -> ProbeError {
    let Some(rpc) = error.rpc().filter(|e| is_modern_error(e)) else {
        return ProbeError::Legacy;
    };
    if rpc.code() != error_codes::UNSUPPORTED_PROTOCOL_VERSION {
        return ProbeError::Modern;
    }
    match retry_version(rpc, tried) {
        Some(version) => ProbeError::Retry(version),
        None => ProbeError::Modern,
    }
}

/// A modern version of this client's that the server lists as supported
/// in its `-32022` error, for a retry; the same version again when the
/// server lists it (a server may refuse a first request for its own
/// reasons).
pub(crate) fn retry_version(error: &Error, _tried: &str) -> Option<String> {
    let data: UnsupportedVersionData = error.data_as().and_then(Result::ok)?;
    data.supported
        .into_iter()
        .find(|v| MODERN_PROTOCOL_VERSIONS.contains(&v.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64, data: Option<serde_json::Value>) -> CallError {
        let mut error = Error::new(code, "x");
        if let Some(data) = data {
            error = error.with_data(&data);
        }
        CallError::Rpc(error)
    }

    #[test]
    fn probe_errors_tell_the_era() {
        let cases = [
            (rpc(-32601, None), ProbeError::Legacy),
            (rpc(-32602, None), ProbeError::Legacy),
            (rpc(-32000, None), ProbeError::Legacy),
            (
                CallError::Timeout(std::time::Duration::from_secs(1)),
                ProbeError::Legacy,
            ),
            (
                rpc(
                    -32022,
                    Some(serde_json::json!({"supported": ["2026-07-28"], "requested": "x"})),
                ),
                ProbeError::Retry("2026-07-28".into()),
            ),
            (
                rpc(
                    -32022,
                    Some(serde_json::json!({"supported": ["2099-01-01"], "requested": "x"})),
                ),
                ProbeError::Modern,
            ),
            (rpc(-32022, None), ProbeError::Modern),
            (rpc(-32021, None), ProbeError::Modern),
            (rpc(-32020, None), ProbeError::Modern),
        ];
        for (error, expected) in cases {
            assert_eq!(read_probe_error(&error, "2026-07-28"), expected, "{error}");
        }
    }

    #[test]
    fn choices_say_what_to_try() {
        assert_eq!(ProtocolChoice::Auto.modern(), Some("2026-07-28"));
        assert_eq!(ProtocolChoice::Auto.legacy(), Some("2025-11-25"));
        assert_eq!(ProtocolChoice::Legacy.modern(), None);
        let pinned: ProtocolChoice = "2025-06-18".parse().unwrap();
        assert_eq!((pinned.modern(), pinned.legacy()), (None, Some("2025-06-18")));
        let modern: ProtocolChoice = "2026-07-28".parse().unwrap();
        assert_eq!((modern.modern(), modern.legacy()), (Some("2026-07-28"), None));
        assert_eq!(modern.to_string(), "2026-07-28");
    }
}
