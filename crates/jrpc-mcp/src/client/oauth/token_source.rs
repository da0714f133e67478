//! Where a token the client is handed comes from: a workload's identity
//! token (workload identity federation, SEP-1933), or a user's ID token
//! from the enterprise's identity provider (enterprise-managed
//! authorization, SEP-990).

use std::path::PathBuf;

use super::error::OAuthError;

/// Where a token the client is handed comes from (a workload's identity
/// token, a user's ID token): read afresh at each use, since platforms and
/// identity providers rotate them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenSource {
    /// The token itself.
    Value(String),
    /// A file holding it (`/var/run/secrets/…/token`), read each time.
    File(PathBuf),
    /// An environment variable holding it.
    Env(String),
}

impl TokenSource {
    /// `SOURCE` as a command line gives it: `env:NAME` for an environment
    /// variable, else a file's path.
    pub fn parse(source: &str) -> TokenSource {
        match source.strip_prefix("env:") {
            Some(name) => TokenSource::Env(name.to_owned()),
            None => TokenSource::File(source.into()),
        }
    }

    /// The token now.
    pub(crate) fn read(&self) -> Result<String, OAuthError> {
        let token = match self {
            TokenSource::Value(token) => token.clone(),
            TokenSource::File(path) => std::fs::read_to_string(path)
                .map_err(|e| OAuthError::Key(format!("the token in {}: {e}", path.display())))?,
            TokenSource::Env(name) => {
                std::env::var(name).map_err(|_| OAuthError::Key(format!("the token: ${name} is not set")))?
            }
        };
        let token = token.trim();
        if token.is_empty() {
            return Err(OAuthError::Key("the token is empty".into()));
        }
        Ok(token.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_token_is_read_from_where_it_is_each_time() {
        let path = std::env::temp_dir().join(format!("jrpc-wif-{}", std::process::id()));
        std::fs::write(&path, "eyJ.first\n").unwrap();
        let from_file = TokenSource::File(path.clone());
        assert_eq!(from_file.read().unwrap(), "eyJ.first");
        std::fs::write(&path, "eyJ.rotated").unwrap();
        assert_eq!(from_file.read().unwrap(), "eyJ.rotated");
        std::fs::remove_file(&path).unwrap();
        assert!(from_file.read().unwrap_err().to_string().contains("jrpc-wif-"));
        assert!(TokenSource::Env("JRPC_TEST_UNSET_WIF".into()).read().is_err());
        assert!(TokenSource::Value("  ".into()).read().is_err());
        assert_eq!(
            TokenSource::parse("env:ID_TOKEN"),
            TokenSource::Env("ID_TOKEN".into())
        );
        assert_eq!(
            TokenSource::parse("/run/token"),
            TokenSource::File("/run/token".into())
        );
    }
}
