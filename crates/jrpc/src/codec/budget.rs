//! A server-wide bound on bytes held for frames and bodies that have not
//! arrived whole, so that many slow clients, each with a large unfinished
//! frame, cannot exhaust memory together (each alone stays under the frame
//! limit).

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use tokio_util::codec::Decoder;

use super::inbound::Inbound;

/// Bytes buffered in unfinished frames (or HTTP request bodies), counted
/// across every connection that shares this budget. Cloning shares it.
///
/// A [`Server`](crate::server::Server) gives one to its TCP and Unix socket
/// connections, an [`HttpServer`](crate::server::http::HttpServer) one to
/// its request bodies; both default to [`DEFAULT`](Self::DEFAULT).
///
/// ```
/// use jrpc::codec::BufferBudget;
///
/// let budget = BufferBudget::new(1024);
/// let mut charge = budget.charge();
/// assert!(charge.hold(1000).is_ok());
/// assert!(budget.charge().hold(100).is_err()); // 1100 > 1024
/// charge.hold(0).unwrap();
/// assert_eq!(budget.in_use(), 0);
/// ```
#[derive(Clone)]
pub struct BufferBudget {
    shared: Arc<Shared>,
}

struct Shared {
    limit: usize,
    used: AtomicUsize,
}

impl BufferBudget {
    /// The default budget: 256 MiB.
    pub const DEFAULT: usize = 256 * 1024 * 1024;

    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        BufferBudget {
            shared: Arc::new(Shared {
                limit,
                used: AtomicUsize::new(0),
            }),
        }
    }

    /// The most bytes that may be held at once.
    pub fn limit(&self) -> usize {
        self.shared.limit
    }

    /// The bytes held now.
    pub fn in_use(&self) -> usize {
        self.shared.used.load(Ordering::Acquire)
    }

    /// A new holder of bytes from this budget, holding none yet.
    pub fn charge(&self) -> Charge {
        Charge {
            budget: self.clone(),
            held: 0,
        }
    }
}

impl Default for BufferBudget {
    fn default() -> Self {
        Self::new(Self::DEFAULT)
    }
}

/// A new budget of this many bytes.
impl From<usize> for BufferBudget {
    fn from(limit: usize) -> Self {
        Self::new(limit)
    }
}

impl fmt::Debug for BufferBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferBudget")
            .field("limit", &self.limit())
            .field("in_use", &self.in_use())
            .finish()
    }
}

/// What one frame or body holds of a [`BufferBudget`]; given back when
/// dropped.
#[derive(Debug)]
pub struct Charge {
    budget: BufferBudget,
    held: usize,
}

/// The budget is spent: holding more would exceed [`BufferBudget::limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the buffer budget of {limit} bytes is spent")]
pub struct OverBudget {
    /// The budget's limit.
    pub limit: usize,
}

impl Charge {
    /// Holds `bytes` in all (more or fewer than before). When that would
    /// exceed the budget, nothing is held and the error says so.
    pub fn hold(&mut self, bytes: usize) -> Result<(), OverBudget> {
        let used = &self.budget.shared.used;
        if bytes <= self.held {
            used.fetch_sub(self.held - bytes, Ordering::AcqRel);
            self.held = bytes;
            return Ok(());
        }
        let more = bytes - self.held;
        let before = used.fetch_add(more, Ordering::AcqRel);
        self.held = bytes;
        if before + more > self.budget.shared.limit {
            self.release();
            return Err(OverBudget {
                limit: self.budget.shared.limit,
            });
        }
        Ok(())
    }

    /// The bytes held now.
    pub fn held(&self) -> usize {
        self.held
    }

    fn release(&mut self) {
        if self.held > 0 {
            self.budget.shared.used.fetch_sub(self.held, Ordering::AcqRel);
            self.held = 0;
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.release();
    }
}

/// A frame decoder whose unfinished frame is charged to a [`BufferBudget`].
///
/// The first [`FREE_BYTES`](Self::FREE_BYTES) of a connection's buffer are
/// not charged: ordinary small frames never touch the shared counter, and
/// the number of connections bounds what that leaves uncounted. When the
/// budget is spent, the buffer is dropped, [`Inbound::OverBudget`] is
/// reported once, and everything after it is dropped too: the stream cannot
/// be resynchronized, so the connection should answer and close.
#[derive(Debug)]
pub struct Budgeted<D> {
    inner: D,
    charge: Charge,
    spent: bool,
}

impl<D> Budgeted<D> {
    /// Bytes of each connection's buffer that are not charged: 64 KiB.
    pub const FREE_BYTES: usize = 64 * 1024;

    /// `decoder`, charging its unfinished frame to `budget`.
    pub fn new(decoder: D, budget: &BufferBudget) -> Self {
        Budgeted {
            inner: decoder,
            charge: budget.charge(),
            spent: false,
        }
    }

