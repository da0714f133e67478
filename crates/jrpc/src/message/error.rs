//! The JSON-RPC error object: what a handler returns when it fails and what a
//! peer sends back in place of a result.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Error codes defined by the JSON-RPC 2.0 specification, and the codes jrpc
/// itself uses inside the range the specification reserves for
/// implementations (`-32099..=-32000`).
pub mod codes {
    use std::ops::RangeInclusive;

    /// Invalid JSON was received: the frame could not be parsed at all.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error, also used for a handler that panicked.
    pub const INTERNAL_ERROR: i64 = -32603;

    /// Codes reserved by the specification for implementation-defined server
    /// errors. jrpc's own limit errors below live here; applications may use
    /// the rest of the range too, though codes outside every reserved range
    /// (`-32768..=-32000`) are the safer choice for application errors.
    pub const SERVER_ERROR_RANGE: RangeInclusive<i64> = -32099..=-32000;
    /// Codes reserved by the specification as a whole (pre-defined errors and
    /// the implementation range).
    pub const RESERVED_RANGE: RangeInclusive<i64> = -32768..=-32000;

    /// A frame (one message or one batch) was larger than the configured
    /// maximum frame size. Sent with `"id": null`.
    pub const FRAME_TOO_LARGE: i64 = -32001;
    /// A batch had more entries than the configured maximum batch length.
    /// Sent once, with `"id": null`, in place of the whole batch.
    pub const BATCH_TOO_LARGE: i64 = -32002;
    /// A frame nested arrays and objects deeper than the configured maximum
    /// depth. Sent with `"id": null`.
    pub const NESTING_TOO_DEEP: i64 = -32003;
    /// The request lacked valid credentials (HTTP `401`).
    pub const UNAUTHORIZED: i64 = -32004;
    /// The client sent too many requests (HTTP `429`; over WebSocket, the
    /// response to each refused request).
    pub const RATE_LIMITED: i64 = -32005;
    /// The request took longer than the server allows (HTTP `503`).
    pub const REQUEST_TIMEOUT: i64 = -32006;
    /// The connection has too many requests in flight, or is closing; the
    /// request was not run. Retry later.
    pub const SERVER_BUSY: i64 = -32007;
    /// Nothing is subscribed to the broker address a call was sent to (NATS
    /// "no responders"): the request was not delivered. jrpc's own NATS
    /// dialer fails such a call with a
    /// [`transport::Undelivered`](crate::transport::Undelivered) instead;
    /// the code is for a gateway that must say it as a JSON-RPC error.
    pub const NO_RESPONDERS: i64 = -32008;

    /// Whether `code` lies in the implementation-defined server error range.
    pub fn is_server_error(code: i64) -> bool {
        SERVER_ERROR_RANGE.contains(&code)
    }
}

/// A JSON-RPC error object: `code`, `message` and optional `data`.
///
/// Handlers return it to fail a call; the router turns it into the `error`
/// member of the response. `data` is kept as raw JSON so that it is written
/// out exactly as it was built or received.
///
/// ```
/// use jrpc::Error;
///
/// let err = Error::new(-32050, "Account locked").with_data(&serde_json::json!({"retry_in": 30}));
/// assert_eq!(err.code(), -32050);
/// assert_eq!(err.message(), "Account locked");
/// assert_eq!(err.data().unwrap().get(), r#"{"retry_in":30}"#);
/// ```
#[derive(Clone, thiserror::Error)]
pub struct Error {
    code: i64,
    message: Cow<'static, str>,
    data: Option<Box<RawValue>>,
    /// It answers a request whose id could not be read: its response
    /// carries id null, whatever the call's id.
    unreadable: bool,
}

