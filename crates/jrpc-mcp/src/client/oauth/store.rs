//! Where a client keeps what it got from an authorization server: its
//! registration there and its tokens, per MCP server (resource) and per
//! authorization server (credentials are bound to the server that issued
//! them, as the MCP specification's "Authorization Server Binding" says).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::error::OAuthError;

/// What a client holds for one MCP server at one authorization server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The authorization server's `issuer`: these credentials are good
    /// there only.
    pub issuer: String,
    /// How the client is known there, when it registered (dynamically, or
    /// by a client ID metadata document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<RegisteredClient>,
    /// The tokens it was last given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// The key DPoP-bound tokens are bound to (PKCS#8, base64url), when the
    /// authorization server binds them (RFC 9449).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

/// A client's registration at an authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredClient {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The redirect URI registered with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// `token_endpoint_auth_method` the server registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_method: Option<String>,
    /// The scopes it was registered for (space-separated), as the server
    /// registered them (else as asked): a login asking for more registers
    /// again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// The tokens of a token response (RFC 6749 §5.1).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token, sent as `Authorization: Bearer …` (or `DPoP …`).
    pub access_token: String,
    /// The refresh token, when the server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes granted (or asked, when the server did not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// `DPoP` for a token bound to the client's key (sent as
    /// `Authorization: DPoP …` with a proof); none for a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
}

impl std::fmt::Debug for RegisteredClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("RegisteredClient")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("redirect_uri", &self.redirect_uri)
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the tokens themselves: they end up in logs.
        f.debug_struct("Tokens")
            .field("refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Whether the access token has expired, or will within `margin`.
    pub fn expires_within(&self, margin: Duration) -> bool {
        self.expires_at
            .is_some_and(|at| now_secs().saturating_add(margin.as_secs()) >= at)
    }
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Where credentials are kept between runs (or not). Keyed by the MCP
/// server's URL, as the user gave it, and the authorization server's
/// issuer. Calls are short and rare (once per login or refresh): a store
/// may do blocking file I/O.
pub trait TokenStore: Send + Sync + 'static {
    /// What is held for `resource` at `issuer`; with no issuer, what was
    /// saved last for `resource` (sent before the server is asked where
    /// its authorization server is).
    fn load(&self, resource: &str, issuer: Option<&str>) -> Option<Credentials>;
    /// Keeps `credentials` for `resource` (at their issuer).
    fn save(&self, resource: &str, credentials: &Credentials) -> io::Result<()>;
    /// Forgets everything held for `resource`; whether there was anything.
    fn remove(&self, resource: &str) -> io::Result<bool>;
}

/// Credentials in memory, for one process: the default.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: Mutex<HashMap<String, Entry>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }
}

/// What is held for one resource: per issuer, and which was saved last.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Entry {
    resource: String,
    #[serde(default)]
    last: Option<String>,
    #[serde(default)]
    servers: Vec<Credentials>,
}

impl Entry {
    fn get(&self, issuer: Option<&str>) -> Option<Credentials> {
        let issuer = issuer.or(self.last.as_deref())?;
        self.servers.iter().find(|c| c.issuer == issuer).cloned()
    }

    fn put(&mut self, credentials: &Credentials) {
        self.servers.retain(|c| c.issuer != credentials.issuer);
        self.servers.push(credentials.clone());
        self.last = Some(credentials.issuer.clone());
    }
}

impl TokenStore for MemoryStore {
    fn load(&self, resource: &str, issuer: Option<&str>) -> Option<Credentials> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(resource)?.get(issuer)
    }

    fn save(&self, resource: &str, credentials: &Credentials) -> io::Result<()> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .entry(resource.to_owned())
            .or_insert_with(|| Entry {
                resource: resource.to_owned(),
                ..Entry::default()
            })
            .put(credentials);
        Ok(())
    }

    fn remove(&self, resource: &str) -> io::Result<bool> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        Ok(entries.remove(resource).is_some())
    }
}

