//! `jrpc mcp`: asking on the terminal for what a server's elicitation
//! wants (a prompt per field of its schema).

use std::io::{BufRead, Write};

use jrpc_mcp::types::{ElicitAction, ElicitParams, ElicitResult, JsonObject};
use serde_json::Value;

pub(crate) fn declined() -> ElicitResult {
    ElicitResult {
        action: ElicitAction::Decline,
        content: None,
        meta: None,
    }
}

/// One prompt per field of the requested schema, on stderr; answers
/// read from stdin. An empty answer takes the field's default (or
/// leaves it out); end of input declines.
pub(crate) fn ask(params: &ElicitParams) -> ElicitResult {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    eprintln!("jrpc: the server asks: {}", params.message);
    let required: Vec<&str> = params
        .requested_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut content = JsonObject::new();
    let properties = params
        .requested_schema
        .get("properties")
        .and_then(Value::as_object);
    for (name, schema) in properties.into_iter().flatten() {
        let kind = schema.get("type").and_then(Value::as_str).unwrap_or("string");
        let choices = schema.get("enum").and_then(Value::as_array);
        loop {
            let title = schema.get("title").and_then(Value::as_str).unwrap_or(name);
            let mut hint = match choices {
                Some(choices) => choices
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join("|"),
                None => kind.to_owned(),
            };
            if let Some(default) = schema.get("default") {
                hint.push_str(&format!(", default {default}"));
            }
            let star = if required.contains(&name.as_str()) {
                "*"
            } else {
                ""
            };
            eprint!("  {title}{star} ({hint}): ");
            let _ = std::io::stderr().flush();
            let Some(Ok(line)) = lines.next() else {
                eprintln!();
                return declined();
            };
            let line = line.trim();
            if line.is_empty() {
                if let Some(default) = schema.get("default") {
                    content.insert(name.clone(), default.clone());
                }
                if content.contains_key(name) || !required.contains(&name.as_str()) {
                    break;
                }
                eprintln!("  (required)");
                continue;
            }
            match read_value(kind, choices, line) {
                Some(value) => {
                    content.insert(name.clone(), value);
                    break;
                }
                None => eprintln!("  not a valid {kind}"),
            }
        }
    }
    ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
    }
}

/// An answer as the field's type wants it.
fn read_value(kind: &str, choices: Option<&Vec<Value>>, text: &str) -> Option<Value> {
    let value = match kind {
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return None,
        },
        "integer" => Value::from(text.parse::<i64>().ok()?),
        "number" => serde_json::Number::from_f64(text.parse::<f64>().ok()?).map(Value::Number)?,
        _ => Value::String(text.to_owned()),
    };
    match choices {
        Some(choices) if !choices.contains(&value) => None,
        _ => Some(value),
    }
}
