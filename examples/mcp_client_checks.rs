//! `McpClient` put through everything a client does, against a server
//! with the tools of `crates/jrpc-mcp/tests/interop/python_server.py` (the
//! official Python SDK's): calls, lists, reads and prompts; input-required
//! rounds (elicitation, sampling, roots, two rounds in a row, parallel
//! calls); a subscription; cancellation; the cache; and, on a legacy HTTP
//! session, resumption of a stream the server broke. It prints what it
//! checked and exits non-zero at the first thing that is wrong.
//!
//! ```sh
//! cargo build -p jrpc-examples --example mcp_client_checks
//! target/debug/examples/mcp_client_checks --expect 2026-07-28 -- python python_server.py
//! target/debug/examples/mcp_client_checks --protocol legacy --expect 2025-11-25 http://127.0.0.1:8000/mcp
//! ```
//!
//! `--protocol auto|legacy|VERSION` pins the era (found out by default);
//! `--expect VERSION` is the revision the connection must speak;
//! `--refused` expects the connection to be refused instead (a client
//! pinned to one era, a server that speaks only the other).

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use jrpc_mcp::client::{McpClient, McpClientBuilder, ProtocolChoice};
use jrpc_mcp::types::{
    CreateMessageParams, CreateMessageResult, ElicitAction, ElicitResult, JsonObject, OneOrMany, Role, Root,
    SamplingContent, SubscriptionFilter,
};
use serde_json::{json, Value};

/// What to run against, and what to expect.
struct Args {
    protocol: ProtocolChoice,
    expect: Option<String>,
    refused: bool,
    target: Target,
}

enum Target {
    Url(String),
    Command(Vec<String>),
}

impl Target {
    fn is_http(&self) -> bool {
        matches!(self, Target::Url(_))
    }
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let (mut protocol, mut expect, mut refused, mut target) = (ProtocolChoice::Auto, None, false, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--protocol" => {
                let value = args.next().ok_or("--protocol needs a value")?;
                protocol = value.parse().map_err(|e| format!("--protocol: {e}"))?;
            }
            "--expect" => expect = Some(args.next().ok_or("--expect needs a version")?),
            "--refused" => refused = true,
            "--" => target = Some(Target::Command(args.by_ref().collect())),
            url if url.starts_with("http") => target = Some(Target::Url(url.to_owned())),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let target = target
        .ok_or("usage: mcp_client_checks [--protocol P] [--expect V] [--refused] (URL | -- COMMAND...)")?;
    if matches!(&target, Target::Command(c) if c.is_empty()) {
        return Err("-- needs a command".into());
    }
    Ok(Args {
        protocol,
        expect,
        refused,
        target,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("mcp_client_checks: {e}");
            return ExitCode::from(2);
        }
    };
    let mut checks = Checks::default();
    match run(&args, &mut checks).await {
        Ok(()) => {
            println!("{} checks passed", checks.passed);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp_client_checks: FAILED after {} checks: {e}", checks.passed);
            ExitCode::FAILURE
        }
    }
}

/// Counts what passed, and says each.
#[derive(Default)]
struct Checks {
    passed: usize,
}

impl Checks {
    fn pass(&mut self, what: &str) {
        self.passed += 1;
        println!("ok {what}");
    }

    /// Passes when `actual` contains `expected`.
    fn contains(&mut self, what: &str, actual: &str, expected: &str) -> Result<(), String> {
        if !actual.contains(expected) {
            return Err(format!("{what}: expected {expected:?} in {actual:?}"));
        }
        self.pass(what);
        Ok(())
    }
}

/// The sampling model: echoes the text it was given, so that each call's
/// answer names its own request.
fn echo_model(params: CreateMessageParams) -> CreateMessageResult {
    let asked = serde_json::to_value(&params.messages).unwrap_or(Value::Null);
    let mut texts = Vec::new();
    collect_texts(&asked, &mut texts);
    CreateMessageResult {
        role: Role::Assistant,
        content: OneOrMany::One(SamplingContent::text(format!("echo: {}", texts.join(" ")))),
        model: "echo".into(),
        stop_reason: Some("endTurn".into()),
        meta: None,
    }
}

fn collect_texts(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(text)) = map.get("text") {
                texts.push(text.clone());
            }
            map.values().for_each(|v| collect_texts(v, texts));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_texts(v, texts)),
        _ => {}
    }
}

