//! The call stack: the handlers inside every layer of middleware.

use std::sync::Mutex;
use std::task::{Context, Poll};

use tower::{Service, ServiceExt};

use crate::middleware::{BoxCallService, Call, RawResult};

/// The call stack (the handlers inside every layer), and one instance of
/// it that calls share.
///
/// A call needs a service of its own only while it waits for the stack to
/// be ready. Cloning the stack for every call cloned every layer (a boxed
/// service each, plus whatever the layer holds: the call log's redaction
/// list, say): six allocations a call with the call log and metrics on.
/// Most stacks are ready at once, so a call starts on the shared instance
/// when it can, and clones only when that instance is busy or not ready.
pub(super) struct Stack {
    pristine: BoxCallService,
    shared: Mutex<BoxCallService>,
}

impl Stack {
    pub(super) fn new(stack: BoxCallService) -> Self {
        Stack {
            shared: Mutex::new(stack.clone()),
            pristine: stack,
        }
    }

    /// Serves `call` through the stack.
    pub(super) async fn call(&self, call: Call) -> Result<RawResult, crate::Error> {
        match self.start(call) {
            Ok(started) => started.await,
            Err(call) => self.pristine.clone().oneshot(call).await,
        }
    }

    /// Starts `call` on the shared instance, if it is free and ready now;
    /// gives the call back otherwise.
    fn start(&self, call: Call) -> Result<<BoxCallService as Service<Call>>::Future, Call> {
        let Ok(mut shared) = self.shared.try_lock() else {
            return Err(call);
        };
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        match shared.poll_ready(&mut cx) {
            Poll::Ready(Ok(())) => Ok(shared.call(call)),
            // Not ready (or failing): whatever the instance holds while it
            // waits (a place in a semaphore's queue, say) would be held for
            // nobody, so it is replaced; the call gets a clone of its own,
            // which waits, or fails, as it would have.
            Poll::Ready(Err(_)) | Poll::Pending => {
                *shared = self.pristine.clone();
                Err(call)
            }
        }
    }
}

impl Clone for Stack {
    fn clone(&self) -> Self {
        Stack::new(self.pristine.clone())
    }
}
