//! DPoP proof ids remembered by every replica (feature `oauth`): a proof
//! used at one replica is refused at the others, as the resource server
//! must refuse a replayed proof (RFC 9449 §11.1).

use std::sync::Arc;

use sha2::Digest as _;

use super::{SharedState, Space};

/// A [`ReplayCache`](jrpc::auth::ReplayCache) in the fleet's shared state:
/// each proof id is created once, by compare-and-set, in the space whose
/// records expire (the tasks' space, an hour after their last write; a
/// proof's window is a minute). Hand it to
/// [`Dpop::replay_cache`](jrpc::auth::Dpop::replay_cache).
#[derive(Debug, Clone)]
pub struct SharedReplayCache {
    state: Arc<dyn SharedState>,
}

impl SharedReplayCache {
    /// Proof ids kept in `state`.
    pub fn new(state: Arc<dyn SharedState>) -> Self {
        SharedReplayCache { state }
    }
}

impl jrpc::auth::ReplayCache for SharedReplayCache {
    fn first_use<'a>(&'a self, id: &'a str, until: u64) -> jrpc::auth::BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            // A key any store takes (letters, digits, `-`), of fixed length.
            let digest = sha2::Sha256::digest(id.as_bytes());
            let mut key = String::from("dpop-proof-");
            for byte in &digest[..20] {
                key.push_str(&format!("{byte:02x}"));
            }
            match self
                .state
                .create(Space::Tasks, &key, until.to_string().into())
                .await
            {
                Ok(Some(_)) => Ok(true),
                Ok(None) => Ok(false),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jrpc::auth::ReplayCache as _;

    #[tokio::test]
    async fn a_proof_id_is_accepted_once_across_replicas_of_one_state() {
        let state: Arc<dyn SharedState> = Arc::new(super::super::InMemory::new());
        let one = SharedReplayCache::new(Arc::clone(&state));
        let two = SharedReplayCache::new(state);
        assert_eq!(one.first_use("jkt:jti-1", 100).await, Ok(true));
        assert_eq!(
            two.first_use("jkt:jti-1", 100).await,
            Ok(false),
            "seen by the other replica"
        );
        assert_eq!(two.first_use("jkt:jti-2", 100).await, Ok(true));
    }
}
