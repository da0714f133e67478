//! `Router::handle` on arbitrary frames, for two routers with the same
//! methods: one plain (sync handlers answered inline) and one behind an
//! identity call middleware with a batch concurrency of 2 (every call goes
//! through the layered, concurrent path). Each reply is checked for shape,
//! against what `parse_frame` says the frame holds, against what each
//! method must answer, and against the other router's reply.

#![no_main]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use jrpc::message::{codes, parse_frame, Frame, Incoming, Limits};
use jrpc::middleware::{layer_fn, BoxCallService};
use jrpc::{Error, Id, Router};
use jrpc_fuzz::reference::{Members, RefId};
use jrpc_fuzz::reply::{self, Response, FRAME_ERRORS};
use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use serde_json::Value;

/// An application error code for `add` overflowing.
const OVERFLOW: i64 = -32050;
/// The error code `fail` always answers with.
const FAILED: i64 = -32051;

struct Served {
    router: Router,
    /// Runs of the `note` (sync) and `tick` (async) notification handlers.
    notes: Arc<AtomicUsize>,
    ticks: Arc<AtomicUsize>,
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    plain: Served,
    layered: Served,
}

fn served(layered: bool) -> Served {
    let notes = Arc::new(AtomicUsize::new(0));
    let ticks = Arc::new(AtomicUsize::new(0));
    let (n, t) = (Arc::clone(&notes), Arc::clone(&ticks));
    let router = Router::new()
        // Async, and yields once, so batch entries really interleave.
        .method("add", |(a, b): (i64, i64)| async move {
            tokio::task::yield_now().await;
            a.checked_add(b).ok_or_else(|| Error::new(OVERFLOW, "overflow"))
        })
        .sync_method("echo", |params: Value| Ok(params))
        .sync_method("fail", |_: Value| -> Result<(), Error> {
            Err(Error::new(FAILED, "failed"))
        })
        .sync_notification("note", move || {
            n.fetch_add(1, Ordering::Relaxed);
        })
        .notification("tick", move || {
            let t = Arc::clone(&t);
            async move {
                tokio::task::yield_now().await;
                t.fetch_add(1, Ordering::Relaxed);
            }
        });
    let router = if layered {
        router
            .layer(layer_fn(|inner: BoxCallService| inner))
            .batch_concurrency(2)
    } else {
        router
    };
    Served { router, notes, ticks }
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| Fixture {
        runtime: tokio::runtime::Builder::new_current_thread().build().unwrap(),
        plain: served(false),
        layered: served(true),
    })
}

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let plain = serve(fx, &fx.plain, data);
    let layered = serve(fx, &fx.layered, data);
    // Both paths give the same answers. (Messages are not compared: the
    // layered path passes even `Method not found` through the redaction of
    // secrets echoed from the params, the inline path does not.)
    match (&plain, &layered) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            let (a, b) = (reply::parse(a), reply::parse(b));
            let (a, b) = (a.responses(), b.responses());
            assert_eq!(a.len(), b.len());
            for (a, b) in a.iter().zip(b) {
                assert_eq!(a.id, b.id);
                match (&a.outcome, &b.outcome) {
                    (Ok(x), Ok(y)) => assert_eq!(x, y),
                    (Err(x), Err(y)) => assert_eq!(x.0, y.0, "error codes differ"),
                    _ => panic!("one router succeeded, the other failed: {a:?} / {b:?}"),
                }
            }
        }
        _ => panic!("only one router replied: {plain:?} / {layered:?}"),
    }
});

/// Serves `data` on one router and checks its reply; returns it.
fn serve(fx: &Fixture, served: &Served, data: &[u8]) -> Option<bytes::Bytes> {
    let (notes, ticks) = (
        served.notes.load(Ordering::Relaxed),
        served.ticks.load(Ordering::Relaxed),
    );
    let reply = fx.runtime.block_on(served.router.handle(data));
    let ran = (
        served.notes.load(Ordering::Relaxed) - notes,
        served.ticks.load(Ordering::Relaxed) - ticks,
    );
    check(data, reply.as_deref(), ran);
    reply
}

fn check(data: &[u8], reply: Option<&[u8]>, ran: (usize, usize)) {
    let text = String::from_utf8_lossy(data);
    let parsed = reply.map(reply::parse);

    // The spec's own cases, stated without the parser: an empty batch gets
    // one -32600 error; a lone valid notification gets nothing.
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        if value == Value::Array(vec![]) {
            let Some(reply::Reply::Single(r)) = &parsed else {
                panic!("[] must get one error object: {reply:?}")
            };
            assert_eq!((r.id, code_of(r)), ("null", Some(codes::INVALID_REQUEST)));
        }
        if is_plain_notification(data) {
            assert!(reply.is_none(), "a notification was answered: {text}");
        }
        if let Value::Array(entries) = &value {
            if let Some(reply::Reply::Batch(rs)) = &parsed {
                assert!(rs.len() <= entries.len(), "more replies than entries");
            }
        }
    }

    // What the frame holds decides what comes back.
    let mut expected_runs = (0, 0);
    match parse_frame(data, &Limits::default()) {
        Err(error) => {
            assert!(FRAME_ERRORS.contains(&error.code()));
            let Some(reply::Reply::Single(r)) = &parsed else {
                panic!("a refused frame must get one error object: {text} -> {reply:?}")
            };
            assert_eq!((r.id, code_of(r)), ("null", Some(error.code())), "{text}");
        }
        Ok(Frame::Single(item)) => {
            let expected = expect(&item, &mut expected_runs);
            match (&parsed, expected) {
                (None, None) => {}
                (Some(reply::Reply::Single(r)), Some(expected)) => expected.check(r, &text),
                (got, want) => panic!("{text}: got {got:?}, expected {want:?}"),
            }
        }
        Ok(Frame::Batch(items)) => {
            let expected: Vec<Expected> = items
                .iter()
                .filter_map(|i| expect(i, &mut expected_runs))
                .collect();
            match &parsed {
                None => assert!(expected.is_empty(), "{text}: no reply, expected {expected:?}"),
                Some(reply::Reply::Batch(rs)) => {
                    assert_eq!(
                        rs.len(),
                        expected.len(),
                        "{text}: replies {rs:?}, expected {expected:?}"
                    );
                    for (r, e) in rs.iter().zip(expected) {
                        e.check(r, &text);
                    }
                }
                Some(single) => panic!("{text}: a batch answered with {single:?}"),
            }
        }
    }
    assert_eq!(
        ran, expected_runs,
        "notification handler runs (note, tick) for {text}"
    );
}

