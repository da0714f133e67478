//! Helpers shared by the fuzz targets.
//!
//! - [`reference`]: an independent model of how a frame's items must be
//!   classified, built on plain serde_json parsing (member lists, not the
//!   library's streaming visitors), used as an oracle for `parse_frame`.
//! - [`reply`]: structural checks of reply frames.
//! - [`stream`]: splitting a fuzz input into codec parameters and a byte
//!   stream, and driving a decoder over it whole and in chunks.

pub mod reference {
    use std::fmt;

    use jrpc::message::{Incoming, Version};
    use jrpc::{Error, Id};
    use serde::de::{self, Deserialize, MapAccess, Visitor};
    use serde_json::value::RawValue;
    use serde_json::Value;

    /// An object's members in order, duplicates kept, values raw.
    pub struct Members<'a>(pub Vec<(String, &'a RawValue)>);

    impl<'de> Deserialize<'de> for Members<'de> {
        fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Members<'de>;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                    let mut members = Vec::new();
                    while let Some(key) = map.next_key::<String>()? {
                        members.push((key, map.next_value::<&'de RawValue>()?));
                    }
                    Ok(Members(members))
                }
            }
            deserializer.deserialize_map(V)
        }
    }

    impl<'a> Members<'a> {
        /// Parses `text`, which must be a JSON object.
        pub fn parse(text: &'a str) -> Option<Self> {
            serde_json::from_str(text).ok()
        }

        /// The last member named `name` (later duplicates win).
        pub fn last(&self, name: &str) -> Option<&'a RawValue> {
            self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| *v)
        }

        /// How many members are named `name`.
        pub fn count(&self, name: &str) -> usize {
            self.0.iter().filter(|(k, _)| k == name).count()
        }

        /// The member names, in order.
        pub fn names(&self) -> Vec<&str> {
            self.0.iter().map(|(k, _)| k.as_str()).collect()
        }
    }

    /// An id as the model sees it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum RefId {
        Null,
        /// The exact number text.
        Num(String),
        /// The decoded string.
        Str(String),
    }

    impl RefId {
        /// The library's id, seen by the model.
        pub fn of(id: &Id) -> RefId {
            if id.is_null() {
                RefId::Null
            } else if let Some(s) = id.as_str() {
                RefId::Str(s.to_owned())
            } else if let Some(n) = id.as_number_text() {
                RefId::Num(n.to_owned())
            } else {
                panic!("an id that is neither null, a string nor a number: {id:?}")
            }
        }

        /// A raw member as an id; `None` for kinds the spec does not allow.
        /// Needs a value serde_json can decode (the caller checked that).
        pub fn from_raw(raw: &RawValue) -> Option<RefId> {
            match serde_json::from_str::<Value>(raw.get()).expect("strictly valid JSON") {
                Value::Null => Some(RefId::Null),
                Value::String(s) => Some(RefId::Str(s)),
                Value::Number(_) => Some(RefId::Num(raw.get().to_owned())),
                _ => None,
            }
        }

        /// The id as JSON text, as a reply must carry it.
        pub fn to_json(&self) -> String {
            match self {
                RefId::Null => "null".to_owned(),
                RefId::Num(n) => n.clone(),
                RefId::Str(s) => serde_json::to_string(s).unwrap(),
            }
        }
    }

    /// One classified item, owned, comparable.
    #[derive(Debug, Clone, PartialEq)]
    pub enum Item {
        Request {
            version: Version,
            id: RefId,
            method: String,
            params: Option<String>,
        },
        Notification {
            version: Version,
            method: String,
            params: Option<String>,
        },
        Response {
            version: Version,
            id: RefId,
            outcome: Result<String, Error>,
        },
        Invalid {
            version: Version,
            id: RefId,
            error: Error,
        },
    }

    impl Item {
        /// What the library's classification says, in the model's terms.
        pub fn observe(item: &Incoming<'_>) -> Item {
            match item {
                Incoming::Request(r) => Item::Request {
                    version: r.version,
                    id: RefId::of(&r.id),
                    method: r.method.to_string(),
                    params: r.params.map(|p| p.get().to_owned()),
                },
                Incoming::Notification(n) => Item::Notification {
                    version: n.version,
                    method: n.method.to_string(),
                    params: n.params.map(|p| p.get().to_owned()),
                },
                Incoming::Response(r) => Item::Response {
                    version: r.version,
                    id: RefId::of(&r.id),
                    outcome: r.outcome.clone().map(|raw| raw.get().to_owned()),
                },
                Incoming::Invalid(i) => Item::Invalid {
                    version: i.version,
                    id: RefId::of(&i.id),
                    error: i.error.clone(),
                },
            }
        }
    }

    const KNOWN: [&str; 6] = ["jsonrpc", "method", "params", "id", "result", "error"];

    fn invalid(version: Version, id: Option<Option<RefId>>) -> Item {
        Item::Invalid {
            version,
            id: id.flatten().unwrap_or(RefId::Null),
            error: Error::invalid_request(),
        }
    }

    /// How one value of a frame (the frame itself, or a batch entry) must
    /// be classified. `raw` must be strictly valid JSON (serde_json decodes
    /// it into a `Value`).
    ///
    /// The rules (JSON-RPC 2.0, plus jrpc's documented 1.0 mode):
    /// - not an object, or a repeated member among `jsonrpc`, `method`,
    ///   `params`, `id`, `result`, `error`: invalid (`-32600`);
    /// - `"jsonrpc": "2.0"` is 2.0; no `jsonrpc` is 1.0 when that is
    ///   accepted; anything else is invalid;
    /// - with a `method`: it must be a string; `params` absent, an array or
    ///   an object (or `null` in 1.0); no `id` makes a notification (so does
    ///   a `null` id in 1.0); an id that is not a string, number or null is
    ///   invalid; otherwise a request;
    /// - without a `method`: a response needs a valid id and exactly one of
    ///   `result` / a well-formed `error` (in 1.0 the unused one is `null`).
    pub fn classify(raw: &RawValue, accept_v1: bool) -> Item {
        let Some(m) = raw
            .get()
            .starts_with('{')
            .then(|| Members::parse(raw.get()))
            .flatten()
        else {
            return invalid(Version::V2, None);
        };
        let id: Option<Option<RefId>> = m.last("id").map(RefId::from_raw);
        let version = match m.last("jsonrpc") {
            Some(v) if serde_json::from_str::<String>(v.get()).ok().as_deref() == Some("2.0") => Version::V2,
            None if accept_v1 => Version::V1,
            _ => return invalid(Version::V2, id),
        };
        if KNOWN.iter().any(|name| m.count(name) > 1) {
            return invalid(version, id);
        }
        if let Some(method) = m.last("method") {
            let Ok(method) = serde_json::from_str::<String>(method.get()) else {
                return invalid(version, id);
            };
            let params = match m.last("params") {
                None => None,
                Some(p) if p.get().starts_with(['[', '{']) => Some(p.get().to_owned()),
                Some(p) if version == Version::V1 && p.get() == "null" => None,
                Some(_) => return invalid(version, id),
            };
            return match id {
                None => Item::Notification {
                    version,
                    method,
                    params,
                },
                Some(None) => invalid(version, None),
                Some(Some(RefId::Null)) if version == Version::V1 => Item::Notification {
                    version,
                    method,
                    params,
                },
                Some(Some(id)) => Item::Request {
                    version,
                    id,
                    method,
                    params,
                },
            };
        }
        let (result, error) = (m.last("result"), m.last("error"));
        if result.is_none() && error.is_none() {
            return invalid(version, id);
        }
        let Some(Some(id)) = id else {
            return invalid(version, None);
        };
        let (result, error) = match version {
            Version::V2 => (result, error),
            Version::V1 => {
                let error = error.filter(|e| e.get() != "null");
                (if error.is_some() { None } else { result }, error)
            }
        };
        match (result, error) {
            (Some(result), None) => Item::Response {
                version,
                id,
                outcome: Ok(result.get().to_owned()),
            },
            (None, Some(error)) => match serde_json::from_str::<Error>(error.get()) {
                Ok(error) => Item::Response {
                    version,
                    id,
                    outcome: Err(error),
                },
                Err(_) => invalid(version, Some(Some(id))),
            },
            _ => invalid(version, Some(Some(id))),
        }
    }

    /// Nesting depth of a JSON text: scalars 0, an array or object one
    /// more than its deepest member. Every member counts, repeated ones too
    /// (a `Value` would keep only the last). `None` if serde_json refuses it.
    pub fn depth(text: &str) -> Option<usize> {
        struct Depth(usize);
        impl<'de> Deserialize<'de> for Depth {
            fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Depth;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("any JSON value")
                    }
                    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Depth, A::Error> {
                        let mut deepest = 0;
                        while let Some(Depth(d)) = seq.next_element()? {
                            deepest = deepest.max(d);
                        }
                        Ok(Depth(1 + deepest))
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Depth, A::Error> {
                        let mut deepest = 0;
                        while let Some((de::IgnoredAny, Depth(d))) = map.next_entry()? {
                            deepest = deepest.max(d);
                        }
                        Ok(Depth(1 + deepest))
                    }
                    fn visit_bool<E>(self, _: bool) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                    fn visit_i64<E>(self, _: i64) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                    fn visit_u64<E>(self, _: u64) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                    fn visit_f64<E>(self, _: f64) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                    fn visit_str<E>(self, _: &str) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                    fn visit_unit<E>(self) -> Result<Depth, E> {
                        Ok(Depth(0))
                    }
                }
                deserializer.deserialize_any(V)
            }
        }
        serde_json::from_str::<Depth>(text).ok().map(|Depth(d)| d)
    }
}

