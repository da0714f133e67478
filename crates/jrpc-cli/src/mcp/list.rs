//! `jrpc mcp list`: a server's tools, resources and prompts.

use std::process::ExitCode;

use super::args::ListArgs;
use super::session::{connect, failure, finish, target, usage};
use crate::call::Failure;

pub(super) async fn list(args: ListArgs) -> ExitCode {
    finish(list_inner(args).await)
}

async fn list_inner(args: ListArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let what = match words.as_slice() {
        [] => vec!["tools", "resources", "prompts"],
        [one] if ["tools", "resources", "prompts"].contains(&one.as_str()) => vec![one.as_str()],
        _ => {
            return Err(usage(format!(
                "list what? tools, resources or prompts, not {words:?}"
            )))
        }
    };
    let what: Vec<String> = what.into_iter().map(str::to_owned).collect();
    let client = connect(url, &args.client).await?;
    let caps = client.server_capabilities().clone();
    let mut out = serde_json::Map::new();
    let era = if client.is_modern() { "modern" } else { "legacy" };
    if args.client.verbose {
        eprintln!("jrpc: MCP {} ({era})", client.protocol_version());
    }
    if args.json {
        out.insert("protocolVersion".into(), client.protocol_version().into());
    }
    for kind in &what {
        match kind.as_str() {
            "tools" if caps.tools.is_some() => {
                let tools = client.list_tools().await.map_err(failure)?;
                if !args.json {
                    println!("tools ({}):", tools.len());
                    for tool in &tools {
                        let called = format!("{}{}", tool.name, signature(tool));
                        println!("  {called:<32} {}", tool.description.as_deref().unwrap_or(""));
                    }
                }
                out.insert("tools".into(), serde_json::to_value(tools).unwrap_or_default());
            }
            "resources" if caps.resources.is_some() => {
                let resources = client.list_resources().await.map_err(failure)?;
                let templates = client.list_resource_templates().await.map_err(failure)?;
                if !args.json {
                    println!("resources ({}):", resources.len());
                    for r in &resources {
                        println!("  {:<30} {}", r.uri, r.description.as_deref().unwrap_or(&r.name));
                    }
                    println!("resource templates ({}):", templates.len());
                    for t in &templates {
                        println!(
                            "  {:<30} {}",
                            t.uri_template,
                            t.description.as_deref().unwrap_or(&t.name)
                        );
                    }
                }
                out.insert(
                    "resources".into(),
                    serde_json::to_value(resources).unwrap_or_default(),
                );
                out.insert(
                    "resourceTemplates".into(),
                    serde_json::to_value(templates).unwrap_or_default(),
                );
            }
            "prompts" if caps.prompts.is_some() => {
                let prompts = client.list_prompts().await.map_err(failure)?;
                if !args.json {
                    println!("prompts ({}):", prompts.len());
                    for p in &prompts {
                        let arguments: Vec<String> = p
                            .arguments
                            .iter()
                            .flatten()
                            .map(|a| format!("{}{}", a.name, if a.required == Some(true) { "*" } else { "" }))
                            .collect();
                        println!(
                            "  {:<20} ({}) {}",
                            p.name,
                            arguments.join(", "),
                            p.description.as_deref().unwrap_or("")
                        );
                    }
                }
                out.insert(
                    "prompts".into(),
                    serde_json::to_value(prompts).unwrap_or_default(),
                );
            }
            other => {
                if !args.json {
                    println!("{other}: not offered by this server");
                }
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    }
    client.close().await;
    Ok(ExitCode::SUCCESS)
}

/// A tool's arguments as a signature, from its input schema:
/// `(a: number, b: number, note?: string)`.
fn signature(tool: &jrpc_mcp::types::Tool) -> String {
    let schema = &tool.input_schema;
    let required: Vec<&str> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| r.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let params: Vec<String> = schema
        .get("properties")
        .and_then(|p| p.as_object())
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| {
                    let kind = match property.get("type") {
                        Some(serde_json::Value::String(t)) => t.clone(),
                        Some(serde_json::Value::Array(ts)) => {
                            ts.iter().filter_map(|t| t.as_str()).collect::<Vec<_>>().join("|")
                        }
                        _ => "any".to_owned(),
                    };
                    let optional = if required.contains(&name.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{name}{optional}: {kind}")
                })
                .collect()
        })
        .unwrap_or_default();
    format!("({})", params.join(", "))
}
