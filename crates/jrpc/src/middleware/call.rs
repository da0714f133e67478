//! One call as middleware sees it, and its result.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::context::{empty_connection, ConnectionInfo, Extensions, Identity, Scopes};
use crate::message::{serialize_into, Error, Id};

/// One incoming request or notification on its way to its handler.
///
/// It owns what it carries (layers may hold it across awaits) and has two
/// maps of facts: the connection's, recorded by the transport (its
/// [`ConnectionInfo`], HTTP headers, an authenticated [`Identity`]), and its
/// own, which layers may add to for the layers and the handler after them
/// (the handler reads both through [`RequestContext::get`](crate::RequestContext::get)).
pub struct Call {
    id: Option<Id>,
    /// Shared, so that layers keep it cheaply for after the call.
    method: Arc<str>,
    params: Option<Box<RawValue>>,
    connection: Arc<Extensions>,
    extensions: Extensions,
}

impl Call {
    /// A request (a call with an id), on no connection in particular.
    pub fn request(id: impl Into<Id>, method: impl Into<Arc<str>>, params: Option<Box<RawValue>>) -> Self {
        Call::new(Some(id.into()), method.into(), params, empty_connection().clone())
    }

    /// A notification (a call without an id).
    pub fn notification(method: impl Into<Arc<str>>, params: Option<Box<RawValue>>) -> Self {
        Call::new(None, method.into(), params, empty_connection().clone())
    }

    pub(crate) fn new(
        id: Option<Id>,
        method: Arc<str>,
        params: Option<Box<RawValue>>,
        connection: Arc<Extensions>,
    ) -> Self {
        Call {
            id,
            method,
            params,
            connection,
            extensions: Extensions::new(),
        }
    }

    /// The same call on a connection that has these facts recorded.
    pub fn with_connection(mut self, connection: Arc<Extensions>) -> Self {
        self.connection = connection;
        self
    }

    /// The method called.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The method called, shared: cheap to keep for after the call.
    pub fn method_shared(&self) -> Arc<str> {
        Arc::clone(&self.method)
    }

    /// The request id; `None` for a notification.
    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// Whether this is a notification (no reply will be sent).
    pub fn is_notification(&self) -> bool {
        self.id.is_none()
    }

    /// The params as raw JSON (an array or an object); `None` when omitted.
    pub fn params(&self) -> Option<&RawValue> {
        self.params.as_deref()
    }

    /// Takes the params out of the call, for a layer that has read them
    /// into a fact of its own (an extension) so that the handler does not
    /// read them again; the handler then gets none.
    pub fn take_params(&mut self) -> Option<Box<RawValue>> {
        self.params.take()
    }

    /// What the transport recorded about the connection.
    pub fn connection(&self) -> &Extensions {
        &self.connection
    }

    /// Facts recorded about this call by the layers before this one.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// Facts about this call, for the layers after this one and the handler.
    pub fn extensions_mut(&mut self) -> &mut Extensions {
        &mut self.extensions
    }

    /// A fact about this call or, failing that, its connection.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get().or_else(|| self.connection.get())
    }

    /// The transport's description of the connection.
    pub fn connection_info(&self) -> Option<&ConnectionInfo> {
        self.get()
    }

    /// Who the caller is, when an authentication layer said so.
    pub fn identity(&self) -> Option<&Identity> {
        self.get()
    }

    /// What the caller's credentials grant, when an authentication layer
    /// said so (an OAuth token's scopes).
    pub fn scopes(&self) -> Option<&Scopes> {
        self.get()
    }

    /// Takes the call apart for dispatch: id, method, params, connection and
    /// the call's own facts (`None` when it has none).
    pub(crate) fn into_parts(self) -> CallParts {
        let extensions = (!self.extensions.is_empty()).then(|| Arc::new(self.extensions));
        CallParts {
            id: self.id,
            method: self.method,
            params: self.params,
            connection: self.connection,
            extensions,
        }
    }
}

pub(crate) struct CallParts {
    pub(crate) id: Option<Id>,
    pub(crate) method: Arc<str>,
    pub(crate) params: Option<Box<RawValue>>,
    pub(crate) connection: Arc<Extensions>,
    pub(crate) extensions: Option<Arc<Extensions>>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("id", &self.id)
            .field("params", &self.params.as_deref().map(RawValue::get))
            .finish_non_exhaustive()
    }
}

/// A call's result, already serialized: JSON text, written into the reply
/// as it is.
#[derive(Clone, PartialEq, Eq)]
pub struct RawResult(Vec<u8>);

impl RawResult {
    /// `null`: the result of a notification handler.
    pub fn null() -> Self {
        RawResult(b"null".to_vec())
    }

    /// `value` serialized; a value that does not serialize is an internal
    /// error.
    pub fn new<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        let mut out = Vec::with_capacity(crate::message::RESULT_CAPACITY);
        serialize_into(&mut out, value)?;
        Ok(RawResult(out))
    }

    /// A result that is already JSON.
    pub fn from_raw(raw: &RawValue) -> Self {
        RawResult(raw.get().as_bytes().to_vec())
    }

    /// Bytes a serializer wrote: trusted to be one JSON text.
    pub(crate) fn from_serialized(bytes: Vec<u8>) -> Self {
        RawResult(bytes)
    }

    /// The JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The JSON text as a string.
    pub fn as_str(&self) -> &str {
        // Written by serde_json (or checked when built from raw JSON).
        std::str::from_utf8(&self.0).unwrap_or("<not UTF-8>")
    }

    /// Decodes the result into `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.0)
    }

    /// The JSON text's bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for RawResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RawResult").field(&self.as_str()).finish()
    }
}
