//! Parsing one frame of bytes into classified incoming items.
//!
//! A frame is one JSON text: a single message or a batch. Parsing is one pass
//! with serde_json; every member that matters is kept as borrowed raw JSON so
//! that params, results and ids are decoded only when (and as) they are used.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{depth, Error, Id, Incoming, Invalid, Limits, NotificationRef, RequestRef, ResponseRef, Version};
use crate::message::codes;

/// One parsed frame: a single item or a batch of items.
#[derive(Debug)]
pub enum Frame<'a> {
    /// The frame held one JSON value.
    Single(Incoming<'a>),
    /// The frame held a non-empty JSON array; one item per entry, in order.
    Batch(Vec<Incoming<'a>>),
}

/// Parses one frame.
///
/// On success every item is classified; items that are not valid messages
/// come back as [`Incoming::Invalid`] with the `-32600` error the
/// specification demands, so that one bad entry does not spoil a batch.
///
/// A frame that cannot be answered item by item yields the one error object
/// to send back (with `"id": null`):
///
/// | cause | code |
/// |---|---|
/// | not JSON, invalid UTF-8, trailing garbage, empty | `-32700` [`codes::PARSE_ERROR`] |
/// | an empty batch `[]` | `-32600` [`codes::INVALID_REQUEST`] |
/// | longer than `limits.max_frame_len` | `-32001` [`codes::FRAME_TOO_LARGE`] |
/// | more than `limits.max_batch_len` entries | `-32002` [`codes::BATCH_TOO_LARGE`] |
/// | nested deeper than `limits.max_depth` | `-32003` [`codes::NESTING_TOO_DEEP`] |
///
/// ```
/// use jrpc::message::{parse_frame, Frame, Incoming, Limits};
///
/// let frame = parse_frame(br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7}"#, &Limits::default()).unwrap();
/// let Frame::Single(Incoming::Request(req)) = frame else { panic!() };
/// assert_eq!(req.method, "add");
/// assert_eq!(req.params.unwrap().get(), "[1,2]");
/// assert_eq!(req.id.as_i64(), Some(7));
/// ```
pub fn parse_frame<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Frame<'a>, Error> {
    // The usual request or response first: read without serde's visitors,
    // or left to the general path.
    if let Some(item) = super::fast::usual(bytes, limits) {
        return Ok(Frame::Single(item));
    }
    parse_with_serde(bytes, limits)
}

/// [`parse_frame`]'s general path: any frame, through serde.
pub(super) fn parse_with_serde<'a>(bytes: &'a [u8], limits: &Limits) -> Result<Frame<'a>, Error> {
    let text = frame_text(bytes, limits)?;
    let batch_overflow = Cell::new(false);
    let seed = FrameSeed {
        max_batch_len: limits.max_batch_len,
        batch_overflow: &batch_overflow,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let raw = seed
        .deserialize(&mut de)
        .and_then(|raw| de.end().map(|()| raw))
        .map_err(|e| {
            if batch_overflow.get() {
                Error::new(codes::BATCH_TOO_LARGE, "Batch too large").with_data(&format!(
                    "a batch may hold at most {} entries",
                    limits.max_batch_len
                ))
            } else if e.to_string().starts_with("recursion limit exceeded") {
                nesting_too_deep(limits)
            } else {
                Error::parse_error()
            }
        })?;
    Ok(match raw {
        RawFrame::Single(item) => Frame::Single(item.classify(limits.accept_v1)),
        RawFrame::Batch(items) if items.is_empty() => return Err(Error::invalid_request()),
        RawFrame::Batch(items) => Frame::Batch(
            items
                .into_iter()
                .map(|item| item.classify(limits.accept_v1))
                .collect(),
        ),
    })
}

/// The text of a frame within `limits`: not too long, not nested too deep,
/// valid UTF-8, a byte order mark dropped.
fn frame_text<'a>(bytes: &'a [u8], limits: &Limits) -> Result<&'a str, Error> {
    if bytes.len() > limits.max_frame_len {
        return Err(Error::frame_too_large().with_data(&format!(
            "frame is {} bytes; the limit is {}",
            bytes.len(),
            limits.max_frame_len
        )));
    }
    if depth::exceeds(bytes, limits.max_depth) {
        return Err(nesting_too_deep(limits));
    }
    // RFC 8259 lets a parser ignore a byte order mark.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Validating UTF-8 once up front lets the parser borrow every string and
    // raw value without checking each again.
    std::str::from_utf8(bytes).map_err(|_| Error::parse_error())
}

