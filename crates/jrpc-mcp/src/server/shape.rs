//! The shape of a result in each era: a modern result says what it is
//! (`resultType`), who answered (`_meta["io.modelcontextprotocol/serverInfo"]`)
//! and, when it may be cached, for how long and for whom (`ttlMs`,
//! `cacheScope`); a legacy result keeps the shape it always had.

use serde::Serialize;

use crate::types::{
    meta_keys, CacheHint, CallToolResult, CompleteResult, GetPromptResult, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Meta,
    ReadResourceResult, ResultType, Task,
};

/// A result in the shape of its era.
pub(crate) trait Shaped {
    /// As a modern result: `resultType` (`complete` unless set), the
    /// server's identity in `_meta`, and `cache` where the result is
    /// cacheable and its handler did not set its own.
    fn modern(&mut self, server_info: &serde_json::Value, cache: CacheHint);
    /// As a legacy result: without the fields of 2026-07-28.
    fn legacy(&mut self);
}

/// Adds the server's identity to `meta`, unless a handler put one there.
pub(crate) fn stamp(meta: &mut Option<Meta>, server_info: &serde_json::Value) {
    meta.get_or_insert_with(Meta::new)
        .entry(meta_keys::SERVER_INFO)
        .or_insert_with(|| server_info.clone());
}

macro_rules! shaped {
    ($($ty:ty),* $(,)?) => {$(
        impl Shaped for $ty {
            fn modern(&mut self, server_info: &serde_json::Value, _: CacheHint) {
                self.result_type.get_or_insert(ResultType::Complete);
                stamp(&mut self.meta, server_info);
            }

            fn legacy(&mut self) {
                self.result_type = None;
            }
        }
    )*};
}

macro_rules! cacheable {
    ($($ty:ty),* $(,)?) => {$(
        impl Shaped for $ty {
            fn modern(&mut self, server_info: &serde_json::Value, cache: CacheHint) {
                self.result_type.get_or_insert(ResultType::Complete);
                stamp(&mut self.meta, server_info);
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
        }
    )*};
}

shaped!(CallToolResult, GetPromptResult, CompleteResult);
cacheable!(
    ListToolsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListPromptsResult,
    ReadResourceResult
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
        let info = json!({"name": "s", "version": "1"});
        let hint = CacheHint::new(Duration::from_secs(60), CacheScope::Public);
        let mut list = ListToolsResult::default();
        list.modern(&info, hint);
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            json!({"tools": [], "resultType": "complete", "ttlMs": 60000, "cacheScope": "public",
                   "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}})
        );
        list.legacy();
        list.meta = None;
        assert_eq!(serde_json::to_value(&list).unwrap(), json!({"tools": []}));
        // A handler's own hints win.
        let mut read = ReadResourceResult {
            ttl_ms: Some(0),
            cache_scope: Some(CacheScope::Private),
            ..Default::default()
        };
        read.modern(&info, hint);
        assert_eq!(
            (read.ttl_ms, read.cache_scope),
            (Some(0), Some(CacheScope::Private))
        );
    }
}
