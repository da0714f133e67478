//! The line editor of `jrpc connect`, on a thread of its own (it blocks
//! reading keys): history kept in a file, completion of commands and method
//! names.

use std::borrow::Cow;

use rustyline::completion::Completer;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, ExternalPrinter, Helper};
use tokio::sync::mpsc::UnboundedSender;

const COMMANDS: [&str; 9] = [
    ":notify", ":batch", ":end", ":raw", ":reply", ":error", ":help", ":quit", ":raw!",
];

/// Tab completes method names (from `rpc.discover`) and commands.
struct Completion {
    methods: Vec<String>,
}

impl Completer for Completion {
    type Candidate = String;

    fn complete(&self, line: &str, pos: usize, _: &Context<'_>) -> rustyline::Result<(usize, Vec<String>)> {
        let before = &line[..pos];
        let start = before
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let word = &before[start..];
        let first = before[..start].trim().is_empty();
        let after_notify = before[..start].trim() == ":notify";
        let mut candidates: Vec<String> = Vec::new();
        if first || after_notify {
            candidates.extend(self.methods.iter().filter(|m| m.starts_with(word)).cloned());
        }
        if first {
            candidates.extend(
                COMMANDS
                    .iter()
                    .filter(|c| c.starts_with(word))
                    .map(|c| c.to_string()),
            );
        }
        Ok((start, candidates))
    }
}

impl Hinter for Completion {
    type Hint = String;
}

impl Highlighter for Completion {
    fn highlight_prompt<'b, 's: 'b, 'p: 'b>(&'s self, prompt: &'p str, _: bool) -> Cow<'b, str> {
        Cow::Borrowed(prompt)
    }
}

impl Validator for Completion {}

impl Helper for Completion {}

/// Where the history is kept: `$XDG_STATE_HOME/jrpc/connect_history`,
/// else `~/.local/state/jrpc/connect_history`.
fn history_file() -> Option<std::path::PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state")))?;
    Some(state.join("jrpc").join("connect_history"))
}

/// Starts the editor: each line typed goes to `lines`; the printer
/// prints above the prompt.
pub(super) fn start(
    methods: Vec<String>,
    lines: UnboundedSender<String>,
) -> rustyline::Result<(Box<dyn ExternalPrinter + Send>, std::thread::JoinHandle<()>)> {
    let mut editor: Editor<Completion, DefaultHistory> = Editor::new()?;
    editor.set_helper(Some(Completion { methods }));
    let history = history_file();
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    let printer = editor.create_external_printer()?;
    let thread = std::thread::spawn(move || {
        let mut in_batch = false;
        loop {
            let prompt = if in_batch { "batch> " } else { "jrpc> " };
            match editor.readline(prompt) {
                Ok(line) => {
                    let trimmed = line.trim();
                    if !trimmed.is_empty() {
                        let _ = editor.add_history_entry(trimmed);
                    }
                    match trimmed.split_whitespace().next() {
                        Some(":batch") => in_batch = true,
                        Some(":end") => in_batch = false,
                        // Ends here, so that the terminal is restored
                        // before the session ends.
                        Some(":quit" | ":q" | ":exit") => break,
                        _ => {}
                    }
                    if lines.send(line).is_err() {
                        break;
                    }
                }
                // Ctrl-C drops the line being typed, as a shell does.
                Err(rustyline::error::ReadlineError::Interrupted) => continue,
                Err(_) => break,
            }
        }
        if let Some(path) = &history {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.save_history(path);
        }
        // Dropping `lines` ends the session.
    });
    Ok((Box::new(printer), thread))
}