/// Credentials in files, one JSON file per MCP server, readable by the
/// user alone (mode `0600` in a `0700` folder on Unix): what `jrpc mcp
/// login` uses, under `$XDG_STATE_HOME/jrpc/oauth/` (else
/// `~/.local/state/jrpc/oauth/`).
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    /// A store in `dir` (made when first saved to).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileStore { dir: dir.into() }
    }

    /// The default folder: `$XDG_STATE_HOME/jrpc/oauth`, else
    /// `$HOME/.local/state/jrpc/oauth`; `None` when neither is set.
    pub fn default_dir() -> Option<PathBuf> {
        let state = std::env::var_os("XDG_STATE_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|v| !v.is_empty())
                    .map(|home| Path::new(&home).join(".local/state"))
            })?;
        Some(state.join("jrpc").join("oauth"))
    }

    /// The folder this store keeps its files in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file for `resource`: its URL made safe as a file name, and a
    /// hash of it so that two URLs never share a file.
    pub fn path_for(&self, resource: &str) -> PathBuf {
        use sha2::Digest as _;
        let readable: String = resource
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        let digest = sha2::Sha256::digest(resource.as_bytes());
        let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{readable}-{hash}.json"))
    }

    fn read(&self, resource: &str) -> Option<Entry> {
        let text = std::fs::read(self.path_for(resource)).ok()?;
        let entry: Entry = serde_json::from_slice(&text).ok()?;
        (entry.resource == resource).then_some(entry)
    }
}

impl TokenStore for FileStore {
    fn load(&self, resource: &str, issuer: Option<&str>) -> Option<Credentials> {
        self.read(resource)?.get(issuer)
    }

    fn save(&self, resource: &str, credentials: &Credentials) -> io::Result<()> {
        let mut entry = self.read(resource).unwrap_or_else(|| Entry {
            resource: resource.to_owned(),
            ..Entry::default()
        });
        entry.put(credentials);
        create_private_dir(&self.dir)?;
        let path = self.path_for(resource);
        let json = serde_json::to_vec_pretty(&entry).map_err(io::Error::other)?;
        // Written whole to a private file beside it, then moved over: a
        // crash never leaves half a file, and no one else can read it.
        let unique = super::pkce::random_token().map_err(io::Error::other)?;
        let temporary = self.dir.join(format!(".{unique}.tmp"));
        if let Err(e) = write_private(&temporary, &json) {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
        std::fs::rename(&temporary, &path)
    }

    fn remove(&self, resource: &str) -> io::Result<bool> {
        match std::fs::remove_file(self.path_for(resource)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn create_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    // A new file of a fresh name: never one that is there already (a
    // symbolic link planted by someone else is not followed).
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// The key a server's credentials are stored under: its URL, parsed and
/// written back (`HTTP://Host:80` and `http://host` are one server).
pub(crate) fn store_key(server_url: &str) -> Result<String, OAuthError> {
    url::Url::parse(server_url)
        .map(String::from)
        .map_err(|e| OAuthError::Discovery(format!("{server_url}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(issuer: &str, token: &str) -> Credentials {
        Credentials {
            issuer: issuer.into(),
            client: None,
            tokens: Some(Tokens {
                access_token: token.into(),
                refresh_token: None,
                expires_at: None,
                scope: None,
                token_type: None,
            }),
            dpop_key: None,
        }
    }

    fn exercise(store: &dyn TokenStore) {
        let mcp = "http://127.0.0.1:1/mcp";
        assert_eq!(store.load(mcp, None), None);
        store.save(mcp, &credentials("http://as1", "a")).unwrap();
        store.save(mcp, &credentials("http://as2", "b")).unwrap();
        assert_eq!(store.load(mcp, None), Some(credentials("http://as2", "b")));
        assert_eq!(
            store.load(mcp, Some("http://as1")),
            Some(credentials("http://as1", "a"))
        );
        assert_eq!(store.load(mcp, Some("http://as3")), None);
        assert_eq!(store.load("http://127.0.0.1:1/other", None), None);
        store.save(mcp, &credentials("http://as1", "c")).unwrap();
        assert_eq!(store.load(mcp, None), Some(credentials("http://as1", "c")));
        assert!(store.remove(mcp).unwrap());
        assert!(!store.remove(mcp).unwrap());
        assert_eq!(store.load(mcp, None), None);
    }

    #[test]
    fn the_memory_store_keeps_credentials_per_resource_and_issuer() {
        exercise(&MemoryStore::new());
    }

    #[test]
    fn the_file_store_keeps_them_in_private_files() {
        let dir = std::env::temp_dir().join(format!("jrpc-oauth-store-{}", std::process::id()));
        let store = FileStore::new(dir.join("oauth"));
        exercise(&store);
        store
            .save("http://x/mcp", &credentials("http://as", "t"))
            .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(store.path_for("http://x/mcp"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(store.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        assert_ne!(store.path_for("http://x/mcp"), store.path_for("http://x/mcp/"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn tokens_never_show_in_debug_output() {
        let shown = format!("{:?}", credentials("http://as", "secret-token"));
        assert!(!shown.contains("secret-token"), "{shown}");
    }
}
