//! The checker: its connection to the server, the outcome of each rule,
//! and how a reply is judged (its shape, its ids, its numbers).

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use crate::call::{ConnectArgs, Target};
use crate::wire::{id_key, message, raw_ids, Observed, Wire};

/// One rule's outcome.
#[derive(Debug)]
pub(super) struct Outcome {
    pub(super) id: &'static str,
    pub(super) section: &'static str,
    pub(super) title: String,
    pub(super) verdict: Verdict,
    pub(super) evidence: String,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    Pass,
    Fail,
    Skip,
}
/// Checks that a reply object is well formed: `jsonrpc` exactly "2.0", an
/// id, exactly one of `result` and `error`, an error object of an integer
/// `code`, a string `message` and maybe `data`.
pub(super) fn shape_problem(reply: &Value) -> Option<String> {
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
pub(super) fn parse_reply(frame: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(frame).map_err(|e| format!("not JSON ({e})"))
}
/// Whether two JSON numbers written as text are the same number: integers
/// digit for digit (beyond 64 bits too), others by value.
pub(super) fn same_number(a: &str, b: &str) -> bool {
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
pub(super) fn same_value(a: &Value, b: &Value) -> bool {
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
pub(super) struct Checker {
    pub(super) wire: Wire,
    pub(super) quiet: Duration,
    pub(super) timeout: Duration,
    pub(super) outcomes: Vec<Outcome>,
    pub(super) http: bool,
    /// How to open the connection again after the server closed it.
    pub(super) target: Target,
    pub(super) connect: ConnectArgs,
    pub(super) headers: Vec<(String, String)>,
    /// The connection is gone for good (it could not be opened again).
    pub(super) gone: Option<String>,
    pub(super) barriers: u64,
}
impl Checker {
    pub(super) fn record(
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

    pub(super) fn skip(&mut self, id: &'static str, section: &'static str, title: &str, why: &str) {
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
    pub(super) async fn send(&mut self, frame: &str, expect: usize) -> Result<Observed, String> {
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
    pub(super) fn blame_late(&mut self, late: &[Bytes]) {
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

    pub(super) async fn reopen(&mut self, why: String) -> String {
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
    pub(super) async fn observe(
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
    pub(super) async fn expect_error(
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
    pub(super) async fn expect_silence(
        &mut self,
        rule: &'static str,
        section: &'static str,
        title: &str,
        frame: &str,
    ) {
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
pub(super) fn the_reply(observed: &Observed) -> Result<(Bytes, Value), String> {
    let frames = observed.frames();
    let [frame] = frames.as_slice() else {
        return Err(format!("{} replies, not one", frames.len()));
    };
    Ok((frame.clone(), parse_reply(frame)?))
}
/// The one reply in `observed` is an error with `code` and one of the
/// ids `ids`.
pub(super) fn single_error(observed: &Observed, code: i64, ids: &[&str]) -> Result<(), String> {
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
pub(super) fn ids_equal(got: &str, want: &str) -> bool {
    id_key(got) == id_key(want)
}

/// A method name no server has.
pub(super) const NO_SUCH_METHOD: &str = "jrpc.check/no-such-method-5f1c";

pub(super) fn request(method: &str, params: Option<&Value>, id: &str) -> String {
    message(method, params.map(Value::to_string).as_deref(), Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
