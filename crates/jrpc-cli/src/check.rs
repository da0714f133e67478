//! `jrpc check TARGET`: a conformance check of any JSON-RPC 2.0 server, over
//! raw frames, knowing nothing of its methods. Error paths use a method name
//! that cannot exist; success paths use `--method` (with `--params` and
//! `--expect`) or `rpc.discover` when the server answers it. One line per
//! rule (PASS/FAIL/SKIP with the evidence), then `N passed, M failed`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use bytes::Bytes;
use clap::Args;
use serde_json::{json, Value};

use crate::call::{parse_timeout, report, ConnectArgs, Failure, Target};
use crate::wire::{id_key, message, raw_ids, Observed, Wire};

/// A method name no server has.
const NO_SUCH_METHOD: &str = "jrpc.check/no-such-method-5f1c";

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The server to check (none when a command follows `--`).
    #[arg(value_name = "TARGET")]
    words: Vec<String>,

    /// A command to spawn and check over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,

    /// A method of the server's for the success path (without it, the
    /// check uses rpc.discover when the server answers it).
    #[arg(long, value_name = "NAME")]
    method: Option<String>,

    /// The params for --method: a JSON array or object.
    #[arg(long, value_name = "JSON", requires = "method")]
    params: Option<String>,

    /// The result --method must give, as JSON (numbers compared by value).
    #[arg(long, value_name = "JSON", requires = "method")]
    expect: Option<String>,

    /// How long to wait for a reply that must not come (to a
    /// notification).
    #[arg(long, default_value = "300ms", value_parser = parse_timeout, value_name = "DURATION")]
    quiet: Duration,

    /// Print a JSON report instead of lines.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    connect: ConnectArgs,
}

pub async fn run(args: CheckArgs) -> ExitCode {
    match check(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(failure) => report(failure),
    }
}

/// One rule's outcome.
#[derive(Debug)]
struct Outcome {
    id: &'static str,
    section: &'static str,
    title: String,
    verdict: Verdict,
    evidence: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail,
    Skip,
}

/// Checks that a reply object is well formed: `jsonrpc` exactly "2.0", an
/// id, exactly one of `result` and `error`, an error object of an integer
/// `code`, a string `message` and maybe `data`.
fn shape_problem(reply: &Value) -> Option<String> {
    let Some(object) = reply.as_object() else {
        return Some("a reply that is not an object".into());
    };
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Some(format!("\"jsonrpc\" is {:?}, not \"2.0\"", object.get("jsonrpc")));
    }
    if !object.contains_key("id") {
        return Some("no \"id\" member".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(_), Some(_)) => return Some("both \"result\" and \"error\"".into()),
        (None, None) => return Some("neither \"result\" nor \"error\"".into()),
        (None, Some(error)) => {
            let Some(error) = error.as_object() else {
                return Some("\"error\" is not an object".into());
            };
            if !error.get("code").is_some_and(|c| c.is_i64() || c.is_u64()) {
                return Some("the error's \"code\" is not an integer".into());
            }
            if !error.get("message").is_some_and(Value::is_string) {
                return Some("the error's \"message\" is not a string".into());
            }
        }
        (Some(_), None) => {}
    }
    // Members besides these are not forbidden by the specification: not
    // judged here.
    None
}

/// The JSON of a reply frame, with its `id` texts as written (for ids
/// beyond 64 bits, compared digit for digit).
fn parse_reply(frame: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(frame).map_err(|e| format!("not JSON ({e})"))
}

