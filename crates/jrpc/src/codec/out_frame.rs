//! What a connection writes: a frame, and what it carries.
//!
//! The side that writes a frame knows what it is (its own request, its
//! reply to the peer's, a notification). It says so beside the bytes, so a
//! transport that routes by kind — a message broker publishes calls to the
//! servers' address and drops replies that have nowhere to go, MCP's HTTP
//! endpoint ends a request's stream with its reply — need not parse the
//! frame again.

use bytes::Bytes;

use crate::message::{parse_frame, Frame, Id, Incoming, Limits};

/// One outgoing frame and its [`OutKind`].
///
/// A transport of plain bytes ignores the kind: [`Connection::new`]
/// takes a sink of [`Bytes`] and drops it. A frame from bytes alone is of
/// kind [`OutKind::Unknown`].
///
/// [`Connection::new`]: crate::transport::Connection::new
///
/// ```
/// use jrpc::transport::{OutFrame, OutKind};
/// use jrpc::Id;
///
/// let frame = OutFrame::from(bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":3,"result":1}"#));
/// assert_eq!(frame.kind, OutKind::Unknown);
/// // Read from its bytes when nobody said what it is:
/// assert_eq!(frame.read_kind(), OutKind::Reply(Id::from(3)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutFrame {
    /// The frame, without framing.
    pub bytes: Bytes,
    /// What it carries.
    pub kind: OutKind,
}

/// What an outgoing frame carries.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OutKind {
    /// This side's reply to a request of the peer's, with the request's id
    /// (`null` for the error reply to a frame that could not be read).
    Reply(Id),
    /// This side's replies to a batch of the peer's.
    Replies,
    /// A request of this side's, with its id.
    Request(Id),
    /// A notification of this side's.
    Notification,
    /// A batch of this side's calls: the ids of its requests, in order
    /// (none when every entry is a notification).
    Calls(Vec<Id>),
    /// Bytes written by someone who did not say what they are (a raw
    /// frame, a transport's own): [`OutFrame::read_kind`] reads them.
    Unknown,
}

impl OutKind {
    /// Whether the frame answers the peer (replies only, no call).
    pub fn is_reply(&self) -> bool {
        matches!(self, OutKind::Reply(_) | OutKind::Replies)
    }

    /// The ids of the requests in the frame, whose replies this side waits
    /// for; `None` for a frame of replies or of unknown bytes.
    pub fn request_ids(&self) -> Option<&[Id]> {
        match self {
            OutKind::Request(id) => Some(std::slice::from_ref(id)),
            OutKind::Calls(ids) => Some(ids),
            OutKind::Notification => Some(&[]),
            OutKind::Reply(_) | OutKind::Replies | OutKind::Unknown => None,
        }
    }
}

impl OutFrame {
    /// A frame and what it carries.
    pub fn new(bytes: impl Into<Bytes>, kind: OutKind) -> Self {
        OutFrame {
            bytes: bytes.into(),
            kind,
        }
    }

    /// The bytes, for a sink that carries only them.
    #[inline]
    pub(crate) fn into_bytes(self) -> Bytes {
        let OutFrame { bytes, kind } = self;
        // A byte sink's frames are of no kind (the engine does not work
        // them out for it): nothing to drop, and no call to the kind's drop
        // glue per frame.
        if matches!(kind, OutKind::Unknown) {
            std::mem::forget(kind);
        }
        bytes
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The kind, read from the bytes when it is [`OutKind::Unknown`]:
    /// replies only, one call or a batch of calls (a batch mixing replies
    /// and calls counts as calls). Bytes that are not valid JSON-RPC
    /// messages, or that hold an invalid entry, stay `Unknown`: the peer
    /// answers them with an error.
    pub fn read_kind(&self) -> OutKind {
        if self.kind != OutKind::Unknown {
            return self.kind.clone();
        }
        let limits = Limits {
            max_frame_len: usize::MAX,
            max_batch_len: usize::MAX,
            ..Limits::default()
        };
        match parse_frame(&self.bytes, &limits) {
            Ok(Frame::Single(Incoming::Response(response))) => OutKind::Reply(response.id),
            Ok(Frame::Single(Incoming::Request(request))) => OutKind::Request(request.id),
            Ok(Frame::Single(Incoming::Notification(_))) => OutKind::Notification,
            Ok(Frame::Batch(items)) if !items.is_empty() => {
                let mut ids = Vec::new();
                let mut calls = false;
                for item in items {
                    match item {
                        Incoming::Request(request) => {
                            calls = true;
                            ids.push(request.id);
                        }
                        Incoming::Notification(_) => calls = true,
                        Incoming::Response(_) => {}
                        Incoming::Invalid(_) => return OutKind::Unknown,
                    }
                }
                if calls {
                    OutKind::Calls(ids)
                } else {
                    OutKind::Replies
                }
            }
            _ => OutKind::Unknown,
        }
    }
}

impl From<Bytes> for OutFrame {
    fn from(bytes: Bytes) -> Self {
        OutFrame {
            bytes,
            kind: OutKind::Unknown,
        }
    }
}

impl From<Vec<u8>> for OutFrame {
    fn from(bytes: Vec<u8>) -> Self {
        Bytes::from(bytes).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bytes_are_read_into_their_kind() {
        let cases: &[(&str, OutKind)] = &[
            (
                r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
                OutKind::Reply(Id::from(1)),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
                OutKind::Reply(Id::NULL),
            ),
            (
                r#"[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":2,"result":2}]"#,
                OutKind::Replies,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"m","id":"a"}"#,
                OutKind::Request(Id::from("a")),
            ),
            (r#"{"jsonrpc":"2.0","method":"n"}"#, OutKind::Notification),
            (
                r#"[{"jsonrpc":"2.0","method":"m","id":1},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"m","id":2}]"#,
                OutKind::Calls(vec![Id::from(1), Id::from(2)]),
            ),
            (r#"[{"jsonrpc":"2.0","method":"n"}]"#, OutKind::Calls(Vec::new())),
            (
                r#"[{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","method":"m","id":2}]"#,
                OutKind::Calls(vec![Id::from(2)]),
            ),
            (r#"[]"#, OutKind::Unknown),
            (r#"[1]"#, OutKind::Unknown),
            (r#"[{"jsonrpc":"2.0","method":"m","id":1},2]"#, OutKind::Unknown),
            (r#"{"jsonrpc":"2.0","method":1}"#, OutKind::Unknown),
            ("not json", OutKind::Unknown),
        ];
        for (text, kind) in cases {
            let frame = OutFrame::from(Bytes::copy_from_slice(text.as_bytes()));
            assert_eq!(&frame.read_kind(), kind, "{text}");
        }
    }

    #[test]
    fn a_known_kind_is_not_read_again() {
        let frame = OutFrame::new(Bytes::from_static(b"not json"), OutKind::Notification);
        assert_eq!(frame.read_kind(), OutKind::Notification);
        assert!(OutKind::Replies.is_reply());
        assert!(!OutKind::Notification.is_reply());
        assert_eq!(
            OutKind::Request(Id::from(4)).request_ids(),
            Some(&[Id::from(4)][..])
        );
        assert_eq!(OutKind::Unknown.request_ids(), None);
    }
}
