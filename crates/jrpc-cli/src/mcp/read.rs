//! `jrpc mcp read`: read a resource, print its contents.

use std::process::ExitCode;

use jrpc_mcp::types::ResourceContents;

use super::args::ReadArgs;
use super::session::{connect, failure, finish, target, unknown, usage};
use crate::call::Failure;

pub(super) async fn read(args: ReadArgs) -> ExitCode {
    finish(read_inner(args).await)
}

async fn read_inner(args: ReadArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let [uri] = words.as_slice() else {
        return Err(usage("read what? jrpc mcp read [TARGET] URI"));
    };
    let client = connect(url, &args.client).await?;
    let read = match client.read_resource(uri).await {
        Ok(read) => read,
        Err(e) => return Err(unknown_resource(&client, uri, e).await),
    };
    for contents in &read.contents {
        match contents {
            ResourceContents::Text(t) => println!("{}", t.text),
            ResourceContents::Blob(b) => println!("{}", b.blob),
        }
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// A resource the server does not have: which ones it has (its templates
/// too, as it writes them).
async fn unknown_resource(
    client: &jrpc_mcp::client::McpClient,
    uri: &str,
    e: jrpc_mcp::client::McpClientError,
) -> Failure {
    if !matches!(e, jrpc_mcp::client::McpClientError::ResourceNotFound { .. }) {
        return failure(e);
    }
    let Ok(resources) = client.list_resources().await else {
        return failure(e);
    };
    let mut known: Vec<String> = resources.into_iter().map(|r| r.uri).collect();
    if let Ok(templates) = client.list_resource_templates().await {
        known.extend(templates.into_iter().map(|t| t.uri_template));
    }
    unknown("resource", uri, &known)
}
