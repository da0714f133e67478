//! The usual frame, read without serde's machinery.
//!
//! Nearly every frame a server reads is one request or notification of one
//! shape: `jsonrpc`, `method`, `id` and `params` members, plain strings
//! (no escapes), an integer or short string id, params an array or object.
//! Reading that through serde's visitors costs about 2 400 instructions for
//! a 55-byte `add` call, half of all a TCP server spends on it. Nearly every
//! frame a client reads is the response to one of its calls: `jsonrpc`,
//! `id` and `result`. This reader walks the bytes once and hands the params
//! or the result to serde only to validate them.
//!
//! It accepts only what it is sure of and otherwise says nothing (`None`):
//! the frame is then read by [`parse_frame`](super::parse_frame)'s general
//! path, which decides everything else (batches, error responses, escapes,
//! duplicates, unknown members, errors and their codes). What it accepts,
//! it reads exactly as that path does: the property test below holds the
//! two to the same answer.

use std::borrow::Cow;

use super::cursor::Cursor;
use super::{Incoming, Limits, NotificationRef, RequestRef, ResponseRef, Version};

/// The frame in `bytes` as a request, a notification or a response with a
/// result, when it has the usual shape (see the module's documentation);
/// `None` leaves it to the general path.
pub(super) fn usual<'a>(bytes: &'a [u8], limits: &Limits) -> Option<Incoming<'a>> {
    // Too long, or a limit that refuses even the frame's own object.
    if bytes.len() > limits.max_frame_len || limits.max_depth == 0 {
        return None;
    }
    // Valid UTF-8 checked once, so that every piece is sliced from the text
    // without checking it again.
    let text = std::str::from_utf8(bytes).ok()?;
    let mut at = Cursor::of_text(text);
    at.skip_ws();
    at.expect(b'{')?;
    let mut version = false;
    let mut method = None;
    let mut id = None;
    let mut params = None;
    let mut result = None;
    loop {
        at.skip_ws();
        let key = at.plain_str()?;
        at.member_value()?;
        match key {
            "jsonrpc" if !version => {
                // Anything but "2.0" (or a 1.0 request, which has none) is
                // for the general path to judge.
                if at.plain_str()? != "2.0" {
                    return None;
                }
                version = true;
            }
            "method" if method.is_none() => method = Some(at.plain_str()?),
            "id" if id.is_none() => id = Some(at.id()?),
            "params" if params.is_none() => params = Some(at.nested(1, limits.max_depth)?),
            "result" if result.is_none() => result = Some(at.value(1, limits.max_depth)?),
            // Another member, or one given twice.
            _ => return None,
        }
        if !at.after_member()? {
            break;
        }
    }
    at.skip_ws();
    if !at.at_end() || !version {
        return None;
    }
    if let Some(result) = result {
        // A result beside a method or params is no message the general
        // path would read as a response: it says what it is.
        if method.is_some() || params.is_some() {
            return None;
        }
        return Some(Incoming::Response(ResponseRef {
            version: Version::V2,
            id: id?,
            outcome: Ok(result),
        }));
    }
    let method = Cow::Borrowed(method?);
    Some(match id {
        Some(id) => Incoming::Request(RequestRef {
            version: Version::V2,
            id,
            method,
            params,
        }),
        None => Incoming::Notification(NotificationRef {
            version: Version::V2,
            method,
            params,
        }),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::parse::parse_with_serde;
    use super::super::{Frame, Limits};
    use super::*;

    fn general(text: &str, limits: &Limits) -> String {
        match parse_with_serde(text.as_bytes(), limits) {
            Ok(Frame::Single(item)) => format!("{item:?}"),
            other => format!("not a single item: {other:?}"),
        }
    }

    fn fast(text: &str, limits: &Limits) -> Option<String> {
        usual(text.as_bytes(), limits).map(|item| format!("{item:?}"))
    }

    #[test]
    fn reads_the_usual_requests_as_the_general_path_does() {
        let limits = Limits::default();
        for text in [
            r#"{"jsonrpc":"2.0","method":"add","params":[1,2],"id":7}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","method":"add","params":{"a":1,"b":[2,{"c":"}"}]}}"#,
            r#" { "jsonrpc" : "2.0" , "method" : "m" } "#,
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[\"\\\"]\",\"é\"],\"id\":-1.5e3}\r\n",
            r#"{"id":123456789012345678901234567890,"method":"m","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","method":"é/ü","id":"ß"}"#,
            // Responses with a result, of every kind.
            r#"{"jsonrpc":"2.0","result":3,"id":1}"#,
            r#"{"id":"c-9","jsonrpc":"2.0","result":{"content":[{"type":"text","text":"3"}]}}"#,
            r#" { "jsonrpc" : "2.0" , "result" : null , "id" : 4294967296 } "#,
            r#"{"jsonrpc":"2.0","result":"a \"quoted\" \u00e9]}","id":2}"#,
            r#"{"jsonrpc":"2.0","result":[true,false,-1.5e3],"id":3}"#,
            r#"{"jsonrpc":"2.0","result":false,"id":3}"#,
        ] {
            assert_eq!(fast(text, &limits), Some(general(text, &limits)), "{text}");
        }
    }

    #[test]
    fn reads_deep_params_up_to_the_limit() {
        // The frame is `depth` deep, the request's own object included.
        let nested = |depth: usize| {
            let params = format!("{}{}", "[".repeat(depth - 1), "]".repeat(depth - 1));
            format!(r#"{{"jsonrpc":"2.0","method":"m","params":{params},"id":1}}"#)
        };
        for (max_depth, depth) in [(128, 128), (1000, 500), (1000, 1000)] {
            let limits = Limits {
                max_depth,
                ..Limits::default()
            };
            assert_eq!(
                fast(&nested(depth), &limits),
                Some(general(&nested(depth), &limits))
            );
        }
        let limits = Limits::default();
        assert_eq!(fast(&nested(129), &limits), None);
        assert!(general(&nested(129), &limits).starts_with("not a single item: Err"));
    }

    #[test]
    fn leaves_everything_else_to_the_general_path() {
        let limits = Limits::default();
        for text in [
            // Not a request of the usual shape.
            r#"[{"jsonrpc":"2.0","method":"m","id":1}]"#,
            // Error responses, and results the general path judges.
            r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"},"id":1}"#,
            r#"{"jsonrpc":"2.0","result":1,"error":null,"id":1}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","result":1,"id":null}"#,
            r#"{"jsonrpc":"2.0","result":1,"method":"m","id":1}"#,
            r#"{"jsonrpc":"2.0","result":01,"id":1}"#,
            r#"{"jsonrpc":"2.0","result":tru,"id":1}"#,
            r#"{"jsonrpc":"2.0","result":[1,],"id":1}"#,
            r#"{"result":1,"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","id":null}"#,
            r#"{"jsonrpc":"2.0","method":"m","id":1,"extra":true}"#,
            r#"{"method":"m","id":1}"#,
            r#"{"jsonrpc":"1.0","method":"m","id":1}"#,
            // Escapes in the members.
            r#"{"jsonrpc":"2.0","method":"\u0061","id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","id":"\n"}"#,
            // What the general path refuses, with its own code.
            r#"{"jsonrpc":"2.0","method":"m","id":1,"id":2}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":1,"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":[1,}],"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":[01],"id":1}"#,
            r#"{"jsonrpc":"2.0","method":"m","id":01}"#,
            r#"{"jsonrpc":"2.0","method":"m","id":1}x"#,
            r#"{"jsonrpc":"2.0","method":"m","id":1"#,
            "{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":[\"\u{1}\"],\"id\":1}",
            "\u{feff}{\"jsonrpc\":\"2.0\",\"method\":\"m\"}",
        ] {
            assert_eq!(fast(text, &limits), None, "{text}");
        }
        let shallow = Limits {
            max_depth: 2,
            ..Limits::default()
        };
        let deep = r#"{"jsonrpc":"2.0","method":"m","params":[[1]],"id":1}"#;
        assert_eq!(fast(deep, &shallow), None);
        let long = Limits {
            max_frame_len: 10,
            ..Limits::default()
        };
        assert_eq!(fast(r#"{"jsonrpc":"2.0","method":"m"}"#, &long), None);
    }

    fn ws() -> impl Strategy<Value = &'static str> {
        prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\r\n\t")]
    }

    /// Member values, most of them usual, some of every kind the general
    /// path treats otherwise.
    fn values(usual: Vec<&'static str>, odd: Vec<&'static str>) -> impl Strategy<Value = String> {
        prop_oneof![
            4 => proptest::sample::select(usual).prop_map(str::to_owned),
            1 => proptest::sample::select(odd).prop_map(str::to_owned),
        ]
    }

    /// The members of a request-like object, in any order: those a request
    /// has (each present or not), and now and then one given twice or one
    /// it should not have.
    fn members() -> impl Strategy<Value = Vec<(String, String)>> {
        let jsonrpc = values(
            vec![r#""2.0""#],
            vec![r#""1.0""#, "2.0", r#""2.0 ""#, r#""2\u002e0""#],
        );
        let method = values(
            vec![r#""add""#, r#""tools/call""#, r#""a.b_c""#, r#""""#],
            vec![r#""\u0061""#, r#""é""#, "1", "null", "[]", "\"a\u{1}\""],
        );
        let id = prop_oneof![
            4 => prop_oneof![(0i64..i64::MAX).prop_map(|n| n.to_string()), "\"[a-z0-9-]{0,30}\""],
            1 => proptest::sample::select(vec![
                "null", "-0", "01", "1.5e3", "1.", "-", "1e", "true", "[1]", r#""a\"b""#, r#""é""#,
                "123456789012345678901234567890",
            ])
            .prop_map(str::to_owned),
        ];
        let params = values(
            vec![
                "[1,2]",
                r#"{"a":[1,{"b":"]"}]}"#,
                "[]",
                "{}",
                r#"["\u00e9\n","é"]"#,
                "[[[1]]]",
            ],
            vec![
                "[1,]",
                "[1}",
                "[01]",
                "1",
                "null",
                r#""x""#,
                "[\"\u{1}\"]",
                r#"{"a"}"#,
                "[1 2]",
            ],
        );
        let result = values(
            vec![
                "3",
                "null",
                "true",
                r#""text""#,
                r#"{"content":[{"type":"text","text":"3"}],"isError":false}"#,
                r#"["a\"]",{"b":[]}]"#,
                "-1.5e3",
                "[[[1]]]",
            ],
            vec![
                "01",
                "tru",
                "[1,]",
                "\"a\u{1}\"",
                r#"{"a"}"#,
                "1 2",
                r#""\x""#,
                "-",
            ],
        );
        let extra = prop_oneof![
            6 => Just(None),
            1 => Just(Some(("jsonrpc".to_owned(), r#""2.0""#.to_owned()))),
            1 => Just(Some(("id".to_owned(), "2".to_owned()))),
            1 => Just(Some(("error".to_owned(), r#"{"code":1,"message":"m"}"#.to_owned()))),
            1 => Just(Some(("other".to_owned(), "{}".to_owned()))),
        ];
        // Requests mostly; responses (a result, no method) a quarter of
        // the time.
        let response = proptest::bool::weighted(0.25);
        // Now and then a response keeps the request's method and params.
        let mixed = proptest::bool::weighted(0.2);
        (
            proptest::option::weighted(0.9, jsonrpc),
            proptest::option::weighted(0.9, method),
            proptest::option::weighted(0.7, id),
            proptest::option::weighted(0.7, params),
            (response, mixed, proptest::option::weighted(0.9, result)),
            extra,
        )
            .prop_map(
                |(jsonrpc, method, id, params, (response, mixed, result), extra)| {
                    let mut members = Vec::new();
                    let (method, params, result) = match (response, mixed) {
                        (true, false) => (None, None, result),
                        (true, true) => (method, params, result),
                        (false, _) => (method, params, None),
                    };
                    for (key, value) in [
                        ("jsonrpc", jsonrpc),
                        ("method", method),
                        ("id", id),
                        ("params", params),
                        ("result", result),
                    ] {
                        if let Some(value) = value {
                            members.push((key.to_owned(), value));
                        }
                    }
                    members.extend(extra);
                    members
                },
            )
            .prop_shuffle()
    }

    /// A request-like frame of `members`, spaced out by `spaces`.
    fn frame(members: &[(String, String)], spaces: &[&str]) -> String {
        let space = |i: usize| spaces[i % spaces.len()];
        let body: Vec<String> = members
            .iter()
            .enumerate()
            .map(|(i, (key, value))| {
                format!(
                    "{}\"{key}\"{}:{}{value}{}",
                    space(i),
                    space(i + 1),
                    space(i + 2),
                    space(i + 3)
                )
            })
            .collect();
        format!("{}{{{}}}{}", space(7), body.join(","), space(8))
    }

    proptest! {
        #[test]
        fn what_it_reads_it_reads_as_the_general_path(
            members in members(),
            spaces in proptest::collection::vec(ws(), 1..5),
            max_depth in 0usize..6,
        ) {
            let text = frame(&members, &spaces);
            let limits = Limits { max_depth, ..Limits::default() };
            if let Some(fast) = fast(&text, &limits) {
                prop_assert_eq!(fast, general(&text, &limits), "{}", text);
            }
        }

        #[test]
        fn usual_requests_are_read_by_it(
            id in prop_oneof![(0i64..i64::MAX).prop_map(|n| n.to_string()), "\"[a-z0-9-]{0,30}\""],
            method in "[a-z/_.]{1,20}",
            a in any::<i32>(),
            b in any::<i32>(),
        ) {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":[{a},{b}]}}"#);
            let limits = Limits::default();
            prop_assert_eq!(fast(&text, &limits), Some(general(&text, &limits)));
        }

        #[test]
        fn usual_responses_are_read_by_it(
            id in prop_oneof![(0i64..i64::MAX).prop_map(|n| n.to_string()), "\"[a-z0-9-]{0,30}\""],
            text in "[a-z0-9 ]{0,40}",
            n in any::<i64>(),
        ) {
            let limits = Limits::default();
            for result in [n.to_string(), format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#)] {
                let frame = format!(r#"{{"jsonrpc":"2.0","result":{result},"id":{id}}}"#);
                prop_assert_eq!(fast(&frame, &limits), Some(general(&frame, &limits)));
            }
        }
    }
}