/// Whether two JSON numbers written as text are the same number: integers
/// digit for digit (beyond 64 bits too), others by value.
fn same_number(a: &str, b: &str) -> bool {
    let integer = |s: &str| !s.contains(['.', 'e', 'E']);
    if integer(a) && integer(b) {
        return a.trim_start_matches('-').trim_start_matches('0')
            == b.trim_start_matches('-').trim_start_matches('0')
            && a.starts_with('-') == b.starts_with('-');
    }
    // An integer beyond 64 bits is only ever equal to its own digits; a
    // float rounding it is not.
    let beyond_64_bits = |s: &str| integer(s) && s.parse::<i64>().is_err() && s.parse::<u64>().is_err();
    if beyond_64_bits(a) || beyond_64_bits(b) {
        return false;
    }
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// Whether two JSON values are equal, numbers compared by value.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(&x.to_string(), &y.to_string()),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_value(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

struct Checker {
    wire: Wire,
    quiet: Duration,
    timeout: Duration,
    outcomes: Vec<Outcome>,
    http: bool,
    /// How to open the connection again after the server closed it.
    target: Target,
    connect: ConnectArgs,
    headers: Vec<(String, String)>,
    /// The connection is gone for good (it could not be opened again).
    gone: Option<String>,
    barriers: u64,
}

impl Checker {
    fn record(
        &mut self,
        id: &'static str,
        section: &'static str,
        title: impl Into<String>,
        result: Result<(), String>,
        observed: &str,
    ) {
        let (verdict, evidence) = match result {
            Ok(()) => (Verdict::Pass, observed.to_owned()),
            Err(why) => (Verdict::Fail, format!("{why}; got: {observed}")),
        };
        self.outcomes.push(Outcome {
            id,
            section,
            title: title.into(),
            verdict,
            evidence,
        });
    }

    fn skip(&mut self, id: &'static str, section: &'static str, title: &str, why: &str) {
        self.outcomes.push(Outcome {
            id,
            section,
            title: title.into(),
            verdict: Verdict::Skip,
            evidence: why.into(),
        });
    }

    /// Sends a frame for a rule. Late replies (to what was sent before)
    /// fail the rule before; a failed connection fails this rule and is
    /// opened again for the next.
    async fn send(&mut self, frame: &str, expect: usize) -> Result<Observed, String> {
        if let Some(why) = &self.gone {
            return Err(why.clone());
        }
        match self.wire.exchange(frame, expect, self.quiet, self.timeout).await {
            Ok(observed) => {
                self.blame_late(observed.late());
                Ok(observed)
            }
            Err(e) => Err(self.reopen(format!("the connection failed: {e:#}")).await),
        }
    }

    /// Replies that came after their rule was judged fail that rule.
    fn blame_late(&mut self, late: &[Bytes]) {
        if late.is_empty() {
            return;
        }
        if let Some(last) = self.outcomes.last_mut() {
            let text: Vec<String> = late
                .iter()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            last.verdict = Verdict::Fail;
            last.evidence = format!("{}; then, late: {}", last.evidence, text.join(" | "));
        }
    }

    async fn reopen(&mut self, why: String) -> String {
        match Wire::open(&self.target, &self.connect, &self.headers).await {
            Ok(wire) => {
                self.wire = wire;
                why
            }
            Err(e) => {
                let why = format!("{why}; opening it again failed: {e:#}");
                self.gone = Some(why.clone());
                why
            }
        }
    }

    /// Sends `frame` and judges what came back.
    async fn observe(
        &mut self,
        rule: &'static str,
        section: &'static str,
        title: impl Into<String>,
        frame: &str,
        judge: impl FnOnce(&Observed) -> Result<(), String>,
    ) -> Option<Observed> {
        match self.send(frame, 1).await {
            Ok(observed) => {
                let result = judge(&observed);
                self.record(rule, section, title, result, &observed.evidence());
                Some(observed)
            }
            Err(why) => {
                self.record(rule, section, title, Err(why), "nothing");
                None
            }
        }
    }

    /// A frame that must get exactly one reply object: an error with
    /// `code` and one of the ids `ids` (raw JSON text).
    async fn expect_error(
        &mut self,
        rule: &'static str,
        section: &'static str,
        title: &str,
        frame: &str,
        code: i64,
        ids: &[&str],
    ) {
        self.observe(rule, section, title, frame, |observed| {
            single_error(observed, code, ids)
        })
        .await;
    }

    /// A frame that must get no reply at all (HTTP: 200, 202 or 204 with an
    /// empty body).
    async fn expect_silence(&mut self, rule: &'static str, section: &'static str, title: &str, frame: &str) {
        let observed = match self.send(frame, 0).await {
            Ok(observed) => observed,
            Err(why) => return self.record(rule, section, title, Err(why), "nothing"),
        };
        let mut replies = observed.frames();
        let mut evidence = observed.evidence();
        if !self.http {
            // A barrier: once the server has answered a request sent after
            // the notification, whatever else came answers the notification.
            self.barriers += 1;
            let id = format!("\"jrpc-check-barrier-{}\"", self.barriers);
            match self
                .wire
                .exchange_until(&request(NO_SUCH_METHOD, None, &id), &id, self.timeout)
                .await
            {
                Ok(barrier) => {
                    replies.extend(barrier.late().iter().cloned());
                    replies.extend(barrier.frames().into_iter().filter(|f| !raw_ids(f).contains(&id)));
                    if replies.len() > observed.frames().len() {
                        evidence = format!("{evidence}; before the next reply: {}", barrier.evidence());
                    }
                }
                Err(e) => {
                    let why = self.reopen(format!("the connection failed: {e:#}")).await;
                    return self.record(rule, section, title, Err(why), &evidence);
                }
            }
        }
        let result = match &observed {
            Observed::Http { status, .. } if ![200, 202, 204].contains(status) => {
                Err(format!("HTTP status {status}, not 200, 202 or 204"))
            }
            _ if !replies.is_empty() => Err("a reply to what must not be answered".into()),
            _ => Ok(()),
        };
        self.record(rule, section, title, result, &evidence);
    }
}

/// The one reply frame of `observed`, and its JSON.
fn the_reply(observed: &Observed) -> Result<(Bytes, Value), String> {
    let frames = observed.frames();
    let [frame] = frames.as_slice() else {
        return Err(format!("{} replies, not one", frames.len()));
    };
    Ok((frame.clone(), parse_reply(frame)?))
}

/// The one reply in `observed` is an error with `code` and one of the
/// ids `ids`.
fn single_error(observed: &Observed, code: i64, ids: &[&str]) -> Result<(), String> {
    let (frame, reply) = the_reply(observed)?;
    if reply.is_array() {
        return Err("a batch reply to a single message".into());
    }
    if let Some(problem) = shape_problem(&reply) {
        return Err(problem);
    }
    let got = reply["error"]["code"].as_i64();
    if got != Some(code) {
        return Err(format!("error code {got:?}, not {code}"));
    }
    let got = raw_ids(&frame);
    let got_id = got.first().map(String::as_str).unwrap_or("");
    if !ids.iter().any(|id| ids_equal(got_id, id)) {
        return Err(format!("id {got_id}, not {}", ids.join(" or ")));
    }
    Ok(())
}

/// Ids compared as JSON values: numbers numerically (integers beyond 64
/// bits digit for digit), strings exactly, null to null.
fn ids_equal(got: &str, want: &str) -> bool {
    id_key(got) == id_key(want)
}

async fn check(args: CheckArgs) -> Result<bool, Failure> {
    let (target, mut rest) = Target::from_words(args.words, &args.command)?;
    if let Some(extra) = rest.next() {
        return Err(Failure::Usage(anyhow!(
            "unexpected argument {extra:?}: check takes only a TARGET"
        )));
    }
    let params = match &args.params {
        Some(text) => {
            let value: Value =
                serde_json::from_str(text).map_err(|e| Failure::Usage(anyhow!("--params: {e}")))?;
            if !value.is_array() && !value.is_object() {
                return Err(Failure::Usage(anyhow!("--params: a JSON array or object")));
            }
            Some(value)
        }
        None => None,
    };
    let expect = match &args.expect {
        Some(text) => {
            Some(serde_json::from_str::<Value>(text).map_err(|e| Failure::Usage(anyhow!("--expect: {e}")))?)
        }
        None => None,
    };
    let name = target.to_string();
    let headers = args.connect.dial.headers()?;
    let wire = Wire::open(&target, &args.connect, &headers)
        .await
        .map_err(|e| Failure::Transport(e.context(format!("connecting to {name}"))))?;
    let mut checker = Checker {
        http: matches!(wire, Wire::Http(_)),
        wire,
        quiet: args.quiet,
        timeout: args.connect.dial.timeout,
        outcomes: Vec::new(),
        target,
        connect: args.connect.clone(),
        headers,
        gone: None,
        barriers: 0,
    };
    rules(&mut checker, args.method.as_deref(), params, expect).await;
    print_outcomes(&checker.outcomes, &name, args.json);
    Ok(checker.outcomes.iter().all(|o| o.verdict != Verdict::Fail))
}

/// A rule of one frame answered by one error: rule, section, title, the
/// frame, the error code, and the ids the reply may carry.
type ErrorRule = (
    &'static str,
    &'static str,
    &'static str,
    String,
    i64,
    &'static [&'static str],
);

