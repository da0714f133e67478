//! Outgoing messages a caller builds to send: owned requests, notifications
//! and responses, and the reply refusing a whole frame.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;

use super::error::Error;
use super::id::Id;
use super::incoming::{Incoming, ResponseRef};
use super::limits::Limits;
use super::parse::{parse_frame, Frame};
use super::version::Version;
use super::write::{to_raw, write_call, write_error, write_result};

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
        write_call(out, &self.method, self.params.as_deref(), Some(&self.id));
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
        write_call(out, &self.method, self.params.as_deref(), None);
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

impl ResponseRef<'_> {
    /// An owned copy.
    pub fn to_owned(&self) -> Response {
        Response {
            id: self.id.clone(),
            outcome: self.outcome.clone().map(RawValue::to_owned),
        }
    }
}