pub mod reply {
    use jrpc::message::codes;
    use serde_json::value::RawValue;

    use crate::reference::Members;

    /// One checked response object of a reply.
    #[derive(Debug)]
    pub struct Response<'a> {
        /// The id member, as JSON text.
        pub id: &'a str,
        /// `Ok(result JSON text)` or `Err((code, message, data JSON text))`.
        pub outcome: Result<&'a str, (i64, String, Option<&'a str>)>,
    }

    /// A reply frame: one response, or a batch of them.
    #[derive(Debug)]
    pub enum Reply<'a> {
        Single(Response<'a>),
        Batch(Vec<Response<'a>>),
    }

    impl<'a> Reply<'a> {
        /// The responses, in order.
        pub fn responses(&self) -> Vec<&Response<'a>> {
            match self {
                Reply::Single(r) => vec![r],
                Reply::Batch(rs) => rs.iter().collect(),
            }
        }
    }

    /// Checks that `bytes` is a well-formed JSON-RPC 2.0 reply frame and
    /// splits it into its responses:
    /// - UTF-8 and JSON (numbers are checked for syntax, not range: an id is
    ///   echoed byte for byte, and `1e400` is a valid JSON number);
    /// - one response object, or a non-empty array of them;
    /// - each response has exactly the members `jsonrpc` (= `"2.0"`), `id`,
    ///   and one of `result` / `error`, none repeated;
    /// - an error object has an integer `code`, a string `message`, an
    ///   optional `data`, and nothing else.
    pub fn parse(bytes: &[u8]) -> Reply<'_> {
        let text = std::str::from_utf8(bytes).expect("reply is not UTF-8");
        serde_json::from_str::<serde::de::IgnoredAny>(text)
            .unwrap_or_else(|e| panic!("reply is not JSON ({e}): {text}"));
        if text.starts_with('[') {
            let entries: Vec<&RawValue> = serde_json::from_str(text).expect("reply batch entries");
            assert!(!entries.is_empty(), "empty batch reply: {text}");
            Reply::Batch(entries.into_iter().map(|e| response(e.get())).collect())
        } else {
            Reply::Single(response(text))
        }
    }

    fn response(text: &str) -> Response<'_> {
        let m = Members::parse(text).unwrap_or_else(|| panic!("response is not an object: {text}"));
        let mut names = m.names();
        names.sort_unstable();
        let has_result = m.count("result") == 1;
        let expected: &[&str] = if has_result {
            &["id", "jsonrpc", "result"]
        } else {
            &["error", "id", "jsonrpc"]
        };
        assert_eq!(names, expected, "response members: {text}");
        assert_eq!(m.last("jsonrpc").unwrap().get(), r#""2.0""#, "{text}");
        let id = m.last("id").unwrap().get();
        assert!(
            id == "null"
                || id.starts_with('"')
                || id.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']),
            "id is not a string, number or null: {text}"
        );
        let outcome = if has_result {
            Ok(m.last("result").unwrap().get())
        } else {
            Err(error_object(m.last("error").unwrap().get()))
        };
        Response { id, outcome }
    }

    fn error_object(text: &str) -> (i64, String, Option<&str>) {
        let m = Members::parse(text).unwrap_or_else(|| panic!("error is not an object: {text}"));
        for name in m.names() {
            assert!(
                ["code", "message", "data"].contains(&name),
                "error member {name:?}: {text}"
            );
        }
        for name in ["code", "message", "data"] {
            assert!(m.count(name) <= 1, "error member {name:?} repeated: {text}");
        }
        let code = m
            .last("code")
            .unwrap_or_else(|| panic!("error without code: {text}"))
            .get();
        let code: i64 = code
            .parse()
            .unwrap_or_else(|_| panic!("error code is not an integer: {text}"));
        let message = m
            .last("message")
            .unwrap_or_else(|| panic!("error without message: {text}"));
        let message: String = serde_json::from_str(message.get())
            .unwrap_or_else(|_| panic!("error message is not a string: {text}"));
        (code, message, m.last("data").map(|d| d.get()))
    }

    /// The codes a frame-level error (`parse_frame` failing) may carry.
    pub const FRAME_ERRORS: [i64; 5] = [
        codes::PARSE_ERROR,
        codes::INVALID_REQUEST,
        codes::FRAME_TOO_LARGE,
        codes::BATCH_TOO_LARGE,
        codes::NESTING_TOO_DEEP,
    ];
}

