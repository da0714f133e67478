//! The library snippets of the README and of the guide's library page are
//! compiled and run: each ```rust block must appear line for line
//! (indentation aside) in `readme.rs`, the example that `.ci/run` builds and
//! runs.

fn rust_blocks(markdown: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), line) => block.push(line),
            (None, _) => {}
        }
    }
    assert!(current.is_none(), "a ```rust block is not closed");
    blocks
}

fn contains_in_order(haystack: &[&str], block: &[&str]) -> bool {
    let block: Vec<&str> = block.iter().map(|l| l.trim()).collect();
    haystack
        .windows(block.len())
        .any(|window| window.iter().map(|l| l.trim()).eq(block.iter().copied()))
}

#[test]
fn every_readme_snippet_is_in_the_readme_example() {
    let example = include_str!("../readme.rs");
    let example_lines: Vec<&str> = example.lines().collect();
    let mut blocks = rust_blocks(include_str!("../../README.md"));
    blocks.extend(rust_blocks(include_str!("../../docs/guide/library.md")));
    assert!(
        blocks.len() >= 5,
        "found only {} rust blocks in README.md and docs/guide/library.md",
        blocks.len()
    );
    for block in &blocks {
        assert!(
            contains_in_order(&example_lines, block),
            "this snippet of README.md or docs/guide/library.md is not in examples/readme.rs as written:\n{}",
            block.join("\n")
        );
    }
}

#[test]
fn the_check_notices_a_changed_line() {
    let example = ["fn f() {", "    let a = 1;", "    let b = 2;", "}"];
    assert!(contains_in_order(&example, &["let a = 1;", "let b = 2;"]));
    assert!(!contains_in_order(&example, &["let a = 1;", "let b = 3;"]));
    assert!(!contains_in_order(&example, &["let b = 2;", "let a = 1;"]));
}