/// A single request whose params were read as the caller's type `P` while
/// the frame was parsed (see [`parse_request_as`]).
#[derive(Debug)]
pub struct TypedRequest<'a, P> {
    /// The protocol version it was sent in.
    pub version: Version,
    /// The id to echo in the response.
    pub id: Id,
    /// The method name.
    pub method: Cow<'a, str>,
    /// The params, read as `P`; `None` when omitted.
    pub params: Option<P>,
}

/// [`parse_frame`] for a caller that knows what shape a request's params
/// take: a frame holding one request whose params are an object that reads
/// as `P`, read in the same pass (without keeping the params as raw JSON to
/// read them again).
///
/// `None` for anything else — a batch, a notification, a response, an
/// invalid message, a frame past `limits`, params that are an array or not
/// a `P` — which the caller then parses with [`parse_frame`] to learn what
/// it is. What this accepts, `parse_frame` accepts as the same request.
///
/// ```
/// use jrpc::message::{parse_request_as, Limits};
///
/// #[derive(serde::Deserialize)]
/// struct Add { a: i64, b: i64 }
///
/// let frame = br#"{"jsonrpc":"2.0","method":"add","params":{"a":1,"b":2},"id":7}"#;
/// let request = parse_request_as::<Add>(frame, &Limits::default()).unwrap();
/// assert_eq!((request.method.as_ref(), request.id.as_i64()), ("add", Some(7)));
/// let params = request.params.unwrap();
/// assert_eq!(params.a + params.b, 3);
/// // Positional params are not an object: the caller parses the frame as usual.
/// let positional = br#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7}"#;
/// assert!(parse_request_as::<Add>(positional, &Limits::default()).is_none());
/// ```
pub fn parse_request_as<'a, P: Deserialize<'a>>(
    bytes: &'a [u8],
    limits: &Limits,
) -> Option<TypedRequest<'a, P>> {
    let text = frame_text(bytes, limits).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    // Only an object: a batch is never one request.
    let members = de::Deserializer::deserialize_map(&mut de, TypedVisitor(PhantomData)).ok()?;
    de.end().ok()?;
    // The rules of a request are checked where parse_frame checks them, on
    // the members with an object standing in for the params read.
    let (members, params) = members.take_params();
    match members.classify(limits.accept_v1) {
        Incoming::Request(request) => Some(TypedRequest {
            version: request.version,
            id: request.id,
            method: request.method,
            params,
        }),
        _ => None,
    }
}

struct TypedVisitor<P>(PhantomData<P>);

impl<'de, P: Deserialize<'de>> Visitor<'de> for TypedVisitor<P> {
    type Value = Members<'de, AsObject<P>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC request")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        collect_members(map)
    }
}

/// How a message's `params` member is read: kept as raw JSON
/// ([`parse_frame`]), or read as a caller's type ([`parse_request_as`]).
trait ReadParams<'de>: Sized {
    fn read<A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error>;
}

impl<'de> ReadParams<'de> for &'de RawValue {
    fn read<A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        map.next_value()
    }
}

/// Params read as `P`, from an object only.
struct AsObject<P>(P);

impl<'de, P: Deserialize<'de>> ReadParams<'de> for AsObject<P> {
    fn read<A: MapAccess<'de>>(map: &mut A) -> Result<Self, A::Error> {
        map.next_value_seed(ObjectSeed(PhantomData)).map(AsObject)
    }
}

struct ObjectSeed<P>(PhantomData<P>);

impl<'de, P: Deserialize<'de>> DeserializeSeed<'de> for ObjectSeed<P> {
    type Value = P;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<P, D::Error> {
        // A struct would also read an array; params read so must be an object.
        deserializer.deserialize_map(self)
    }
}

