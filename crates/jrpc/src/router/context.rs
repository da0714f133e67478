//! What a handler can know about the call it is serving.

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
}

impl Extensions {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Inserts `value`, returning the value of the same type it replaces.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Option<T> {
        let key = TypeId::of::<T>();
        let value: Box<dyn Any + Send + Sync> = Box::new(value);
        match self.map.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => std::mem::replace(slot, value).downcast().ok().map(|b| *b),
            None => {
                // Connection info and headers, typically: room for both.
                self.map.reserve_exact(2);
                self.map.push((key, value));
                None
            }
        }
    }

    /// The value of type `T`, if any.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        let key = TypeId::of::<T>();
        self.map
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, b)| b.downcast_ref())
    }
}

impl fmt::Debug for Extensions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Extensions")
            .field("len", &self.map.len())
            .finish()
    }
}

/// The context of one incoming call, handed to handlers that ask for it.
#[derive(Clone, Debug)]
pub struct RequestContext {
    id: Option<Id>,
    connection: Arc<Extensions>,
}

impl RequestContext {
    pub(crate) fn new(id: Option<&Id>, connection: &Arc<Extensions>) -> Self {
        RequestContext {
            id: id.cloned(),
            connection: Arc::clone(connection),
        }
    }

    /// The id of the request; `None` for a notification.
    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// A value the transport recorded about the connection.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.connection.get()
    }

    /// Everything the transport recorded about the connection.
    pub fn connection(&self) -> &Extensions {
        &self.connection
    }
}
