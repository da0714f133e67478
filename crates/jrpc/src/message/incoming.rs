//! Incoming items, classified and borrowing from the frame they were parsed
//! from.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::error::Error;
use super::id::Id;
use super::version::Version;

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
