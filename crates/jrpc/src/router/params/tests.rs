use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::decode;
use crate::message::codes;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

fn ok<P: serde::de::DeserializeOwned>(params: Option<&str>) -> P {
    let raw = params.map(raw);
    decode(raw.as_deref()).unwrap_or_else(|e| panic!("{params:?}: {e}"))
}

/// The error's data as JSON.
fn err<P: serde::de::DeserializeOwned + std::fmt::Debug>(params: Option<&str>) -> Value {
    let raw = params.map(raw);
    let e = decode::<P>(raw.as_deref()).expect_err("should not decode");
    assert_eq!(e.code(), codes::INVALID_PARAMS);
    serde_json::from_str(e.data().unwrap().get()).unwrap()
}

#[derive(Debug, Deserialize, PartialEq)]
struct Point {
    x: i32,
    y: i32,
    label: Option<String>,
}

#[test]
fn struct_by_name_and_by_position() {
    let want = Point {
        x: 1,
        y: 2,
        label: Some("p".into()),
    };
    assert_eq!(ok::<Point>(Some(r#"{"x":1,"y":2,"label":"p"}"#)), want);
    assert_eq!(ok::<Point>(Some(r#"[1,2,"p"]"#)), want);
    assert_eq!(
        ok::<Point>(Some(r#"{"y":2,"x":1}"#)),
        Point { label: None, ..want }
    );
}

#[test]
fn trailing_options_may_be_omitted() {
    assert_eq!(
        ok::<Point>(Some("[1,2]")),
        Point {
            x: 1,
            y: 2,
            label: None
        }
    );
    assert_eq!(
        ok::<(i32, Option<i32>, Option<i32>)>(Some("[1]")),
        (1, None, None)
    );
    assert_eq!(ok::<(Option<i32>,)>(None), (None,));
    assert_eq!(ok::<(Option<i32>,)>(Some("[]")), (None,));
}

#[test]
fn missing_required_positional_names_the_field() {
    let data = err::<Point>(Some("[1]"));
    assert_eq!(data["param"], "y");
    assert_eq!(data["reason"], "missing required parameter");
    let data = err::<(i32, i32)>(Some("[1]"));
    assert_eq!(data["param"], 1);
}

#[test]
fn wrong_type_names_the_parameter() {
    let data = err::<Point>(Some(r#"[1,"two"]"#));
    assert_eq!(data["param"], "y");
    assert!(
        data["reason"]
            .as_str()
            .unwrap()
            .starts_with("invalid type: string \"two\""),
        "{data}"
    );
    assert!(
        !data["reason"].as_str().unwrap().contains("line 1"),
        "no positions into params text: {data}"
    );
    let data = err::<Point>(Some(r#"{"x":1,"y":true}"#));
    assert_eq!(data["param"], "y");
    let data = err::<(i32, String)>(Some(r#"[1,2]"#));
    assert_eq!(data["param"], 1);
}

#[test]
fn missing_named_field_is_named() {
    let data = err::<Point>(Some(r#"{"x":1}"#));
    assert_eq!(data["param"], "y");
    assert!(data["reason"].as_str().unwrap().contains("missing field"));
}

#[test]
fn too_many_positional_params() {
    let data = err::<(i32, i32)>(Some("[1,2,3]"));
    assert!(
        data["reason"].as_str().unwrap().contains("too many params"),
        "{data}"
    );
    let data = err::<Point>(Some(r#"[1,2,"a",4]"#));
    assert!(
        data["reason"].as_str().unwrap().contains("too many params"),
        "{data}"
    );
}

#[test]
fn tuple_refuses_named_params() {
    let data = err::<(i32, i32)>(Some(r#"{"a":1,"b":2}"#));
    assert!(
        data["reason"].as_str().unwrap().contains("named params"),
        "{data}"
    );
}

#[test]
fn no_params_accepts_omitted_empty_array_and_empty_object() {
    ok::<()>(None);
    ok::<()>(Some("[]"));
    ok::<()>(Some("{}"));
    ok::<()>(Some(" [ ] "));
    let data = err::<()>(Some("[1]"));
    assert_eq!(data["reason"], "this method takes no params");
    err::<()>(Some(r#"{"a":1}"#));
}

#[test]
fn sequences_maps_and_values() {
    assert_eq!(ok::<Vec<i32>>(Some("[1,2,3]")), vec![1, 2, 3]);
    assert_eq!(ok::<Vec<i32>>(None), Vec::<i32>::new());
    let map: std::collections::BTreeMap<String, i32> = ok(Some(r#"{"a":1,"b\n":2}"#));
    assert_eq!(map.get("b\n"), Some(&2));
    assert_eq!(ok::<Value>(Some(r#"{"a":[1]}"#)), serde_json::json!({"a":[1]}));
    assert_eq!(ok::<Option<Vec<i32>>>(None), None);
}

#[test]
fn escaped_keys_match_field_names() {
    assert_eq!(
        ok::<Point>(Some(r#"{"\u0078":1,"y":2}"#)),
        Point {
            x: 1,
            y: 2,
            label: None
        }
    );
}

#[test]
fn newtype_params() {
    #[derive(Debug, Deserialize, PartialEq)]
    struct Ids(Vec<u32>);
    assert_eq!(ok::<Ids>(Some("[1,2]")), Ids(vec![1, 2]));
}
