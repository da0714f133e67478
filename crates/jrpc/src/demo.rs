//! The demo methods: the examples of the JSON-RPC 2.0 specification and a
//! few more, served by `jrpc serve` and used by tests of every transport.
//!
//! | method | params | result |
//! |---|---|---|
//! | `subtract` | `[minuend, subtrahend]` or `{"minuend", "subtrahend"}` | minuend − subtrahend |
//! | `add` | `[a, b]` or `{"a", "b"}` | a + b |
//! | `sum` | `[n, ...]` (positional only, any count) | the sum (`0` for none) |
//! | `get_data` | none | `["hello", 5]` |
//! | `echo` | `[value]` or `{"value"}` | `value`, byte for byte |
//! | `sleep` | `[ms]` or `{"ms"}`, at most one hour | `ms`, after waiting that long |
//! | `update`, `notify_hello`, `notify_sum` | anything | notification handlers; no visible effect |
//!
//! Numbers may be any JSON numbers: the result is an integer when every
//! operand is written as an integer (exact, up to 128 bits), else a float.
//! Anything else as an operand is `-32602 Invalid params`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let router = jrpc::demo::router();
//! let reply = router.handle(br#"{"jsonrpc":"2.0","method":"subtract","params":{"minuend":42,"subtrahend":23.5},"id":1}"#).await;
//! assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","result":18.5,"id":1}"#);
//! # });
//! ```

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use serde_json::json;

use crate::openrpc::{ContentDescriptor, MethodDoc, ParamStructure};
use crate::{Error, Router};

/// The longest `sleep` accepted, in milliseconds (one hour).
pub const MAX_SLEEP_MS: u64 = 60 * 60 * 1000;

/// A router serving the demo methods, with default settings, each
/// described for OpenRPC (turn `rpc.discover` on with
/// [`Router::discover`]).
pub fn router() -> Router {
    describe(undescribed_router())
}

fn undescribed_router() -> Router {
    Router::new()
        .sync_method("subtract", |p: Subtract| p.minuend.sub(p.subtrahend))
        .sync_method("add", |p: Add| p.a.add(p.b))
        .sync_method("sum", |Positional(numbers): Positional<Vec<Number>>| {
            numbers.into_iter().try_fold(Number::Int(0), Number::add)
        })
        .sync_method("get_data", || Ok(("hello", 5)))
        .sync_method("echo", |p: Echo| Ok(p.value))
        .method("sleep", |p: Sleep| async move {
            let ms = p.ms.as_millis()?;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(ms)
        })
        .sync_notification("update", |_: IgnoredParams| {})
        .sync_notification("notify_hello", |_: IgnoredParams| {})
        .sync_notification("notify_sum", |_: IgnoredParams| {})
}

/// Attaches each demo method's description, written by hand (the demo's
/// number type accepts any JSON number, which a derived schema would not
/// say).
fn describe(router: Router) -> Router {
    let number = || json!({"type": "number"});
    let operand = |name: &str, description: &str| {
        ContentDescriptor::new(name, number())
            .description(description)
            .required()
    };
    let invalid = |doc: MethodDoc| doc.error(-32602, "Invalid params");
    let ignored = |summary: &str| MethodDoc::new().summary(summary).any_params();
    router
        .describe(
            "subtract",
            invalid(
                MethodDoc::new()
                    .summary("Subtracts the subtrahend from the minuend")
                    .param(operand("minuend", "the number to subtract from"))
                    .param(operand("subtrahend", "the number to subtract"))
                    .result(ContentDescriptor::new("difference", number()))
                    .param_structure(ParamStructure::Either),
            ),
        )
        .describe(
            "add",
            invalid(
                MethodDoc::new()
                    .summary("Adds two numbers")
                    .param(operand("a", "the first number"))
                    .param(operand("b", "the second number"))
                    .result(ContentDescriptor::new("sum", number()))
                    .param_structure(ParamStructure::Either),
            ),
        )
        .describe(
            "sum",
            invalid(
                MethodDoc::new()
                    .summary("Adds any count of numbers")
                    .description("Positional only: `[n, ...]`; `0` for none.")
                    .param(ContentDescriptor::new("numbers", number()).description("each number to add"))
                    .variadic()
                    .result(ContentDescriptor::new("sum", number()))
                    .param_structure(ParamStructure::ByPosition),
            ),
        )
        .describe(
            "get_data",
            MethodDoc::new()
                .summary("Returns [\"hello\", 5]")
                .result(ContentDescriptor::new(
                    "data",
                    json!({"type": "array", "items": [{"type": "string"}, {"type": "integer"}],
                           "minItems": 2, "maxItems": 2}),
                ))
                .param_structure(ParamStructure::Either),
        )
        .describe(
            "echo",
            invalid(
                MethodDoc::new()
                    .summary("Returns its value, byte for byte")
                    .param(
                        ContentDescriptor::new("value", json!({}))
                            .description("any JSON value")
                            .required(),
                    )
                    .result(ContentDescriptor::new("value", json!({})))
                    .param_structure(ParamStructure::Either),
            ),
        )
        .describe(
            "sleep",
            invalid(
                MethodDoc::new()
                    .summary("Waits ms milliseconds, then returns ms")
                    .param(
                        ContentDescriptor::new(
                            "ms",
                            json!({"type": "number", "minimum": 0, "maximum": MAX_SLEEP_MS}),
                        )
                        .description("how long to wait, in whole milliseconds (at most one hour)")
                        .required(),
                    )
                    .result(ContentDescriptor::new(
                        "ms",
                        json!({"type": "integer", "minimum": 0}),
                    ))
                    .param_structure(ParamStructure::Either),
            ),
        )
        .describe("update", ignored("A notification; any params, no visible effect"))
        .describe(
            "notify_hello",
            ignored("A notification; any params, no visible effect"),
        )
        .describe(
            "notify_sum",
            ignored("A notification; any params, no visible effect"),
        )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Subtract {
    minuend: Number,
    subtrahend: Number,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Add {
    a: Number,
    b: Number,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Echo {
    value: Box<RawValue>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Sleep {
    ms: Number,
}

/// Params that must be positional (a JSON array).
struct Positional<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Positional<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `deserialize_seq` refuses an object with "invalid type: map".
        struct SeqOnly<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> de::Visitor<'de> for SeqOnly<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("positional params (an array)")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
                T::deserialize(de::value::SeqAccessDeserializer::new(seq))
            }
        }
        deserializer
            .deserialize_seq(SeqOnly(std::marker::PhantomData))
            .map(Positional)
    }
}

