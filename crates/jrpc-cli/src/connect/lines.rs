//! The lines typed in `jrpc connect`: words (quoted, named), a call's
//! method and params, the `:` commands' answers, the help text.

use anyhow::anyhow;
use serde_json::value::RawValue;

use crate::call::line_params;

pub(super) const HELP: &str =
    "  METHOD [PARAM]...          call METHOD (each PARAM JSON or a bare word; all NAME=VALUE: named)
  :notify METHOD [PARAM]...  send a notification
  :batch ... :end            send the calls and notifications in between as one batch
  :raw JSON                  send JSON as typed (:raw! TEXT sends anything at all);
  {...} or [...]             a line that starts as JSON is sent as :raw sends it
  :reply ID JSON             answer the server's request ID with a result
  :error ID CODE MESSAGE     answer the server's request ID with an error
  :quit                      end the session (or Ctrl-D); Ctrl-R searches the history";

/// `method params…` split into the method and its params.
pub(super) fn method_and_params(text: &str) -> anyhow::Result<(String, Option<Box<RawValue>>)> {
    let words = split_words(text)?;
    let Some((method, params)) = words.split_first() else {
        anyhow::bail!("no method given");
    };
    Ok((method.clone(), line_params(params)?))
}

/// `:reply ID JSON` or `:error ID CODE MESSAGE` as a response frame.
pub(super) fn answer(command: &str, rest: &str) -> anyhow::Result<String> {
    let words = split_words(rest)?;
    let id = words
        .first()
        .ok_or_else(|| anyhow!("{command} needs the request's ID"))?;
    // An id as printed (`7`, `"abc"`), or a bare word taken as a string.
    let id: Box<RawValue> = serde_json::from_str(id)
        .or_else(|_| serde_json::value::to_raw_value(id.as_str()))
        .map_err(|e| anyhow!("{id}: not an id ({e})"))?;
    if command == ":reply" {
        let result = rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..].trim();
        let result: &RawValue = serde_json::from_str(if result.is_empty() { "null" } else { result })
            .map_err(|e| anyhow!(":reply {}: the result is not JSON ({e})", id.get()))?;
        return Ok(format!(
            r#"{{"jsonrpc":"2.0","result":{},"id":{}}}"#,
            result.get(),
            id.get()
        ));
    }
    let code: i64 = words
        .get(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!(":error ID CODE MESSAGE: CODE is an integer"))?;
    let message = words[2..].join(" ");
    Ok(format!(
        r#"{{"jsonrpc":"2.0","error":{{"code":{code},"message":{}}},"id":{}}}"#,
        serde_json::Value::from(message),
        id.get()
    ))
}

/// Splits a line into words at whitespace, as a shell would, but keeping
/// JSON whole: brackets and braces (with the strings inside them) stay one
/// word as typed. A quote that opens a word, or a value after `NAME=`,
/// makes a string: 'single' as typed, "double" with JSON's escapes; it is
/// kept as JSON text (`"hello world"`), so it is sent as a string even when
/// it reads as a number. A quote inside a word (`don't`) is just a
/// character.
pub(super) fn split_words(text: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut depth = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let opens_string =
            word.is_empty() || (depth == 0 && word.ends_with('=') && !word.contains(['"', '\'']));
        match c {
            c if c.is_whitespace() && depth == 0 => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            '"' if depth > 0 => {
                // A JSON string inside brackets: kept whole, escapes and all.
                word.push('"');
                loop {
                    match chars.next() {
                        Some('"') => break word.push('"'),
                        Some('\\') => {
                            word.push('\\');
                            word.extend(chars.next());
                        }
                        Some(other) => word.push(other),
                        None => anyhow::bail!("a string is not closed"),
                    }
                }
            }
            '"' if opens_string => {
                let mut literal = String::from('"');
                loop {
                    match chars.next() {
                        Some('"') => break literal.push('"'),
                        Some('\\') => {
                            literal.push('\\');
                            literal.extend(chars.next());
                        }
                        Some(other) => literal.push(other),
                        None => anyhow::bail!("a quote is not closed"),
                    }
                }
                let string: String = serde_json::from_str(&literal)
                    .map_err(|e| anyhow!("{literal}: not a JSON string ({e})"))?;
                word.push_str(&serde_json::Value::from(string).to_string());
            }
            '\'' if opens_string => {
                let mut string = String::new();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(other) => string.push(other),
                        None => anyhow::bail!("a quote is not closed"),
                    }
                }
                word.push_str(&serde_json::Value::from(string).to_string());
            }
            '[' | '{' => {
                depth += 1;
                word.push(c);
            }
            ']' | '}' => {
                depth = depth.saturating_sub(1);
                word.push(c);
            }
            c => word.push(c),
        }
    }
    if depth > 0 {
        anyhow::bail!("a bracket is not closed");
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_into_words() {
        let cases: &[(&str, &[&str])] = &[
            ("subtract 42 23", &["subtract", "42", "23"]),
            ("  sum   1\t2 ", &["sum", "1", "2"]),
            ("echo 'hello world'", &["echo", r#""hello world""#]),
            (r#"echo "42""#, &["echo", r#""42""#]),
            (r#"echo "a\nb \u00e9""#, &["echo", r#""a\nb é""#]),
            ("echo don't", &["echo", "don't"]),
            (
                r#"greet name="Ada Lovelace" age=36"#,
                &["greet", r#"name="Ada Lovelace""#, "age=36"],
            ),
            ("greet name='O Brien'", &["greet", r#"name="O Brien""#]),
            (
                r#"sum [1, 2, 3] {"a b": "c ]"}"#,
                &["sum", "[1, 2, 3]", r#"{"a b": "c ]"}"#],
            ),
            ("echo ü 日本", &["echo", "ü", "日本"]),
            ("", &[]),
        ];
        for (line, words) in cases {
            assert_eq!(split_words(line).unwrap(), *words, "{line}");
        }
        for bad in ["echo 'open", r#"echo "open"#, "sum [1, 2", r#"x {"a": "b}"#] {
            assert!(split_words(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quoted_words_are_strings_and_named_words_named() {
        let params = |line: &str| {
            let (method, params) = method_and_params(line).unwrap();
            (method, params.map(|p| p.get().to_owned()))
        };
        assert_eq!(params("echo '42'"), ("echo".into(), Some(r#"["42"]"#.into())));
        assert_eq!(
            params("subtract 42 23"),
            ("subtract".into(), Some("[42,23]".into()))
        );
        assert_eq!(
            params(r#"greet name="Ada Lovelace" age=36"#),
            ("greet".into(), Some(r#"{"name":"Ada Lovelace","age":36}"#.into()))
        );
        assert_eq!(params("ping"), ("ping".into(), None));
    }
}
