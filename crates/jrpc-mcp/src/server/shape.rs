//! The shape of a result in each era: a modern result says what it is
//! (`resultType`), who answered (`_meta["io.modelcontextprotocol/serverInfo"]`)
//! and, when it may be cached, for how long and for whom (`ttlMs`,
//! `cacheScope`); a legacy result keeps the shape it always had.

use std::sync::Arc;

use jrpc::message::RawValue;
use serde::ser::{Impossible, SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use crate::types::{
    meta_keys, CacheHint, CallToolResult, CompleteResult, GetPromptResult, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Meta,
    ReadResourceResult, ResultType, Task,
};
use crate::types::{GetSkillResult, ListSkillsResult, ReadDirectoryResult};

/// A result in the shape of its era.
pub(crate) trait Shaped {
    /// As a modern result: `resultType` (`complete` unless set) and `cache`
    /// where the result is cacheable and its handler did not set its own.
    fn modern(&mut self, cache: CacheHint);
    /// As a legacy result: without the fields of 2026-07-28.
    fn legacy(&mut self);
    /// The result's `_meta`.
    fn meta_mut(&mut self) -> &mut Option<Meta>;
}

/// Adds the server's identity to `meta`, unless a handler put one there.
pub(crate) fn stamp(meta: &mut Option<Meta>, server_info: &serde_json::Value) {
    meta.get_or_insert_with(Meta::new)
        .entry(meta_keys::SERVER_INFO)
        .or_insert_with(|| server_info.clone());
}

/// Who the server is, for `_meta["io.modelcontextprotocol/serverInfo"]` of
/// modern results: as a value, and as the text of a `_meta` that holds only
/// it, serialized once.
pub(crate) struct Identity {
    value: serde_json::Value,
    meta_text: Arc<RawValue>,
}

impl Identity {
    pub(crate) fn new(info: &crate::types::Implementation) -> Self {
        let value = serde_json::to_value(info).unwrap_or(serde_json::Value::Null);
        let mut meta = Meta::new();
        meta.insert(meta_keys::SERVER_INFO.to_owned(), value.clone());
        let meta_text = serde_json::value::to_raw_value(&meta)
            .unwrap_or_else(|_| RawValue::from_string("{}".to_owned()).expect("{} is JSON"));
        Identity {
            value,
            meta_text: Arc::from(meta_text),
        }
    }

    pub(crate) fn value(&self) -> &serde_json::Value {
        &self.value
    }

    /// `result`, stamped with the server's identity: into its `_meta` when a
    /// handler gave it one, else (the usual case) as it is serialized, from
    /// the text — so a reply neither clones nor escapes the identity again.
    pub(crate) fn stamp<T>(&self, mut result: T) -> Stamped<T>
    where
        T: Shaped,
    {
        let meta = result.meta_mut();
        if meta.is_some() {
            stamp(meta, &self.value);
            return Stamped::plain(result);
        }
        Stamped {
            result,
            meta: Some(Arc::clone(&self.meta_text)),
        }
    }
}

/// A result ready to go out: a modern result without `_meta` gets one
/// holding only the server's identity, written as it was serialized.
#[derive(Debug)]
pub(crate) struct Stamped<T> {
    result: T,
    meta: Option<Arc<RawValue>>,
}

impl<T> Stamped<T> {
    /// `result`, serialized as it is.
    pub(crate) fn plain(result: T) -> Self {
        Stamped { result, meta: None }
    }
}

impl<T: Serialize> Serialize for Stamped<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.meta {
            None => self.result.serialize(serializer),
            Some(meta) => self.result.serialize(IdentityLast {
                inner: serializer,
                meta,
            }),
        }
    }
}

/// A serializer of a result (a JSON object without `_meta`) that ends the
/// object with `"_meta": {"io.modelcontextprotocol/serverInfo": …}`.
struct IdentityLast<'a, S> {
    inner: S,
    /// That `_meta`, as text.
    meta: &'a RawValue,
}

/// A result that is not a JSON object cannot carry `_meta`.
fn not_an_object<E: serde::ser::Error>() -> E {
    E::custom("a result must be a JSON object")
}

macro_rules! refuse_non_objects {
    ($($method:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {$(
        fn $method(self, $(_: $ty),*) -> Result<$out, Self::Error> {
            Err(not_an_object())
        }
    )*};
}

impl<'a, S: Serializer> Serializer for IdentityLast<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = IdentityLast<'a, S::SerializeMap>;
    type SerializeStruct = IdentityLast<'a, S::SerializeStruct>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    fn serialize_struct(self, name: &'static str, len: usize) -> Result<Self::SerializeStruct, S::Error> {
        Ok(IdentityLast {
            inner: self.inner.serialize_struct(name, len + 1)?,
            meta: self.meta,
        })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Ok(IdentityLast {
            inner: self.inner.serialize_map(len.map(|len| len + 1))?,
            meta: self.meta,
        })
    }

    fn serialize_newtype_struct<V: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &V,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_some<V: Serialize + ?Sized>(self, value: &V) -> Result<S::Ok, S::Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<V: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &V,
    ) -> Result<S::Ok, S::Error> {
        Err(not_an_object())
    }

    refuse_non_objects! {
        serialize_bool(v: bool) -> S::Ok;
        serialize_i8(v: i8) -> S::Ok;
        serialize_i16(v: i16) -> S::Ok;
        serialize_i32(v: i32) -> S::Ok;
        serialize_i64(v: i64) -> S::Ok;
        serialize_u8(v: u8) -> S::Ok;
        serialize_u16(v: u16) -> S::Ok;
        serialize_u32(v: u32) -> S::Ok;
        serialize_u64(v: u64) -> S::Ok;
        serialize_f32(v: f32) -> S::Ok;
        serialize_f64(v: f64) -> S::Ok;
        serialize_char(v: char) -> S::Ok;
        serialize_str(v: &str) -> S::Ok;
        serialize_bytes(v: &[u8]) -> S::Ok;
        serialize_none() -> S::Ok;
        serialize_unit() -> S::Ok;
        serialize_unit_struct(name: &'static str) -> S::Ok;
        serialize_unit_variant(name: &'static str, index: u32, variant: &'static str) -> S::Ok;
        serialize_seq(len: Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(len: usize) -> Self::SerializeTuple;
        serialize_tuple_struct(name: &'static str, len: usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> Self::SerializeTupleVariant;
        serialize_struct_variant(name: &'static str, index: u32, variant: &'static str, len: usize) -> Self::SerializeStructVariant;
    }
}

impl<S: SerializeStruct> SerializeStruct for IdentityLast<'_, S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_field<V: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &V,
    ) -> Result<(), S::Error> {
        self.inner.serialize_field(key, value)
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), S::Error> {
        self.inner.skip_field(key)
    }

    fn end(mut self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_field("_meta", self.meta)?;
        self.inner.end()
    }
}

