//! What is known about a call and its connection: the transport's facts
//! ([`ConnectionInfo`], request headers, an authenticated identity), facts
//! that middleware adds per call, and the [`RequestContext`] a handler reads
//! them from.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::Arc;

use crate::Id;

/// A type map of values describing one connection (its peer address, the
/// transport, request headers, ...). Transports fill it in; handlers read it
/// through [`RequestContext::get`].
///
/// ```
/// use jrpc::router::Extensions;
///
/// #[derive(Clone, Debug, PartialEq)]
/// struct Transport(&'static str);
///
/// let mut ext = Extensions::new();
/// ext.insert(Transport("stdio"));
/// assert_eq!(ext.get::<Transport>(), Some(&Transport("stdio")));
/// ```
#[derive(Default)]
pub struct Extensions {
    // A handful of entries at most (connection info, headers): a vector
    // beats hashing, and an empty one allocates nothing.
    map: Vec<(TypeId, Box<dyn Any + Send + Sync>)>,
    /// Facts shared by many maps (an HTTP connection's, under each of its
    /// requests' maps), read after this map's own values.
    shared: Option<Arc<Extensions>>,
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty map over `shared`: a value of this map hides one of the
    /// same type there. Saves copying a connection's facts into each of its
    /// requests' maps.
    // Only the HTTP server shares a connection's facts this way.
    #[cfg_attr(not(feature = "http-server"), allow(dead_code))]
    pub(crate) fn over(shared: Arc<Extensions>) -> Self {
        Extensions {
            map: Vec::new(),
            shared: Some(shared),
        }
    }

    /// Inserts `value`, returning the value of the same type it replaces
    /// in this map (a value of a map it is over is hidden, not replaced).
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        let key = TypeId::of::<T>();
        let value: Box<dyn Any + Send + Sync> = Box::new(value);
        match self.map.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => std::mem::replace(slot, value).downcast().ok().map(|b| *b),
            None => {
                // Connection info and headers, typically: room for both
                // at the first insert (and no more: `reserve_exact` asks
                // for room beyond what is in use, and would grow the
                // vector again at the second).
                if self.map.capacity() == 0 {
                    self.map.reserve_exact(2);
                }
                self.map.push((key, value));
                None
            }
        }
    }

    /// Whether the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty() && self.shared.as_ref().map_or(true, |shared| shared.is_empty())
    }

    /// The value of type `T`, if any.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        let key = TypeId::of::<T>();
        self.map
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, b)| b.downcast_ref())
            .or_else(|| self.shared.as_ref()?.get())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .field("shared", &self.shared)
            .finish()
    }
}

/// The facts of a connection nobody recorded anything about.
/// (A reference: counting a shared `Arc` up and down on every call is two
/// atomic operations that most calls never need.)
pub(crate) fn empty_connection() -> &'static Arc<Extensions> {
    static EMPTY: std::sync::OnceLock<Arc<Extensions>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::new(Extensions::new()))
}

/// What is known about a connection: recorded by its transport, read by
/// handlers through [`RequestContext::connection_info`] and by middleware
/// through [`Call::connection_info`](crate::middleware::Call::connection_info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    /// The transport: `"stdio"`, `"tcp"`, `"unix"`, `"child"`, `"http"`,
    /// `"websocket"`, ...
    pub transport: &'static str,
    /// The other side's address, where there is one.
    pub peer_addr: Option<String>,
    /// This side's address, where there is one.
    pub local_addr: Option<String>,
}

/// Who the caller is, as established by an authentication layer (the HTTP
/// bearer-token check puts one in each request's extensions); read by
/// per-method authorization.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity(pub Arc<str>);

impl Identity {
    /// An identity of that name.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Identity(name.into())
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.0
    }
}

/// What the caller's credentials grant (an OAuth token's scopes), as
/// established by an authentication layer
/// ([`BearerAuth`](crate::server::http::BearerAuth)); read by per-method
/// authorization ([`Authorize::require_scope`](crate::middleware::Authorize::require_scope)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes(Arc<[Box<str>]>);

impl Scopes {
    /// These scopes.
    pub fn new(scopes: impl IntoIterator<Item = impl Into<Box<str>>>) -> Self {
        Scopes(scopes.into_iter().map(Into::into).collect())
    }

    /// Whether `scope` is granted.
    pub fn has(&self, scope: &str) -> bool {
        self.0.iter().any(|s| &**s == scope)
    }

    /// Every scope granted.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|s| &**s)
    }
}

/// The context of one incoming call, handed to handlers that ask for it.
#[derive(Clone, Debug)]
pub struct RequestContext {
    id: Option<Id>,
    connection: Arc<Extensions>,
    /// What middleware recorded about this call alone, if anything.
    call: Option<Arc<Extensions>>,
}

impl RequestContext {
    pub(crate) fn new(id: Option<&Id>, connection: &Arc<Extensions>, call: Option<&Arc<Extensions>>) -> Self {
        RequestContext {
            id: id.cloned(),
            connection: Arc::clone(connection),
            call: call.cloned(),
        }
    }

    /// The id of the request; `None` for a notification.
    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// A value recorded about this call (by middleware) or, failing that,
    /// about its connection (by the transport).
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.call
            .as_deref()
            .and_then(Extensions::get)
            .or_else(|| self.connection.get())
    }

    /// What the transport recorded about the connection.
    pub fn connection_info(&self) -> Option<&ConnectionInfo> {
        self.get::<ConnectionInfo>()
    }

    /// Who the caller is, when an authentication layer said so.
    pub fn identity(&self) -> Option<&Identity> {
        self.get::<Identity>()
    }

    /// The HTTP request headers (over HTTP, and the upgrade request's over
    /// WebSocket).
    #[cfg(any(feature = "http-server", feature = "http-client"))]
    pub fn headers(&self) -> Option<&http::HeaderMap> {
        self.get::<http::HeaderMap>()
    }

    /// Everything the transport recorded about the connection.
    pub fn connection(&self) -> &Extensions {
        &self.connection
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_over_shared_facts_reads_its_own_first() {
        let mut connection = Extensions::new();
        connection.insert(ConnectionInfo {
            transport: "http",
            peer_addr: Some("127.0.0.1:9".into()),
            local_addr: None,
        });
        connection.insert(Identity::new("connection"));
        let connection = Arc::new(connection);

        let mut request = Extensions::over(Arc::clone(&connection));
        assert!(!request.is_empty(), "the shared facts count");
        assert_eq!(request.get::<ConnectionInfo>().unwrap().transport, "http");
        request.insert(Identity::new("request"));
        assert_eq!(request.get::<Identity>().unwrap().name(), "request");
        assert_eq!(connection.get::<Identity>().unwrap().name(), "connection");
        assert!(request.get::<u8>().is_none());
        assert!(Extensions::over(Arc::new(Extensions::new())).is_empty());
    }
}
