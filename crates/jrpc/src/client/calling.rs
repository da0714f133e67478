//! What a client does with each call before it reaches its connection:
//! its layers, its retry policy, automatic batching.

use super::auto_batch::AutoBatch;
use super::retry::RetryPolicy;
use crate::caller::{erase_layer, OutgoingLayerFn};

/// What a client does with each call before it reaches the connection.
#[derive(Default)]
pub(super) struct Calling {
    /// Outgoing middleware, innermost first.
    pub(super) layers: Vec<OutgoingLayerFn>,
    /// Below the layers: which failed calls are tried again.
    pub(super) retry: Option<RetryPolicy>,
    pub(super) auto_batch: Option<AutoBatch>,
}

impl Calling {
    /// The layers calls go through, innermost first: the retry policy's,
    /// then the user's.
    pub(super) fn stack_layers(&self) -> Vec<OutgoingLayerFn> {
        let retry = self.retry.as_ref().map(|policy| erase_layer(policy.layer()));
        retry.into_iter().chain(self.layers.iter().cloned()).collect()
    }
}