impl<'de, P: Deserialize<'de>> Visitor<'de> for ObjectSeed<P> {
    type Value = P;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("params that are an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<P, A::Error> {
        P::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

impl<'a, P> Members<'a, AsObject<P>> {
    /// The members with a stand-in object for the params, and the params.
    fn take_params(self) -> (Members<'a>, Option<P>) {
        let (stand_in, params) = match self.params {
            Some(AsObject(params)) => (Some(empty_object()), Some(params)),
            None => (None, None),
        };
        let members = Members {
            jsonrpc: self.jsonrpc,
            method: self.method,
            params: stand_in,
            id: self.id,
            result: self.result,
            error: self.error,
            duplicate: self.duplicate,
        };
        (members, params)
    }
}

/// `{}`, as raw JSON.
fn empty_object() -> &'static RawValue {
    static EMPTY: std::sync::OnceLock<Box<RawValue>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| RawValue::from_string("{}".to_owned()).expect("{} is JSON"))
}

fn nesting_too_deep(limits: &Limits) -> Error {
    Error::new(codes::NESTING_TOO_DEEP, "Nesting too deep").with_data(&format!(
        "arrays and objects may nest at most {} levels deep",
        limits.max_depth
    ))
}

enum RawFrame<'a> {
    Single(RawItem<'a>),
    Batch(Vec<RawItem<'a>>),
}

/// One JSON value of a frame, before classification.
enum RawItem<'a> {
    Object(Members<'a>),
    NotObject,
}

/// The members of an object that JSON-RPC gives meaning to, as raw JSON
/// (the params, read as `P`). `Some(raw null)` is a member present with
/// value `null`; `None` is absent.
struct Members<'a, P = &'a RawValue> {
    jsonrpc: Option<StrMember<'a>>,
    method: Option<StrMember<'a>>,
    params: Option<P>,
    id: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    duplicate: bool,
}

impl<P> Default for Members<'_, P> {
    fn default() -> Self {
        Members {
            jsonrpc: None,
            method: None,
            params: None,
            id: None,
            result: None,
            error: None,
            duplicate: false,
        }
    }
}

/// Visitor methods for every JSON value that is not an object or an array.
macro_rules! not_an_object {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}
#[allow(unused_imports)]
use not_an_object;

struct FrameSeed<'s> {
    max_batch_len: usize,
    batch_overflow: &'s Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for FrameSeed<'_> {
    type Value = RawFrame<'de>;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FrameSeed<'_> {
    type Value = RawFrame<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message or batch")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        collect_members(map).map(|m| RawFrame::Single(RawItem::Object(m)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(16).min(64));
        while let Some(item) = seq.next_element::<RawItem<'de>>()? {
            if items.len() == self.max_batch_len {
                self.batch_overflow.set(true);
                return Err(de::Error::custom("batch too large"));
            }
            items.push(item);
        }
        Ok(RawFrame::Batch(items))
    }

    not_an_object!(RawFrame::Single(RawItem::NotObject));
}

impl<'de> Deserialize<'de> for RawItem<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ItemVisitor)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = RawItem<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        collect_members(map).map(RawItem::Object)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // A nested batch is not a message; it still has to be valid JSON.
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(RawItem::NotObject)
    }

    not_an_object!(RawItem::NotObject);
}

fn collect_members<'de, A, P>(mut map: A) -> Result<Members<'de, P>, A::Error>
where
    A: MapAccess<'de>,
    P: ReadParams<'de>,
{
    let mut m = Members::default();
    while let Some(key) = map.next_key::<Key>()? {
        let slot = match key {
            Key::Jsonrpc => {
                m.duplicate |= m.jsonrpc.replace(map.next_value()?).is_some();
                continue;
            }
            Key::Method => {
                m.duplicate |= m.method.replace(map.next_value()?).is_some();
                continue;
            }
            Key::Params => {
                m.duplicate |= m.params.replace(P::read(&mut map)?).is_some();
                continue;
            }
            Key::Id => &mut m.id,
            Key::Result => &mut m.result,
            Key::Error => &mut m.error,
            Key::Other => {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
        };
        let value = map.next_value::<&'de RawValue>()?;
        m.duplicate |= slot.replace(value).is_some();
    }
    Ok(m)
}

/// A member that must be a string: the string (borrowed when it holds no
/// escapes), or a note that it was some other JSON value.
enum StrMember<'a> {
    Str(Cow<'a, str>),
    NotStr,
}

impl<'a> StrMember<'a> {
    fn as_str(&self) -> Option<&str> {
        match self {
            StrMember::Str(s) => Some(s),
            StrMember::NotStr => None,
        }
    }
}

impl<'de> Deserialize<'de> for StrMember<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = StrMember<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrMember::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrMember::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(StrMember::NotStr)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(StrMember::NotStr)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(StrMember::NotStr)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(StrMember::NotStr)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(StrMember::NotStr)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(StrMember::NotStr)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(StrMember::NotStr)
            }
        }
        deserializer.deserialize_any(StrVisitor)
    }
}

