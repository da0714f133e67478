//! `jrpc mcp read`: read a resource, print its contents.

use std::process::ExitCode;

use jrpc_mcp::types::ResourceContents;

use super::args::ReadArgs;
use super::session::{connect, failure, finish, target, usage};
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
    let read = client.read_resource(uri).await.map_err(failure)?;
    for contents in &read.contents {
        match contents {
            ResourceContents::Text(t) => println!("{}", t.text),
            ResourceContents::Blob(b) => println!("{}", b.blob),
        }
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