/// A single object that is a valid 2.0 notification: `"jsonrpc": "2.0"`, a
/// string method, params absent or an array or object, no `id`, no member
/// repeated.
fn is_plain_notification(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    if !text.trim_start().starts_with('{') {
        return false;
    }
    let Some(m) = Members::parse(text) else {
        return false;
    };
    let known = ["jsonrpc", "method", "params", "id", "result", "error"];
    known.iter().all(|k| m.count(k) <= 1)
        && m.last("jsonrpc").map(RawValue::get) == Some(r#""2.0""#)
        && m.last("method")
            .is_some_and(|v| serde_json::from_str::<String>(v.get()).is_ok())
        && m.last("params").is_none_or(|p| p.get().starts_with(['[', '{']))
        && m.last("id").is_none()
}

/// What one response must be.
#[derive(Debug)]
struct Expected {
    /// The id, as JSON text.
    id: String,
    outcome: Outcome,
}

#[derive(Debug)]
enum Outcome {
    /// A result equal to this value.
    Result(Value),
    /// An error with this code.
    Error(i64),
}

impl Expected {
    fn check(&self, r: &Response<'_>, frame: &str) {
        assert_eq!(r.id, self.id, "id in reply to {frame}");
        match (&self.outcome, &r.outcome) {
            (Outcome::Result(want), Ok(got)) => {
                let got: Value = serde_json::from_str(got).expect("result decodes");
                assert_eq!(&got, want, "result in reply to {frame}");
            }
            (Outcome::Error(want), Err((code, _, _))) => assert_eq!(code, want, "error in reply to {frame}"),
            (want, got) => panic!("reply to {frame}: got {got:?}, expected {want:?}"),
        }
    }
}

fn code_of(r: &Response<'_>) -> Option<i64> {
    r.outcome.as_ref().err().map(|e| e.0)
}

/// The response an item calls for (`None` for a notification), and the
/// notification handler runs it causes (added to `runs`).
fn expect(item: &Incoming<'_>, runs: &mut (usize, usize)) -> Option<Expected> {
    let error = |id: &Id, code| Expected {
        id: RefId::of(id).to_json(),
        outcome: Outcome::Error(code),
    };
    match item {
        Incoming::Invalid(i) => Some(error(&i.id, i.error.code())),
        // A router only serves: a response sent to it is an invalid request.
        Incoming::Response(r) => Some(error(&r.id, codes::INVALID_REQUEST)),
        Incoming::Notification(n) => {
            count_runs(&n.method, n.params, runs);
            None
        }
        Incoming::Request(r) => {
            count_runs(&r.method, r.params, runs);
            let outcome = match &*r.method {
                "add" => match r.params.map(|p| serde_json::from_str::<(i64, i64)>(p.get())) {
                    Some(Ok((a, b))) => match a.checked_add(b) {
                        Some(sum) => Outcome::Result(sum.into()),
                        None => Outcome::Error(OVERFLOW),
                    },
                    _ => Outcome::Error(codes::INVALID_PARAMS),
                },
                "echo" | "fail" => match value_params(r.params) {
                    // The handler decodes the params into a `Value` and
                    // writes it back: serde_json (without float_roundtrip)
                    // may land a long float one ulp off on the way, so the
                    // model takes the same trip.
                    Some(v) if r.method == "echo" => Outcome::Result(
                        serde_json::from_str(&v.to_string()).expect("serde_json reads what it writes"),
                    ),
                    Some(_) => Outcome::Error(FAILED),
                    None => Outcome::Error(codes::INVALID_PARAMS),
                },
                "note" | "tick" if no_params(r.params) => Outcome::Result(Value::Null),
                "note" | "tick" => Outcome::Error(codes::INVALID_PARAMS),
                _ => Outcome::Error(codes::METHOD_NOT_FOUND),
            };
            Some(Expected {
                id: RefId::of(&r.id).to_json(),
                outcome,
            })
        }
    }
}

/// Params decoded as a `Value`: `null` when omitted.
fn value_params(params: Option<&RawValue>) -> Option<Value> {
    match params {
        None => Some(Value::Null),
        Some(p) => serde_json::from_str(p.get()).ok(),
    }
}

/// Whether a method taking no params accepts these: omitted, `[]` or `{}`.
fn no_params(params: Option<&RawValue>) -> bool {
    match value_params(params) {
        Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    }
}

/// `note` and `tick` run for a call (request or notification) whose params
/// they accept; any other method does not count.
fn count_runs(method: &str, params: Option<&RawValue>, runs: &mut (usize, usize)) {
    match method {
        "note" if no_params(params) => runs.0 += 1,
        "tick" if no_params(params) => runs.1 += 1,
        _ => {}
    }
}
