//! The JSON-RPC 2.0 data model: ids, error objects, requests, notifications
//! and responses; parsing of incoming frames and serialization of outgoing
//! messages. No async and no I/O here.
//!
//! Incoming items borrow from the frame they were parsed from
//! ([`RequestRef`], [`NotificationRef`], [`ResponseRef`]); `params`, `result`
//! and error `data` stay raw JSON ([`RawValue`]) until somebody asks for a
//! type. Owned counterparts ([`Request`], [`Notification`], [`Response`]) are
//! what a caller builds to send.

mod depth;
mod error;
mod id;
mod parse;
mod write;

use std::borrow::Cow;

use bytes::Bytes;
use serde::Serialize;
pub use serde_json::value::RawValue;

pub use error::{codes, Error};
pub use id::Id;
pub use parse::{parse_frame, parse_request_as, Frame, TypedRequest};
pub use write::{encode_call, to_raw};
#[cfg_attr(not(feature = "runtime"), allow(unused_imports))]
pub(crate) use write::{
    result_prefix, result_suffix, serialize_into, write_error, write_json_str, write_result, RESULT_CAPACITY,
};

/// Which protocol an item speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// JSON-RPC 1.0: no `"jsonrpc"` member; accepted only when the
    /// compatibility mode is on (see [`Limits::accept_v1`]).
    V1,
    /// JSON-RPC 2.0: `"jsonrpc": "2.0"`.
    V2,
}

/// Bounds applied while parsing a frame. Each exceeded bound yields its own
/// error (see [`parse_frame`]).
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

/// One item of an incoming frame, classified.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A call that expects a response.
    Request(RequestRef<'a>),
    /// A call without an `id`: it must never be answered.
    Notification(NotificationRef<'a>),
    /// A response to a call this side made.
    Response(ResponseRef<'a>),
    /// Not a valid message; answer it with `error` and `id`.
    Invalid(Invalid),
}

/// An incoming request, borrowing from its frame.
#[derive(Debug, Clone)]
pub struct RequestRef<'a> {
    /// The protocol version it was sent in; the response uses the same.
    pub version: Version,
    /// The id to echo in the response.
    pub id: Id,
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params: a raw JSON array or object, or `None` when omitted.
    pub params: Option<&'a RawValue>,
}

/// An incoming notification, borrowing from its frame.
#[derive(Debug, Clone)]
pub struct NotificationRef<'a> {
    /// The protocol version it was sent in.
    pub version: Version,
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params: a raw JSON array or object, or `None` when omitted.
    pub params: Option<&'a RawValue>,
}

/// An incoming response, borrowing from its frame.
#[derive(Debug, Clone)]
pub struct ResponseRef<'a> {
    /// The protocol version it was sent in.
    pub version: Version,
    /// The id of the call it answers.
    pub id: Id,
    /// The raw result, or the error object.
    pub outcome: Result<&'a RawValue, Error>,
}

/// An item that is not a valid message, with the reply it calls for.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    /// The form to answer in.
    pub version: Version,
    /// The item's id when it was a valid id, else `null`.
    pub id: Id,
    /// The error to answer with (`-32600`).
    pub error: Error,
}

impl ResponseRef<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> Response {
        Response {
            id: self.id.clone(),
            outcome: self.outcome.clone().map(RawValue::to_owned),
        }
    }
}

/// An outgoing request.
///
/// ```
/// use jrpc::message::Request;
///
/// let req = Request::new(1, "subtract", &[42, 23]).unwrap();
/// assert_eq!(req.to_bytes(), r#"{"jsonrpc":"2.0","method":"subtract","params":[42,23],"id":1}"#);
/// ```
#[derive(Debug, Clone)]
pub struct Request {
    /// The id the response will carry.
    pub id: Id,
    /// The method to call.
    pub method: String,
    /// The params, as raw JSON (an array or an object), if any.
    pub params: Option<Box<RawValue>>,
}

