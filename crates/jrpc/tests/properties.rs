//! Property tests: no input makes the router panic or answer with anything
//! but a valid JSON-RPC reply, and valid requests round-trip exactly.

use jrpc::message::{parse_frame, parse_request_as, Frame, Id, Incoming, Limits, Request};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Checks that `reply` is one valid response object or a non-empty array of
/// them.
fn assert_valid_reply(reply: &[u8]) -> Result<(), TestCaseError> {
    let value: Value =
        serde_json::from_slice(reply).map_err(|e| TestCaseError::fail(format!("reply is not JSON: {e}")))?;
    match &value {
        Value::Array(items) => {
            prop_assert!(!items.is_empty(), "empty batch reply");
            for item in items {
                assert_valid_response(item)?;
            }
        }
        other => assert_valid_response(other)?,
    }
    Ok(())
}

fn assert_valid_response(v: &Value) -> Result<(), TestCaseError> {
    let obj = v
        .as_object()
        .ok_or_else(|| TestCaseError::fail(format!("not an object: {v}")))?;
    prop_assert_eq!(obj.get("jsonrpc"), Some(&Value::String("2.0".into())), "{}", v);
    prop_assert!(
        matches!(
            obj.get("id"),
            Some(Value::Null | Value::String(_) | Value::Number(_))
        ),
        "bad id: {}",
        v
    );
    prop_assert!(
        obj.contains_key("result") != obj.contains_key("error"),
        "result xor error: {}",
        v
    );
    if let Some(error) = obj.get("error") {
        prop_assert!(error["code"].is_i64(), "error code: {}", v);
        prop_assert!(error["message"].is_string(), "error message: {}", v);
    }
    prop_assert_eq!(obj.len(), 3, "no extra members: {}", v);
    Ok(())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects that look like JSON-RPC messages, valid or not.
fn message_like() -> impl Strategy<Value = Value> {
    let member = |values: BoxedStrategy<Value>| prop::option::of(values);
    let jsonrpc = prop_oneof![Just(Value::from("2.0")), Just(Value::from("1.0")), json_value()].boxed();
    let method = prop_oneof![
        prop::sample::select(vec![
            "subtract", "sum", "add", "echo", "get_data", "update", "rpc.x", "nope"
        ])
        .prop_map(Value::from),
        json_value()
    ]
    .boxed();
    (
        member(jsonrpc),
        member(method),
        member(json_value().boxed()),
        member(json_value().boxed()),
        member(json_value().boxed()),
    )
        .prop_map(|(jsonrpc, method, params, id, result)| {
            let mut m = Map::new();
            for (key, value) in [
                ("jsonrpc", jsonrpc),
                ("method", method),
                ("params", params),
                ("id", id),
                ("result", result),
            ] {
                if let Some(value) = value {
                    m.insert(key.into(), value);
                }
            }
            Value::Object(m)
        })
}

/// `parse_request_as` accepts exactly the single requests whose params are
/// absent or an object, as the same request `parse_frame` sees.
fn assert_typed_parse_agrees(text: &[u8]) -> Result<(), TestCaseError> {
    let limits = Limits::default();
    let typed = parse_request_as::<Map<String, Value>>(text, &limits);
    let generic = match parse_frame(text, &limits) {
        Ok(Frame::Single(Incoming::Request(request)))
            if request.params.map_or(true, |p| p.get().starts_with('{')) =>
        {
            Some(request)
        }
        _ => None,
    };
    match (typed, generic) {
        (None, None) => {}
        (Some(typed), Some(generic)) => {
            prop_assert_eq!(typed.version, generic.version);
            prop_assert_eq!(&typed.id, &generic.id);
            prop_assert_eq!(&typed.method, &generic.method);
            let generic_params: Option<Map<String, Value>> =
                generic.params.map(|p| serde_json::from_str(p.get()).unwrap());
            prop_assert_eq!(typed.params, generic_params);
        }
        (typed, generic) => prop_assert!(
            false,
            "typed {:?} but parse_frame {:?} for {}",
            typed.map(|t| t.method),
            generic.map(|g| g.method),
            String::from_utf8_lossy(text)
        ),
    }
    Ok(())
}

fn number_text() -> impl Strategy<Value = String> {
    "-?(0|[1-9][0-9]{0,40})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let router = jrpc::demo::router();
        if let Some(reply) = runtime().block_on(router.handle(&bytes)) {
            assert_valid_reply(&reply)?;
        }
    }

    #[test]
    fn arbitrary_json_never_panics(value in json_value()) {
        let router = jrpc::demo::router();
        let text = value.to_string();
        if let Some(reply) = runtime().block_on(router.handle(text.as_bytes())) {
            assert_valid_reply(&reply)?;
        }
    }

    #[test]
    fn a_typed_parse_agrees_with_parse_frame(message in message_like(), bytes in prop::collection::vec(any::<u8>(), 0..64), mutate in any::<bool>()) {
        let mut text = message.to_string().into_bytes();
        if mutate {
            // Some frames broken in arbitrary ways too.
            let at = bytes.first().map_or(0, |b| *b as usize % text.len().max(1));
            text.splice(at..at, bytes.iter().copied().skip(1));
        }
        assert_typed_parse_agrees(&text)?;
    }

    #[test]
    fn message_like_objects_and_batches_get_valid_replies(
        items in prop::collection::vec(message_like(), 1..5),
        batch in any::<bool>(),
    ) {
        let router = jrpc::demo::router();
        let text = if batch { Value::Array(items.clone()).to_string() } else { items[0].to_string() };
        let reply = runtime().block_on(router.handle(text.as_bytes()));
        if let Some(reply) = &reply {
            assert_valid_reply(reply)?;
        }
        // A single item without an "id" member must never be answered when it
        // is a well-formed notification.
        let first = &items[0];
        let well_formed_notification = first.get("id").is_none()
            && first.get("jsonrpc") == Some(&Value::from("2.0"))
            && first.get("method").is_some_and(Value::is_string)
            && first.get("params").is_none_or(|p| p.is_array() || p.is_object());
        if !batch && well_formed_notification {
            prop_assert!(reply.is_none(), "notification answered: {}", text);
        }
    }

    #[test]
    fn mutated_valid_frames_never_panic(cut in 0usize..80, byte in any::<u8>()) {
        let router = jrpc::demo::router();
        let mut frame = br#"[{"jsonrpc":"2.0","method":"subtract","params":{"minuend":1,"subtrahend":2},"id":"x"}]"#.to_vec();
        let at = cut.min(frame.len() - 1);
        frame[at] = byte;
        if let Some(reply) = runtime().block_on(router.handle(&frame)) {
            assert_valid_reply(&reply)?;
        }
    }

    #[test]
    fn echo_round_trips_values_and_ids_exactly(value in json_value(), id in number_text(), string_id in ".{0,10}", use_string in any::<bool>()) {
        let router = jrpc::demo::router();
        let id_text = if use_string { Value::from(string_id).to_string() } else { id };
        let params = Value::Array(vec![value.clone()]).to_string();
        let frame = format!(r#"{{"jsonrpc":"2.0","method":"echo","params":{params},"id":{id_text}}}"#);
        let reply = runtime().block_on(router.handle(frame.as_bytes())).expect("a request is answered");
        let expected = format!(r#"{{"jsonrpc":"2.0","result":{},"id":{id_text}}}"#, value);
        prop_assert_eq!(std::str::from_utf8(&reply).unwrap(), expected);
    }

    #[test]
    fn requests_round_trip_through_parse(method in "[a-z_./\"\\\\é]{1,12}", params in prop::collection::vec(json_value(), 0..4), id in number_text()) {
        let id = Id::from_number_text(&id).unwrap();
        let request = Request::new(id.clone(), method.clone(), &params).unwrap();
        let bytes = request.to_bytes();
        let Ok(Frame::Single(Incoming::Request(back))) = parse_frame(&bytes, &Limits::default()) else {
            return Err(TestCaseError::fail("did not parse back as a request"));
        };
        prop_assert_eq!(back.id, id);
        prop_assert_eq!(back.method.as_ref(), method.as_str());
        // Compared as text: params stay raw, so not even float digits change.
        prop_assert_eq!(back.params.unwrap().get(), serde_json::to_string(&params).unwrap());
    }

    #[test]
    fn subtract_matches_integer_arithmetic(a in any::<i64>(), b in any::<i64>(), named in any::<bool>()) {
        let router = jrpc::demo::router();
        let params = if named { format!(r#"{{"subtrahend":{b},"minuend":{a}}}"#) } else { format!("[{a},{b}]") };
        let frame = format!(r#"{{"jsonrpc":"2.0","method":"subtract","params":{params},"id":1}}"#);
        let reply = runtime().block_on(router.handle(frame.as_bytes())).unwrap();
        let expected = format!(r#"{{"jsonrpc":"2.0","result":{},"id":1}}"#, i128::from(a) - i128::from(b));
        prop_assert_eq!(std::str::from_utf8(&reply).unwrap(), expected);
    }
}
