//! Checking a call's params against the method's OpenRPC description
//! before sending it (`jrpc call --openrpc FILE`, or the document `jrpc
//! describe` cached): the form (by name, by position), the count, the
//! names, the required ones, and each value against its JSON Schema.
//!
//! The schema check covers what describes params in practice — `type`,
//! `enum`, `const`, number and length bounds, `items`, `properties`,
//! `required`, `additionalProperties`, `anyOf`/`oneOf`/`allOf`, `not` and
//! `$ref`s into the document — and passes whatever it does not know
//! (`pattern`, `format`): a check that refuses a valid call would be worse
//! than one that lets a rare invalid one through to the server, which
//! checks again.

use jrpc::openrpc::{ContentDescriptor, Document, MethodDoc, ParamStructure};
use serde_json::{Map, Value};

/// Why params do not fit the description: one sentence for the user.
pub(crate) type Misfit = String;

/// Checks `params` (`None` for none) of a call of `method`.
pub(crate) fn check(document: &Document, method: &str, params: Option<&Value>) -> Result<(), Misfit> {
    let Some(doc) = document.method(method) else {
        let mut names: Vec<&str> = document.methods.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        return Err(format!(
            "the document has no method {method:?} (it has: {})",
            names.join(", ")
        ));
    };
    if doc.any_params {
        return Ok(());
    }
    let structure = doc.param_structure.unwrap_or(ParamStructure::ByName);
    match params {
        None => check_positional(document, doc, &[]),
        Some(Value::Array(_)) if structure == ParamStructure::ByName => Err(format!(
            "{method} takes named params ({}): use --named NAME=VALUE",
            signature(doc)
        )),
        Some(Value::Array(items)) => check_positional(document, doc, items),
        Some(Value::Object(_)) if structure == ParamStructure::ByPosition => Err(format!(
            "{method} takes positional params ({}): give them in order, without --named",
            signature(doc)
        )),
        Some(Value::Object(members)) => check_named(document, doc, members),
        Some(other) => Err(format!("params must be an array or an object, not {other}")),
    }
}

fn check_positional(document: &Document, doc: &MethodDoc, items: &[Value]) -> Result<(), Misfit> {
    let params = &doc.params;
    let repeats = doc.variadic && !params.is_empty();
    if items.len() > params.len() && !repeats {
        return Err(format!(
            "{} takes at most {} param{} ({}), got {}",
            doc.name,
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            signature(doc),
            items.len()
        ));
    }
    for (index, param) in params.iter().enumerate() {
        if param.required && index >= items.len() {
            return Err(format!(
                "{}: missing param {} ({})",
                doc.name,
                param.name,
                signature(doc)
            ));
        }
    }
    for (index, item) in items.iter().enumerate() {
        let param = &params[index.min(params.len() - 1)];
        check_value(document, param, item)
            .map_err(|why| format!("{}: param {}: {why}", doc.name, param.name))?;
    }
    Ok(())
}

fn check_named(document: &Document, doc: &MethodDoc, members: &Map<String, Value>) -> Result<(), Misfit> {
    for name in members.keys() {
        if !doc.params.iter().any(|p| &p.name == name) {
            return Err(format!("{} has no param {name:?} ({})", doc.name, signature(doc)));
        }
    }
    for param in &doc.params {
        match members.get(&param.name) {
            Some(value) => check_value(document, param, value)
                .map_err(|why| format!("{}: param {}: {why}", doc.name, param.name))?,
            None if param.required => {
                return Err(format!(
                    "{}: missing param {} ({})",
                    doc.name,
                    param.name,
                    signature(doc)
                ))
            }
            None => {}
        }
    }
    Ok(())
}

fn check_value(document: &Document, param: &ContentDescriptor, value: &Value) -> Result<(), Misfit> {
    Validator { document, depth: 0 }.check(&param.schema, value)
}

/// The method as the user should call it: `subtract(minuend: number,
/// subtrahend: number)`.
pub(crate) fn signature(doc: &MethodDoc) -> String {
    let params: Vec<String> = doc
        .params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let rest = if doc.variadic && i + 1 == doc.params.len() {
                "..."
            } else {
                ""
            };
            let optional = if p.required { "" } else { "?" };
            format!("{}{optional}: {}{rest}", p.name, type_name(&p.schema))
        })
        .collect();
    format!("{}({})", doc.name, params.join(", "))
}