impl Error {
    /// An error with the given code and message and no data.
    pub fn new(code: i64, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            code,
            message: message.into(),
            data: None,
            unreadable: false,
        }
    }

    /// Marks the error as the answer to a request that could not be read
    /// (it did not parse, say): a server writes its response with id null,
    /// whatever the call's id, as the specification has it. What a proxy
    /// does with such an answer from the server behind it: a call through
    /// jrpc's client whose peer answered with id null fails with an error
    /// marked so, and a handler returning it passes the id null on.
    ///
    /// ```
    /// let error = jrpc::Error::parse_error().for_unreadable_request();
    /// assert!(error.is_for_unreadable_request());
    /// ```
    pub fn for_unreadable_request(mut self) -> Self {
        self.unreadable = true;
        self
    }

    /// Whether the error answers a request that could not be read (its
    /// response carries id null).
    pub fn is_for_unreadable_request(&self) -> bool {
        self.unreadable
    }

    /// Attaches `data`, serialized to JSON. A value that cannot be serialized
    /// (a map with non-string keys, say) is replaced by a string saying so, so
    /// that building an error never fails.
    pub fn with_data<T: Serialize + ?Sized>(mut self, data: &T) -> Self {
        self.data = Some(serde_json::value::to_raw_value(data).unwrap_or_else(|e| {
            serde_json::value::to_raw_value(&format!("unserializable error data: {e}"))
                .expect("a string always serializes")
        }));
        self
    }

    /// Attaches `data` that is already JSON text.
    pub fn with_raw_data(mut self, data: Box<RawValue>) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700 Parse error`.
    pub fn parse_error() -> Self {
        Error::new(codes::PARSE_ERROR, "Parse error")
    }

    /// `-32600 Invalid Request`.
    pub fn invalid_request() -> Self {
        Error::new(codes::INVALID_REQUEST, "Invalid Request")
    }

    /// `-32601 Method not found`.
    pub fn method_not_found() -> Self {
        Error::new(codes::METHOD_NOT_FOUND, "Method not found")
    }

    /// `-32602 Invalid params`.
    pub fn invalid_params() -> Self {
        Error::new(codes::INVALID_PARAMS, "Invalid params")
    }

    /// `-32001 Frame too large`: a frame (a message, a request body, a
    /// datagram, a reply over what its carrier takes) is over a size limit.
    pub fn frame_too_large() -> Self {
        Error::new(codes::FRAME_TOO_LARGE, "Frame too large")
    }

    /// `-32007 Server busy`: a bound (connections, requests in flight,
    /// buffered bodies) is reached; try again later.
    pub fn server_busy() -> Self {
        Error::new(codes::SERVER_BUSY, "Server busy")
    }

    /// `-32603 Internal error`.
    pub fn internal_error() -> Self {
        Error::new(codes::INTERNAL_ERROR, "Internal error")
    }

    /// The error code.
    pub fn code(&self) -> i64 {
        self.code
    }

    /// The short description.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `data` member as raw JSON, if any.
    pub fn data(&self) -> Option<&RawValue> {
        self.data.as_deref()
    }

    /// Decodes the `data` member into `T`; `None` when there is no data.
    pub fn data_as<'de, T: Deserialize<'de>>(&'de self) -> Option<Result<T, serde_json::Error>> {
        self.data.as_deref().map(|raw| serde_json::from_str(raw.get()))
    }

    /// Writes the error object as JSON text.
    pub(crate) fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"code\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.code).as_bytes());
        out.extend_from_slice(b",\"message\":");
        super::escape::write_json_str(out, &self.message);
        if let Some(data) = &self.data {
            out.extend_from_slice(b",\"data\":");
            out.extend_from_slice(data.get().as_bytes());
        }
        out.push(b'}');
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)?;
        if let Some(data) = &self.data {
            write!(f, ": {}", data.get())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("data", &self.data.as_deref().map(RawValue::get))
            .finish()
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code
            && self.message == other.message
            && self.data.as_deref().map(RawValue::get) == other.data.as_deref().map(RawValue::get)
    }
}

impl Eq for Error {}

impl Serialize for Error {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("Error", 2 + usize::from(self.data.is_some()))?;
        s.serialize_field("code", &self.code)?;
        s.serialize_field("message", &self.message)?;
        if let Some(data) = &self.data {
            s.serialize_field("data", data)?;
        }
        s.end()
    }
}

impl<'de> Deserialize<'de> for Error {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            code: i64,
            message: String,
            #[serde(default, deserialize_with = "present")]
            data: Option<Box<RawValue>>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(Error {
            unreadable: false,
            code: wire.code,
            message: Cow::Owned(wire.message),
            data: wire.data,
        })
    }
}

/// `deserialize_with` helper: a member that is present (even as `null`) is
/// `Some`; an absent one falls back to `#[serde(default)]`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_for_an_unreadable_request_is_answered_with_id_null() {
        let id = crate::message::Id::from(7u64);
        for (error, expected) in [
            (Error::parse_error(), "7"),
            (Error::parse_error().for_unreadable_request(), "null"),
        ] {
            let mut out = Vec::new();
            crate::message::write::write_error(&mut out, crate::message::Version::V2, &id, &error);
            let reply: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(reply["id"].to_string(), expected, "{reply}");
        }
        // The mark is not part of the error's content.
        assert_eq!(
            Error::parse_error(),
            Error::parse_error().for_unreadable_request()
        );
    }

    #[test]
    fn writes_members_in_spec_order() {
        let mut out = Vec::new();
        Error::invalid_params()
            .with_data("bad \"x\"")
            .write_json(&mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"code":-32602,"message":"Invalid params","data":"bad \"x\""}"#
        );
    }

    #[test]
    fn round_trips_through_serde() {
        let err = Error::new(-32000, "Server busy").with_data(&[1, 2]);
        let text = serde_json::to_string(&err).unwrap();
        assert_eq!(text, r#"{"code":-32000,"message":"Server busy","data":[1,2]}"#);
        let back: Error = serde_json::from_str(&text).unwrap();
        assert_eq!(back, err);
        let null_data: Error = serde_json::from_str(r#"{"code":1,"message":"m","data":null}"#).unwrap();
        assert_eq!(null_data.data().unwrap().get(), "null");
    }

    #[test]
    fn server_error_range() {
        assert!(codes::is_server_error(-32000));
        assert!(codes::is_server_error(-32099));
        assert!(!codes::is_server_error(-32100));
        assert!(codes::is_server_error(codes::FRAME_TOO_LARGE));
    }
}
