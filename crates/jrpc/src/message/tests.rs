use super::*;

fn single(text: &str) -> Incoming<'_> {
    match parse_frame(text.as_bytes(), &Limits::default()).unwrap() {
        Frame::Single(item) => item,
        Frame::Batch(_) => panic!("expected a single item"),
    }
}

#[test]
fn classifies_requests_notifications_and_responses() {
    let Incoming::Request(r) = single(r#"{"jsonrpc":"2.0","method":"m","params":{"a":1},"id":"x"}"#) else {
        panic!()
    };
    assert_eq!(
        (r.method.as_ref(), r.params.unwrap().get(), r.id.as_str()),
        ("m", r#"{"a":1}"#, Some("x"))
    );

    let Incoming::Notification(n) = single(r#"{"jsonrpc":"2.0","method":"m"}"#) else {
        panic!()
    };
    assert!(n.params.is_none());

    let Incoming::Response(ok) = single(r#"{"jsonrpc":"2.0","result":{"v":[1]},"id":3}"#) else {
        panic!()
    };
    assert_eq!(ok.outcome.unwrap().get(), r#"{"v":[1]}"#);

    let Incoming::Response(err) =
        single(r#"{"jsonrpc":"2.0","error":{"code":-1,"message":"m","data":null},"id":3}"#)
    else {
        panic!()
    };
    let e = err.outcome.unwrap_err();
    assert_eq!(
        (e.code(), e.message(), e.data().unwrap().get()),
        (-1, "m", "null")
    );

    // A null result is still a result.
    let Incoming::Response(null) = single(r#"{"jsonrpc":"2.0","result":null,"id":null}"#) else {
        panic!()
    };
    assert_eq!(null.outcome.unwrap().get(), "null");
    assert!(null.id.is_null());
}

#[test]
fn malformed_responses_are_invalid() {
    for text in [
        r#"{"jsonrpc":"2.0","result":1,"error":{"code":1,"message":"m"},"id":1}"#,
        r#"{"jsonrpc":"2.0","error":{"code":"1","message":"m"},"id":1}"#,
        r#"{"jsonrpc":"2.0","error":{"code":1.5,"message":"m"},"id":1}"#,
        r#"{"jsonrpc":"2.0","error":{"message":"m"},"id":1}"#,
        r#"{"jsonrpc":"2.0","error":null,"id":1}"#,
        r#"{"jsonrpc":"2.0","result":1}"#,
        r#"{"result":1,"id":1}"#,
    ] {
        assert!(matches!(single(text), Incoming::Invalid(_)), "{text}");
    }
}

#[test]
fn v1_messages_only_with_the_mode_on() {
    let limits = Limits {
        accept_v1: true,
        ..Limits::default()
    };
    let parse = |text: &'static str| match parse_frame(text.as_bytes(), &limits).unwrap() {
        Frame::Single(item) => item,
        Frame::Batch(_) => panic!(),
    };
    assert!(
        matches!(parse(r#"{"method":"m","params":[],"id":1}"#), Incoming::Request(r) if r.version == Version::V1)
    );
    assert!(matches!(
        parse(r#"{"method":"m","params":[],"id":null}"#),
        Incoming::Notification(_)
    ));
    let Incoming::Response(r) = parse(r#"{"result":null,"error":{"code":1,"message":"m"},"id":1}"#) else {
        panic!()
    };
    assert_eq!(r.outcome.unwrap_err().code(), 1);
    let Incoming::Response(r) = parse(r#"{"result":null,"error":null,"id":1}"#) else {
        panic!()
    };
    assert_eq!(r.outcome.unwrap().get(), "null");
    assert!(matches!(
        single(r#"{"method":"m","params":[],"id":1}"#),
        Incoming::Invalid(_)
    ));
}

#[test]
fn outgoing_messages_serialize_in_spec_order() {
    let req = Request::new("a", "m", &serde_json::json!({"k": [1]})).unwrap();
    assert_eq!(
        req.to_bytes(),
        r#"{"jsonrpc":"2.0","method":"m","params":{"k":[1]},"id":"a"}"#
    );
    assert_eq!(
        Request::without_params(1, "m").to_bytes(),
        r#"{"jsonrpc":"2.0","method":"m","id":1}"#
    );
    assert_eq!(
        Notification::new("n", &[1]).unwrap().to_bytes(),
        r#"{"jsonrpc":"2.0","method":"n","params":[1]}"#
    );
    assert!(
        Request::new(1, "m", &5).is_err(),
        "params must be an array or object"
    );
    let resp = Response {
        id: Id::from(9),
        outcome: Err(Error::method_not_found()),
    };
    assert_eq!(
        resp.to_bytes(),
        r#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":9}"#
    );
}

#[test]
fn outgoing_messages_parse_back() {
    let req = Request::new(Id::from_number_text("1.5").unwrap(), "m\"", &[1, 2]).unwrap();
    let bytes = req.to_bytes();
    let Frame::Single(Incoming::Request(back)) = parse_frame(&bytes, &Limits::default()).unwrap() else {
        panic!()
    };
    assert_eq!(
        (back.id, back.method.as_ref(), back.params.unwrap().get()),
        (req.id, "m\"", "[1,2]")
    );
}

#[test]
fn a_typed_parse_reads_only_single_requests_with_object_params() {
    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Named {
        name: String,
    }
    let limits = Limits::default();
    let typed = |text: &str| {
        parse_request_as::<Named>(text.as_bytes(), &limits).map(|r| {
            let name = r.params.map(|p| p.name);
            (r.id.to_string(), r.method.into_owned(), name)
        })
    };
    let some = |id: &str, method: &str, name: Option<&str>| {
        Some((id.to_owned(), method.to_owned(), name.map(str::to_owned)))
    };
    let cases = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x","other":[1]}}"#,
            some("1", "m", Some("x")),
        ),
        (
            r#"{"params":{"name":"x"},"method":"m","id":"a","jsonrpc":"2.0"}"#,
            some(r#""a""#, "m", Some("x")),
        ),
        (
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"m\"}",
            some("2", "m", None),
        ),
        // Not for the typed parse: the caller parses these as usual.
        (r#"{"jsonrpc":"2.0","id":1,"method":"m","params":["x"]}"#, None),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"other":1}}"#,
            None,
        ),
        (r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#, None),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x"},"params":{"name":"y"}}"#,
            None,
        ),
        (r#"{"jsonrpc":"2.0","method":"m","params":{"name":"x"}}"#, None),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"m","params":{"name":"x"}}"#,
            None,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5e3,"method":"m"}"#,
            some("1.5e3", "m", None),
        ),
        (r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#, None),
        (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, None),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#, None),
        (r#"{"jsonrpc":"2.0","id":1,"method":"m"} x"#, None),
    ];
    for (text, expected) in cases {
        assert_eq!(typed(text), expected, "{text}");
    }
    let shallow = Limits {
        max_depth: 2,
        ..Limits::default()
    };
    let deep = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"name":"x","n":[[[1]]]}}"#;
    assert!(parse_request_as::<Named>(deep.as_bytes(), &shallow).is_none());
}
