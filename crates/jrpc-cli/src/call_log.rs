//! Where `--log-calls` lines go: stderr, in batches.
//!
//! One `write` per line would cost a system call per call, more than a
//! small call itself costs to serve. Lines are gathered instead and written
//! together: when 64 KiB have gathered, or 20 ms after the first line of a
//! batch, and when the command ends. Everything else on stderr (warnings,
//! errors, `jrpc call -v`) is written at once, as before.

use std::io::{self, Write};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Lines gathered beyond this are written at once.
const BATCH_BYTES: usize = 64 * 1024;

/// How long the first line of a batch may wait.
const BATCH_DELAY: Duration = Duration::from_millis(20);

struct Batch {
    lines: Mutex<Vec<u8>>,
    /// Signalled when a batch starts (the buffer was empty).
    started: Condvar,
}

static BATCH: OnceLock<Batch> = OnceLock::new();

/// Where call log lines are gathered ([`crate::call_line::CallLines`]
/// writes them).
pub struct CallLogWriter;

impl CallLogWriter {
    /// Starts the thread that writes batches out.
    pub fn start() {
        let batch = Batch {
            lines: Mutex::new(Vec::new()),
            started: Condvar::new(),
        };
        if BATCH.set(batch).is_err() {
            // Started already.
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("jrpc-call-log".into())
            .spawn(|| loop {
                let Some(batch) = BATCH.get() else { return };
                {
                    let lines = batch.lines.lock().unwrap_or_else(|p| p.into_inner());
                    let _lines = batch
                        .started
                        .wait_while(lines, |lines| lines.is_empty())
                        .unwrap_or_else(|p| p.into_inner());
                }
                std::thread::sleep(BATCH_DELAY);
                Self::flush();
            });
        if let Err(e) = spawned {
            // Lines still reach stderr, only later (at 64 KiB or the end).
            eprintln!("jrpc: cannot start the call log writer: {e}");
        }
    }

    /// Adds the line(s) `write` appends to the batch (written into it in
    /// place, under its lock).
    pub fn append(write: impl FnOnce(&mut Vec<u8>)) {
        let Some(batch) = BATCH.get() else {
            let mut line = Vec::new();
            write(&mut line);
            let _ = io::stderr().write_all(&line);
            return;
        };
        let mut lines = batch.lines.lock().unwrap_or_else(|p| p.into_inner());
        let first = lines.is_empty();
        write(&mut lines);
        if lines.len() >= BATCH_BYTES {
            write_out(&mut lines);
        } else if first {
            batch.started.notify_one();
        }
    }

    /// Writes out the lines gathered so far.
    pub fn flush() {
        if let Some(batch) = BATCH.get() {
            let mut lines = batch.lines.lock().unwrap_or_else(|p| p.into_inner());
            write_out(&mut lines);
        }
    }
}

fn write_out(lines: &mut Vec<u8>) {
    if !lines.is_empty() {
        // stderr gone: nothing to be done about it.
        let _ = io::stderr().lock().write_all(lines);
        lines.clear();
    }
}
