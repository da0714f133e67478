//! What a decoder yields.

use bytes::Bytes;

/// How a [`Inbound::Malformed`] reason starts when the other side uses the
/// other framing (newline-delimited against `Content-Length`).
pub(crate) const FRAMING_MISMATCH: &str = "framing mismatch";

/// What a decoder yields: a frame, or a report of bad input it skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Inbound {
    /// One frame, without its framing.
    Frame(Bytes),
    /// A frame longer than the limit. It is reported as soon as that is known
    /// and then skipped, never buffered; the stream goes on.
    Oversized {
        /// The limit the frame exceeded.
        limit: usize,
    },
    /// Framing that could not be understood (bad headers). The decoder has
    /// skipped to where the next frame can start.
    Malformed(String),
    /// The bytes held for unfinished frames across connections exceed their
    /// shared [`BufferBudget`](super::BufferBudget): the unfinished frame was dropped, and the
    /// stream cannot go on (answer `-32007` and close).
    OverBudget {
        /// The budget's limit.
        limit: usize,
    },
    /// Calls this side sent that the transport could not deliver (a
    /// broker's "no responders"): each waiting call of these ids fails at
    /// once with a [`CallError::Transport`](crate::CallError::Transport)
    /// holding an [`Undelivered`](crate::transport::Undelivered).
    Undelivered {
        /// The ids of the calls, as sent.
        ids: Box<[crate::Id]>,
        /// Why, for the error (`no responders: nothing subscribes to …`).
        // Boxed slices, not a `Vec` and a `String`: every frame read is an
        // `Inbound`, which this variant must not make larger.
        reason: Box<str>,
    },
    /// Calls this side sent whose replies can no longer come: the
    /// transport lost its way back while they were out (a broker node that
    /// went away; the client reconnects elsewhere). Each waiting call of
    /// these ids fails at once with
    /// [`CallError::Closed`](crate::CallError::Closed): it may have run.
    Lost {
        /// The ids of the calls, as sent.
        ids: Box<[crate::Id]>,
        /// Why, for the error.
        reason: Box<str>,
    },
}
