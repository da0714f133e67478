//! The shared state of one process: a map in memory.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use futures_util::stream::BoxStream;

use super::{Entry, Event, SharedState, Space, StateError, StateFuture};

/// The default [`SharedState`]: this process's memory. Nothing to set up;
/// nothing shared with another process.
#[derive(Debug, Default)]
pub struct InMemory {
    records: Mutex<Records>,
}

#[derive(Debug, Default)]
struct Records {
    /// By space (`Tasks`, `Server`), then key: looked up by `&str`.
    spaces: [HashMap<String, Entry>; 2],
    revision: u64,
}

impl Records {
    fn space(&mut self, space: Space) -> &mut HashMap<String, Entry> {
        &mut self.spaces[match space {
            Space::Tasks => 0,
            Space::Server => 1,
        }]
    }
}

impl InMemory {
    /// An empty store.
    pub fn new() -> Self {
        InMemory::default()
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, space: Space, key: &str, value: Bytes, expect: Option<u64>) -> Option<u64> {
        let mut records = self.records();
        records.revision += 1;
        let revision = records.revision;
        let map = records.space(space);
        if map.get(key).map(|e| e.revision) != expect {
            return None;
        }
        map.insert(key.to_owned(), Entry { value, revision });
        Some(revision)
    }
}

impl SharedState for InMemory {
    fn get<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, Option<Entry>> {
        let entry = self.records().space(space).get(key).cloned();
        Box::pin(async move { Ok(entry) })
    }

    fn create<'a>(&'a self, space: Space, key: &'a str, value: Bytes) -> StateFuture<'a, Option<u64>> {
        let written = self.write(space, key, value, None);
        Box::pin(async move { Ok(written) })
    }

    fn update<'a>(
        &'a self,
        space: Space,
        key: &'a str,
        value: Bytes,
        revision: u64,
    ) -> StateFuture<'a, Option<u64>> {
        let written = self.write(space, key, value, Some(revision));
        Box::pin(async move { Ok(written) })
    }

    fn delete<'a>(&'a self, space: Space, key: &'a str) -> StateFuture<'a, ()> {
        self.records().space(space).remove(key);
        Box::pin(async { Ok(()) })
    }

    fn publish(&self, _message: Bytes) -> StateFuture<'_, ()> {
        // No other replica to tell.
        Box::pin(async { Ok::<(), StateError>(()) })
    }

    fn events(&self) -> BoxStream<'static, Event> {
        Box::pin(futures_util::stream::pending())
    }

    fn is_shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn compare_and_set_refuses_a_stale_revision() {
        let state = InMemory::new();
        let first = state
            .create(Space::Server, "k", Bytes::from_static(b"1"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            state
                .create(Space::Server, "k", Bytes::from_static(b"x"))
                .await
                .unwrap(),
            None
        );
        let second = state
            .update(Space::Server, "k", Bytes::from_static(b"2"), first)
            .await
            .unwrap();
        assert!(second.is_some());
        assert_eq!(
            state
                .update(Space::Server, "k", Bytes::from_static(b"3"), first)
                .await
                .unwrap(),
            None
        );
        assert_eq!(state.get(Space::Server, "k").await.unwrap().unwrap().value, "2");
        assert_eq!(
            state.get(Space::Tasks, "k").await.unwrap(),
            None,
            "spaces are apart"
        );
        state.delete(Space::Server, "k").await.unwrap();
        assert_eq!(state.get(Space::Server, "k").await.unwrap(), None);
    }

    #[tokio::test]
    async fn modify_retries_until_no_write_comes_between() {
        let state = InMemory::new();
        let (value, wrote) = super::super::modify(&state, Space::Server, "n", |current| {
            let n: u64 = current.map_or(0, |b| std::str::from_utf8(b).unwrap().parse().unwrap());
            Some(Bytes::from((n + 1).to_string()))
        })
        .await
        .unwrap();
        assert_eq!((value.unwrap(), wrote), (Bytes::from("1"), true));
        let (value, wrote) = super::super::modify(&state, Space::Server, "n", |_| None)
            .await
            .unwrap();
        assert_eq!((value.unwrap(), wrote), (Bytes::from("1"), false));
    }
}
