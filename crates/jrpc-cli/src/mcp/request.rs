//! `jrpc mcp request`: any request by its method, its result as JSON.

use std::process::ExitCode;

use super::args::RequestArgs;
use super::session::{connect, failure, finish, key_values, target, usage};
use crate::call::Failure;
use crate::pretty::format_json;

pub(super) async fn request(args: RequestArgs) -> ExitCode {
    finish(request_inner(args).await)
}

async fn request_inner(args: RequestArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let Some((method, rest)) = words.split_first() else {
        return Err(usage(
            "which method? jrpc mcp request [TARGET] METHOD [PARAMS|K=V...]",
        ));
    };
    let params = match rest {
        [] => serde_json::json!({}),
        // One word that is a JSON object: the params as they are.
        [object] if object.trim_start().starts_with('{') => serde_json::from_str(object)
            .map_err(|e| usage(format!("{object:?} is not a JSON object: {e}")))?,
        words => serde_json::Value::Object(key_values(words, true)?),
    };
    let client = connect(url, &args.client).await?;
    let result = client.send_request(method, params).await.map_err(failure)?;
    println!("{}", format_json(&result.to_string(), true));
    client.close().await;
    Ok(ExitCode::SUCCESS)
}
