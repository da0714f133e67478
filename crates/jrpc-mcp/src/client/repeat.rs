//! Calls safe to repeat: which requests the client sends again after a
//! lost connection or a proxy's refusal (`502`, `503`, `504`: a replica
//! behind a load balancer went away), and within what budget.
//!
//! Only requests that change nothing are repeated: lists,
//! `resources/read`, `prompts/get`, `server/discover`, `tasks/get`, and
//! `tools/call` of a tool the server annotates `readOnlyHint: true` or
//! `idempotentHint: true` (the tool list is looked up once, when first
//! needed, and kept). Anything else may have run before the connection was
//! lost, and is never sent twice.

use std::time::Duration;

use jrpc::CallError;

/// The most attempts of one request, for every reason together: a version
/// the server asks for, headers learned again, a repeat after a loss.
pub(super) const MAX_ATTEMPTS: u32 = 5;

/// Whether `method` is safe to send again whatever its params: `Some`,
/// said at once; `None` for `tools/call`, which depends on the tool.
pub(super) fn safe_method(method: &str) -> Option<bool> {
    match method {
        "tools/list"
        | "resources/list"
        | "resources/templates/list"
        | "prompts/list"
        | "resources/read"
        | "prompts/get"
        | "server/discover"
        | "tasks/get" => Some(true),
        "tools/call" => None,
        _ => Some(false),
    }
}

/// Whether a tool annotated so may be called twice for once: read-only,
/// or idempotent (which the spec gives meaning only when the tool is not
/// read-only, where it is the weaker promise).
pub(super) fn safe_tool(tool: &crate::types::Tool) -> bool {
    tool.annotations
        .as_ref()
        .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true))
}

/// Whether `error` is a loss worth another attempt of a safe request: the
/// connection failed or closed before the answer, or a proxy says the
/// server behind it cannot answer now.
pub(super) fn worth_repeating(error: &CallError) -> bool {
    match error {
        CallError::Io(_) | CallError::Closed(_) => true,
        #[cfg(feature = "http-client")]
        CallError::Transport(_) => error
            .transport_error::<super::modern_http::HttpStatusError>()
            .is_some_and(|http| matches!(http.status, 502..=504)),
        _ => false,
    }
}

/// How long to wait before repeat `n` (1, 2, ...): 50 ms doubling, at most
/// 800 ms — a load balancer notices a lost replica within its health
/// check, and a request sent again goes to another.
pub(super) fn backoff(n: u32) -> Duration {
    Duration::from_millis(50u64 << n.saturating_sub(1).min(4))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::types::{Tool, ToolAnnotations};

    #[test]
    fn only_what_changes_nothing_is_repeated() {
        for method in [
            "tools/list",
            "resources/read",
            "prompts/get",
            "server/discover",
            "tasks/get",
        ] {
            assert_eq!(safe_method(method), Some(true), "{method}");
        }
        for method in [
            "tasks/cancel",
            "tasks/update",
            "completion/complete",
            "logging/setLevel",
            "ping",
            "x/y",
        ] {
            assert_eq!(safe_method(method), Some(false), "{method}");
        }
        assert_eq!(safe_method("tools/call"), None);
        let tool = |read_only, idempotent| {
            Tool::new("t").annotations(ToolAnnotations {
                read_only_hint: read_only,
                idempotent_hint: idempotent,
                ..Default::default()
            })
        };
        assert!(safe_tool(&tool(Some(true), None)));
        assert!(safe_tool(&tool(Some(false), Some(true))));
        assert!(safe_tool(&tool(None, Some(true))));
        assert!(!safe_tool(&tool(None, None)));
        assert!(!safe_tool(&tool(Some(false), Some(false))));
        assert!(!safe_tool(&Tool::new("plain")));
    }

    #[test]
    fn losses_are_repeated_answers_are_not() {
        assert!(worth_repeating(&CallError::Io(Arc::new(std::io::Error::other(
            "reset"
        )))));
        assert!(worth_repeating(&CallError::Closed("gone".into())));
        assert!(!worth_repeating(&CallError::Rpc(jrpc::Error::internal_error())));
        assert!(!worth_repeating(&CallError::Timeout(Duration::from_secs(1))));
        #[cfg(feature = "http-client")]
        for (status, again) in [
            (502, true),
            (503, true),
            (504, true),
            (500, false),
            (429, false),
            (404, false),
        ] {
            let error = CallError::Transport(Arc::new(super::super::modern_http::HttpStatusError {
                status,
                body: String::new(),
            }));
            assert_eq!(worth_repeating(&error), again, "{status}");
        }
        assert_eq!(backoff(1), Duration::from_millis(50));
        assert_eq!(backoff(3), Duration::from_millis(200));
        assert_eq!(backoff(9), Duration::from_millis(800));
    }
}
