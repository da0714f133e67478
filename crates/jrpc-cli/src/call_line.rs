//! How `--log-calls` lines are formatted.
//!
//! Exactly as `tracing_subscriber::fmt` formats them without colours
//! (`2026-11-24T07:29:25.613558Z  INFO jrpc::call: call method=add id=1
//! transport=http duration=15µs outcome="ok"`), but written straight into
//! the batch: the generic formatter spent two thirds of a logged call's
//! extra cost (ANSI styling of every field name, a second pass for the
//! timestamp, a `fmt::Write` adapter per piece). A test formats the same
//! events both ways and compares.
//!
//! Call log events carry no spans, so none are printed.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;

use crate::call_log::CallLogWriter;

/// The layer that writes call log lines (filter it to the call log's
/// target).
pub struct CallLines;

impl<S: Subscriber> tracing_subscriber::Layer<S> for CallLines {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        CallLogWriter::append(|line| format_line(event, SystemTime::now(), line));
    }
}

/// Appends `event`'s line, stamped `now`, to `lines`.
fn format_line(event: &Event<'_>, now: SystemTime, lines: &mut Vec<u8>) {
    let mut text = Text(lines);
    let text = &mut text;
    timestamp(now, text);
    let meta = event.metadata();
    text.push_str(match *meta.level() {
        Level::TRACE => " TRACE ",
        Level::DEBUG => " DEBUG ",
        Level::INFO => "  INFO ",
        Level::WARN => "  WARN ",
        Level::ERROR => " ERROR ",
    });
    text.push_str(meta.target());
    text.push_str(": ");
    let mut fields = Fields { text, first: true };
    event.record(&mut fields);
    text.push('\n');
}

/// Text appended to a byte buffer (all of whose lines are UTF-8).
struct Text<'a>(&'a mut Vec<u8>);

impl Text<'_> {
    fn push_str(&mut self, text: &str) {
        self.0.extend_from_slice(text.as_bytes());
    }

    fn push(&mut self, c: char) {
        self.push_str(c.encode_utf8(&mut [0; 4]));
    }
}

impl std::fmt::Write for Text<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.push_str(text);
        Ok(())
    }
}

/// RFC 3339 in UTC with microseconds, as `tracing_subscriber` prints it:
/// `2026-11-24T07:29:25.613558Z` (a clock set before 1970 reads as 1970).
fn timestamp(now: SystemTime, text: &mut Text<'_>) {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (year, month, day) = civil_date((secs / 86_400) as i64);
    let of_day = secs % 86_400;
    if year > 9999 {
        // Beyond RFC 3339's range, marked as `tracing_subscriber` marks it.
        let _ = write!(text, "+{year}");
    } else {
        digits(text, year as u32, 4);
    }
    // By hand: `write!` with seven arguments cost a quarter of the line.
    for (separator, value, width) in [
        ('-', month, 2),
        ('-', day, 2),
        ('T', (of_day / 3600) as u32, 2),
        (':', (of_day / 60 % 60) as u32, 2),
        (':', (of_day % 60) as u32, 2),
        ('.', since.subsec_micros(), 6),
    ] {
        text.push(separator);
        digits(text, value, width);
    }
    text.push('Z');
}

/// `value`'s last `width` decimal digits, zero-padded.
fn digits(text: &mut Text<'_>, mut value: u32, width: usize) {
    let mut buf = [b'0'; 10];
    for slot in buf[..width].iter_mut().rev() {
        *slot = b'0' + (value % 10) as u8;
        value /= 10;
    }
    text.0.extend_from_slice(&buf[..width]);
}

/// The (year, month, day) of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Writes fields as `tracing_subscriber`'s default visitor does: the
/// message first as it is, then `name=value` with the value's `Debug`,
/// separated by spaces.
struct Fields<'a, 'b> {
    text: &'a mut Text<'b>,
    first: bool,
}

impl Fields<'_, '_> {
    /// Starts a field: the separator, and its name unless it is the message.
    fn start(&mut self, field: &Field) {
        if !std::mem::take(&mut self.first) {
            self.text.push(' ');
        }
        if field.name() != "message" {
            let name = field.name();
            self.text.push_str(name.strip_prefix("r#").unwrap_or(name));
            self.text.push('=');
        }
    }
}

impl Visit for Fields<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.start(field);
        if field.name() == "message" {
            self.text.push_str(value);
        } else if value
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
        {
            // What `Debug` prints for such a string, without its escaping pass.
            self.text.push('"');
            self.text.push_str(value);
            self.text.push('"');
        } else {
            let _ = write!(self.text, "{value:?}");
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.start(field);
        let _ = write!(self.text, "{value}");
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.start(field);
        let _ = write!(self.text, "{value}");
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.start(field);
        let _ = write!(self.text, "{value:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt as _;

    /// Collects what `tracing_subscriber::fmt` writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Formats events with this layer (at `now`) and with the generic
    /// formatter.
    struct Both {
        now: SystemTime,
        ours: Arc<Mutex<Vec<u8>>>,
    }

    impl<S: Subscriber> tracing_subscriber::Layer<S> for Both {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            format_line(event, self.now, &mut self.ours.lock().unwrap());
        }
    }

    #[test]
    fn lines_are_what_the_generic_formatter_writes() {
        let theirs = Captured::default();
        let ours = Arc::new(Mutex::new(Vec::new()));
        let now = SystemTime::now();
        let writer = theirs.clone();
        let subscriber = tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(move || writer.clone())
                    .with_ansi(false),
            )
            .with(Both {
                now,
                ours: Arc::clone(&ours),
            });
        tracing::subscriber::with_default(subscriber, || {
            let id: Option<tracing::field::DisplayValue<&str>> = None;
            tracing::info!(target: "jrpc::call", method = display("add"), id = display(7), transport = display("http"), duration = %"15µs", outcome = "ok", "call");
            tracing::info!(target: "jrpc::call", method = display("nope"), id, code = -32601i64, error = "Method \"nope\" not found\n", big = u64::MAX, flag = true, "call");
            tracing::warn!(target: "jrpc::call", r#type = "é", params = r#"{"a":[1,2]}"#, "call {}", 2);
            tracing::error!(target: "other", message = "plain", quoted = "\u{7}");
        });
        let theirs = String::from_utf8(theirs.0.lock().unwrap().clone()).unwrap();
        let ours = String::from_utf8(ours.lock().unwrap().clone()).unwrap();
        assert_eq!(theirs.lines().count(), 4, "{theirs}");
        // The generic formatter reads the clock itself: compare from the
        // level on, and the stamps by their shape.
        for (theirs, ours) in theirs.lines().zip(ours.lines()) {
            assert_eq!(theirs[27..], ours[27..]);
            assert_eq!(theirs.len(), ours.len());
            assert_eq!(theirs[..4], ours[..4], "the same year");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_in_utc_with_microseconds() {
        let at = |secs: u64, micros: u64| {
            let mut bytes = Vec::new();
            timestamp(
                UNIX_EPOCH + std::time::Duration::from_micros(secs * 1_000_000 + micros),
                &mut Text(&mut bytes),
            );
            String::from_utf8(bytes).unwrap()
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(at(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(at(1_795_505_365, 613_558), "2026-11-24T07:29:25.613558Z");
        assert_eq!(at(4_107_542_399, 999_999), "2100-02-28T23:59:59.999999Z");
        assert_eq!(at(4_107_542_400, 0), "2100-03-01T00:00:00.000000Z");
        assert_eq!(at(253_402_300_800, 1), "+10000-01-01T00:00:00.000001Z");
    }
}