impl<S: SerializeMap> SerializeMap for IdentityLast<'_, S> {
    type Ok = S::Ok;
    type Error = S::Error;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, key: &K) -> Result<(), S::Error> {
        self.inner.serialize_key(key)
    }

    fn serialize_value<V: Serialize + ?Sized>(&mut self, value: &V) -> Result<(), S::Error> {
        self.inner.serialize_value(value)
    }

    fn end(mut self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_entry("_meta", self.meta)?;
        self.inner.end()
    }
}

macro_rules! shaped {
    ($($ty:ty),* $(,)?) => {$(
        impl Shaped for $ty {
            fn modern(&mut self, _: CacheHint) {
                self.result_type.get_or_insert(ResultType::Complete);
            }

            fn legacy(&mut self) {
                self.result_type = None;
            }

            fn meta_mut(&mut self) -> &mut Option<Meta> {
                &mut self.meta
            }
        }
    )*};
}

macro_rules! cacheable {
    ($($ty:ty),* $(,)?) => {$(
        impl Shaped for $ty {
            fn modern(&mut self, cache: CacheHint) {
                self.result_type.get_or_insert(ResultType::Complete);
                // What the handler chose wins, as one pair.
                if self.ttl_ms.is_none() || self.cache_scope.is_none() {
                    self.ttl_ms = Some(self.ttl_ms.unwrap_or_else(|| cache.ttl_ms()));
                    self.cache_scope = Some(self.cache_scope.unwrap_or(cache.scope));
                }
            }

            fn legacy(&mut self) {
                self.result_type = None;
                self.ttl_ms = None;
                self.cache_scope = None;
            }

            fn meta_mut(&mut self) -> &mut Option<Meta> {
                &mut self.meta
            }
        }
    )*};
}

shaped!(CallToolResult, GetPromptResult, CompleteResult);
cacheable!(
    ListToolsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    ReadResourceResult,
    ListSkillsResult,
    GetSkillResult,
    ReadDirectoryResult
);

/// What a tool, prompt or resource request answers: its result, the input
/// it needs first (modern), or the task it became (the tasks extension).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum Answer<T> {
    Complete(T),
    InputRequired(InputRequiredResult),
    Task(Task),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::CacheScope;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn modern_results_carry_their_type_identity_and_hints() {
        let identity = Identity::new(&crate::types::Implementation::new("s", "1"));
        let hint = CacheHint::new(Duration::from_secs(60), CacheScope::Public);
        let mut list = ListToolsResult::default();
        list.modern(hint);
        let stamped = identity.stamp(list);
        let expected = json!({"tools": [], "resultType": "complete", "ttlMs": 60000, "cacheScope": "public",
                              "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}});
        // As text (what goes on the wire) and as a value (a task's result).
        let text = serde_json::to_string(&stamped).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            expected
        );
        assert_eq!(serde_json::to_value(&stamped).unwrap(), expected);
        let mut list = stamped.result;
        list.legacy();
        assert_eq!(
            serde_json::to_value(Stamped::plain(&list)).unwrap(),
            json!({"tools": []})
        );
        // A handler's own hints win.
        let mut read = ReadResourceResult {
            ttl_ms: Some(0),
            cache_scope: Some(CacheScope::Private),
            ..Default::default()
        };
        read.modern(hint);
        assert_eq!(
            (read.ttl_ms, read.cache_scope),
            (Some(0), Some(CacheScope::Private))
        );
    }

    #[test]
    fn the_identity_joins_a_meta_the_handler_gave() {
        let identity = Identity::new(&crate::types::Implementation::new("s", "1"));
        let mut result = CallToolResult::text("hi");
        result.meta = Some([("mine".to_owned(), json!(1))].into_iter().collect());
        result.modern(CacheHint::new(Duration::ZERO, CacheScope::Private));
        let value = serde_json::to_value(identity.stamp(result)).unwrap();
        assert_eq!(
            value["_meta"],
            json!({"mine": 1, "io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}})
        );
        // Without one, the result gets a `_meta` of only the identity.
        let empty = identity.stamp(CompleteResult::default());
        let text = serde_json::to_string(&empty).unwrap();
        assert!(
            text.ends_with(r#""_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}"#),
            "{text}"
        );
    }
}