/// A short name for what a schema accepts: `number`, `string|null`,
/// `[integer]`, `"a"|"b"`, `Tree`, `any`.
pub(crate) fn type_name(schema: &Value) -> String {
    let Some(object) = schema.as_object() else {
        return if schema == &Value::Bool(false) {
            "nothing".into()
        } else {
            "any".into()
        };
    };
    if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().unwrap_or(reference).to_owned();
    }
    if let Some(Value::Array(values)) = object.get("enum") {
        return values.iter().map(Value::to_string).collect::<Vec<_>>().join("|");
    }
    if let Some(value) = object.get("const") {
        return value.to_string();
    }
    match object.get("type") {
        Some(Value::String(kind)) if kind == "array" => match object.get("items") {
            Some(items @ Value::Object(_)) => format!("[{}]", type_name(items)),
            Some(Value::Array(items)) => {
                format!("[{}]", items.iter().map(type_name).collect::<Vec<_>>().join(", "))
            }
            _ => "array".into(),
        },
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => match object.get("anyOf").or_else(|| object.get("oneOf")) {
            Some(Value::Array(options)) => options.iter().map(type_name).collect::<Vec<_>>().join("|"),
            _ => "any".into(),
        },
    }
}

struct Validator<'a> {
    document: &'a Document,
    depth: usize,
}

impl Validator<'_> {
    /// Deeper than this, `$ref`s are taken to loop: accept.
    const MAX_DEPTH: usize = 64;

    fn check(&mut self, schema: &Value, value: &Value) -> Result<(), Misfit> {
        let schema = match schema {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => return Err("no value is allowed here".into()),
            Value::Object(schema) => schema,
            _ => return Ok(()),
        };
        if self.depth > Self::MAX_DEPTH {
            return Ok(());
        }
        self.depth += 1;
        let outcome = self.check_object(schema, value);
        self.depth -= 1;
        outcome
    }

    fn check_object(&mut self, schema: &Map<String, Value>, value: &Value) -> Result<(), Misfit> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            // Only refs into the document itself are followed.
            if let Some(target) = self.resolve(reference) {
                let target = target.clone();
                self.check(&target, value)?;
            }
        }
        if let Some(kind) = schema.get("type") {
            let kinds: Vec<&str> = match kind {
                Value::String(kind) => vec![kind.as_str()],
                Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !kinds.is_empty() && !kinds.iter().any(|k| is_type(value, k)) {
                return Err(format!(
                    "expected {}, got {}",
                    kinds.join(" or "),
                    describe(value)
                ));
            }
        }
        if let Some(Value::Array(values)) = schema.get("enum") {
            if !values.iter().any(|v| json_equal(v, value)) {
                let choices: Vec<String> = values.iter().map(Value::to_string).collect();
                return Err(format!("expected one of {}, got {value}", choices.join(", ")));
            }
        }
        if let Some(expected) = schema.get("const") {
            if !json_equal(expected, value) {
                return Err(format!("expected {expected}, got {value}"));
            }
        }
        if let Some(number) = value.as_f64().filter(|_| value.is_number()) {
            check_bounds(schema, number)?;
        }
        if let Some(text) = value.as_str() {
            let length = text.chars().count() as f64;
            bound(
                schema,
                "minLength",
                |m| length >= m,
                |m| format!("at least {m} characters"),
            )?;
            bound(
                schema,
                "maxLength",
                |m| length <= m,
                |m| format!("at most {m} characters"),
            )?;
        }
        if let Some(items) = value.as_array() {
            self.check_items(schema, items)?;
        }
        if let Some(members) = value.as_object() {
            self.check_members(schema, members)?;
        }
        if let Some(Value::Array(all)) = schema.get("allOf") {
            for part in all {
                self.check(part, value)?;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = schema.get(key) {
                let fits = options.iter().filter(|o| self.check(o, value).is_ok()).count();
                let ok = if key == "anyOf" { fits >= 1 } else { fits == 1 };
                if !ok {
                    let names: Vec<String> = options.iter().map(type_name).collect();
                    return Err(format!(
                        "expected {}, got {}",
                        names.join(" or "),
                        describe(value)
                    ));
                }
            }
        }
        if let Some(not) = schema.get("not") {
            if self.check(not, value).is_ok() {
                return Err(format!("{value} is not allowed here"));
            }
        }
        Ok(())
    }

    fn check_items(&mut self, schema: &Map<String, Value>, items: &[Value]) -> Result<(), Misfit> {
        let count = items.len() as f64;
        bound(
            schema,
            "minItems",
            |m| count >= m,
            |m| format!("at least {m} items"),
        )?;
        bound(
            schema,
            "maxItems",
            |m| count <= m,
            |m| format!("at most {m} items"),
        )?;
        match schema.get("items") {
            Some(Value::Array(positional)) => {
                for (index, (item, item_schema)) in items.iter().zip(positional).enumerate() {
                    self.check(item_schema, item)
                        .map_err(|why| format!("item {index}: {why}"))?;
                }
                if let Some(extra) = schema.get("additionalItems") {
                    for (index, item) in items.iter().enumerate().skip(positional.len()) {
                        self.check(extra, item)
                            .map_err(|why| format!("item {index}: {why}"))?;
                    }
                }
            }
            Some(each) => {
                for (index, item) in items.iter().enumerate() {
                    self.check(each, item)
                        .map_err(|why| format!("item {index}: {why}"))?;
                }
            }
            None => {}
        }
        Ok(())
    }

    fn check_members(
        &mut self,
        schema: &Map<String, Value>,
        members: &Map<String, Value>,
    ) -> Result<(), Misfit> {
        if let Some(Value::Array(required)) = schema.get("required") {
            for name in required.iter().filter_map(Value::as_str) {
                if !members.contains_key(name) {
                    return Err(format!("missing member {name:?}"));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, member) in members {
            match properties.and_then(|p| p.get(name)) {
                Some(member_schema) => self
                    .check(member_schema, member)
                    .map_err(|why| format!("member {name:?}: {why}"))?,
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => return Err(format!("unexpected member {name:?}")),
                    Some(extra @ Value::Object(_)) => self
                        .check(extra, member)
                        .map_err(|why| format!("member {name:?}: {why}"))?,
                    _ => {}
                },
            }
        }
        Ok(())
    }

    /// A `#/...` pointer into the document.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        let name = pointer.strip_prefix("/components/schemas/")?;
        self.document.components.schemas.get(name)
    }
}

