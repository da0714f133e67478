//! Serialization of outgoing messages straight into a byte buffer.
//!
//! Members are written in the order the specification's examples use
//! (`jsonrpc`, `method`/`result`/`error`, `params`, `id`); raw JSON values
//! (params, results, error data) are copied in as they are.

use serde::Serialize;
use serde_json::value::RawValue;

use super::error::Error;
use super::escape::write_json_str;
use super::id::Id;
use super::version::Version;

/// Writes the opening of a successful response, up to where the result goes.
pub(crate) fn result_prefix(out: &mut Vec<u8>, version: Version) {
    match version {
        Version::V2 => out.extend_from_slice(br#"{"jsonrpc":"2.0","result":"#),
        Version::V1 => out.extend_from_slice(br#"{"result":"#),
    }
}

/// Writes the close of a successful response, after the result.
pub(crate) fn result_suffix(out: &mut Vec<u8>, version: Version, id: &Id) {
    match version {
        Version::V2 => out.extend_from_slice(br#","id":"#),
        Version::V1 => out.extend_from_slice(br#","error":null,"id":"#),
    }
    id.write_json(out);
    out.push(b'}');
}

/// Writes a whole successful response whose result is already JSON text.
pub(crate) fn write_result(out: &mut Vec<u8>, version: Version, id: &Id, result: &[u8]) {
    result_prefix(out, version);
    out.extend_from_slice(result);
    result_suffix(out, version, id);
}

/// Writes a whole error response; an error answering a request that could
/// not be read carries id null.
pub(crate) fn write_error(out: &mut Vec<u8>, version: Version, id: &Id, error: &Error) {
    let id = if error.is_for_unreadable_request() {
        &Id::NULL
    } else {
        id
    };
    match version {
        Version::V2 => out.extend_from_slice(br#"{"jsonrpc":"2.0","error":"#),
        Version::V1 => out.extend_from_slice(br#"{"result":null,"error":"#),
    }
    error.write_json(out);
    out.extend_from_slice(br#","id":"#);
    id.write_json(out);
    out.push(b'}');
}

/// Writes a request (`id` is `Some`) or a notification (`id` is `None`).
pub(crate) fn write_call(out: &mut Vec<u8>, method: &str, params: Option<&RawValue>, id: Option<&Id>) {
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    write_json_str(out, method);
    if let Some(params) = params {
        out.extend_from_slice(br#","params":"#);
        out.extend_from_slice(params.get().as_bytes());
    }
    if let Some(id) = id {
        out.extend_from_slice(br#","id":"#);
        id.write_json(out);
    }
    out.push(b'}');
}

/// Serializes `value` to JSON text as a boxed raw value.
pub fn to_raw<T: Serialize + ?Sized>(value: &T) -> Result<Box<RawValue>, serde_json::Error> {
    serde_json::value::to_raw_value(value)
}

/// Serializes a call straight into bytes: a request when `id` is given, a
/// notification otherwise. `params` must serialize to a JSON array or object;
/// `null` (as `()` or `None` serialize) leaves params out.
pub fn encode_call<P: Serialize + ?Sized>(
    method: &str,
    params: &P,
    id: Option<&Id>,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64 + method.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"#);
    write_json_str(&mut out, method);
    let mark = out.len();
    out.extend_from_slice(br#","params":"#);
    let start = out.len();
    serde_json::to_writer(&mut out, params).map_err(|e| e.to_string())?;
    match out[start..].first() {
        Some(b'[' | b'{') => {}
        _ if &out[start..] == b"null" => out.truncate(mark),
        _ => return Err("params must serialize to a JSON array or object, or to null for none".to_owned()),
    }
    if let Some(id) = id {
        out.extend_from_slice(br#","id":"#);
        id.write_json(&mut out);
    }
    out.push(b'}');
    Ok(out)
}

/// The bytes a handler's result is first given room for: most results are
/// objects of a few hundred bytes, better allocated once than grown from
/// nothing.
pub(crate) const RESULT_CAPACITY: usize = 256;

/// Serializes a handler's result into `out`; a value that does not
/// serialize is an internal error.
pub(crate) fn serialize_into<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    value: &T,
) -> Result<(), super::Error> {
    serde_json::to_writer(out, value)
        .map_err(|e| super::Error::internal_error().with_data(&format!("result does not serialize: {e}")))
}