fn builder(args: &Args) -> McpClientBuilder {
    McpClient::builder("jrpc-client-checks", env!("CARGO_PKG_VERSION"))
        .protocol(args.protocol.clone())
        .call_timeout(Duration::from_secs(30))
        .elicitation(|_| async {
            let mut content = JsonObject::new();
            content.insert("name".into(), json!("Ada"));
            Ok(ElicitResult {
                action: ElicitAction::Accept,
                content: Some(content),
                meta: None,
            })
        })
        .sampling(|params| async move { Ok(echo_model(params)) })
        .roots([Root {
            uri: "file:///checks/root".into(),
            name: Some("checks".into()),
            meta: None,
        }])
}

async fn connect(args: &Args, builder: McpClientBuilder) -> Result<McpClient, String> {
    let connected = match &args.target {
        Target::Url(url) => builder.connect_http(url).await,
        Target::Command(command) => {
            let mut child = tokio::process::Command::new(&command[0]);
            child.args(&command[1..]);
            builder.spawn(child).await
        }
    };
    connected.map_err(|e| format!("connecting: {e}"))
}

async fn run(args: &Args, checks: &mut Checks) -> Result<(), String> {
    if args.refused {
        return match connect(args, builder(args)).await {
            Ok(client) => Err(format!(
                "connected at {} where a refusal was expected",
                client.protocol_version()
            )),
            Err(e) => {
                checks.pass(&format!("refused: {e}"));
                Ok(())
            }
        };
    }
    let client = connect(args, builder(args)).await?;
    let outcome = everything(args, &client, checks).await;
    client.close().await;
    outcome
}

async fn text_of(client: &McpClient, tool: &str, arguments: Value) -> Result<String, String> {
    let result = client
        .call_tool(tool, arguments)
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    if result.failed() {
        return Err(format!("{tool} failed: {}", result.joined_text()));
    }
    Ok(result.joined_text())
}

/// How many requests of `method` the server has had.
async fn seen(client: &McpClient, method: &str) -> Result<u64, String> {
    let text = text_of(client, "seen", json!({ "method": method })).await?;
    text.trim()
        .parse()
        .map_err(|_| format!("seen({method}) said {text:?}"))
}

async fn everything(args: &Args, client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    if let Some(expected) = &args.expect {
        checks.contains("the revision spoken", client.protocol_version(), expected)?;
    }
    basics(client, checks).await?;
    rounds(client, checks).await?;
    cache(args, client, checks).await?;
    subscription(client, checks).await?;
    cancellation(client, checks).await?;
    if args.target.is_http() && !client.is_modern() {
        let text = text_of(client, "drop_stream", json!({})).await?;
        checks.contains("a broken stream resumed (Last-Event-ID)", &text, "resumed")?;
    }
    Ok(())
}

async fn basics(client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    let tools = client
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for wanted in [
        "add",
        "shout",
        "ask_name",
        "sample_poem",
        "list_roots",
        "bump",
        "slow",
    ] {
        checks.contains("tools/list", &names.join(","), wanted)?;
    }
    checks.contains(
        "tools/call add",
        &text_of(client, "add", json!({"a": 2, "b": 40})).await?,
        "42",
    )?;
    let shouted = text_of(client, "shout", json!({"text": "hi there"})).await?;
    checks.contains("tools/call shout", &shouted, "HI THERE")?;
    let failed = client
        .call_tool("add", json!({"a": "two", "b": 1}))
        .await
        .map_err(|e| format!("add with bad arguments: {e}"))?;
    if !failed.failed() {
        return Err(format!(
            "add with bad arguments succeeded: {}",
            failed.joined_text()
        ));
    }
    checks.pass("tools/call with bad arguments is a failed result");
    let resources = client
        .list_resources()
        .await
        .map_err(|e| format!("resources/list: {e}"))?;
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    checks.contains("resources/list", &uris.join(","), "note://hello")?;
    let read = client
        .read_resource("note://hello")
        .await
        .map_err(|e| format!("resources/read: {e}"))?;
    let text = serde_json::to_string(&read.contents).unwrap_or_default();
    checks.contains("resources/read", &text, "hello from python")?;
    match client.read_resource("note://nowhere").await {
        Err(jrpc_mcp::client::McpClientError::ResourceNotFound { .. }) => {
            checks.pass("resources/read of an unknown resource: not found")
        }
        other => return Err(format!("reading note://nowhere: {other:?}")),
    }
    let prompts = client
        .list_prompts()
        .await
        .map_err(|e| format!("prompts/list: {e}"))?;
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    checks.contains("prompts/list", &names.join(","), "greet")?;
    let prompt = client
        .get_prompt("greet", [("name".to_owned(), "Ada".to_owned())].into())
        .await
        .map_err(|e| format!("prompts/get: {e}"))?;
    let text = serde_json::to_string(&prompt.messages).unwrap_or_default();
    checks.contains("prompts/get", &text, "Ada")?;
    Ok(())
}