/// A member name, classified without allocating.
enum Key {
    Jsonrpc,
    Method,
    Params,
    Id,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(match v {
                    "jsonrpc" => Key::Jsonrpc,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "id" => Key::Id,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    _ => Key::Other,
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

impl<'a> RawItem<'a> {
    fn classify(self, accept_v1: bool) -> Incoming<'a> {
        match self {
            RawItem::Object(members) => members.classify(accept_v1),
            RawItem::NotObject => Incoming::Invalid(Invalid {
                version: Version::V2,
                id: Id::NULL,
                error: Error::invalid_request(),
            }),
        }
    }
}

impl<'a> Members<'a> {
    fn classify(self, accept_v1: bool) -> Incoming<'a> {
        // `None`: no id member; `Some(None)`: an id of a kind the spec does
        // not allow (answered with a null id).
        let id: Option<Option<Id>> = self.id.map(Id::from_raw);
        let version = match self.jsonrpc {
            Some(ref v) if v.as_str() == Some("2.0") => Some(Version::V2),
            None if accept_v1 => Some(Version::V1),
            _ => None,
        };
        let Some(version) = version else {
            return invalid(Version::V2, id);
        };
        if self.duplicate {
            return invalid(version, id);
        }

        if let Some(method) = self.method {
            let StrMember::Str(method) = method else {
                return invalid(version, id);
            };
            let params = match self.params {
                Some(p) if !matches!(p.get().as_bytes().first(), Some(b'[' | b'{')) => {
                    // JSON-RPC 1.0 requests often carry `"params": null`.
                    if version == Version::V1 && p.get() == "null" {
                        None
                    } else {
                        return invalid(version, id);
                    }
                }
                p => p,
            };
            return match id {
                None => Incoming::Notification(NotificationRef {
                    version,
                    method,
                    params,
                }),
                Some(None) => invalid(version, None),
                // In JSON-RPC 1.0 a notification is a request with a null id.
                Some(Some(id)) if version == Version::V1 && id.is_null() => {
                    Incoming::Notification(NotificationRef {
                        version,
                        method,
                        params,
                    })
                }
                Some(Some(id)) => Incoming::Request(RequestRef {
                    version,
                    id,
                    method,
                    params,
                }),
            };
        }

        if self.result.is_none() && self.error.is_none() {
            return invalid(version, id);
        }
        let Some(Some(id)) = id else {
            return invalid(version, None);
        };
        // 1.0 responses carry both members, the unused one null.
        let (result, error) = match version {
            Version::V2 => (self.result, self.error),
            Version::V1 => {
                let error = self.error.filter(|e| e.get() != "null");
                (if error.is_some() { None } else { self.result }, error)
            }
        };
        let outcome = match (result, error) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => match serde_json::from_str::<Error>(error.get()) {
                Ok(error) => Err(error),
                Err(_) => return invalid(version, Some(Some(id))),
            },
            _ => return invalid(version, Some(Some(id))),
        };
        Incoming::Response(ResponseRef { version, id, outcome })
    }
}

/// An invalid item: `-32600`, echoing its id when that id was valid.
fn invalid<'a>(version: Version, id: Option<Option<Id>>) -> Incoming<'a> {
    Incoming::Invalid(Invalid {
        version,
        id: id.flatten().unwrap_or(Id::NULL),
        error: Error::invalid_request(),
    })
}