    /// The decoder inside.
    pub fn get_ref(&self) -> &D {
        &self.inner
    }

    /// Charges what `buf` holds beyond the free allowance; on failure drops
    /// it and reports.
    fn account(&mut self, buf: &mut BytesMut) -> Option<Inbound> {
        let beyond = buf.len().saturating_sub(Self::FREE_BYTES);
        if beyond == self.charge.held() {
            return None;
        }
        match self.charge.hold(beyond) {
            Ok(()) => None,
            Err(OverBudget { limit }) => {
                *buf = BytesMut::new();
                self.spent = true;
                Some(Inbound::OverBudget { limit })
            }
        }
    }
}

impl<D: Decoder<Item = Inbound, Error = io::Error>> Decoder for Budgeted<D> {
    type Item = Inbound;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        if self.spent {
            buf.clear();
            return Ok(None);
        }
        match self.inner.decode(buf)? {
            // Complete frames may still follow in `buf`; the buffer is
            // charged once it holds only an unfinished one.
            Some(item) => Ok(Some(item)),
            None => Ok(self.account(buf)),
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Inbound>, io::Error> {
        if self.spent {
            buf.clear();
            return Ok(None);
        }
        let item = self.inner.decode_eof(buf)?;
        if item.is_none() {
            self.charge.release();
        }
        Ok(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{frame, NdjsonCodec};

    fn feed(decoder: &mut Budgeted<NdjsonCodec>, buf: &mut BytesMut, bytes: &[u8]) -> Vec<Inbound> {
        buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(item) = decoder.decode(buf).unwrap() {
            out.push(item);
        }
        out
    }

    #[test]
    fn charge_grows_shrinks_and_refuses_past_the_limit() {
        let budget = BufferBudget::new(100);
        let mut a = budget.charge();
        a.hold(60).unwrap();
        a.hold(80).unwrap();
        assert_eq!(budget.in_use(), 80);
        let mut b = budget.charge();
        assert_eq!(b.hold(30), Err(OverBudget { limit: 100 }));
        assert_eq!(b.held(), 0);
        assert_eq!(budget.in_use(), 80);
        a.hold(10).unwrap();
        b.hold(90).unwrap();
        drop(a);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn small_frames_never_touch_the_budget() {
        let budget = BufferBudget::new(0);
        let mut decoder = Budgeted::new(NdjsonCodec::new(1 << 20), &budget);
        let mut buf = BytesMut::new();
        assert_eq!(
            feed(&mut decoder, &mut buf, b"{\"a\":1}\n{\"b\""),
            vec![frame("{\"a\":1}")]
        );
        assert_eq!(feed(&mut decoder, &mut buf, b":2}\n"), vec![frame("{\"b\":2}")]);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn unfinished_frames_are_charged_until_they_end() {
        let budget = BufferBudget::new(1 << 20);
        let free = Budgeted::<NdjsonCodec>::FREE_BYTES;
        let mut decoder = Budgeted::new(NdjsonCodec::new(1 << 20), &budget);
        let mut buf = BytesMut::new();
        let big = vec![b' '; free + 500];
        assert!(feed(&mut decoder, &mut buf, &big).is_empty());
        assert_eq!(budget.in_use(), 500);
        assert!(feed(&mut decoder, &mut buf, b"1\n").len() == 1);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn a_spent_budget_is_reported_once_and_the_rest_dropped() {
        let budget = BufferBudget::new(1000);
        let free = Budgeted::<NdjsonCodec>::FREE_BYTES;
        let mut other = budget.charge();
        other.hold(900).unwrap();
        let mut decoder = Budgeted::new(NdjsonCodec::new(1 << 20), &budget);
        let mut buf = BytesMut::new();
        let big = vec![b' '; free + 200];
        assert_eq!(
            feed(&mut decoder, &mut buf, &big),
            vec![Inbound::OverBudget { limit: 1000 }]
        );
        assert!(buf.is_empty());
        assert_eq!(budget.in_use(), 900);
        assert!(feed(&mut decoder, &mut buf, b"1\n2\n").is_empty());
        assert_eq!(decoder.decode_eof(&mut buf).unwrap(), None);
    }

    #[test]
    fn dropping_the_decoder_gives_its_bytes_back() {
        let budget = BufferBudget::new(1 << 20);
        let mut decoder = Budgeted::new(NdjsonCodec::new(1 << 20), &budget);
        let mut buf = BytesMut::new();
        feed(
            &mut decoder,
            &mut buf,
            &vec![b'x'; Budgeted::<NdjsonCodec>::FREE_BYTES + 7],
        );
        assert_eq!(budget.in_use(), 7);
        drop(decoder);
        assert_eq!(budget.in_use(), 0);
    }
}
