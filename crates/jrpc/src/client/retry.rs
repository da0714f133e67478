//! Retries with exponential backoff and jitter: for HTTP requests that are
//! safe to repeat, and for reconnecting a dropped connection.

use std::time::Duration;

/// When and how to retry a request that failed in a way that is safe to
/// retry: the connection could not be made, or the server answered `429`
/// or `503`. Off by default, since a retried call may run twice if the
/// server did receive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Retries after the first attempt (0: never retry).
    pub attempts: u32,
    /// The first wait; each retry doubles it, with random jitter of ±50%.
    pub base: Duration,
    /// The longest wait (a server's `Retry-After` is honoured up to this).
    pub max: Duration,
}

impl Retry {
    /// No retries.
    pub const NEVER: Retry = Retry {
        attempts: 0,
        base: Duration::from_millis(100),
        max: Duration::from_secs(5),
    };

    /// Up to `attempts` retries, starting at 100 ms, at most 5 s apart.
    pub fn attempts(attempts: u32) -> Retry {
        Retry {
            attempts,
            ..Retry::NEVER
        }
    }

    pub(crate) fn wait(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max);
        }
        let exp = self.base.saturating_mul(1u32 << attempt.min(16)).min(self.max);
        // Jitter from a randomly keyed hash: spreads clients apart.
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(attempt);
        let factor = 0.5 + (hasher.finish() % 1000) as f64 / 1000.0;
        Duration::from_secs_f64((exp.as_secs_f64() * factor).min(self.max.as_secs_f64()))
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::NEVER
    }
}