/// Input the server asks for mid-call: input-required rounds on a modern
/// connection, requests to the client on a legacy one.
async fn rounds(client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    let asked = text_of(client, "ask_name", json!({})).await?;
    checks.contains("elicitation", &asked, "hello Ada")?;
    let sampled = text_of(client, "sample_poem", json!({"topic": "rivers"})).await?;
    checks.contains("sampling", &sampled, "rivers")?;
    let roots = text_of(client, "list_roots", json!({})).await?;
    checks.contains("roots", &roots, "file:///checks/root")?;
    let twice = text_of(client, "ask_twice", json!({})).await?;
    checks.contains("two rounds: the answer to the first", &twice, "Ada:")?;
    checks.contains("two rounds: the answer to the second", &twice, "name is Ada")?;
    // Parallel calls keep their own rounds.
    let topics = ["oceans", "deserts", "forests", "glaciers"];
    let calls = topics
        .iter()
        .map(|topic| text_of(client, "sample_poem", json!({ "topic": topic })));
    let answers = futures_util::future::join_all(calls).await;
    for (topic, answer) in topics.iter().zip(answers) {
        let answer = answer?;
        for other in topics.iter().filter(|t| *t != topic) {
            if answer.contains(other) {
                return Err(format!("the {topic} call was answered for {other}: {answer:?}"));
            }
        }
        checks.contains("parallel rounds keep their own state", &answer, topic)?;
    }
    Ok(())
}

/// A modern server's lists carry `ttlMs`: a second list within it sends
/// nothing. A legacy server's carry none: every list is asked.
async fn cache(args: &Args, client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    client
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let before = seen(client, "tools/list").await?;
    client
        .list_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let after = seen(client, "tools/list").await?;
    if client.is_modern() {
        if after != before {
            return Err(format!(
                "a second tools/list within ttlMs reached the server ({before} -> {after})"
            ));
        }
        checks.pass("a second tools/list within ttlMs sends nothing");
        // Without the cache, each list is asked (counted by that client's
        // server: over stdio each client starts its own).
        let uncached = connect(args, builder(args).cache(false)).await?;
        let before = seen(&uncached, "tools/list").await?;
        for _ in 0..2 {
            uncached
                .list_tools()
                .await
                .map_err(|e| format!("tools/list: {e}"))?;
        }
        let after = seen(&uncached, "tools/list").await?;
        uncached.close().await;
        if after != before + 2 {
            return Err(format!(
                "with the cache off, two tools/list reached the server {} times",
                after - before
            ));
        }
        checks.pass("with the cache off, every tools/list is sent");
    } else {
        if after != before + 1 {
            return Err(format!("a legacy tools/list was not sent ({before} -> {after})"));
        }
        checks.pass("a legacy tools/list (no ttlMs) is always sent");
    }
    Ok(())
}

/// A change, as the server tells of it.
async fn subscription(client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    let filter = SubscriptionFilter {
        resource_subscriptions: Some(vec!["note://counter".into()]),
        tools_list_changed: Some(true),
        ..SubscriptionFilter::default()
    };
    let mut changes = client.listen(filter).await.map_err(|e| format!("listen: {e}"))?;
    checks.pass("subscribed");
    let count = text_of(client, "bump", json!({})).await?;
    let mut updated = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !updated {
        let change = tokio::time::timeout_at(deadline, changes.next())
            .await
            .map_err(|_| "no notifications/resources/updated within 10 s of bump".to_owned())?;
        match change {
            Some(Ok(change)) => {
                updated = change.method == "notifications/resources/updated"
                    && change.uri() == Some("note://counter");
            }
            Some(Err(e)) => return Err(format!("the subscription failed: {e}")),
            None => return Err("the subscription ended before the change".into()),
        }
    }
    checks.pass("notifications/resources/updated note://counter after bump");
    let read = client
        .read_resource("note://counter")
        .await
        .map_err(|e| format!("reading note://counter: {e}"))?;
    let text = serde_json::to_string(&read.contents).unwrap_or_default();
    checks.contains("the counter reads as bumped", &text, count.trim())?;
    Ok(())
}

/// A call given up is cancelled on the server.
async fn cancellation(client: &McpClient, checks: &mut Checks) -> Result<(), String> {
    let before: u64 = text_of(client, "cancelled", json!({}))
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    let slow = client.call_tool("slow", json!({}));
    if tokio::time::timeout(Duration::from_millis(500), slow)
        .await
        .is_ok()
    {
        return Err("slow answered at once".into());
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now: u64 = text_of(client, "cancelled", json!({}))
            .await?
            .trim()
            .parse()
            .unwrap_or(0);
        if now > before {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the server did not see slow cancelled within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    checks.pass("a call given up is cancelled on the server");
    Ok(())
}