/// Accepts any params (or none) and keeps nothing.
struct IgnoredParams;

impl<'de> Deserialize<'de> for IgnoredParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        de::IgnoredAny::deserialize(deserializer).map(|_| IgnoredParams)
    }
}

/// A JSON number operand: exact integer arithmetic when both sides are
/// integers, float otherwise.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Int(i128),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }

    fn combine(
        self,
        other: Number,
        int_op: fn(i128, i128) -> Option<i128>,
        float_op: fn(f64, f64) -> f64,
    ) -> Result<Number, Error> {
        if let (Number::Int(a), Number::Int(b)) = (self, other) {
            if let Some(n) = int_op(a, b) {
                return Ok(Number::Int(n));
            }
        }
        let result = float_op(self.as_f64(), other.as_f64());
        if result.is_finite() {
            Ok(Number::Float(result))
        } else {
            Err(Error::invalid_params().with_data("the result is too large to represent"))
        }
    }

    /// A whole, non-negative number of milliseconds (`1e3` and `10.0` are
    /// whole too), at most [`MAX_SLEEP_MS`].
    fn as_millis(self) -> Result<u64, Error> {
        let ms = match self {
            Number::Int(i) => u64::try_from(i).ok(),
            Number::Float(f) if f.fract() == 0.0 && f >= 0.0 && f < u64::MAX as f64 => Some(f as u64),
            Number::Float(_) => None,
        };
        let bad = |reason: String| {
            Error::invalid_params().with_data(&serde_json::json!({"param": "ms", "reason": reason}))
        };
        match ms {
            Some(ms) if ms <= MAX_SLEEP_MS => Ok(ms),
            Some(_) => Err(bad(format!("ms must be at most {MAX_SLEEP_MS}"))),
            None => Err(bad("ms must be a whole, non-negative number".to_owned())),
        }
    }

    fn add(self, other: Number) -> Result<Number, Error> {
        self.combine(other, i128::checked_add, |a, b| a + b)
    }

    fn sub(self, other: Number) -> Result<Number, Error> {
        self.combine(other, i128::checked_sub, |a, b| a - b)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Read the number's own text so that integers beyond 64 bits stay exact.
        let raw = <&RawValue>::deserialize(deserializer)?;
        let text = raw.get();
        if !matches!(text.as_bytes().first(), Some(b'-' | b'0'..=b'9')) {
            return Err(de::Error::custom(format_args!("expected a number, got {text}")));
        }
        if !text.contains(['.', 'e', 'E']) {
            if let Ok(i) = text.parse::<i128>() {
                return Ok(Number::Int(i));
            }
        }
        text.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Number::Float)
            .ok_or_else(|| de::Error::custom(format_args!("number {text} is out of range")))
    }
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Number::Int(i) => serializer.serialize_i128(i),
            Number::Float(f) => serializer.serialize_f64(f),
        }
    }
}
