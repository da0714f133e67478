//! The usual modern `tools/call`, read without serde's machinery.
//!
//! Nearly every `tools/call` a 2026-07-28 client POSTs has one shape:
//! `jsonrpc`, `id`, `method` and `params`, and in the params `name`,
//! `arguments` and the `_meta` envelope the client sent with its earlier
//! requests too. Reading that through serde costs about 6 800 instructions
//! for a 270-byte call, most of it walking the envelope's long keys to
//! validate a text the server has read before. This reader walks the bytes
//! once: the envelope is taken from [`Envelopes`] when the bytes where it
//! begins are one of the texts kept there (each was valid JSON when it was
//! read, so nothing more of it is looked at), and only the arguments are
//! handed to serde, to validate them, once the envelope is known.
//!
//! It accepts only what it is sure of and otherwise says nothing (`None`):
//! the request is then read by the general path, which decides everything
//! else (escapes, other members, members given twice, another envelope,
//! errors and their codes). What it accepts, it reads exactly as that path
//! does: the tests below hold the two to the same answer.

use std::sync::Arc;

use jrpc::message::{Cursor, Id, Limits, RawValue};

use crate::server::envelopes::Envelopes;
use crate::server::round_params::ToolCall;
use crate::types::RequestEnvelope;

/// A `tools/call` read from `body`: its id, its params without `_meta`,
/// and its envelope.
pub(super) type UsualCall = (Id, ToolCall, Arc<RequestEnvelope>);

/// The `tools/call` request in `body`, when it has the usual shape (see the
/// module's documentation) and carries an envelope `envelopes` keeps;
/// `None` leaves it to the general path.
pub(super) fn read(body: &[u8], limits: &Limits, envelopes: &Envelopes) -> Option<UsualCall> {
    // The frame's own object and the params' are two levels; a limit that
    // refuses them is for the general path to apply.
    if body.len() > limits.max_frame_len || limits.max_depth < 2 {
        return None;
    }
    let mut at = Cursor::new(body);
    let (mut version, mut method, mut id, mut params) = (false, false, None, None);
    at.skip_ws();
    at.expect(b'{')?;
    loop {
        at.skip_ws();
        let key = at.plain_bytes()?;
        at.member_value()?;
        match key {
            b"jsonrpc" if !version => {
                if at.plain_bytes()? != b"2.0" {
                    return None;
                }
                version = true;
            }
            b"method" if !method => {
                if at.plain_bytes()? != b"tools/call" {
                    return None;
                }
                method = true;
            }
            b"id" if id.is_none() => id = Some(at.id()?),
            b"params" if params.is_none() => {
                params = Some(read_params(&mut at, limits.max_depth, envelopes)?)
            }
            // Another member, or one given twice.
            _ => return None,
        }
        if !at.after_member()? {
            break;
        }
    }
    at.skip_ws();
    if !at.at_end() || !version || !method {
        return None;
    }
    let (call, envelope) = params?;
    Some((id?, call, envelope))
}

/// The params: `name`, `arguments` (an object, validated by serde) and the
/// `_meta` envelope kept in `envelopes`, and nothing else.
fn read_params(
    at: &mut Cursor<'_>,
    max_depth: usize,
    envelopes: &Envelopes,
) -> Option<(ToolCall, Arc<RequestEnvelope>)> {
    at.expect(b'{')?;
    let (mut name, mut arguments, mut envelope) = (None, None, None);
    loop {
        at.skip_ws();
        let key = at.plain_bytes()?;
        at.member_value()?;
        match key {
            b"name" if name.is_none() => name = Some(at.plain_str()?.to_owned()),
            // Inside the frame's object and the params'; validated once
            // the envelope is known to be kept.
            b"arguments" if arguments.is_none() && at.rest().first() == Some(&b'{') => {
                arguments = Some(at.skip_nested(2, max_depth)?);
            }
            b"_meta" if envelope.is_none() => {
                let (len, kept) = envelopes.known_prefix(at.rest(), max_depth.checked_sub(2)?)?;
                at.skip(len);
                envelope = Some(kept);
            }
            _ => return None,
        }
        if !at.after_member()? {
            break;
        }
    }
    let envelope = envelope?;
    let arguments = match arguments {
        Some(bytes) => {
            let raw: &RawValue = serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()?;
            Some(raw.to_owned())
        }
        None => None,
    };
    let call = ToolCall {
        name: name?,
        arguments,
        input_responses: None,
        request_state: None,
        meta: None,
    };
    Some((call, envelope))
}

