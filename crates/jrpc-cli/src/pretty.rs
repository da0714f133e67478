//! Re-indenting JSON text without parsing its values, so that numbers of any
//! size and member order come out exactly as the server sent them.

/// Pretty-prints valid JSON text with two-space indentation; with
/// `indent == false`, strips insignificant whitespace instead.
pub fn format_json(text: &str, indent: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len() * 2);
    let mut depth = 0usize;
    let mut i = 0;
    let newline = |out: &mut String, depth: usize| {
        if indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str("  ");
            }
        }
    };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                // Copy the string verbatim, escapes included.
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                out.push_str(&text[start..i]);
                continue;
            }
            b'{' | b'[' => {
                let close = if b == b'{' { b'}' } else { b']' };
                let next = bytes[i + 1..]
                    .iter()
                    .position(|c| !c.is_ascii_whitespace())
                    .map(|p| i + 1 + p);
                if next.is_some_and(|n| bytes[n] == close) {
                    out.push(b as char);
                    out.push(close as char);
                    i = next.unwrap_or(i) + 1;
                    continue;
                }
                out.push(b as char);
                depth += 1;
                newline(&mut out, depth);
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b as char);
            }
            b',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            b':' => out.push_str(if indent { ": " } else { ":" }),
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => {
                // Numbers and literals: copy up to the next structural byte.
                let start = i;
                while i < bytes.len() && !b",:{}[] \t\r\n\"".contains(&bytes[i]) {
                    i += 1;
                }
                out.push_str(&text[start..i]);
                continue;
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format_json;

    #[test]
    fn pretty_keeps_values_exact() {
        let text =
            r#"{"b":[1, 2.50e3, {}],"a" :{"x":"y, \"z\": [", "n": 123456789012345678901234567890}, "e": []}"#;
        assert_eq!(
            format_json(text, true),
            "{\n  \"b\": [\n    1,\n    2.50e3,\n    {}\n  ],\n  \"a\": {\n    \"x\": \"y, \\\"z\\\": [\",\n    \"n\": 123456789012345678901234567890\n  },\n  \"e\": []\n}"
        );
        assert_eq!(
            format_json(text, false),
            r#"{"b":[1,2.50e3,{}],"a":{"x":"y, \"z\": [","n":123456789012345678901234567890},"e":[]}"#
        );
        assert_eq!(format_json("  null ", true), "null");
        assert_eq!(format_json(r#""\\""#, true), r#""\\""#);
    }
}
