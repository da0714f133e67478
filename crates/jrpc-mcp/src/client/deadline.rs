//! The time a call may take, across all of its attempts: a token refused
//! and renewed, a request sent again. Time the user spends logging in is
//! not the server's, so it is given back.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use jrpc::CallError;
use tokio::sync::Notify;
use tokio::time::Instant;

/// When a call must be over.
#[derive(Debug)]
pub(crate) struct Deadline {
    limit: Duration,
    state: Mutex<State>,
    /// Told when a pause ends.
    resumed: Notify,
}

#[derive(Debug)]
struct State {
    at: Instant,
    /// Pauses under way: while there is one the deadline does not pass.
    paused: usize,
}

impl Deadline {
    /// `limit` from now.
    pub(crate) fn after(limit: Duration) -> Self {
        Deadline {
            limit,
            state: Mutex::new(State {
                at: later(Instant::now(), limit),
                paused: 0,
            }),
            resumed: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds the deadline while something that may not be the server's
    /// time happens (renewing a token: a login waits for the user). Its
    /// time counts unless it is [given back](Pause::give_back).
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn pause(&self) -> Pause<'_> {
        self.state().paused += 1;
        Pause {
            deadline: self,
            started: Instant::now(),
            give_back: false,
        }
    }

    /// Runs `work` until it ends or the deadline passes: then
    /// [`CallError::Timeout`], and `work` is dropped (over HTTP, its
    /// request's stream is closed: the server's signal to cancel it).
    ///
    /// `work` is pinned by the caller: taken by value, it would be held
    /// twice in this future (as the argument, and pinned), which doubled
    /// the size of every call's future.
    pub(crate) async fn run<T, F>(&self, mut work: Pin<&mut F>) -> Result<T, CallError>
    where
        F: Future<Output = Result<T, CallError>> + ?Sized,
    {
        loop {
            // Listening before the state is read: a pause that ends in
            // between is not missed.
            let resumed = self.resumed.notified();
            tokio::pin!(resumed);
            resumed.as_mut().enable();
            let (at, paused) = {
                let state = self.state();
                (state.at, state.paused > 0)
            };
            let passes = async {
                match paused {
                    true => std::future::pending().await,
                    false => tokio::time::sleep_until(at).await,
                }
            };
            tokio::select! {
                biased;
                outcome = work.as_mut() => return outcome,
                () = resumed => {}
                () = passes => {
                    let state = self.state();
                    if state.paused == 0 && state.at <= Instant::now() {
                        return Err(CallError::Timeout(self.limit));
                    }
                }
            }
        }
    }
}

/// `by` after `at`, or as late as can be said (a timeout of
/// `Duration::MAX` means "never").
fn later(at: Instant, by: Duration) -> Instant {
    at.checked_add(by)
        .unwrap_or_else(|| at + Duration::from_secs(100 * 365 * 24 * 3600))
}

/// A pause of a [`Deadline`]; it ends when dropped.
pub(crate) struct Pause<'a> {
    deadline: &'a Deadline,
    started: Instant,
    give_back: bool,
}

impl Pause<'_> {
    /// Ends the pause, its time not counted: the deadline moves by it.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    pub(crate) fn give_back(mut self) {
        self.give_back = true;
    }
}

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        {
            let mut state = self.deadline.state();
            state.paused -= 1;
            if self.give_back {
                state.at = later(state.at, self.started.elapsed());
            }
        }
        self.deadline.resumed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_past_the_deadline_times_out() {
        let deadline = Deadline::after(Duration::from_millis(300));
        let slow = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok(())
        };
        let started = Instant::now();
        let outcome = deadline.run(std::pin::pin!(slow)).await;
        assert!(matches!(outcome, Err(CallError::Timeout(limit)) if limit == Duration::from_millis(300)));
        assert_eq!(started.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn time_given_back_is_not_counted() {
        let deadline = Deadline::after(Duration::from_millis(300));
        let work = async {
            // 100 ms of the server's, a login of 5 s, then 150 ms more.
            tokio::time::sleep(Duration::from_millis(100)).await;
            let login = deadline.pause();
            tokio::time::sleep(Duration::from_secs(5)).await;
            login.give_back();
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok(7)
        };
        assert_eq!(deadline.run(std::pin::pin!(work)).await.unwrap(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_not_given_back_counts_once_it_ends() {
        let deadline = Deadline::after(Duration::from_millis(300));
        let work = async {
            // A refresh of 1 s: the deadline passed meanwhile.
            let refresh = deadline.pause();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(refresh);
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(())
        };
        let started = Instant::now();
        assert!(matches!(
            deadline.run(std::pin::pin!(work)).await,
            Err(CallError::Timeout(_))
        ));
        assert_eq!(started.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_of_duration_max_never_passes() {
        let deadline = Deadline::after(Duration::MAX);
        let slow = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(1)
        };
        assert_eq!(deadline.run(std::pin::pin!(slow)).await.unwrap(), 1);
        let pause = deadline.pause();
        pause.give_back();
    }

    #[tokio::test(start_paused = true)]
    async fn work_within_the_deadline_ends_as_it_ends() {
        let deadline = Deadline::after(Duration::from_secs(1));
        let failing = async { Err::<(), _>(CallError::Closed("gone".into())) };
        assert!(matches!(
            deadline.run(std::pin::pin!(failing)).await,
            Err(CallError::Closed(_))
        ));
    }
}