fn request(method: &str, params: Option<&Value>, id: &str) -> String {
    message(method, params.map(Value::to_string).as_deref(), Some(id))
}

async fn rules(c: &mut Checker, method: Option<&str>, params: Option<Value>, expect: Option<Value>) {
    // What the server offers, for the success paths.
    let discover = c
        .send(&request("rpc.discover", None, "\"jrpc-check-discover\""), 1)
        .await
        .ok();
    let discovered: Option<Value> = discover
        .as_ref()
        .and_then(|d| d.frames().first().cloned())
        .and_then(|f| parse_reply(&f).ok())
        .and_then(|r| r.get("result").cloned())
        .filter(|r| r.get("methods").is_some_and(Value::is_array));

    // Frames that must get one error reply: (rule, section, title, frame,
    // code, the ids it may carry). An invalid request's id is echoed when
    // it can be read, or null.
    let m = NO_SUCH_METHOD;
    let errors: [ErrorRule; 12] = [
        (
            "parse-error",
            "§5.1",
            "invalid JSON → -32700 Parse error, id null",
            r#"{"jsonrpc":"2.0","method":"foobar,"params":"bar","baz]"#.into(),
            -32700,
            &["null"],
        ),
        (
            "parse-error-truncated",
            "§5.1",
            "a truncated frame → -32700 Parse error, id null",
            r#"{"jsonrpc":"2.0","method":"#.into(),
            -32700,
            &["null"],
        ),
        (
            "invalid-request",
            "§5.1",
            "\"method\" not a string → -32600 Invalid Request, id null",
            r#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#.into(),
            -32600,
            &["null"],
        ),
        (
            "invalid-request-id",
            "§5.1",
            "an invalid request with a valid id → -32600, the id echoed (or null)",
            r#"{"jsonrpc":"2.0","method":1,"id":7}"#.into(),
            -32600,
            &["7", "null"],
        ),
        (
            "jsonrpc-missing",
            "§4",
            "no \"jsonrpc\" member → -32600",
            format!(r#"{{"method":"{m}","id":8}}"#),
            -32600,
            &["8", "null"],
        ),
        (
            "jsonrpc-exact",
            "§4",
            "\"jsonrpc\": \"2\" (not exactly \"2.0\") → -32600",
            format!(r#"{{"jsonrpc":"2","method":"{m}","id":9}}"#),
            -32600,
            &["9", "null"],
        ),
        (
            "jsonrpc-number",
            "§4",
            "\"jsonrpc\": 2.0 (a number) → -32600",
            format!(r#"{{"jsonrpc":2.0,"method":"{m}","id":10}}"#),
            -32600,
            &["10", "null"],
        ),
        (
            "method-missing",
            "§4",
            "no \"method\" member → -32600",
            r#"{"jsonrpc":"2.0","id":11}"#.into(),
            -32600,
            &["11", "null"],
        ),
        (
            "params-string",
            "§4.2",
            "params a string → -32600",
            format!(r#"{{"jsonrpc":"2.0","method":"{m}","params":"bar","id":12}}"#),
            -32600,
            &["12", "null"],
        ),
        (
            "params-number",
            "§4.2",
            "params a number → -32600",
            format!(r#"{{"jsonrpc":"2.0","method":"{m}","params":42,"id":13}}"#),
            -32600,
            &["13", "null"],
        ),
        (
            "method-not-found",
            "§5.1",
            "an unknown method → -32601 Method not found",
            request(m, Some(&json!([1, 2])), "\"a\""),
            -32601,
            &["\"a\""],
        ),
        (
            "batch-empty",
            "§6",
            "an empty batch [] → one -32600 reply (not an array), id null",
            "[]".into(),
            -32600,
            &["null"],
        ),
    ];
    for (rule, section, title, frame, code, ids) in errors {
        c.expect_error(rule, section, title, &frame, code, ids).await;
    }
    // §4: ids are echoed as they were sent.
    for (rule, kind, id) in [
        ("id-string", "a string", "\"id \\\"quoted\\\" ü\""),
        ("id-negative", "a negative integer", "-7"),
        ("id-fraction", "a fraction", "1.5"),
        ("id-exponent", "a number with an exponent", "1e3"),
        (
            "id-big",
            "an integer beyond 64 bits",
            "123456789012345678901234567890",
        ),
        ("id-null", "null", "null"),
    ] {
        let title = format!("id {kind} ({id}) echoed in the reply");
        c.expect_error(
            rule,
            "§4",
            &title,
            &request(NO_SUCH_METHOD, None, id),
            -32601,
            &[id],
        )
        .await;
    }
    // §4.1: notifications are never answered.
    c.expect_silence(
        "notification-unknown",
        "§4.1",
        "a notification of an unknown method gets no reply",
        &format!(r#"{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[1]}}"#),
    )
    .await;
    // Only a method the user named: one found by discovery might do
    // something when it runs.
    match method {
        Some(name) => {
            let frame = format!(
                r#"{{"jsonrpc":"2.0","method":{},"params":["jrpc check: params no method takes",{{"x":[[[]]]}},-1]}}"#,
                json!(name)
            );
            c.expect_silence(
                "notification-failing",
                "§4.1",
                &format!("a notification of {name} with params it cannot take gets no reply"),
                &frame,
            )
            .await;
        }
        None => c.skip(
            "notification-failing",
            "§4.1",
            "a failing notification gets no reply",
            "give --method NAME to check a failing notification of it",
        ),
    }
    // §6: batches.
    for (rule, frame, count) in [
        ("batch-invalid-one", "[1]", 1usize),
        ("batch-invalid", "[1,2,3]", 3),
    ] {
        let title = format!("the batch {frame} → an array of {count} -32600 replies, id null");
        c.observe(rule, "§6", title, frame, |observed| {
            batch_of_errors(observed, count)
        })
        .await;
    }
    let mixed = format!(
        r#"[{}, {{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[7]}}, {{"foo":"boo"}}, {}, {}]"#,
        request(NO_SUCH_METHOD, Some(&json!([1, 2, 4])), "\"1\""),
        request(NO_SUCH_METHOD, Some(&json!({"name": "myself"})), "\"5\""),
        request(NO_SUCH_METHOD, None, "\"9\""),
    );
    c.observe(
        "batch-mixed",
        "§6",
        "a mixed batch → one reply per request and per invalid entry, none for the notification (matched by id, in any order)",
        &mixed,
        mixed_batch,
    )
    .await;
    c.expect_silence(
        "batch-notifications",
        "§6",
        "a batch of notifications only gets no reply",
        &format!(
            r#"[{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}","params":[1,2,4]}},{{"jsonrpc":"2.0","method":"{NO_SUCH_METHOD}"}}]"#
        ),
    )
    .await;
    // §5: the success path.
    match method {
        Some(name) => {
            let title = match &expect {
                Some(value) => format!("{name} answers with a result equal to {value}"),
                None => format!("{name} answers with a result"),
            };
            let frame = request(name, params.as_ref(), "\"jrpc-check-success\"");
            c.observe("success", "§5", title, &frame, |observed| {
                success(observed, "\"jrpc-check-success\"", expect.as_ref())
            })
            .await;
        }
        None if discovered.is_some() => {
            let discover = discover.as_ref().expect("discovered through it");
            let result = success(discover, "\"jrpc-check-discover\"", None);
            c.record(
                "success",
                "§5",
                "rpc.discover answers with a result",
                result,
                &discover.evidence(),
            );
        }
        None => c.skip(
            "success",
            "§5",
            "a call answered with a result",
            "no method known: give --method (and --params, --expect)",
        ),
    }
    // After all that, the server (and this connection) still serve.
    let title = if c.http {
        "after the bad input, the server still answers"
    } else {
        "after the bad input, the connection still serves"
    };
    let frame = request(NO_SUCH_METHOD, None, "\"jrpc-check-after\"");
    c.observe("still-serving", "§5", title, &frame, |observed| {
        single_error(observed, -32601, &["\"jrpc-check-after\""])
    })
    .await;
}

/// An array of `count` -32600 replies with id null.
fn batch_of_errors(observed: &Observed, count: usize) -> Result<(), String> {
    let (_, reply) = the_reply(observed)?;
    let Some(items) = reply.as_array() else {
        return Err("not an array".into());
    };
    if items.len() != count {
        return Err(format!("{} entries, not {count}", items.len()));
    }
    for item in items {
        if let Some(problem) = shape_problem(item) {
            return Err(problem);
        }
        if item["error"]["code"] != json!(-32600) || !item["id"].is_null() {
            return Err(format!("an entry {item}, not -32600 with id null"));
        }
    }
    Ok(())
}

/// The mixed batch's replies: -32601 for ids "1", "5" and "9", -32600 with
/// id null for the invalid entry, nothing else.
fn mixed_batch(observed: &Observed) -> Result<(), String> {
    let (_, reply) = the_reply(observed)?;
    let Some(items) = reply.as_array() else {
        return Err("not an array".into());
    };
    let mut want = vec![
        ("\"1\"", -32601),
        ("\"5\"", -32601),
        ("\"9\"", -32601),
        ("null", -32600),
    ];
    for item in items {
        if let Some(problem) = shape_problem(item) {
            return Err(problem);
        }
        let id = item["id"].to_string();
        let code = item["error"]["code"].as_i64().unwrap_or(0);
        match want.iter().position(|(i, c)| *i == id && *c == code) {
            Some(at) => {
                want.remove(at);
            }
            None => return Err(format!("an unexpected entry {item}")),
        }
    }
    if !want.is_empty() {
        let missing: Vec<String> = want
            .iter()
            .map(|(id, code)| format!("{code} for id {id}"))
            .collect();
        return Err(format!("missing: {}", missing.join(", ")));
    }
    Ok(())
}

/// One reply with a result (equal to `expect` when given) and the id.
fn success(observed: &Observed, id: &str, expect: Option<&Value>) -> Result<(), String> {
    let (frame, reply) = the_reply(observed)?;
    if let Some(problem) = shape_problem(&reply) {
        return Err(problem);
    }
    let Some(result) = reply.get("result") else {
        return Err(format!("an error: {}", reply["error"]));
    };
    let got_id = raw_ids(&frame).into_iter().next().unwrap_or_default();
    if !ids_equal(&got_id, id) {
        return Err(format!("id {got_id}, not {id}"));
    }
    match expect {
        Some(want) if !same_value(result, want) => Err(format!("the result {result}, not {want}")),
        _ => Ok(()),
    }
}

fn print_outcomes(outcomes: &[Outcome], target: &str, as_json: bool) {
    let count = |v: Verdict| outcomes.iter().filter(|o| o.verdict == v).count();
    let (passed, failed, skipped) = (count(Verdict::Pass), count(Verdict::Fail), count(Verdict::Skip));
    if as_json {
        let rules: Vec<Value> = outcomes
            .iter()
            .map(|o| {
                json!({
                    "rule": o.id,
                    "section": o.section,
                    "title": o.title,
                    "outcome": match o.verdict { Verdict::Pass => "pass", Verdict::Fail => "fail", Verdict::Skip => "skip" },
                    "evidence": o.evidence,
                })
            })
            .collect();
        let report = json!({
            "target": target,
            "passed": passed,
            "failed": failed,
            "skipped": skipped,
            "rules": rules,
        });
        println!("{report}");
        return;
    }
    for o in outcomes {
        let word = match o.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "SKIP",
        };
        println!("{word}  {:<5} {:<22} {}", o.section, o.id, o.title);
        if o.verdict != Verdict::Pass {
            println!("      {}", o.evidence);
        }
    }
    // The last line is exactly `N passed, M failed[, K skipped]`, for
    // parsers of test results; what was checked goes on the line before.
    println!("target: {target}");
    println!("{}", summary_line(passed, failed, skipped));
}

/// `N passed, M failed`, then `, K skipped` when any were.
fn summary_line(passed: usize, failed: usize, skipped: usize) -> String {
    let mut line = format!("{passed} passed, {failed} failed");
    if skipped > 0 {
        line.push_str(&format!(", {skipped} skipped"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_is_what_result_parsers_read() {
        assert_eq!(summary_line(26, 0, 0), "26 passed, 0 failed");
        assert_eq!(summary_line(20, 3, 2), "20 passed, 3 failed, 2 skipped");
    }

    #[test]
    fn ids_compare_as_json_values() {
        let cases = [
            ("1e3", "1000", true),
            ("1000.0", "1e3", true),
            ("-7", "-7", true),
            ("7", "-7", false),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
                true,
            ),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567891",
                false,
            ),
            ("123456789012345678901234567890", "1.2345678901234568e29", false),
            ("null", "null", true),
            ("\"1\"", "1", false),
            ("\"a\"", "\"a\"", true),
        ];
        for (got, want, equal) in cases {
            assert_eq!(ids_equal(got, want), equal, "{got} vs {want}");
        }
    }

    #[test]
    fn reply_shapes_are_checked() {
        let good = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"x","data":1}});
        assert_eq!(shape_problem(&good), None);
        // Members the specification does not name are not forbidden.
        let extended = json!({"jsonrpc":"2.0","id":1,"result":1,"meta":{}});
        assert_eq!(shape_problem(&extended), None);
        for bad in [
            json!({"jsonrpc":"2.0","id":1}),
            json!({"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}),
            json!({"jsonrpc":"2","id":1,"result":1}),
            json!({"jsonrpc":"2.0","result":1}),
            json!({"jsonrpc":"2.0","id":1,"error":{"code":"1","message":"x"}}),
            json!({"jsonrpc":"2.0","id":1,"error":{"code":1}}),
        ] {
            assert!(shape_problem(&bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn raw_ids_keep_their_digits() {
        assert_eq!(
            raw_ids(br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":1}"#),
            ["123456789012345678901234567890"]
        );
        assert_eq!(raw_ids(br#"[{"id":1e3},{"id":"x"}]"#), ["1e3", "\"x\""]);
    }
}
