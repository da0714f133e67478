//! `jrpc describe`: what a server serves, from its `rpc.discover` OpenRPC
//! document; and the documents `jrpc call` checks params against (a file
//! given with `--openrpc`, or the one `jrpc describe` last cached for the
//! same target).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, Context as _};
use clap::Args;
use jrpc::openrpc::{Document, DISCOVER_METHOD};
use serde_json::Value;

use crate::params_check::{signature, type_name};
use crate::pretty::format_json;
use crate::target::{close, report, ConnectArgs, Failure, Target};

#[derive(Debug, Args)]
#[command(after_long_help = "\
TARGET is as for `jrpc call` (http(s)://, ws(s)://, tcp://, unix:, or a
command after --). The document is also saved in the user's cache directory
($XDG_CACHE_HOME/jrpc/openrpc, else ~/.cache/jrpc/openrpc), where `jrpc call`
finds it for the same target and checks params before sending (asking the
server for its own document before it refuses a call). A server without
rpc.discover has its cached document removed.

EXAMPLES:
  jrpc describe http://127.0.0.1:4000
  jrpc describe --json -- jrpc serve --stdio")]
pub struct DescribeArgs {
    /// The server to describe (none when a command follows `--`).
    #[arg(value_name = "TARGET")]
    words: Vec<String>,

    /// A command to spawn and describe over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,

    /// Print the OpenRPC document itself.
    #[arg(long)]
    json: bool,

    /// With --json: on one line instead of pretty.
    #[arg(long)]
    compact: bool,

    #[command(flatten)]
    connect: ConnectArgs,
}

pub async fn run(args: DescribeArgs) -> ExitCode {
    match describe(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => report(failure),
    }
}

async fn describe(args: DescribeArgs) -> Result<(), Failure> {
    let (target, mut rest) = Target::from_words(args.words, &args.command)?;
    if let Some(extra) = rest.next() {
        return Err(Failure::Usage(anyhow!(
            "unexpected argument {extra:?}: describe takes only a TARGET"
        )));
    }
    let key = target.to_string();
    let client = target.connect(&args.connect).await?;
    let answer = client
        .call_raw(DISCOVER_METHOD, (), args.connect.dial.timeout)
        .await;
    close(client).await;
    let raw = answer.map_err(|e| {
        if matches!(&e, jrpc::CallError::Rpc(error) if error.code() == jrpc::message::codes::METHOD_NOT_FOUND)
        {
            eprintln!("jrpc: {key} does not answer rpc.discover: it publishes no OpenRPC document");
            // A document cached for this address was another server's.
            forget_cached(&key);
        }
        Failure::from(e).naming(&key)
    })?;
    let document = serde_json::from_str(raw.get())
        .map_err(anyhow::Error::from)
        .and_then(parse)
        .map_err(|e| {
            Failure::Transport(e.context(format!("{key} answered rpc.discover with no OpenRPC document")))
        })?;
    if let Some(path) = cache_path(&key) {
        if let Err(e) = save(&path, raw.get()) {
            tracing::warn!("could not cache the document at {}: {e:#}", path.display());
        }
    }
    if args.json {
        println!("{}", format_json(raw.get(), !args.compact));
    } else {
        print!("{}", listing(&document));
    }
    Ok(())
}

/// A human listing: the service, then each method's signature, result and
/// summary.
fn listing(document: &Document) -> String {
    let mut out = format!("{} {}", document.info.title, document.info.version);
    if let Some(description) = &document.info.description {
        out.push_str(&format!(" — {description}"));
    }
    out.push_str(&format!(" (OpenRPC {})\n", document.openrpc));
    for method in &document.methods {
        let call = if method.any_params {
            format!("{}(...)", method.name)
        } else {
            signature(method)
        };
        let result = match &method.result {
            Some(result) => format!(" -> {}: {}", result.name, type_name(&result.schema)),
            None => "  (notification)".to_owned(),
        };
        out.push_str(&format!("\n  {call}{result}\n"));
        let mut notes = Vec::new();
        if let Some(summary) = &method.summary {
            notes.push(summary.clone());
        }
        if let Some(description) = &method.description {
            notes.push(description.clone());
        }
        for param in method.params.iter().filter(|p| p.description.is_some()) {
            notes.push(format!(
                "{}: {}",
                param.name,
                param.description.as_deref().unwrap_or("")
            ));
        }
        if !method.errors.is_empty() {
            let errors: Vec<String> = method
                .errors
                .iter()
                .map(|e| format!("{} {}", e.code, e.message))
                .collect();
            notes.push(format!("errors: {}", errors.join(", ")));
        }
        if method.deprecated {
            notes.push("deprecated".to_owned());
        }
        for note in notes {
            out.push_str(&format!("      {note}\n"));
        }
    }
    out
}

