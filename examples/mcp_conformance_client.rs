//! A client for the official MCP conformance suite's client scenarios,
//! written with `McpClient` alone: the suite starts a test server, runs
//! this program with the server's URL as its last argument and the
//! scenario in `MCP_CONFORMANCE_SCENARIO` (the revision in
//! `MCP_CONFORMANCE_PROTOCOL_VERSION`, the scenario's data in
//! `MCP_CONFORMANCE_CONTEXT`), and checks what reached the server.
//!
//! ```sh
//! cargo build -p jrpc-examples --example mcp_conformance_client
//! npx @modelcontextprotocol/conformance@0.2.0-alpha.12 client \
//!   --command target/debug/examples/mcp_conformance_client --requirements 2026-07-28
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;

use jrpc_mcp::client::oauth::{
    Authorizer, BoxFuture, ClientKey, EnterpriseIdp, OAuthClient, OAuthError, TokenSource,
};
use jrpc_mcp::client::{McpClient, McpClientError, ProtocolChoice};
use jrpc_mcp::types::{
    CreateMessageResult, ElicitAction, ElicitParams, ElicitResult, JsonObject, OneOrMany, Role, Root,
    SamplingContent, Tool,
};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    // The suite appends the URL to the command: the last argument.
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: mcp_conformance_client URL (MCP_CONFORMANCE_SCENARIO says what to do)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    match run(&url, &scenario, &context).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The revision the suite asks for, pinned; found out when it names none.
fn protocol() -> ProtocolChoice {
    std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION")
        .ok()
        .and_then(|version| version.parse().ok())
        .unwrap_or_default()
}

/// The client's URL as a client ID metadata document: what the suite's
/// `auth/basic-cimd` expects (its authorization server never fetches it).
const CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";

/// How the client logs in when a server asks (`401`): a headless browser
/// step, the client ID metadata document URL, and what the scenario's
/// context gives (a pre-registered client, the client credentials of a
/// machine client, its private key).
fn oauth(scenario: &str, context: &Value) -> Result<OAuthClient, McpClientError> {
    let mut oauth = OAuthClient::builder()
        .client_name("jrpc-conformance-client")
        .client_metadata_url(CIMD_URL)
        .authorizer(Headless);
    if let Some(id) = context["client_id"].as_str() {
        oauth = oauth.client_id(id);
    }
    if let Some(secret) = context["client_secret"].as_str() {
        oauth = oauth.client_secret(secret);
    }
    // A pre-registered client is good at its own authorization server.
    if let Some(issuer) = context["issuer"].as_str() {
        oauth = oauth.client_issuer(issuer);
    }
    if let Some(pem) = context["private_key_pem"].as_str() {
        let key = ClientKey::from_pem(pem).map_err(|e| McpClientError::Connect(std::io::Error::other(e)))?;
        oauth = oauth.private_key(key);
    }
    if scenario.starts_with("auth/client-credentials") {
        oauth = oauth.client_credentials();
    }
    // Workload identity: the platform's token, traded by the JWT-bearer
    // grant.
    if let Some(jwt) = context["valid_jwt"].as_str() {
        oauth = oauth.jwt_bearer(TokenSource::Value(jwt.to_owned()));
    }
    // Enterprise-managed: the user's ID token from the identity provider,
    // traded there for an identity assertion grant, that for a token.
    if let (Some(endpoint), Some(id_token)) = (
        context["idp_token_endpoint"].as_str(),
        context["idp_id_token"].as_str(),
    ) {
        let mut idp = EnterpriseIdp::new(endpoint, TokenSource::Value(id_token.to_owned()));
        if let Some(id) = context["idp_client_id"].as_str() {
            idp = idp.client_id(id);
        }
        oauth = oauth.enterprise(idp);
    }
    Ok(oauth.build())
}

/// The browser step with no browser: the suite's authorization server
/// redirects at once, so the authorization URL is fetched (redirects not
/// followed) and its `Location` is where the user would have landed.
struct Headless;

impl Authorizer for Headless {
    fn redirect_uri(&self) -> BoxFuture<'_, Result<String, OAuthError>> {
        Box::pin(async { Ok("http://localhost:3000/callback".to_owned()) })
    }

    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, OAuthError>> {
        Box::pin(async move {
            let failed = |why: String| OAuthError::Authorizer(format!("GET {url}: {why}"));
            let http = jrpc::client::Client::builder()
                .http(&url)
                .map_err(|e| failed(e.to_string()))?;
            let response = http
                .send_streaming(http::Method::GET, http::HeaderMap::new(), bytes::Bytes::new())
                .await
                .map_err(|e| failed(e.to_string()))?;
            response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| failed(format!("HTTP {} with no redirect", response.status())))
        })
    }
}

async fn connect(url: &str, scenario: &str, context: &Value) -> Result<McpClient, McpClientError> {
    McpClient::builder("jrpc-conformance-client", env!("CARGO_PKG_VERSION"))
        .oauth(oauth(scenario, context)?)
        .protocol(protocol())
        .elicitation(|params| async move { Ok(accept_with_defaults(&params)) })
        .sampling(|_| async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: OneOrMany::One(SamplingContent::text("a sampled answer")),
                model: "conformance".into(),
                stop_reason: Some("endTurn".into()),
                meta: None,
            })
        })
        .roots([Root {
            uri: "file:///tmp".into(),
            name: Some("tmp".into()),
            meta: None,
        }])
        .connect_http(url)
        .await
}

