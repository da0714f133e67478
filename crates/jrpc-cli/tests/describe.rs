//! End to end: `jrpc describe` against `jrpc serve` (over TCP and a spawned
//! child), and `jrpc call` checking params against the document it cached
//! or one given with `--openrpc`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

const JRPC: &str = env!("CARGO_BIN_EXE_jrpc");

/// A cache directory of its own, so tests neither see nor leave documents
/// in the user's cache.
fn cache_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "jrpc-describe-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn jrpc(cache: &PathBuf, args: &[&str]) -> Output {
    Command::new(JRPC)
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `jrpc serve --tcp 127.0.0.1:0`, killed on drop; its target.
struct Served(Child, String);

impl Served {
    fn start() -> Served {
        let mut child = Command::new(JRPC)
            .args(["serve", "--tcp", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("jrpc: listening on ") {
            line.clear();
            assert!(
                stderr.read_line(&mut line).unwrap() > 0,
                "jrpc serve exited early"
            );
        }
        let target = line["jrpc: listening on ".len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned();
        std::thread::spawn(move || for _ in stderr.lines() {});
        Served(child, target)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn describe_lists_signatures_and_prints_the_document() {
    let served = Served::start();
    let cache = cache_dir();
    let out = jrpc(&cache, &["describe", &served.1]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&out.stdout);
    assert!(listing.starts_with("jrpc demo "), "{listing}");
    for line in [
        "subtract(minuend: number, subtrahend: number) -> difference: number",
        "Subtracts the subtrahend from the minuend",
        "sum(numbers?: number...) -> sum: number",
        "update(...)  (notification)",
    ] {
        assert!(listing.contains(line), "{line:?} not in:\n{listing}");
    }

    let out = jrpc(&cache, &["describe", "--json", &served.1]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let document: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(document["openrpc"], "1.3.2");
    let names: Vec<&str> = document["methods"][6]["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        (document["methods"][6]["name"].as_str(), names),
        (Some("subtract"), vec!["minuend", "subtrahend"])
    );

    let usage = jrpc(&cache, &["describe", &served.1, "extra"]);
    assert_eq!(usage.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn call_checks_params_against_the_cached_document() {
    let served = Served::start();
    let cache = cache_dir();
    // Before any describe: the server itself refuses (exit 1, its error).
    let out = jrpc(&cache, &["call", &served.1, "subtract", "42"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));

    assert!(jrpc(&cache, &["describe", &served.1]).status.success());
    for (args, says) in [
        (vec!["subtract", "42"], "missing param subtrahend"),
        (vec!["subtract", "42", "x"], "param subtrahend: expected number"),
        (
            vec!["subtract", "--named", "minuend=1", "--named", "sub=2"],
            "has no param \"sub\"",
        ),
        (vec!["sum", "--named", "numbers=1"], "takes positional params"),
        (vec!["sleep", "-1"], "expected at least 0"),
        (vec!["substract", "1", "2"], "no method \"substract\""),
    ] {
        let mut all = vec!["call", served.1.as_str()];
        all.extend(args.iter().copied());
        let out = jrpc(&cache, &all);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr:?} lacks {says:?}");
        assert!(stderr.contains("checked against"), "{stderr}");
    }
    // What fits goes through; --no-openrpc sends without checking.
    let out = jrpc(&cache, &["call", &served.1, "subtract", "42", "23"]);
    assert_eq!(text(&out.stdout).trim(), "19");
    let out = jrpc(&cache, &["call", &served.1, "sum", "1", "2", "3"]);
    assert_eq!(text(&out.stdout).trim(), "6");
    let out = jrpc(&cache, &["call", "--no-openrpc", &served.1, "subtract", "42"]);
    assert_eq!(out.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn call_checks_params_against_a_given_document() {
    let cache = cache_dir();
    let stdio = ["--", JRPC, "serve", "--stdio"];
    let mut describe = vec!["describe", "--json"];
    describe.extend(stdio);
    let out = jrpc(&cache, &describe);
    assert!(out.status.success(), "{}", text(&out.stderr));
    std::fs::create_dir_all(&cache).unwrap();
    let file = cache.join("demo.json");
    std::fs::write(&file, &out.stdout).unwrap();

    // Another target, no cache for it: --openrpc FILE is what checks.
    let served = Served::start();
    let file = file.to_str().unwrap();
    let out = jrpc(&cache, &["call", "--openrpc", file, &served.1, "add", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("missing param b"),
        "{}",
        text(&out.stderr)
    );
    let out = jrpc(&cache, &["call", "--openrpc", file, &served.1, "add", "1", "2"]);
    assert_eq!(text(&out.stdout).trim(), "3");
    // A file that is not a document is a usage error.
    let out = jrpc(
        &cache,
        &[
            "call",
            "--openrpc",
            "/nonexistent.json",
            &served.1,
            "add",
            "1",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn describe_fails_clearly_without_rpc_discover() {
    let cache = cache_dir();
    // An MCP server answers rpc.discover with an error.
    let out = jrpc(&cache, &["describe", "--", JRPC, "mcp", "serve", "--stdio"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).is_empty());
    let _ = std::fs::remove_dir_all(&cache);
}

/// Issue 33: a document cached for a target never stops a call to a
/// server it does not describe. Here the same command starts `jrpc serve`
/// at first (described and cached), then a server of its own with other
/// methods and no `rpc.discover`: a call it answers goes through, the stale
/// document is removed, and `jrpc describe` says there is none.
#[test]
fn a_cached_document_of_another_server_does_not_stop_a_call() {
    let cache = cache_dir();
    std::fs::create_dir_all(&cache).unwrap();
    let flag = cache.join("other-server");
    let chatty = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/bridge/chatty_server.py");
    let script = format!(
        "if [ -e '{}' ]; then exec python3 '{chatty}'; else exec '{JRPC}' serve --stdio; fi",
        flag.display()
    );
    let command = ["--", "sh", "-c", script.as_str()];
    let with = |words: &[&str]| {
        let mut all: Vec<&str> = words.to_vec();
        all.extend(command);
        jrpc(&cache, &all)
    };
    assert!(with(&["describe"]).status.success());
    let cached = || {
        std::fs::read_dir(cache.join("jrpc/openrpc"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(cached(), 1);
    // Against the cached document `pid` is no method; the server now at
    // the command has it.
    std::fs::write(&flag, "").unwrap();
    let out = with(&["call", "pid"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).trim().parse::<u32>().is_ok(),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("removed the document cached"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(cached(), 0, "the stale document is gone");
    // Cached again, then described where there is no rpc.discover: removed.
    std::fs::remove_file(&flag).unwrap();
    assert!(with(&["describe"]).status.success());
    std::fs::write(&flag, "").unwrap();
    let out = with(&["describe"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("publishes no OpenRPC document"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(cached(), 0, "describe removed the stale document");
    let _ = std::fs::remove_dir_all(&cache);
}
