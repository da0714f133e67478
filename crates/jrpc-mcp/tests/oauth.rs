//! The Streamable HTTP endpoint with OAuth: a tool sees who calls and what
//! the token grants, in both eras, and a token without a tool's scope is
//! refused before the tool runs.

use std::time::Duration;

use jrpc::auth::{AccessToken, BoxFuture, TokenError, TokenVerifier};
use jrpc_mcp::client::{McpClient, ProtocolChoice};
use jrpc_mcp::http::{HttpOptions, OAuth};
use jrpc_mcp::server::{McpContext, McpServer, NoArgs, ToolError};
use serde_json::json;

/// Tokens named after their holder: `token-NAME` grants `mcp`,
/// `writer-NAME` grants `mcp` and `mcp:write`.
struct Named;

impl TokenVerifier for Named {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, TokenError>> {
        Box::pin(async move {
            if let Some(name) = token.strip_prefix("token-") {
                Ok(AccessToken::new(name, ["mcp"]))
            } else if let Some(name) = token.strip_prefix("writer-") {
                Ok(AccessToken::new(name, ["mcp", "mcp:write"]))
            } else {
                Err(TokenError::Invalid("unknown".into()))
            }
        })
    }
}

fn server() -> McpServer {
    McpServer::builder("oauth", "1")
        .tool(
            "whoami",
            "Who calls, with what",
            |_: NoArgs, cx: McpContext| async move {
                let scopes: Vec<&str> = cx.scopes().map(|s| s.iter().collect()).unwrap_or_default();
                Ok::<_, ToolError>(format!(
                    "{} {}",
                    cx.identity().map(|i| i.name()).unwrap_or("nobody"),
                    scopes.join(",")
                ))
            },
        )
        .tool("write", "Needs mcp:write", |_: NoArgs, _: McpContext| async {
            Ok::<_, ToolError>("written")
        })
        .build()
}

async fn client(url: &str, token: &str, protocol: ProtocolChoice) -> Result<McpClient, String> {
    McpClient::builder("test", "1")
        .protocol(protocol)
        .header("Authorization", format!("Bearer {token}"))
        .call_timeout(Duration::from_secs(20))
        .connect_http(url)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn tools_see_the_caller_and_need_their_scopes_in_both_eras() {
    let oauth = OAuth::verifier(Named, "https://auth.example.com")
        .require_scopes(["mcp"])
        .tool_scope("write", "mcp:write");
    let serving = server()
        .serve_http("127.0.0.1:0", HttpOptions::default().oauth(oauth))
        .await
        .unwrap();
    let url = format!("{}/mcp", serving.local_addr());
    for protocol in [ProtocolChoice::Auto, ProtocolChoice::Legacy] {
        let alice = client(&url, "token-alice", protocol.clone()).await.unwrap();
        let who = alice.call_tool("whoami", json!({})).await.unwrap();
        assert_eq!(who.joined_text(), "alice mcp", "{protocol}");
        let refused = alice.call_tool("write", json!({})).await;
        assert!(
            refused.is_err(),
            "{protocol}: write without mcp:write: {refused:?}"
        );
        alice.close().await;
        let writer = client(&url, "writer-bob", protocol.clone()).await.unwrap();
        let written = writer.call_tool("write", json!({})).await.unwrap();
        assert_eq!(written.joined_text(), "written", "{protocol}");
        let who = writer.call_tool("whoami", json!({})).await.unwrap();
        assert_eq!(who.joined_text(), "bob mcp,mcp:write", "{protocol}");
        writer.close().await;
        assert!(
            client(&url, "forged", protocol.clone()).await.is_err(),
            "{protocol}"
        );
    }
    serving.shutdown().await;
}