pub mod stream {
    use std::io;

    use bytes::BytesMut;
    use jrpc::codec::Inbound;
    use tokio_util::codec::Decoder;

    /// A codec fuzz input: the codec's limit, where the stream is cut into
    /// chunks, and the stream.
    #[derive(Debug)]
    pub struct Input<'a> {
        /// The codec's `max_len`: 1..=64.
        pub max_len: usize,
        /// The chunk lengths the stream is fed in (the rest goes last).
        pub chunks: Vec<usize>,
        /// Feed the stream one byte at a time instead.
        pub bytewise: bool,
        pub stream: &'a [u8],
    }

    impl<'a> Input<'a> {
        /// Layout: byte 0 picks `max_len` (1 + b % 64); byte 1 holds the
        /// number of cut bytes (low 3 bits), whether chunk lengths are
        /// scaled by 64 (bit 3) and whether to feed byte by byte (bit 7);
        /// then the cut bytes (each a chunk of 1 + b bytes, times 64 when
        /// scaled); the rest is the stream.
        pub fn split(data: &'a [u8]) -> Option<Self> {
            let (&b0, rest) = data.split_first()?;
            let (&b1, rest) = rest.split_first()?;
            let cuts = usize::from(b1 & 7);
            if rest.len() < cuts {
                return None;
            }
            let (cut_bytes, stream) = rest.split_at(cuts);
            let scale = if b1 & 8 != 0 { 64 } else { 1 };
            Some(Input {
                max_len: 1 + usize::from(b0 % 64),
                chunks: cut_bytes.iter().map(|&b| (usize::from(b) + 1) * scale).collect(),
                bytewise: b1 & 0x80 != 0,
                stream,
            })
        }

        /// The stream cut as this input says; the pieces concatenate to it.
        pub fn pieces(&self) -> Vec<&'a [u8]> {
            if self.bytewise {
                return self.stream.chunks(1).collect();
            }
            let mut pieces = Vec::new();
            let mut rest = self.stream;
            for &len in &self.chunks {
                let (piece, tail) = rest.split_at(len.min(rest.len()));
                pieces.push(piece);
                rest = tail;
            }
            pieces.push(rest);
            pieces
        }
    }

    /// Feeds `pieces` to `decoder` one after another, decoding all it can
    /// after each, then ends the stream. Returns the items.
    ///
    /// Checks on the way: every time `decode` returns `None` the buffer
    /// holds at most `bound` bytes; the decoder never errors; it makes
    /// progress (no more items than bytes, plus one); after the final
    /// `decode_eof` returns `None` nothing is left in the buffer.
    pub fn decode_pieces<D>(decoder: &mut D, pieces: &[&[u8]], bound: usize) -> Vec<Inbound>
    where
        D: Decoder<Item = Inbound, Error = io::Error>,
    {
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for piece in pieces {
            buf.extend_from_slice(piece);
            while let Some(item) = decoder.decode(&mut buf).expect("decode never fails") {
                out.push(item);
                assert!(out.len() <= total + 1, "decoder makes no progress: {out:?}");
            }
            assert!(
                buf.len() <= bound,
                "decode returned None with {} bytes buffered (bound {bound})",
                buf.len()
            );
        }
        while let Some(item) = decoder.decode_eof(&mut buf).expect("decode_eof never fails") {
            out.push(item);
            assert!(out.len() <= total + 1, "decoder makes no progress: {out:?}");
        }
        assert!(
            buf.is_empty(),
            "{} bytes left after the end of the stream",
            buf.len()
        );
        out
    }

    /// The frames among `items`.
    pub fn frames(items: &[Inbound]) -> Vec<&[u8]> {
        items
            .iter()
            .filter_map(|item| match item {
                Inbound::Frame(f) => Some(&f[..]),
                _ => None,
            })
            .collect()
    }
}
