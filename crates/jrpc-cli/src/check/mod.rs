//! `jrpc check TARGET`: a conformance check of any JSON-RPC 2.0 server. The
//! command (`command.rs`), the checker and how it judges replies
//! (`checker.rs`), and the rules of the specification (`rules.rs`).

mod checker;
mod command;
mod rules;

pub use command::{run, CheckArgs};