/// Reads an OpenRPC document, following `$ref`s to methods and content
/// descriptors kept in its components.
pub(crate) fn parse(mut value: Value) -> anyhow::Result<Document> {
    let components = value.get("components").cloned().unwrap_or(Value::Null);
    if let Some(Value::Array(methods)) = value.get_mut("methods") {
        for method in methods.iter_mut() {
            inline_ref(method, &components);
            for key in ["params", "result"] {
                match method.get_mut(key) {
                    Some(Value::Array(params)) => params.iter_mut().for_each(|p| inline_ref(p, &components)),
                    Some(result @ Value::Object(_)) => inline_ref(result, &components),
                    _ => {}
                }
            }
        }
    }
    serde_json::from_value(value).context("not an OpenRPC document")
}

/// Replaces `{"$ref": "#/components/KIND/NAME"}` by what it points to.
fn inline_ref(value: &mut Value, components: &Value) {
    let target = value
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components"))
        .and_then(|pointer| components.pointer(pointer))
        .cloned();
    if let Some(target) = target {
        *value = target;
    }
}

/// Removes the document cached for `target`, saying so.
fn forget_cached(target: &str) {
    if let Some(path) = cache_path(target).filter(|p| p.exists()) {
        match std::fs::remove_file(&path) {
            Ok(()) => eprintln!(
                "jrpc: removed the document cached for {target} ({})",
                path.display()
            ),
            Err(e) => tracing::warn!("could not remove {}: {e}", path.display()),
        }
    }
}

/// Asks `target` for its OpenRPC document and caches it in place of the
/// one cached before; `None` (and the cached one removed) when it
/// publishes none. A server that cannot be reached keeps the cache as it
/// is and gets `None` too: the call then goes ahead and fails, or not, on
/// its own.
pub(crate) async fn refresh_cached(target: &Target, connect: &ConnectArgs) -> Option<Document> {
    let key = target.to_string();
    let client = target.clone().connect(connect).await.ok()?;
    let answer = client.call_raw(DISCOVER_METHOD, (), connect.dial.timeout).await;
    close(client).await;
    let document = match answer {
        Ok(raw) => serde_json::from_str(raw.get())
            .map_err(anyhow::Error::from)
            .and_then(parse)
            .ok()
            .map(|document| (document, raw)),
        Err(jrpc::CallError::Rpc(_)) => None,
        // Unreachable, timed out: nothing learned about the document.
        Err(_) => return None,
    };
    match document {
        Some((document, raw)) => {
            if let Some(path) = cache_path(&key) {
                if let Err(e) = save(&path, raw.get()) {
                    tracing::warn!("could not cache the document at {}: {e:#}", path.display());
                }
            }
            Some(document)
        }
        None => {
            forget_cached(&key);
            None
        }
    }
}

/// Loads the document a call is checked against: `--openrpc FILE`, else the
/// one cached for `target`, if any (and where it came from).
pub(crate) fn load_for_call(
    file: Option<&Path>,
    target: &str,
) -> Result<Option<(Document, PathBuf)>, Failure> {
    let (path, given) = match file {
        Some(path) => (path.to_path_buf(), true),
        None => match cache_path(target) {
            Some(path) if path.exists() => (path, false),
            _ => return Ok(None),
        },
    };
    let loaded = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {}", path.display()))
        .and_then(|text| {
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
        })
        .and_then(|value| parse(value).with_context(|| format!("reading {}", path.display())));
    match loaded {
        Ok(document) => Ok(Some((document, path))),
        Err(e) if given => Err(Failure::Usage(e.context("--openrpc"))),
        // A damaged cache is no reason to refuse a call.
        Err(e) => {
            tracing::warn!("ignoring the cached document: {e:#}");
            Ok(None)
        }
    }
}

/// Where the document of `target` is cached: a file named after the target
/// under `$XDG_CACHE_HOME/jrpc/openrpc` (else `~/.cache/jrpc/openrpc`).
pub(crate) fn cache_path(target: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    let readable: String = target
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(80)
        .collect();
    Some(
        base.join("jrpc")
            .join("openrpc")
            .join(format!("{readable}-{:016x}.json", fnv1a(target.as_bytes()))),
    )
}

/// A stable hash (FNV-1a, 64 bits), so that different targets with the same
/// readable name get different files in every version.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn save(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Write then rename, so a concurrent reader never sees half a file.
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text)?;
    std::fs::rename(&partial, path)?;
    Ok(())
}
