//! `jrpc mcp watch`: a server's change notifications as they come.

use std::io::Write;
use std::process::ExitCode;

use super::args::WatchArgs;
use super::session::{connect_as, failure, finish, target, usage};
use crate::call::Failure;

pub(super) async fn watch(args: WatchArgs) -> ExitCode {
    finish(watch_inner(args).await)
}

/// What `jrpc mcp watch` listens for, from its words.
fn watch_filter(words: &[String]) -> jrpc_mcp::types::SubscriptionFilter {
    let mut filter = jrpc_mcp::types::SubscriptionFilter::default();
    let all = words.is_empty();
    let has = |what: &str| all || words.iter().any(|w| w == what);
    filter.tools_list_changed = has("tools").then_some(true);
    filter.prompts_list_changed = has("prompts").then_some(true);
    filter.resources_list_changed = has("resources").then_some(true);
    let uris: Vec<String> = words
        .iter()
        .filter(|w| !["tools", "prompts", "resources"].contains(&w.as_str()))
        .cloned()
        .collect();
    filter.resource_subscriptions = (!uris.is_empty()).then_some(uris);
    filter
}

/// `filter` cut to the lists whose changes the server announces (its
/// capabilities); a list named but not announced is said on stderr.
/// Resource URIs are left to the server to refuse. Why there is nothing to
/// watch, when there is not.
fn announced(
    mut filter: jrpc_mcp::types::SubscriptionFilter,
    capabilities: &jrpc_mcp::types::ServerCapabilities,
    asked: bool,
) -> Result<jrpc_mcp::types::SubscriptionFilter, String> {
    let lists = |c: &Option<jrpc_mcp::types::ListChangedCapability>| {
        c.as_ref().and_then(|c| c.list_changed) == Some(true)
    };
    let offered = [
        ("tools", lists(&capabilities.tools)),
        ("prompts", lists(&capabilities.prompts)),
        (
            "resources",
            capabilities.resources.as_ref().and_then(|r| r.list_changed) == Some(true),
        ),
    ];
    for ((name, on), wanted) in offered.iter().zip([
        &mut filter.tools_list_changed,
        &mut filter.prompts_list_changed,
        &mut filter.resources_list_changed,
    ]) {
        if *wanted == Some(true) && !on {
            *wanted = None;
            if asked {
                eprintln!("jrpc: the server does not announce changes of its {name} list");
            }
        }
    }
    if filter.is_empty() {
        return Err(if asked {
            "the server announces none of the changes named".into()
        } else {
            "the server announces no changes of its tools, prompts or resources lists; name a resource URI to watch its updates (jrpc mcp watch URL demo://counter)".into()
        });
    }
    Ok(filter)
}

async fn watch_inner(args: WatchArgs) -> Result<ExitCode, Failure> {
    use futures_util::StreamExt;
    let (url, words) = target(args.words, &args.client)?;
    if let Some(bad) = words
        .iter()
        .find(|w| !["tools", "prompts", "resources"].contains(&w.as_str()) && !w.contains(':'))
    {
        return Err(usage(format!(
            "watch what? tools, prompts, resources or a resource URI, not {bad:?}"
        )));
    }
    let client = connect_as(url, &args.client, true).await?;
    let filter = match announced(
        watch_filter(&words),
        client.server_capabilities(),
        !words.is_empty(),
    ) {
        Ok(filter) => filter,
        Err(why) => {
            client.close().await;
            eprintln!("jrpc: nothing to watch: {why}");
            return Ok(ExitCode::from(crate::call::exit::RPC_ERROR));
        }
    };
    let mut changes = client.listen(filter).await.map_err(failure)?;
    // Listening from now on, so that a Ctrl-C between two changes is seen.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    eprintln!(
        "jrpc: watching {} (MCP {}); Ctrl-C to stop",
        if words.is_empty() {
            "tools, prompts, resources".to_owned()
        } else {
            words.join(", ")
        },
        client.protocol_version()
    );
    let ended = loop {
        tokio::select! {
            change = changes.next() => match change {
                Some(Ok(change)) => {
                    if args.json {
                        let line = serde_json::json!({"method": change.method, "params": change.params});
                        println!("{line}");
                    } else {
                        let what = change.method.strip_prefix("notifications/").unwrap_or(&change.method);
                        match change.uri() {
                            Some(uri) => println!("{what} {uri}"),
                            None => println!("{what}"),
                        }
                    }
                    let _ = std::io::stdout().flush();
                }
                Some(Err(e)) => break Err(failure(e)),
                None => break Ok(()),
            },
            _ = &mut interrupted => break Ok(()),
        }
    };
    drop(changes);
    client.close().await;
    ended.map(|()| ExitCode::SUCCESS)
}