#[cfg(test)]
mod tests {
    use jrpc::message::parse_request_as;
    use proptest::prelude::*;

    use super::*;

    const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}"#;

    /// Envelopes that keep `META`.
    fn kept() -> Envelopes {
        let envelopes = Envelopes::default();
        envelopes
            .read(&RawValue::from_string(META.to_owned()).unwrap())
            .unwrap();
        envelopes
    }

    /// What the general path makes of `body`, as text to compare.
    fn general(body: &[u8], limits: &Limits, envelopes: &Envelopes) -> Option<String> {
        let request = parse_request_as::<ToolCall<&RawValue>>(body, limits)?;
        if request.method != "tools/call" {
            return None;
        }
        let (call, meta) = request.params?.split_meta();
        // Read by serde, not through what `envelopes` keep: that is what
        // is compared.
        let _ = envelopes;
        let meta = meta?.get();
        let envelope: RequestEnvelope = serde_json::from_str(meta)
            .ok()
            .filter(|_| meta.starts_with('{'))?;
        Some(format!("{:?} {call:?} {envelope:?}", request.id))
    }

    /// `META` with a progress token appended as its last member.
    fn with_token(token: &str) -> String {
        format!(r#"{},"progressToken":{token}}}"#, &META[..META.len() - 1])
    }

    fn fast(body: &[u8], limits: &Limits, envelopes: &Envelopes) -> Option<String> {
        let (id, call, envelope) = read(body, limits, envelopes)?;
        Some(format!("{id:?} {call:?} {envelope:?}"))
    }

    fn call(id: &str, name: &str, arguments: &str, meta: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":{name},"arguments":{arguments},"_meta":{meta}}}}}"#
        )
    }

    #[test]
    fn reads_the_usual_calls_as_the_general_path_does() {
        let (limits, envelopes) = (Limits::default(), kept());
        for body in [
            call("1", r#""add""#, r#"{"a":1,"b":2}"#, META),
            call(r#""req-7""#, r#""é/ü""#, r#"{"text":"a \"quoted\" }] \u00e9","n":[1,{"x":null}]}"#, META),
            call("-1.5e3", r#""add""#, "{}", META),
            call("123456789012345678901234567890", r#""x""#, r#"{ "deep" : [[[[]]]] }"#, META),
            format!(
                " {{ \"params\" : {{ \"_meta\" : {META} , \"arguments\" : {{}} , \"name\" : \"add\" }} , \"method\" : \"tools/call\" ,\r\n\t\"id\" : 3 , \"jsonrpc\" : \"2.0\" }} \n"
            ),
            // No arguments at all.
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"now","_meta":{META}}}}}"#),
            // The kept envelope with a progress token appended.
            call("2", r#""add""#, r#"{"a":1}"#, &with_token("7")),
            call("3", r#""add""#, "{}", &with_token(r#""tok-3""#)),
            format!(
                r#"{{"params":{{"_meta":{},"name":"add"}},"id":4,"jsonrpc":"2.0","method":"tools/call"}}"#,
                with_token("-4")
            ),
        ] {
            let fast = fast(body.as_bytes(), &limits, &envelopes);
            assert!(fast.is_some(), "{body}");
            assert_eq!(fast, general(body.as_bytes(), &limits, &envelopes), "{body}");
        }
    }

    #[test]
    fn leaves_everything_else_to_the_general_path() {
        let (limits, envelopes) = (Limits::default(), kept());
        let other_meta = META.replace("bench", "other");
        let spaced_meta = META.replace(',', ", ");
        for body in [
            // Another envelope (even the same one written otherwise), or none.
            call("1", r#""add""#, "{}", &other_meta),
            call("1", r#""add""#, "{}", &spaced_meta),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}"#.to_owned(),
            // A token written otherwise than clients write it.
            call("1", r#""add""#, "{}", &with_token("01")),
            call("1", r#""add""#, "{}", &with_token("1.5")),
            call("1", r#""add""#, "{}", &with_token(r#""a\u0041""#)),
            call(
                "1",
                r#""add""#,
                "{}",
                &with_token("7").replace(r#","progressToken""#, r#", "progressToken""#),
            ),
            // Escapes, and what is not plain.
            call("1", r#""a\u0064d""#, "{}", META),
            call(r#""\n""#, r#""add""#, "{}", META),
            call("null", r#""add""#, "{}", META),
            call("1", "7", "{}", META),
            // Arguments that are no object, or no JSON.
            call("1", r#""add""#, "null", META),
            call("1", r#""add""#, "[1]", META),
            call("1", r#""add""#, r#"{"a":1,}"#, META),
            call("1", r#""add""#, r#"{"a":01}"#, META),
            call("1", r#""add""#, r#"{"a":"}"#, META),
            // Other members, or one given twice.
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","requestState":"s","_meta":{META}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","name":"b","_meta":{META}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{{"name":"add","_meta":{META}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","extra":0,"params":{{"name":"add","_meta":{META}}}}}"#
            ),
            // Another method, a notification, another version, a batch.
            call("1", r#""add""#, "{}", META).replace("tools/call", "prompts/get"),
            format!(r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"add","_meta":{META}}}}}"#),
            call("1", r#""add""#, "{}", META).replace("2.0", "1.0"),
            format!("[{}]", call("1", r#""add""#, "{}", META)),
            // Not the end, or more after it.
            call("1", r#""add""#, "{}", META).trim_end_matches('}').to_owned(),
            format!("{}x", call("1", r#""add""#, "{}", META)),
            format!("\u{feff}{}", call("1", r#""add""#, "{}", META)),
        ] {
            assert_eq!(fast(body.as_bytes(), &limits, &envelopes), None, "{body}");
        }
    }

    #[test]
    fn keeps_to_the_limits() {
        let envelopes = kept();
        let body = call("1", r#""add""#, r#"{"a":[[1]]}"#, META).into_bytes();
        // The arguments are five deep counting the frame's object.
        let depth = |max_depth| Limits {
            max_depth,
            ..Limits::default()
        };
        assert!(fast(&body, &depth(5), &envelopes).is_some());
        assert_eq!(
            fast(&body, &depth(5), &envelopes),
            general(&body, &depth(5), &envelopes)
        );
        assert_eq!(fast(&body, &depth(4), &envelopes), None);
        let short = Limits {
            max_frame_len: body.len() - 1,
            ..Limits::default()
        };
        assert_eq!(fast(&body, &short, &envelopes), None);
        // An envelope deeper than the limit is not taken from what is kept.
        let shallow = call("1", r#""a""#, "{}", META).into_bytes();
        assert_eq!(fast(&shallow, &depth(3), &envelopes), None);
        assert!(fast(&shallow, &depth(4), &envelopes).is_some());
    }

    proptest! {
        // A case costs microseconds; about one in eight is accepted.
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Whatever the fast reader accepts, the general path reads the
        /// same: calls of the usual shape, under any depth limit, with
        /// bytes changed here and there (text or not).
        #[test]
        fn never_differs_from_the_general_path(
            arguments in prop_oneof![
                3 => proptest::sample::select(vec![
                    "{}",
                    r#"{"a":1,"b":2}"#,
                    r#"{"t":"x \" ] }","n":[1,{"m":null}]}"#,
                    r#"{"d":[[[]]],"e":-1.5e3}"#,
                    r#"{"é":"ü\u00e9"}"#,
                ]).prop_map(str::to_owned),
                1 => r#"\{("[a-z"\\é]{0,3}":[0-9tfn\[\]{}",.\\ ]{0,6},?){0,3}\}"#,
            ],
            token in proptest::option::of(prop_oneof![
                proptest::sample::select(vec!["7", "-12", "0", r#""t-1""#, "\"\""]).prop_map(str::to_owned),
                r#"-?[0-9]{1,20}|"[a-z\\"é]{0,3}""#,
            ]),
            at in proptest::collection::vec((0usize..400, any::<u8>()), 0..3),
            max_depth in 1usize..8,
        ) {
            let limits = Limits { max_depth, ..Limits::default() };
            let envelopes = kept();
            let meta = match token {
                Some(token) => with_token(&token),
                None => META.to_owned(),
            };
            let mut body = call("1", r#""add""#, &arguments, &meta).into_bytes();
            for (i, byte) in at {
                let i = i % body.len();
                body[i] = byte;
            }
            if let Some(fast) = fast(&body, &limits, &envelopes) {
                prop_assert_eq!(Some(fast), general(&body, &limits, &envelopes), "{:?}", String::from_utf8_lossy(&body));
            }
        }
    }
}
