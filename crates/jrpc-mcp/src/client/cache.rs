//! Results the server said may be kept (`ttlMs`, 2026-07-28's caching):
//! lists and resource reads, by method and params, until they expire or
//! the server says the list changed. Never an `input_required` round.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jrpc::message::RawValue;
use serde::Deserialize;

use crate::types::ResultType;

/// The methods whose results may be kept.
const CACHEABLE: &[&str] = &[
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The most results kept at once; the oldest go first.
const MOST_KEPT: usize = 1_024;

/// What a result says of keeping it.
#[derive(Deserialize)]
struct Hint {
    #[serde(rename = "ttlMs", default)]
    ttl_ms: Option<u64>,
    #[serde(rename = "resultType", default)]
    result_type: Option<ResultType>,
}

/// The results kept, shared by a client and the listener of its
/// notifications (a list that changed is dropped).
pub(super) struct ResultCache {
    on: bool,
    kept: Mutex<HashMap<String, (Instant, Box<RawValue>)>>,
}

impl ResultCache {
    pub(super) fn new(on: bool) -> Self {
        ResultCache {
            on,
            kept: Mutex::default(),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Box<RawValue>)>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key of a request whose result may be kept: its method and params
    /// (before their `_meta`).
    pub(super) fn key(&self, method: &str, params: &serde_json::Value) -> Option<String> {
        (self.on && CACHEABLE.contains(&method)).then(|| format!("{method}\n{params}"))
    }

    /// A result kept for `key` that has not expired.
    pub(super) fn get(&self, key: &str) -> Option<Box<RawValue>> {
        let mut kept = self.kept();
        match kept.get(key) {
            Some((until, raw)) if Instant::now() < *until => Some(raw.clone()),
            Some(_) => {
                kept.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `raw` for `key` as long as it says (`ttlMs`), unless it is an
    /// `input_required` round or says nothing.
    pub(super) fn put(&self, key: String, raw: &RawValue) {
        let Ok(hint) = serde_json::from_str::<Hint>(raw.get()) else {
            return;
        };
        let complete = matches!(hint.result_type, None | Some(ResultType::Complete));
        let Some(ttl) = hint.ttl_ms.filter(|ms| *ms > 0 && complete) else {
            return;
        };
        let until = Instant::now() + Duration::from_millis(ttl);
        let mut kept = self.kept();
        if kept.len() >= MOST_KEPT {
            let now = Instant::now();
            kept.retain(|_, (until, _)| *until > now);
            if kept.len() >= MOST_KEPT {
                if let Some(oldest) = kept
                    .iter()
                    .min_by_key(|(_, (until, _))| *until)
                    .map(|(k, _)| k.clone())
                {
                    kept.remove(&oldest);
                }
            }
        }
        kept.insert(key, (until, raw.to_owned()));
    }

    /// The server says something changed (`notifications/…/list_changed`,
    /// `notifications/resources/updated`): drops what it makes stale.
    pub(super) fn changed(&self, notification: &str) {
        let prefixes: &[&str] = match notification {
            "notifications/tools/list_changed" => &["tools/list\n"],
            "notifications/prompts/list_changed" => &["prompts/list\n"],
            "notifications/resources/list_changed" => &["resources/list\n", "resources/templates/list\n"],
            "notifications/resources/updated" => &["resources/read\n"],
            _ => return,
        };
        self.kept()
            .retain(|key, _| !prefixes.iter().any(|prefix| key.starts_with(prefix)));
    }

    /// Drops everything kept for `method` (a list asked for afresh).
    pub(super) fn forget(&self, method: &str) {
        let prefix = format!("{method}\n");
        self.kept().retain(|key, _| !key.starts_with(&prefix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn results_are_kept_as_long_as_they_say() {
        let cache = ResultCache::new(true);
        let key = cache.key("tools/list", &serde_json::json!({})).unwrap();
        cache.put(key.clone(), &raw(r#"{"tools":[],"ttlMs":60000}"#));
        assert!(cache.get(&key).is_some());
        // Other methods, a zero or absent ttl, and input-required rounds are
        // not kept.
        assert!(cache.key("tools/call", &serde_json::json!({})).is_none());
        let read = cache
            .key("resources/read", &serde_json::json!({"uri": "a"}))
            .unwrap();
        cache.put(read.clone(), &raw(r#"{"contents":[],"ttlMs":0}"#));
        assert!(cache.get(&read).is_none());
        cache.put(
            read.clone(),
            &raw(r#"{"resultType":"input_required","ttlMs":5000}"#),
        );
        assert!(cache.get(&read).is_none());
        cache.put(read.clone(), &raw(r#"{"contents":[]}"#));
        assert!(cache.get(&read).is_none());
        // A list that changed is asked for again.
        cache.changed("notifications/tools/list_changed");
        assert!(cache.get(&key).is_none());
        // Off: nothing is kept.
        assert!(ResultCache::new(false)
            .key("tools/list", &serde_json::json!({}))
            .is_none());
    }

    #[test]
    fn an_expired_result_is_not_given() {
        let cache = ResultCache::new(true);
        let key = cache.key("prompts/list", &serde_json::json!({})).unwrap();
        cache.put(key.clone(), &raw(r#"{"prompts":[],"ttlMs":1}"#));
        std::thread::sleep(Duration::from_millis(5));
        assert!(cache.get(&key).is_none());
    }
}
