//! Server-Sent Events as MCP's Streamable HTTP sends them: each event's
//! data (a JSON-RPC message), with its id and the server's `retry` hint.

/// One event with data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    /// `id:`, for `Last-Event-ID` when the stream is resumed.
    pub(crate) id: Option<String>,
    /// `retry:`, in milliseconds: how long to wait before reconnecting.
    pub(crate) retry: Option<u64>,
    /// The data lines, joined.
    pub(crate) data: String,
}

/// Splits an SSE byte stream into events, however it arrives.
#[derive(Default)]
pub(crate) struct SseParser {
    /// Text not yet split into events, line breaks made `\n`.
    pending: String,
    /// A `\r` that ended the last chunk: a `\n` may follow it.
    held_cr: bool,
    /// The last event id seen (an event without `id:` keeps it).
    last_id: Option<String>,
    /// The last `retry:` seen.
    retry: Option<u64>,
    /// How many events with data were given.
    seen: u64,
}

impl SseParser {
    /// The events completed by `bytes`. Events without data (a priming
    /// event, a keep-alive) are not returned, but their `id` and `retry`
    /// carry over to the events after them.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        if std::mem::take(&mut self.held_cr) {
            text.insert(0, '\r');
        }
        if text.ends_with('\r') {
            text.pop();
            self.held_cr = true;
        }
        self.pending
            .push_str(&text.replace("\r\n", "\n").replace('\r', "\n"));
        let mut out = Vec::new();
        while let Some(end) = self.pending.find("\n\n") {
            let event: String = self.pending.drain(..end + 2).collect();
            let mut data: Vec<&str> = Vec::new();
            for line in event.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "data" => data.push(value),
                    "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
                    "retry" => {
                        if let Ok(ms) = value.parse() {
                            self.retry = Some(ms);
                        }
                    }
                    _ => {}
                }
            }
            let data = data.join("\n");
            if !data.trim().is_empty() {
                self.seen += 1;
                out.push(SseEvent {
                    id: self.last_id.clone(),
                    retry: self.retry,
                    data,
                });
            }
        }
        out
    }

    /// The last event id the stream gave (for `Last-Event-ID`).
    pub(crate) fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The server's last `retry` hint, in milliseconds.
    pub(crate) fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// How many events with data the stream has given.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::SseParser;

    #[test]
    fn sse_events_are_split_however_they_arrive() {
        let stream = "id: 1\r\ndata: {\"a\":1}\r\n\r\n: keep-alive\n\nretry: 5\nid: 2\ndata:\n\nevent: message\ndata: {\"b\":\r\ndata: 2}\r\n\r\n";
        for cut in 0..stream.len() {
            let mut parser = SseParser::default();
            let mut got = parser.feed(&stream.as_bytes()[..cut]);
            got.extend(parser.feed(&stream.as_bytes()[cut..]));
            let data: Vec<_> = got.iter().map(|e| e.data.as_str()).collect();
            assert_eq!(data, ["{\"a\":1}", "{\"b\":\n2}"], "cut at {cut}");
            assert_eq!(got[0].id.as_deref(), Some("1"));
            // The second event inherits the id and retry of the priming one.
            assert_eq!((got[1].id.as_deref(), got[1].retry), (Some("2"), Some(5)));
            assert_eq!(
                (parser.last_id(), parser.retry(), parser.seen()),
                (Some("2"), Some(5), 2)
            );
        }
    }
}
