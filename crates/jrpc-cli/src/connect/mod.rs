//! `jrpc connect TARGET`: an interactive session with a server. The
//! session (`session.rs`), the lines typed (`lines.rs`) and the line editor
//! (`editor.rs`).

mod editor;
mod lines;
mod session;

pub use session::{run, ConnectCmdArgs};
