//! The programs are the `[[example]]`s beside this file: run one with
//! `cargo run --example NAME` (see the README for the list).
