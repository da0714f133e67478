//! What a call comes to: its outcome, the result decoded, and whether its
//! request went out.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::error::CallError;

/// Whether a call's request may have reached the other side, as the
/// transport below saw it. A retry layer puts one in each attempt's
/// [extensions](super::Outgoing::extensions_mut) and reads it after a failure: a
/// request that provably never left is safe to send again, whatever the
/// method. Until a transport says otherwise, a request may have been sent.
///
/// A transport of your own (below a [`RetryPolicy`](crate::client::RetryPolicy))
/// calls [`mark_unsent`](Self::mark_unsent) when it fails before writing
/// anything, and [`mark_sent`](Self::mark_sent) once it has written.
#[derive(Clone, Debug, Default)]
pub struct Delivery(Arc<std::sync::atomic::AtomicU8>);

impl Delivery {
    const UNSENT: u8 = 1;
    const SENT: u8 = 2;

    /// The request went out (or may have).
    pub fn mark_sent(&self) {
        self.0.store(Self::SENT, std::sync::atomic::Ordering::Relaxed);
    }

    /// The request never left: nothing was written.
    pub fn mark_unsent(&self) {
        self.0.store(Self::UNSENT, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the request provably never left.
    pub fn was_unsent(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) == Self::UNSENT
    }
}

/// What a pending call is waiting for.
pub(crate) type Outcome = Result<Box<RawValue>, CallError>;

/// Decodes a raw result into the type asked for.
pub(crate) fn decode<R: DeserializeOwned>(raw: &RawValue) -> Result<R, CallError> {
    serde_json::from_str(raw.get()).map_err(|e| CallError::Decode(Arc::new(e)))
}
