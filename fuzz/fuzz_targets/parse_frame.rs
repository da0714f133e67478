//! `jrpc::message::parse_frame` on arbitrary bytes, under the default limits
//! and under tight ones (small depth, batch and frame limits, 1.0 mode on or
//! off), checked against an independent model of the classification.

#![no_main]

use jrpc::message::{codes, parse_frame, Frame, Incoming, Limits, Version};
use jrpc::Error;
use jrpc_fuzz::reference::{self, Item};
use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::Value;

const BOM: &[u8] = b"\xEF\xBB\xBF";

fuzz_target!(|data: &[u8]| {
    check(data, &Limits::default());
    // Tight limits, picked from the input's length so that the bytes stay
    // plain JSON for the fuzzer to mutate.
    let n = data.len();
    let tight = Limits {
        max_frame_len: 256,
        max_batch_len: n % 4,
        max_depth: 1 + n % 6,
        accept_v1: n % 2 == 1,
    };
    check(data, &tight);
});

fn check(data: &[u8], limits: &Limits) {
    let result = parse_frame(data, limits);

    let stripped = data.strip_prefix(BOM).unwrap_or(data);
    let utf8 = std::str::from_utf8(stripped).is_ok();
    // JSON syntax, numbers not range-checked (what a raw value accepts).
    let lenient = utf8 && serde_json::from_slice::<IgnoredAny>(stripped).is_ok();
    // What serde_json decodes into a `Value` (numbers in range, strings
    // with valid escapes, at most 127 levels deep).
    let strict: Option<Value> = utf8.then(|| serde_json::from_slice(stripped).ok()).flatten();

    let brackets = data.iter().filter(|b| matches!(b, b'[' | b'{')).count();
    let commas = data.iter().filter(|&&b| b == b',').count();
    let starts_array = stripped.iter().find(|b| !b" \t\r\n".contains(b)) == Some(&b'[');
    // A frame that could trip the depth pre-scan: long enough to nest that
    // deep, and with enough opening brackets.
    let may_nest = data.len() >= 2 * (limits.max_depth + 1) && brackets > limits.max_depth;
    let may_overflow_batch = starts_array && commas >= limits.max_batch_len;

    // Frame-level errors: only the documented ones, each only when its
    // cause is there, each with its documented message.
    if let Err(e) = &result {
        let message = match e.code() {
            codes::FRAME_TOO_LARGE => {
                assert!(data.len() > limits.max_frame_len, "{e:?}");
                "Frame too large"
            }
            codes::NESTING_TOO_DEEP => {
                assert!(may_nest, "nesting error without the nesting: {e:?}");
                "Nesting too deep"
            }
            codes::BATCH_TOO_LARGE => {
                assert!(may_overflow_batch, "batch error without a batch that long: {e:?}");
                "Batch too large"
            }
            codes::INVALID_REQUEST => {
                assert_eq!(
                    strict,
                    Some(Value::Array(vec![])),
                    "-32600 for a frame that is not []"
                );
                assert_eq!(e, &Error::invalid_request());
                "Invalid Request"
            }
            codes::PARSE_ERROR => {
                assert!(strict.is_none(), "parse error for JSON serde_json decodes");
                assert_eq!(e, &Error::parse_error());
                "Parse error"
            }
            other => panic!("undocumented frame error {other}: {e:?}"),
        };
        assert_eq!(e.message(), message);
    }

    if data.len() > limits.max_frame_len {
        assert_eq!(code(&result), Some(codes::FRAME_TOO_LARGE));
        return;
    }
    // Whatever is not JSON is refused as a whole: a parse error, unless a
    // limit tripped first.
    if !lenient {
        let code = code(&result).expect("a frame that is not JSON was accepted");
        if !may_nest && !may_overflow_batch {
            assert_eq!(code, codes::PARSE_ERROR, "invalid JSON");
        }
        if !utf8 {
            assert!(
                code == codes::PARSE_ERROR || code == codes::NESTING_TOO_DEEP,
                "invalid UTF-8 got {code}"
            );
        }
    }

    // What the API promises of any accepted frame.
    if let Ok(frame) = &result {
        let items: Vec<&Incoming<'_>> = match frame {
            Frame::Single(item) => vec![item],
            Frame::Batch(items) => {
                assert!(!items.is_empty() && items.len() <= limits.max_batch_len);
                items.iter().collect()
            }
        };
        for item in items {
            check_item(item, limits);
        }
    }

    // JSON that serde_json decodes: the exact outcome is known.
    if let Some(value) = strict {
        let text = std::str::from_utf8(stripped).unwrap();
        let depth = reference::depth(text).expect("serde_json decodes it");
        let expected_error = if depth > limits.max_depth {
            Some(codes::NESTING_TOO_DEEP)
        } else {
            match &value {
                Value::Array(items) if items.len() > limits.max_batch_len => Some(codes::BATCH_TOO_LARGE),
                Value::Array(items) if items.is_empty() => Some(codes::INVALID_REQUEST),
                _ => None,
            }
        };
        assert_eq!(code(&result), expected_error, "frame-level outcome of {text}");
        let Ok(frame) = result else { return };
        let raw: &RawValue = serde_json::from_str(text).unwrap();
        match (frame, &value) {
            (Frame::Batch(items), Value::Array(_)) => {
                let entries: Vec<&RawValue> = serde_json::from_str(text).unwrap();
                assert_eq!(items.len(), entries.len());
                for (item, entry) in items.iter().zip(entries) {
                    let expected = reference::classify(entry, limits.accept_v1);
                    assert_eq!(Item::observe(item), expected, "batch entry {}", entry.get());
                }
            }
            (Frame::Single(item), value) if !value.is_array() => {
                let expected = reference::classify(raw, limits.accept_v1);
                assert_eq!(Item::observe(&item), expected, "frame {text}");
            }
            (frame, _) => panic!("wrong frame shape for {text}: {frame:?}"),
        }
    }
}

/// What holds for every classified item, whatever the input.
fn check_item(item: &Incoming<'_>, limits: &Limits) {
    let version = match item {
        Incoming::Request(r) => {
            check_params(r.params);
            r.version
        }
        Incoming::Notification(n) => {
            check_params(n.params);
            n.version
        }
        Incoming::Response(r) => {
            if let Ok(result) = r.outcome {
                serde_json::from_str::<IgnoredAny>(result.get()).expect("result is JSON");
            }
            r.version
        }
        Incoming::Invalid(i) => {
            assert_eq!(i.error, Error::invalid_request());
            i.version
        }
    };
    assert!(
        version == Version::V2 || limits.accept_v1,
        "1.0 item with 1.0 mode off"
    );
}

fn check_params(params: Option<&RawValue>) {
    if let Some(p) = params {
        assert!(
            p.get().starts_with(['[', '{']),
            "params {} are not an array or object",
            p.get()
        );
    }
}

fn code<T>(result: &Result<T, Error>) -> Option<i64> {
    result.as_ref().err().map(Error::code)
}
