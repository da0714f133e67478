//! Unsupported signatures are compile errors that point at the offending
//! item (each case in `tests/ui/`, its expected message beside it).

#[test]
fn unsupported_signatures_are_refused_where_they_are() {
    // The test harness keeps a test's `eprintln!` until it ends; this step
    // compiles for minutes on a fresh build, so it says so at once (a
    // direct write to stderr is not held back).
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "jrpc-macros: compiling each compile-fail case of tests/ui (a few minutes on a fresh build)"
    );
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
