//! The JSON-RPC 2.0 data model: ids, error objects, requests, notifications
//! and responses; parsing of incoming frames and serialization of outgoing
//! messages. No async and no I/O here.
//!
//! Incoming items borrow from the frame they were parsed from
//! ([`RequestRef`], [`NotificationRef`], [`ResponseRef`]); `params`, `result`
//! and error `data` stay raw JSON ([`RawValue`]) until somebody asks for a
//! type. Owned counterparts ([`Request`], [`Notification`], [`Response`]) are
//! what a caller builds to send.

mod cursor;
mod depth;
mod error;
mod escape;
mod fast;
mod id;
mod incoming;
mod limits;
mod outgoing;
mod parse;
mod version;
mod write;

pub use serde_json::value::RawValue;

pub use cursor::Cursor;
pub use error::{codes, Error};
#[cfg_attr(not(feature = "runtime"), allow(unused_imports))]
pub(crate) use escape::write_json_str;
pub use id::Id;
pub use incoming::{Incoming, Invalid, NotificationRef, RequestRef, ResponseRef};
pub use limits::Limits;
pub use outgoing::{refuse_frame, Notification, Request, Response};
pub use parse::{parse_frame, parse_request_as, Frame, TypedRequest};
pub use version::Version;
pub use write::{encode_call, to_raw};
#[cfg_attr(not(feature = "runtime"), allow(unused_imports))]
pub(crate) use write::{
    result_prefix, result_suffix, serialize_into, write_error, write_result, RESULT_CAPACITY,
};

#[cfg(test)]
mod tests;
