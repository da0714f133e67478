//! `jrpc mcp login URL` and `jrpc mcp logout URL`.

use std::process::ExitCode;

use jrpc_mcp::client::oauth::FileStore;

use super::args::{LoginArgs, LogoutArgs, OAuthArgs};
use super::session::{oauth_client, oauth_client_with};
use crate::call::{report, Failure};

pub(super) async fn login(args: LoginArgs) -> ExitCode {
    let scope = (!args.scope.is_empty()).then(|| args.scope.join(" "));
    let oauth = oauth_client_with(&args.oauth, true, scope.as_deref());
    match oauth.login(&args.url).await {
        Ok(credentials) => {
            let kept = FileStore::default_dir()
                .map(|dir| format!(" (kept in {})", dir.display()))
                .unwrap_or_else(|| " (not kept: neither $XDG_STATE_HOME nor $HOME is set)".into());
            eprintln!("jrpc: logged in to {} at {}{kept}", args.url, credentials.issuer);
            ExitCode::SUCCESS
        }
        Err(e) => report(Failure::Transport(anyhow::anyhow!(
            "logging in to {}: {e}",
            args.url
        ))),
    }
}

pub(super) async fn logout(args: LogoutArgs) -> ExitCode {
    let oauth = oauth_client(&OAuthArgs::default(), false);
    match oauth.logout(&args.url) {
        Ok(true) => {
            eprintln!("jrpc: logged out of {}", args.url);
            ExitCode::SUCCESS
        }
        Ok(false) => {
            eprintln!("jrpc: not logged in to {}", args.url);
            ExitCode::SUCCESS
        }
        Err(e) => report(Failure::Usage(anyhow::anyhow!("{e}"))),
    }
}
