//! The one batch engine, for every transport: entries answered on the spot
//! go straight into the reply; the others are served concurrently, at most
//! the router's [`batch_concurrency`](crate::Router::batch_concurrency) at
//! a time, and their replies are put in at their entries' places, so the
//! batch reply is in request order whatever order the entries finish in.

use std::future::Future;

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, StreamExt};

/// A batch being answered: the replies written so far and the entries
/// still to serve, each `T` (a borrowed item, or one copied out of its
/// frame for a task of its own).
pub(crate) struct Batch<T> {
    /// `[`, then every reply written so far, each followed by a comma (the
    /// last comma becomes the `]`).
    out: Vec<u8>,
    /// Entries to await, with where in `out` their reply goes (`None`: no
    /// reply is due, as for a notification).
    later: Vec<(Option<usize>, T)>,
}

impl<T> Batch<T> {
    /// Room for a batch of `entries`; a small reply is about 40 bytes.
    pub(crate) fn new(entries: usize) -> Self {
        let mut out = Vec::with_capacity(entries.saturating_mul(48).saturating_add(2));
        out.push(b'[');
        Batch {
            out,
            later: Vec::new(),
        }
    }

    /// An entry answered on the spot: `write` appends its reply to the
    /// batch's, or nothing when none is due.
    pub(crate) fn answer<R>(&mut self, write: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let start = self.out.len();
        let result = write(&mut self.out);
        if self.out.len() > start {
            self.out.push(b',');
        }
        result
    }

    /// An entry to serve later; `replies` says whether its reply has a
    /// place (a request's does, even if it ends up empty).
    pub(crate) fn later(&mut self, replies: bool, entry: T) {
        let place = replies.then_some(self.out.len());
        self.later.push((place, entry));
    }

    /// Whether every entry has been answered on the spot.
    pub(crate) fn is_settled(&self) -> bool {
        self.later.is_empty()
    }

    /// The batch reply when every entry was answered on the spot; `None`
    /// when none is due (a batch of notifications gets no reply at all).
    pub(crate) fn settled(self) -> Option<Bytes> {
        debug_assert!(self.later.is_empty());
        close(self.out)
    }

    /// Serves the entries left with `serve`, at most `concurrency` at a
    /// time, and gives the whole batch reply.
    ///
    /// Each entry is polled once as it starts: one that finishes at once
    /// (a plain handler behind quick middleware) is done without joining
    /// those still running.
    pub(crate) async fn run<F, Fut>(self, concurrency: usize, mut serve: F) -> Option<Bytes>
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = Vec<u8>>,
    {
        let Batch { out, later } = self;
        let bound = concurrency.max(1);
        let mut replies = Vec::with_capacity(later.len());
        let mut running = FuturesUnordered::new();
        // Entries are numbered in order: several may share a place (nothing
        // answered on the spot between them), and their order decides.
        for (seq, (place, entry)) in later.into_iter().enumerate() {
            if running.len() >= bound {
                if let Some(done) = running.next().await {
                    replies.push(done);
                }
            }
            let serving = serve(entry);
            let mut serving = Box::pin(async move { (seq, place, serving.await) });
            match (&mut serving).now_or_never() {
                Some(done) => replies.push(done),
                None => running.push(serving),
            }
        }
        while let Some(done) = running.next().await {
            replies.push(done);
        }
        close(splice(out, replies))
    }
}

/// Puts each reply into `out` at its place, followed by its comma; empty
/// replies (a cancelled entry the protocol does not answer) take no place
/// at all.
fn splice(out: Vec<u8>, mut replies: Vec<(usize, Option<usize>, Vec<u8>)>) -> Vec<u8> {
    replies.retain(|(_, place, reply)| place.is_some() && !reply.is_empty());
    if replies.is_empty() {
        return out;
    }
    // Entries finish in any order; in entry order, places ascend.
    replies.sort_unstable_by_key(|(seq, _, _)| *seq);
    let extra: usize = replies.iter().map(|(_, _, r)| r.len() + 1).sum();
    let mut joined = Vec::with_capacity(out.len() + extra);
    let mut copied = 0;
    for (_, place, reply) in replies {
        let at = place.unwrap_or(copied);
        joined.extend_from_slice(&out[copied..at]);
        joined.extend_from_slice(&reply);
        joined.push(b',');
        copied = at;
    }
    joined.extend_from_slice(&out[copied..]);
    joined
}

/// Turns `[a,b,` into `[a,b]`; `None` for `[` (no reply at all).
fn close(mut out: Vec<u8>) -> Option<Bytes> {
    if out.len() <= 1 {
        return None;
    }
    if let Some(last) = out.last_mut() {
        *last = b']';
    }
    Some(out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(batch: Batch<&'static str>, concurrency: usize) -> Option<String> {
        let reply =
            FutureExt::now_or_never(batch.run(concurrency, |entry| async move { entry.as_bytes().to_vec() }))
                .expect("every entry is ready at once");
        reply.map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    /// An entry's reply, and whether it is served later (with a place or
    /// without) rather than on the spot.
    type Case = (&'static str, Option<bool>);

    #[test]
    fn replies_come_in_entry_order_and_empty_ones_take_no_place() {
        // (entry answered on the spot, or later with or without a place)
        let cases: &[(&[Case], Option<&str>)] = &[
            (&[], None),
            (&[("a", None)], Some("[a]")),
            (&[("", None)], None),
            (&[("a", None), ("b", Some(true)), ("c", None)], Some("[a,b,c]")),
            (&[("b", Some(true)), ("a", None)], Some("[b,a]")),
            (&[("x", Some(false)), ("a", None)], Some("[a]")),
            (&[("", Some(true)), ("a", None)], Some("[a]")),
            (&[("a", None), ("", Some(true))], Some("[a]")),
            (&[("", Some(true)), ("", Some(true))], None),
            (
                &[("a", Some(true)), ("b", Some(true)), ("c", Some(true))],
                Some("[a,b,c]"),
            ),
            (
                &[
                    ("a", Some(true)),
                    ("b", Some(true)),
                    ("c", None),
                    ("d", Some(true)),
                    ("e", Some(true)),
                ],
                Some("[a,b,c,d,e]"),
            ),
        ];
        for (entries, expected) in cases {
            for concurrency in [1, 2, 32] {
                let mut batch = Batch::new(entries.len());
                for (reply, later) in entries.iter() {
                    match later {
                        None => batch.answer(|out| out.extend_from_slice(reply.as_bytes())),
                        Some(place) => batch.later(*place, *reply),
                    }
                }
                let got = if batch.is_settled() {
                    batch.settled().map(|b| String::from_utf8(b.to_vec()).unwrap())
                } else {
                    run(batch, concurrency)
                };
                assert_eq!(got.as_deref(), *expected, "{entries:?} at {concurrency}");
            }
        }
    }
}