fn check_bounds(schema: &Map<String, Value>, number: f64) -> Result<(), Misfit> {
    bound(schema, "minimum", |m| number >= m, |m| format!("at least {m}"))?;
    bound(schema, "maximum", |m| number <= m, |m| format!("at most {m}"))?;
    bound(
        schema,
        "exclusiveMinimum",
        |m| number > m,
        |m| format!("more than {m}"),
    )?;
    bound(
        schema,
        "exclusiveMaximum",
        |m| number < m,
        |m| format!("less than {m}"),
    )?;
    bound(
        schema,
        "multipleOf",
        |m| m <= 0.0 || (number / m).fract() == 0.0,
        |m| format!("a multiple of {m}"),
    )?;
    Ok(())
}

/// Applies the numeric keyword `key`, if the schema has it.
fn bound(
    schema: &Map<String, Value>,
    key: &str,
    holds: impl Fn(f64) -> bool,
    expected: impl Fn(f64) -> String,
) -> Result<(), Misfit> {
    match schema.get(key).and_then(Value::as_f64) {
        Some(limit) if !holds(limit) => Err(format!("expected {}", expected(limit))),
        _ => Ok(()),
    }
}

fn is_type(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        "integer" => match value {
            Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
            _ => false,
        },
        _ => true,
    }
}

