//! `jrpc check TARGET`: a conformance check of any JSON-RPC 2.0 server, over
//! raw frames, knowing nothing of its methods. Error paths use a method name
//! that cannot exist; success paths use `--method` (with `--params` and
//! `--expect`) or `rpc.discover` when the server answers it. One line per
//! rule (PASS/FAIL/SKIP with the evidence), then `N passed, M failed`.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use serde_json::{json, Value};

use super::checker::{Checker, Outcome, Verdict};
use super::rules::rules;
use crate::call::{parse_timeout, report, ConnectArgs, Failure, Target};
use crate::wire::Wire;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The server to check (none when a command follows `--`).
    #[arg(value_name = "TARGET")]
    pub(super) words: Vec<String>,

    /// A command to spawn and check over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    pub(super) command: Vec<String>,

    /// A method of the server's for the success path (without it, the
    /// check uses rpc.discover when the server answers it).
    #[arg(long, value_name = "NAME")]
    pub(super) method: Option<String>,

    /// The params for --method: a JSON array or object.
    #[arg(long, value_name = "JSON", requires = "method")]
    pub(super) params: Option<String>,

    /// The result --method must give, as JSON (numbers compared by value).
    #[arg(long, value_name = "JSON", requires = "method")]
    pub(super) expect: Option<String>,

    /// How long to wait for a reply that must not come (to a
    /// notification).
    #[arg(long, default_value = "300ms", value_parser = parse_timeout, value_name = "DURATION")]
    pub(super) quiet: Duration,

    /// Print a JSON report instead of lines.
    #[arg(long)]
    pub(super) json: bool,

    #[command(flatten)]
    pub(super) connect: ConnectArgs,
}
pub async fn run(args: CheckArgs) -> ExitCode {
    match check(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(failure) => report(failure),
    }
}
pub(super) async fn check(args: CheckArgs) -> Result<bool, Failure> {
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
    // An HTTP client connects on its first request: a server that is not
    // there is one line and exit 3, not every rule failing.
    if let (Target::Url(url), Wire::Http(_)) = (&target, &wire) {
        crate::wire::reachable(url, args.connect.dial.timeout)
            .await
            .map_err(|e| Failure::Transport(e.context(format!("connecting to {name}"))))?;
    }
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
pub(super) fn print_outcomes(outcomes: &[Outcome], target: &str, as_json: bool) {
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
pub(super) fn summary_line(passed: usize, failed: usize, skipped: usize) -> String {
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
}
