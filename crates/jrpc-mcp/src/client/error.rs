//! Why an MCP client call failed.

use jrpc::{CallError, Error};

/// Why an MCP client call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpClientError {
    /// The server could not be reached or started. (The I/O error is in the
    /// message, not also its source: a report that prints the chain would
    /// say it twice.)
    #[error("cannot reach the server: {0}")]
    Connect(std::io::Error),
    /// The server answered `initialize` with a protocol revision this
    /// client does not speak.
    #[error("the server speaks protocol {0}, which this client does not")]
    UnsupportedVersion(String),
    /// The call failed: the server answered with an error, did not answer
    /// in time, or the connection closed.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The server asked for input (`input_required`) this client has no
    /// callback to give: the method it asked to be answered.
    #[error("the server needs {0} to answer, and this client has no callback for it")]
    CannotAnswer(String),
    /// The server kept asking for input past the bound on rounds.
    #[error("the server asked for input {0} times without answering")]
    TooManyRounds(usize),
    /// The server asked for authorization, and the client could not get
    /// (or would not send) a token: see [`OAuthError`](super::oauth::OAuthError).
    #[cfg(feature = "oauth")]
    #[error("authorization: {0}")]
    Authorization(super::oauth::OAuthError),
    /// A task was cancelled (or ended without a result) before it
    /// finished; a task that failed is the [`Call`](Self::Call) error it
    /// failed with.
    #[error("task {id} {status}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    TaskEnded {
        /// The task.
        id: String,
        /// How it ended (`cancelled`).
        status: String,
        /// What the server said.
        message: Option<String>,
    },
    /// `resources/read` of a resource the server does not have (`-32002`,
    /// or `-32602` as some servers say it).
    #[error("no resource {uri}: {error}")]
    ResourceNotFound {
        /// The resource asked for.
        uri: String,
        /// The server's error.
        error: Error,
    },
    /// A skill's file is not what its entry promised (the Skills
    /// extension): its content was not used.
    #[error("skill verification failed: {0}")]
    Skill(#[from] SkillVerifyError),
}

impl McpClientError {
    /// Why authorization failed, when it did (at connect time, or on a
    /// later call refused for its scopes).
    #[cfg(feature = "oauth")]
    pub fn authorization(&self) -> Option<&super::oauth::OAuthError> {
        match self {
            McpClientError::Authorization(e) => Some(e),
            McpClientError::Call(e) => e.transport_error::<super::oauth::OAuthError>(),
            _ => None,
        }
    }

    /// The server's error object, when it answered with one.
    pub fn rpc(&self) -> Option<&Error> {
        match self {
            McpClientError::Call(e) => e.rpc(),
            McpClientError::ResourceNotFound { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl From<std::io::Error> for McpClientError {
    fn from(e: std::io::Error) -> Self {
        McpClientError::Connect(e)
    }
}

/// Why a skill's file was not accepted: the content is not what the
/// skill's entry promised (stale, corrupted or tampered with), and must not
/// be used. Ask for the entry again (`skills/get`) to recover from a skill
/// that changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillVerifyError {
    /// The file is not in the skill's manifest.
    #[error("{uri}: not a file of the skill (its manifest does not list it)")]
    Unlisted {
        /// The file.
        uri: String,
    },
    /// The server sent no content for the file.
    #[error("{uri}: the server sent no content")]
    Empty {
        /// The file.
        uri: String,
    },
    /// The file's length is not the manifest's.
    #[error("{uri}: {got} bytes, the manifest says {expected}")]
    Size {
        /// The file.
        uri: String,
        /// The manifest's size.
        expected: u64,
        /// The content's.
        got: u64,
    },
    /// The file's digest is not the manifest's.
    #[error("{uri}: digest {got}, the manifest says {expected}")]
    Digest {
        /// The file.
        uri: String,
        /// The manifest's digest.
        expected: String,
        /// The content's.
        got: String,
    },
    /// The `SKILL.md` has no frontmatter to compare.
    #[error("{uri}: SKILL.md has no YAML frontmatter")]
    NoFrontmatter {
        /// The `SKILL.md`.
        uri: String,
    },
    /// The `SKILL.md` frontmatter is not the entry's.
    #[error("{uri}: the SKILL.md frontmatter differs from the entry's in {field:?}")]
    Frontmatter {
        /// The `SKILL.md`.
        uri: String,
        /// The first field that differs.
        field: String,
    },
}