/// Accepts a form, each field its schema's `default` (SEP-1034), or a
/// value of its type when it has none.
fn accept_with_defaults(params: &ElicitParams) -> ElicitResult {
    let mut content = JsonObject::new();
    let properties = params
        .requested_schema
        .get("properties")
        .and_then(Value::as_object);
    for (name, schema) in properties.into_iter().flatten() {
        let value = match schema.get("default") {
            Some(default) => default.clone(),
            None => match schema.get("type").and_then(Value::as_str) {
                Some("boolean") => json!(true),
                Some("integer") | Some("number") => json!(0),
                _ => match schema
                    .get("enum")
                    .and_then(Value::as_array)
                    .and_then(|e| e.first())
                {
                    Some(first) => first.clone(),
                    None => json!(""),
                },
            },
        };
        content.insert(name.clone(), value);
    }
    ElicitResult {
        action: ElicitAction::Accept,
        content: Some(content),
        meta: None,
    }
}

async fn run(url: &str, scenario: &str, context: &Value) -> Result<(), McpClientError> {
    let client = connect(url, scenario, context).await?;
    let outcome = scenario_steps(&client, scenario, context).await;
    client.close().await;
    outcome
}

async fn scenario_steps(client: &McpClient, scenario: &str, context: &Value) -> Result<(), McpClientError> {
    match scenario {
        "tools_call" => {
            client.list_tools().await?;
            client.call_tool("add_numbers", json!({"a": 2, "b": 3})).await?;
        }
        "elicitation-sep1034-client-defaults" => {
            client.list_tools().await?;
            client
                .call_tool("test_client_elicitation_defaults", json!({}))
                .await?;
        }
        "sse-retry" => {
            client.list_tools().await?;
            client.call_tool("test_reconnection", json!({})).await?;
        }
        "sep-2322-client-request-state" => {
            client.list_tools().await?;
            for tool in [
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            ] {
                client.call_tool(tool, json!({})).await?;
            }
        }
        "http-standard-headers" => {
            for tool in client.list_tools().await? {
                client.call_tool(&tool.name, arguments_for(&tool)).await?;
            }
            for resource in client.list_resources().await? {
                client.read_resource(&resource.uri).await?;
            }
            for prompt in client.list_prompts().await? {
                client.get_prompt(&prompt.name, BTreeMap::new()).await?;
            }
        }
        "http-custom-headers" => {
            client.list_tools().await?;
            let calls = context["toolCalls"].as_array().cloned().unwrap_or_default();
            for call in calls {
                let name = call["name"].as_str().unwrap_or_default();
                client.call_tool(name, call["arguments"].clone()).await?;
            }
        }
        "http-invalid-tool-headers" => {
            // Tools whose annotations break the rules are left out of the
            // list: every tool listed may be called.
            for tool in client.list_tools().await? {
                client.call_tool(&tool.name, arguments_for(&tool)).await?;
            }
        }
        "json-schema-2020-12-preservation" => {
            let tools = client.list_tools().await?;
            if let Some(focal) = tools.iter().find(|t| t.name == "json_schema_2020_12_tool") {
                client
                    .call_tool("json_schema_echo", json!({"schema": focal.input_schema}))
                    .await?;
            }
        }
        // The Skills extension: the listing alone fetches nothing; loading
        // a skill fetches its SKILL.md, verified (size, digest, then the
        // frontmatter against the entry), and only then its other files.
        "sep-2640-client-no-prefetch" => {
            client.list_skills().await?;
        }
        verify if verify.starts_with("sep-2640-client-verify-") => {
            for entry in client.list_skills().await? {
                client.fetch_skill(&entry).await?;
            }
        }
        // The authorization scenarios: a list and a call (`auth/scope-step-up`
        // needs a scope more for the call), each request authorized.
        auth if auth.starts_with("auth/") => {
            client.list_tools().await?;
            client.call_tool("test-tool", json!({})).await?;
        }
        // initialize, request-metadata, json-schema-ref-no-deref, and any
        // scenario not known here: connect (done), list the tools.
        _ => {
            client.list_tools().await?;
        }
    }
    Ok(())
}

/// Arguments for a tool: each required property a value of its type.
fn arguments_for(tool: &Tool) -> Value {
    let mut arguments = JsonObject::new();
    let properties = tool.input_schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, schema) in properties.into_iter().flatten() {
        if !required.contains(&name.as_str()) {
            continue;
        }
        let value = match schema.get("type").and_then(Value::as_str) {
            Some("integer") | Some("number") => json!(1),
            Some("boolean") => json!(true),
            Some("object") => json!({}),
            Some("array") => json!([]),
            _ => json!("us-west1"),
        };
        arguments.insert(name.clone(), value);
    }
    Value::Object(arguments)
}
