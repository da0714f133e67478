//! A fast pre-scan that bounds how deeply a frame nests arrays and objects,
//! before any parser recurses into it.

use memchr::memchr2;

/// Returns `true` when `bytes` nests arrays/objects deeper than `max_depth`.
///
/// Brackets inside strings do not count. The scan does not validate JSON; the
/// parser does that afterwards. A frame shorter than `2 * (max_depth + 1)`
/// bytes cannot hold a *valid* value nested deeper than `max_depth` (every
/// level needs an opening and a closing byte), so it is not scanned; an
/// invalid one is rejected by the parser, whose own recursion limit bounds it.
pub(crate) fn exceeds(bytes: &[u8], max_depth: usize) -> bool {
    if bytes.len() < 2 * (max_depth + 1) {
        return false;
    }
    // No more opening brackets than the limit, in strings or not, cannot
    // nest deeper than it: a count the compiler vectorizes settles most
    // frames without the byte-by-byte walk below.
    if openings(bytes) <= max_depth {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'[' | b'{' => {
                depth += 1;
                if depth > max_depth {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            b'"' => {
                // Skip the string body: jump between quotes and backslashes.
                i += 1;
                loop {
                    if i >= bytes.len() {
                        return false;
                    }
                    match memchr2(b'"', b'\\', &bytes[i..]) {
                        None => return false,
                        Some(off) if bytes[i + off] == b'\\' => i += off + 2,
                        Some(off) => {
                            i += off;
                            break;
                        }
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// How many bytes of `bytes` are `[` or `{`.
fn openings(bytes: &[u8]) -> usize {
    // `[` and `{` differ only in bit 0x20, so one comparison finds both;
    // counts kept in bytes, per chunk that cannot overflow one, vectorize.
    bytes
        .chunks(255)
        .map(|chunk| {
            let count = chunk.iter().fold(0u8, |n, &b| n + u8::from(b | 0x20 == b'{'));
            usize::from(count)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{exceeds, openings};

    #[test]
    fn openings_are_square_and_curly_brackets_only() {
        assert_eq!(openings(b""), 0);
        assert_eq!(openings(br#"{"a":[1,{}],"b":"[{"}"#), 5);
        assert_eq!(openings(b"]})(<;;:"), 0);
        // Past one chunk, and every byte value once.
        let all: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        assert_eq!(
            openings(&all),
            all.iter().filter(|&&b| b == b'[' || b == b'{').count()
        );
    }

    fn nested(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn counts_arrays_and_objects() {
        assert!(!exceeds(nested(3).as_bytes(), 3));
        assert!(exceeds(nested(4).as_bytes(), 3));
        assert!(exceeds(br#"{"a":{"b":{"c":{}}}}"#, 3));
        assert!(!exceeds(br#"{"a":{"b":{"c":1}}}  "#, 3));
    }

    #[test]
    fn ignores_brackets_in_strings() {
        let s = format!(r#"["{}\"[[[", 1, 2, 3]"#, "[".repeat(50));
        assert!(!exceeds(s.as_bytes(), 2));
    }

    #[test]
    fn unterminated_input_does_not_panic() {
        // Each of these ends inside a string or an escape.
        for input in [&br#"["\"#[..], br#"["\\\"#, br#"[[[[[[["abc"#, br#"[[[[[[[["\"#] {
            assert!(!exceeds(input, 100));
            let _ = exceeds(input, 0);
        }
        assert!(exceeds(b"[[[[[[[[", 2));
    }
}
