//! Unsupported signatures are compile errors that point at the offending
//! item (each case in `tests/ui/`, its expected message beside it).

#[test]
fn unsupported_signatures_are_refused_where_they_are() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