/// Numbers compare by value (`1` equals `1.0`), the rest structurally.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".into(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = value.to_string();
    if text.len() <= 40 {
        format!("{kind} ({text})")
    } else {
        kind.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document() -> Document {
        serde_json::from_value(json!({
            "openrpc": "1.3.2",
            "info": {"title": "t", "version": "1"},
            "methods": [
                {"name": "subtract", "paramStructure": "either",
                 "params": [{"name": "minuend", "required": true, "schema": {"type": "number"}},
                            {"name": "subtrahend", "required": true, "schema": {"type": "number"}}],
                 "result": {"name": "difference", "schema": {"type": "number"}}},
                {"name": "sum", "paramStructure": "by-position", "x-variadic": true,
                 "params": [{"name": "numbers", "schema": {"type": "number"}}]},
                {"name": "named", "params": [
                    {"name": "mode", "required": true, "schema": {"enum": ["fast", "slow"]}},
                    {"name": "limit", "schema": {"type": "integer", "minimum": 1, "maximum": 10}},
                    {"name": "tree", "schema": {"$ref": "#/components/schemas/Tree"}}]},
                {"name": "anything", "params": [], "x-any-params": true},
                {"name": "none", "params": [], "paramStructure": "either"}
            ],
            "components": {"schemas": {"Tree": {"type": "object", "required": ["name"],
                "additionalProperties": false,
                "properties": {"name": {"type": "string"},
                               "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}}}}
        }))
        .unwrap()
    }

    #[test]
    fn fitting_params_pass() {
        let doc = document();
        for (method, params) in [
            ("subtract", Some(json!([42, 23]))),
            ("subtract", Some(json!({"minuend": 42, "subtrahend": 23.5}))),
            ("sum", Some(json!([1, 2, 3, 4]))),
            ("sum", None),
            ("named", Some(json!({"mode": "fast", "limit": 3}))),
            (
                "named",
                Some(json!({"mode": "slow", "tree": {"name": "r", "children": [{"name": "c"}]}})),
            ),
            ("anything", Some(json!(["whatever", 1]))),
            ("none", None),
            ("none", Some(json!([]))),
        ] {
            assert_eq!(
                check(&doc, method, params.as_ref()),
                Ok(()),
                "{method} {params:?}"
            );
        }
    }

    #[test]
    fn misfits_are_explained() {
        let doc = document();
        for (method, params, says) in [
            ("subtract", Some(json!([42])), "missing param subtrahend"),
            (
                "subtract",
                Some(json!([42, "x"])),
                "param subtrahend: expected number, got a string",
            ),
            ("subtract", Some(json!([1, 2, 3])), "at most 2 params"),
            (
                "subtract",
                Some(json!({"minuend": 1, "subtrahendd": 2})),
                "no param \"subtrahendd\"",
            ),
            ("sum", Some(json!({"numbers": 1})), "takes positional params"),
            ("sum", Some(json!([1, true])), "param numbers: expected number"),
            ("named", Some(json!([1])), "takes named params"),
            (
                "named",
                Some(json!({"mode": "medium"})),
                "expected one of \"fast\", \"slow\"",
            ),
            (
                "named",
                Some(json!({"mode": "fast", "limit": 11})),
                "expected at most 10",
            ),
            (
                "named",
                Some(json!({"mode": "fast", "limit": 1.5})),
                "expected integer",
            ),
            (
                "named",
                Some(json!({"mode": "fast", "tree": {"name": "r", "children": [{}]}})),
                "missing member \"name\"",
            ),
            (
                "named",
                Some(json!({"mode": "fast", "tree": {"name": "r", "leaf": 1}})),
                "unexpected member \"leaf\"",
            ),
            ("none", Some(json!([1])), "at most 0 params"),
            ("nope", None, "no method \"nope\""),
        ] {
            let error = check(&doc, method, params.as_ref()).expect_err(method);
            assert!(
                error.contains(says),
                "{method} {params:?}: {error:?} lacks {says:?}"
            );
        }
    }

    #[test]
    fn signatures_read_like_calls() {
        let doc = document();
        assert_eq!(
            signature(doc.method("subtract").unwrap()),
            "subtract(minuend: number, subtrahend: number)"
        );
        assert_eq!(signature(doc.method("sum").unwrap()), "sum(numbers?: number...)");
        assert_eq!(
            signature(doc.method("named").unwrap()),
            r#"named(mode: "fast"|"slow", limit?: integer, tree?: Tree)"#
        );
    }
}
