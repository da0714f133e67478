//! Typed params: turning a request's raw `params` into the type a handler
//! asks for.
//!
//! The fast path hands the raw JSON straight to serde_json. Only when that
//! fails does the slower path below run, a deserializer over the params'
//! entries that
//! - pads a short positional array, so that trailing `Option` params may be
//!   omitted;
//! - lets a method that takes no params accept omitted params, `[]` or `{}`;
//! - and, when decoding still fails, says which parameter was wrong and why.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::CowStrDeserializer;
use serde::de::Error as _;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor,
};
use serde::{forward_to_deserialize_any, Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::Error;

/// Decodes `params` (`None` when the request omitted them) into `P`, or
/// returns the `-32602 Invalid params` error to send back.
pub(crate) fn decode<P: DeserializeOwned>(params: Option<&RawValue>) -> Result<P, Error> {
    if let Some(raw) = params {
        if let Ok(value) = serde_json::from_str::<P>(raw.get()) {
            return Ok(value);
        }
    }
    let source = Source::new(params).map_err(ParamError::into_rpc)?;
    P::deserialize(ParamsDeserializer { source }).map_err(ParamError::into_rpc)
}

/// Why params did not decode, and which parameter it was about.
#[derive(Debug)]
struct ParamError {
    param: Option<Param>,
    reason: String,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Param {
    Position(usize),
    Name(String),
}

impl ParamError {
    fn at(param: Param, reason: impl fmt::Display) -> Self {
        ParamError {
            param: Some(param),
            reason: reason.to_string(),
        }
    }

    fn from_json(err: serde_json::Error) -> Self {
        ParamError {
            param: None,
            reason: json_reason(&err),
        }
    }

    /// Names the parameter at position `index` (and its field name, when the
    /// target is a struct) unless a deeper layer already named one.
    fn in_position(mut self, index: usize, name: Option<&'static str>) -> Self {
        if self.param.is_none() {
            self.param = Some(match name {
                Some(name) => Param::Name(name.to_owned()),
                None => Param::Position(index),
            });
        }
        self
    }

    fn into_rpc(self) -> Error {
        #[derive(Serialize)]
        struct Data<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            param: Option<&'a Param>,
            reason: &'a str,
        }
        // serde's own messages name the field for missing/unknown fields.
        let param = self.param.or_else(|| {
            let named = self.reason.starts_with("missing field") || self.reason.starts_with("unknown field");
            let name = self.reason.split('`').nth(1).filter(|_| named)?;
            Some(Param::Name(name.to_owned()))
        });
        Error::invalid_params().with_data(&Data {
            param: param.as_ref(),
            reason: &self.reason,
        })
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ParamError {}

impl de::Error for ParamError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ParamError {
            param: None,
            reason: msg.to_string(),
        }
    }
}

/// serde_json's message without its " at line L column C" suffix, which
/// points into the params' text and means nothing to the caller.
fn json_reason(err: &serde_json::Error) -> String {
    let text = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match text.strip_suffix(&suffix) {
        Some(reason) => reason.to_owned(),
        None => text,
    }
}

/// The params, split one level deep.
enum Source<'a> {
    Omitted,
    Array(Vec<&'a RawValue>),
    Object(Vec<(Cow<'a, str>, &'a RawValue)>),
    /// Not an array or object; the message layer rejects these before a
    /// handler runs, but a direct caller may still pass one.
    Scalar(&'a RawValue),
}

impl<'a> Source<'a> {
    fn new(params: Option<&'a RawValue>) -> Result<Self, ParamError> {
        let Some(raw) = params else {
            return Ok(Source::Omitted);
        };
        Ok(match raw.get().as_bytes().first() {
            Some(b'[') => Source::Array(serde_json::from_str(raw.get()).map_err(ParamError::from_json)?),
            Some(b'{') => Source::Object(
                serde_json::from_str::<Entries>(raw.get())
                    .map_err(ParamError::from_json)?
                    .0,
            ),
            _ => Source::Scalar(raw),
        })
    }

    fn is_empty(&self) -> bool {
        match self {
            Source::Omitted => true,
            Source::Array(items) => items.is_empty(),
            Source::Object(entries) => entries.is_empty(),
            Source::Scalar(_) => false,
        }
    }

    fn unexpected(&self) -> Unexpected<'static> {
        match self {
            Source::Array(_) => Unexpected::Other("positional params (an array)"),
            Source::Object(_) => Unexpected::Other("named params (an object)"),
            Source::Omitted => Unexpected::Other("no params"),
            Source::Scalar(_) => Unexpected::Other("a params value that is not an array or object"),
        }
    }
}

/// An object's entries in order, keys borrowed where they hold no escapes.
struct Entries<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<KeyText<'de>>()? {
                    entries.push((key.0, map.next_value::<&'de RawValue>()?));
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

struct KeyText<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for KeyText<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(KeyText(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(KeyText(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct ParamsDeserializer<'a> {
    source: Source<'a>,
}

impl<'a> ParamsDeserializer<'a> {
    /// Feeds an array (or nothing) to `visitor` as a sequence: padded with
    /// "missing" entries up to `pad_to`, and refusing leftovers beyond what
    /// the visitor took.
    fn visit_positional<V: Visitor<'a>>(
        self,
        visitor: V,
        pad_to: usize,
        names: Option<&'static [&'static str]>,
    ) -> Result<V::Value, ParamError> {
        let items = match self.source {
            Source::Array(items) => items,
            Source::Omitted => Vec::new(),
            other => return Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        };
        let total = items.len();
        let mut elements = Elements {
            items: items.into_iter(),
            index: 0,
            pad_to,
            names,
        };
        let value = visitor.visit_seq(&mut elements)?;
        if elements.items.len() > 0 {
            return Err(ParamError::custom(format_args!(
                "too many params: expected at most {}, got {total}",
                elements.index
            )));
        }
        Ok(value)
    }

    fn visit_named<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        let entries = match self.source {
            Source::Object(entries) => entries,
            Source::Omitted => Vec::new(),
            other => return Err(de::Error::invalid_type(other.unexpected(), &visitor)),
        };
        visitor.visit_map(Fields {
            entries: entries.into_iter(),
            current: None,
        })
    }
}

impl<'a> de::Deserializer<'a> for ParamsDeserializer<'a> {
    type Error = ParamError;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        match self.source {
            Source::Omitted => visitor.visit_unit(),
            Source::Array(_) => self.visit_positional(visitor, 0, None),
            Source::Object(_) => self.visit_named(visitor),
            Source::Scalar(raw) => {
                de::Deserializer::deserialize_any(&mut serde_json::Deserializer::from_str(raw.get()), visitor)
                    .map_err(ParamError::from_json)
            }
        }
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        if self.source.is_empty() {
            visitor.visit_unit()
        } else {
            Err(ParamError::custom("this method takes no params"))
        }
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        match self.source {
            Source::Omitted => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        self.visit_positional(visitor, 0, None)
    }

    fn deserialize_tuple<V: Visitor<'a>>(self, len: usize, visitor: V) -> Result<V::Value, ParamError> {
        self.visit_positional(visitor, len, None)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        self.visit_positional(visitor, len, None)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, ParamError> {
        self.visit_named(visitor)
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ParamError> {
        match self.source {
            Source::Array(_) => self.visit_positional(visitor, fields.len(), Some(fields)),
            _ => self.visit_named(visitor),
        }
    }

    forward_to_deserialize_any! {
        <W: Visitor<'a>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf enum identifier ignored_any
    }
}

/// Positional entries; past the end, up to `pad_to`, "missing" entries that
/// only an `Option` accepts.
struct Elements<'a> {
    items: std::vec::IntoIter<&'a RawValue>,
    index: usize,
    pad_to: usize,
    names: Option<&'static [&'static str]>,
}

impl<'a> SeqAccess<'a> for Elements<'a> {
    type Error = ParamError;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> Result<Option<T::Value>, ParamError> {
        let index = self.index;
        let name = self.names.and_then(|names| names.get(index).copied());
        let value = match self.items.next() {
            Some(raw) => seed
                .deserialize(&mut serde_json::Deserializer::from_str(raw.get()))
                .map_err(ParamError::from_json),
            None if index < self.pad_to => seed.deserialize(Missing),
            None => return Ok(None),
        };
        self.index += 1;
        value.map(Some).map_err(|e| e.in_position(index, name))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len().max(self.pad_to.saturating_sub(self.index)))
    }
}

/// Named entries, each value decoded by serde_json.
struct Fields<'a> {
    entries: std::vec::IntoIter<(Cow<'a, str>, &'a RawValue)>,
    current: Option<(Cow<'a, str>, &'a RawValue)>,
}

impl<'a> MapAccess<'a> for Fields<'a> {
    type Error = ParamError;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> Result<Option<K::Value>, ParamError> {
        let Some((key, raw)) = self.entries.next() else {
            return Ok(None);
        };
        let de: CowStrDeserializer<'a, ParamError> = key.clone().into_deserializer();
        self.current = Some((key, raw));
        seed.deserialize(de).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, ParamError> {
        let (key, raw) = self
            .current
            .take()
            .ok_or_else(|| ParamError::custom("value requested before its key"))?;
        seed.deserialize(&mut serde_json::Deserializer::from_str(raw.get()))
            .map_err(|e| ParamError::at(Param::Name(key.into_owned()), json_reason(&e)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

/// A positional parameter the caller left out.
struct Missing;

impl<'de> de::Deserializer<'de> for Missing {
    type Error = ParamError;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, ParamError> {
        Err(ParamError::custom("missing required parameter"))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ParamError> {
        visitor.visit_none()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple tuple_struct
        map struct enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests;
