//! `jrpc bench` shows trouble (issue 44): refusals by HTTP status in its
//! summary, and `--compare` without `--report` is a text table with each
//! figure's change.

mod common;

use std::process::Command;

use common::{text, Served, JRPC};

#[test]
fn refusals_are_counted_by_status_and_runs_compare_as_text() {
    let served = Served::start(&["--http", "127.0.0.1:0", "--rate-limit", "20"]);
    let url = &served.targets[0];
    let bench = |extra: &[&str]| {
        // The limit's budget refilled first: the bench's first call must
        // get through for it to start.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        Command::new(JRPC)
            .args(["bench", url, "add", "1", "2", "-c", "1", "-m", "2", "-d", "1s"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = bench(&[]);
    let summary = String::from_utf8_lossy(&out.stdout);
    // Most requests of the second are over the limit of 20 a second.
    assert!(summary.contains("http 429: "), "{}", text(&out));

    let dir = std::env::temp_dir().join(format!("jrpc-bench-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    for path in [&a, &b] {
        let out = bench(&["--json"]);
        assert!(out.status.success(), "{}", text(&out));
        std::fs::write(path, &out.stdout).unwrap();
    }
    let out = Command::new(JRPC)
        .args(["bench", "--compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("run") && table.contains("change"), "{table}");
    assert!(table.contains('%'), "the second run's changes: {table}");
    assert!(table.contains("run 1: http 429: "), "{table}");
    assert!(!table.contains("<html"), "text, not a page: {table}");
    let _ = std::fs::remove_dir_all(&dir);
}
