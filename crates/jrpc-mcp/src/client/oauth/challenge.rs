//! Reading a server's `WWW-Authenticate` challenges (RFC 9110 §11.6.1):
//! the `Bearer` one's parameters (`resource_metadata`, `scope`, `error`).

use http::HeaderMap;

/// What a `Bearer` challenge said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// `error`: `invalid_token`, `insufficient_scope`, …
    pub(crate) error: Option<String>,
    /// `scope`: the scopes this request needs, space-separated.
    pub(crate) scope: Option<String>,
    /// `resource_metadata` (RFC 9728 §5.1): where the protected resource
    /// metadata is.
    pub(crate) resource_metadata: Option<String>,
    /// The server challenged with the `DPoP` scheme: it takes DPoP-bound
    /// tokens (RFC 9449 §7.1).
    pub(crate) dpop: bool,
}

impl Challenge {
    /// The `Bearer` challenge among a response's `WWW-Authenticate`
    /// headers; `None` when there is none.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Challenge> {
        headers
            .get_all(http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(parse_bearer)
    }

    /// The scopes asked, one per item.
    pub(crate) fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }
}

/// The `error` of a response's `Bearer` challenge.
pub(crate) fn challenge_error(headers: &HeaderMap) -> Option<String> {
    Challenge::from_headers(headers)?.error
}

/// Space-separated scopes, one per item (RFC 6749 §3.3).
pub(crate) fn split_scopes(scope: &str) -> Vec<String> {
    scope.split_ascii_whitespace().map(str::to_owned).collect()
}

/// The `Bearer` challenge in one header value, which may hold several
/// challenges (`DPoP algs="ES256", Bearer scope="a"`).
fn parse_bearer(value: &str) -> Option<Challenge> {
    let mut rest = value;
    let mut in_bearer = false;
    let mut found: Option<Challenge> = None;
    loop {
        rest = rest.trim_start_matches(|c: char| c == ',' || c.is_ascii_whitespace());
        if rest.is_empty() {
            return found;
        }
        let token_end = rest
            .find(|c: char| c == '=' || c == ',' || c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        let token = &rest[..token_end];
        let after = rest[token_end..].trim_start_matches([' ', '\t']);
        if token.is_empty() {
            // A stray character: skip it.
            rest = &rest[1..];
            continue;
        }
        if let Some(value_part) = after.strip_prefix('=') {
            if value_part.starts_with('=')
                || value_part.trim_start().is_empty()
                || value_part.starts_with(',')
            {
                // token68 padding (`abc==`): not a parameter.
                rest = value_part.trim_start_matches('=');
                continue;
            }
            let value_part = value_part.trim_start_matches([' ', '\t']);
            let (param, next) = read_value(value_part);
            if in_bearer {
                let challenge = found.get_or_insert_with(Challenge::default);
                // Bearer and DPoP challenges together say one thing: the
                // first value of each parameter is kept.
                let slot = match token.to_ascii_lowercase().as_str() {
                    "error" => Some(&mut challenge.error),
                    "scope" => Some(&mut challenge.scope),
                    "resource_metadata" => Some(&mut challenge.resource_metadata),
                    _ => None,
                };
                if let Some(slot) = slot {
                    slot.get_or_insert(param);
                }
            }
            rest = next;
        } else {
            // A scheme name starts a new challenge; a DPoP one carries the
            // same parameters as a Bearer one (RFC 9449 §7.1).
            in_bearer = token.eq_ignore_ascii_case("bearer") || token.eq_ignore_ascii_case("dpop");
            if in_bearer && found.is_none() {
                found = Some(Challenge::default());
            }
            if token.eq_ignore_ascii_case("dpop") {
                if let Some(challenge) = found.as_mut() {
                    challenge.dpop = true;
                }
            }
            rest = after;
        }
    }
}

/// A parameter's value (a quoted-string or a token) and what follows it.
fn read_value(input: &str) -> (String, &str) {
    if let Some(quoted) = input.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => return (value, &quoted[at + 1..]),
                c => value.push(c),
            }
        }
        (value, "")
    } else {
        let end = input.find([',', ' ', '\t']).unwrap_or(input.len());
        (input[..end].to_owned(), &input[end..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Option<Challenge> {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::WWW_AUTHENTICATE, value.parse().unwrap());
        Challenge::from_headers(&headers)
    }

    #[test]
    fn bearer_parameters_are_read_quoted_or_not() {
        type Case<'a> = (&'a str, Option<(&'a str, &'a str, &'a str)>);
        let cases: &[Case] = &[
            ("Bearer", Some(("", "", ""))),
            (
                r#"Bearer resource_metadata="http://a/.well-known/oauth-protected-resource/mcp", scope="read write""#,
                Some((
                    "",
                    "read write",
                    "http://a/.well-known/oauth-protected-resource/mcp",
                )),
            ),
            (
                r#"Bearer error="insufficient_scope", scope="files:write", error_description="needs \"write\"""#,
                Some(("insufficient_scope", "files:write", "")),
            ),
            (
                "bearer error=invalid_token,scope=a",
                Some(("invalid_token", "a", "")),
            ),
            (r#"DPoP algs="ES256", Bearer scope="b""#, Some(("", "b", ""))),
            (
                r#"DPoP error="use_dpop_nonce", resource_metadata="https://m/x""#,
                Some(("use_dpop_nonce", "", "https://m/x")),
            ),
            (
                r#"Bearer scope="a", DPoP scope="b", error="invalid_token""#,
                Some(("invalid_token", "a", "")),
            ),
            (r#"Bearer scope="c", Basic realm="x""#, Some(("", "c", ""))),
            (r#"Basic realm="x""#, None),
            ("Negotiate abc==", None),
        ];
        for (value, expected) in cases {
            let got = parse(value);
            let expected = expected.map(|(error, scope, metadata)| Challenge {
                error: (!error.is_empty()).then(|| error.to_owned()),
                scope: (!scope.is_empty()).then(|| scope.to_owned()),
                resource_metadata: (!metadata.is_empty()).then(|| metadata.to_owned()),
                dpop: value.to_ascii_lowercase().contains("dpop"),
            });
            assert_eq!(got, expected, "{value}");
        }
    }

    #[test]
    fn the_bearer_challenge_is_found_among_several_headers() {
        let mut headers = HeaderMap::new();
        headers.append(
            http::header::WWW_AUTHENTICATE,
            r#"Basic realm="x""#.parse().unwrap(),
        );
        headers.append(
            http::header::WWW_AUTHENTICATE,
            r#"Bearer scope="s""#.parse().unwrap(),
        );
        assert_eq!(Challenge::from_headers(&headers).unwrap().scopes(), vec!["s"]);
    }
}