impl Request {
    /// A request whose params are `params` serialized; it must serialize to
    /// a JSON array or object.
    pub fn new(
        id: impl Into<Id>,
        method: impl Into<String>,
        params: &(impl Serialize + ?Sized),
    ) -> Result<Self, Error> {
        Ok(Request {
            id: id.into(),
            method: method.into(),
            params: Some(params_to_raw(params)?),
        })
    }

    /// A request without params.
    pub fn without_params(id: impl Into<Id>, method: impl Into<String>) -> Self {
        Request {
            id: id.into(),
            method: method.into(),
            params: None,
        }
    }

    /// Appends the request's JSON text to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        write::write_call(out, &self.method, self.params.as_deref(), Some(&self.id));
    }

    /// The request's JSON text.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out.into()
    }
}

/// An outgoing notification.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method to call.
    pub method: String,
    /// The params, as raw JSON (an array or an object), if any.
    pub params: Option<Box<RawValue>>,
}

impl Notification {
    /// A notification whose params are `params` serialized; it must serialize
    /// to a JSON array or object.
    pub fn new(method: impl Into<String>, params: &(impl Serialize + ?Sized)) -> Result<Self, Error> {
        Ok(Notification {
            method: method.into(),
            params: Some(params_to_raw(params)?),
        })
    }

    /// Appends the notification's JSON text to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        write::write_call(out, &self.method, self.params.as_deref(), None);
    }

    /// The notification's JSON text.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out.into()
    }
}

/// A response: the id of the request it answers, and a result or an error.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request this answers.
    pub id: Id,
    /// The raw result, or the error object.
    pub outcome: Result<Box<RawValue>, Error>,
}

impl Response {
    /// Appends the response's JSON-RPC 2.0 text to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match &self.outcome {
            Ok(result) => write_result(out, Version::V2, &self.id, result.get().as_bytes()),
            Err(error) => write_error(out, Version::V2, &self.id, error),
        }
    }

    /// The response's JSON-RPC 2.0 text.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out.into()
    }
}

/// The reply that refuses every request in `frame` with `error` (for a
/// server that will not serve it: rate limited, shutting down). Notifications
/// get nothing; a frame that does not parse gets its parse error.
pub fn refuse_frame(frame: &[u8], limits: &Limits, error: &Error) -> Option<Bytes> {
    let refuse = |item: Incoming<'_>, out: &mut Vec<u8>| match item {
        Incoming::Request(r) => write_error(out, r.version, &r.id, error),
        Incoming::Invalid(i) => write_error(out, i.version, &i.id, &i.error),
        Incoming::Notification(_) | Incoming::Response(_) => {}
    };
    let mut out = Vec::new();
    match parse_frame(frame, limits) {
        Err(e) => write_error(&mut out, Version::V2, &Id::NULL, &e),
        Ok(Frame::Single(item)) => refuse(item, &mut out),
        Ok(Frame::Batch(items)) => {
            out.push(b'[');
            for item in items {
                let mark = out.len();
                if out.len() > 1 {
                    out.push(b',');
                }
                let start = out.len();
                refuse(item, &mut out);
                if out.len() == start {
                    out.truncate(mark);
                }
            }
            if out.len() == 1 {
                return None;
            }
            out.push(b']');
        }
    }
    (!out.is_empty()).then(|| out.into())
}

/// Serializes params, which must come out as a JSON array or object.
fn params_to_raw(params: &(impl Serialize + ?Sized)) -> Result<Box<RawValue>, Error> {
    let raw = to_raw(params).map_err(|e| Error::invalid_params().with_data(&e.to_string()))?;
    match raw.get().as_bytes().first() {
        Some(b'[' | b'{') => Ok(raw),
        _ => Err(Error::invalid_params().with_data("params must serialize to a JSON array or object")),
    }
}

#[cfg(test)]
mod tests;
