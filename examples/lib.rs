//! The programs are the `[[example]]`s beside this file: run one with
//! `cargo run --example NAME` (see docs/guide/library.md for the list).
