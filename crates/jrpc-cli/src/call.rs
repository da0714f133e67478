//! `jrpc call`: call a method on a server and print the result.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::Args;
use jrpc::client::Client;
use jrpc::message::RawValue;
use jrpc::CallError;
use serde::Deserialize;

use crate::pretty::format_json;
pub(crate) use crate::target::{
    cancel_protocol, close, exit, parse_duration, parse_timeout, report, Cancel, ConnectArgs, DialArgs,
    Failure, Target,
};

#[derive(Debug, Args)]
#[command(after_long_help = "\
TARGETS:
  http(s)://HOST:PORT/PATH   a server over HTTP (POST)
  ws(s)://HOST:PORT/PATH     a server over WebSocket
  tcp://HOST:PORT      a server listening on TCP
  unix:PATH            a server listening on a Unix domain socket
  -- COMMAND ARGS...   a command to spawn, spoken to over its stdin/stdout
                       (then there is no TARGET argument)

PARAMS:
  Each PARAM is a JSON value, or a bare word that is not JSON, taken as a
  string: positional params. NAME=VALUE words are named params instead (as in
  jrpc connect and jrpc mcp); the two do not mix, and a string with = in it is
  written as JSON ('\"a=b\"'). --named k=v (repeatable) names a param
  explicitly; --raw sends a whole params value as given.

EXAMPLES:
  jrpc call http://127.0.0.1:4000 subtract 42 23
  jrpc call ws://127.0.0.1:4000 sum 1 2 3 -H 'Authorization: Bearer s3cret'
  jrpc call tcp://127.0.0.1:4000 subtract 42 23
  jrpc call unix:/tmp/jrpc.sock echo hello
  jrpc call subtract minuend=42 subtrahend=23 -- jrpc serve --stdio
  echo '[{\"jsonrpc\":\"2.0\",\"method\":\"sum\",\"params\":[1,2],\"id\":1}]' | jrpc call tcp://127.0.0.1:4000 --batch -

EXIT STATUS:
  0  success (the result is on stdout)
  1  the server answered with an error object (printed on stderr)
  2  the command line was wrong
  3  transport failure: could not connect, the connection closed, the child
     died, or an HTTP refusal (401, 413, 429, ...)
  4  timeout: no response in time")]
pub struct CallArgs {
    /// TARGET, METHOD and PARAMS (no TARGET when a command follows `--`).
    #[arg(value_name = "[TARGET] METHOD [PARAMS]", allow_negative_numbers = true)]
    words: Vec<String>,

    /// A command to spawn and call over its stdin/stdout.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,

    #[command(flatten)]
    params: ParamArgs,

    /// Send a whole batch (a JSON array of request objects): JSON text,
    /// @FILE, or - for stdin. Then no METHOD is given.
    #[arg(long, value_name = "JSON|@FILE|-")]
    batch: Option<String>,

    /// Send a notification: no response is awaited or printed.
    #[arg(long)]
    notify: bool,

    /// Print the result on one line instead of pretty.
    #[arg(long)]
    compact: bool,

    /// Print the whole response object as it came (jsonrpc, id, result or
    /// error), not just the result.
    #[arg(long, conflicts_with_all = ["notify", "batch"])]
    envelope: bool,

    /// Show the wire on stderr: each frame sent (>) and received (<), and
    /// over HTTP the request and response lines and headers.
    #[arg(short = 'v', long)]
    verbose: bool,

    /// Check the params against this OpenRPC document before sending, and
    /// refuse (exit 2) what does not fit. Without it, the document `jrpc
    /// describe` cached for the same TARGET is used, if there is one.
    #[arg(long, value_name = "FILE")]
    openrpc: Option<std::path::PathBuf>,

    /// Do not check params against a cached OpenRPC document.
    #[arg(long, conflicts_with = "openrpc")]
    no_openrpc: bool,

    #[command(flatten)]
    pub(crate) connect: ConnectArgs,
}

/// Named or whole params, besides positional ones: shared by `jrpc call`
/// and `jrpc bench`.
#[derive(Debug, Args)]
pub struct ParamArgs {
    /// A named param, KEY=VALUE (VALUE is JSON or a bare string). Repeatable.
    #[arg(long = "named", value_name = "KEY=VALUE")]
    named: Vec<String>,

    /// The whole params value: JSON text, @FILE, or - for stdin.
    #[arg(long, value_name = "JSON|@FILE|-", conflicts_with_all = ["named"])]
    raw: Option<String>,
}

/// One JSON value from the command line: JSON if it parses, else a string.
/// A word that starts as an object or an array (`{`, `[`) but is not JSON
/// is refused: sending a broken object as a string would hide the typo.
fn json_word(word: &str) -> anyhow::Result<Box<RawValue>> {
    match serde_json::from_str::<Box<RawValue>>(word) {
        Ok(raw) => Ok(raw),
        Err(e) if word.trim_start().starts_with(['{', '[']) => {
            let as_string = serde_json::to_string(word)?;
            bail!(
                "{word:?} starts like JSON but is not JSON ({e}); fix it, or send it as a string, written as JSON: {as_string}"
            )
        }
        Err(_) => Ok(serde_json::value::to_raw_value(word)?),
    }
}

/// Reads JSON text given inline, as @FILE, or as - for stdin.
fn read_source(source: &str) -> anyhow::Result<String> {
    if source == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        Ok(text)
    } else if let Some(path) = source.strip_prefix('@') {
        std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
    } else {
        Ok(source.to_owned())
    }
}

pub async fn run(args: CallArgs) -> ExitCode {
    match call(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => report(failure),
    }
}

impl CallArgs {
    pub(crate) fn verbose(&self) -> bool {
        self.verbose
    }
}

async fn call(args: CallArgs) -> Result<(), Failure> {
    let (target, mut words) = Target::from_words(args.words.clone(), &args.command)?;
    if let Some(source) = &args.batch {
        if words.next().is_some() || args.params.raw.is_some() || !args.params.named.is_empty() {
            return Err(Failure::Usage(anyhow!("--batch takes no METHOD or PARAMS")));
        }
        let text = read_source(source).map_err(Failure::Usage)?;
        let client = target.connect(&args.connect).await?;
        let outcome = batch(&client, &text, args.compact).await;
        close(client).await;
        return outcome;
    }
    let method = words
        .next()
        .ok_or_else(|| Failure::Usage(anyhow!("missing METHOD")))?;
    let positional: Vec<String> = words.collect();
    let params = params(&args.params, &positional).map_err(Failure::Usage)?;
    let named = target.to_string();
    if !args.no_openrpc {
        check_params(
            args.openrpc.as_deref(),
            &target,
            &args.connect,
            &method,
            params.as_deref(),
        )
        .await?;
    }
    if args.envelope {
        return envelope(&target, &args, &method, params.as_deref()).await;
    }
    let client = target.connect(&args.connect).await?;
    // Transport failures name the target (an HTTP client connects only now).
    let failed = |e: CallError| Failure::from(e).naming(&named);
    if args.notify {
        let sent = client.notify(&method, &params).await.map_err(failed);
        close(client).await;
        return sent;
    }
    let result = client.call_raw(&method, &params, args.connect.dial.timeout).await;
    // Whatever happened, what was queued (a cancel notification after a
    // timeout) reaches the server before the process ends.
    close(client).await;
    let result = result.map_err(failed)?;
    println!("{}", format_json(result.get(), !args.compact));
    Ok(())
}

/// `jrpc call --envelope`: one request frame of id 1 on a raw connection,
/// the response printed as it came.
async fn envelope(
    target: &Target,
    args: &CallArgs,
    method: &str,
    params: Option<&RawValue>,
) -> Result<(), Failure> {
    let mut frame = format!(
        r#"{{"jsonrpc":"2.0","method":{}"#,
        serde_json::Value::from(method)
    );
    if let Some(params) = params {
        frame.push_str(&format!(r#","params":{}"#, params.get()));
    }
    frame.push_str(r#","id":1}"#);
    let named = target.to_string();
    let headers = args.connect.dial.headers()?;
    let timeout = args.connect.dial.timeout;
    let mut wire = crate::wire::Wire::open(target, &args.connect, &headers)
        .await
        .map_err(|e| Failure::Transport(e.context(format!("connecting to {named}"))))?;
    let observed = wire
        .exchange(&frame, 1, Duration::ZERO, timeout)
        .await
        .map_err(|e| Failure::Transport(e.context(format!("calling {named}"))))?;
    // The reply to id 1 (the server's own messages are not replies).
    let frames = observed.frames();
    let reply = frames
        .iter()
        .find(|f| crate::wire::raw_ids(f).iter().any(|id| id == "1"));
    let Some(reply) = reply.or(frames.first()) else {
        return Err(Failure::Timeout(anyhow!(
            "no response within {timeout:?}: {}",
            observed.evidence()
        )));
    };
    let text = String::from_utf8_lossy(reply);
    println!("{}", format_json(&text, !args.compact));
    let is_error = serde_json::from_str::<serde_json::Value>(&text)
        .map(|v| v.get("error").is_some())
        .unwrap_or(true);
    if is_error {
        return Err(Failure::ErrorShown);
    }
    Ok(())
}

/// Refuses params that do not fit the method's description in an OpenRPC
/// document; no request is made for it. A document given with `--openrpc`
/// is the user's word. A cached one (saved by `jrpc describe`) may describe
/// another server that was at this address before: when it refuses, the
/// server is asked for its own document first, which replaces the cached
/// one (or, when the server has none, the cached one is removed), and only
/// a misfit with the server's own document refuses the call.
async fn check_params(
    file: Option<&std::path::Path>,
    target: &Target,
    connect: &ConnectArgs,
    method: &str,
    params: Option<&RawValue>,
) -> Result<(), Failure> {
    let key = target.to_string();
    let Some((document, path)) = crate::describe::load_for_call(file, &key)? else {
        return Ok(());
    };
    let params: Option<serde_json::Value> = params
        .map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| Failure::Usage(e.into()))?;
    let Err(misfit) = crate::params_check::check(&document, method, params.as_ref()) else {
        return Ok(());
    };
    if file.is_some() {
        return Err(Failure::Usage(anyhow!(
            "{misfit}\n  checked against {}",
            path.display()
        )));
    }
    let Some(current) = crate::describe::refresh_cached(target, connect).await else {
        // The server publishes no document: the cached one was another's.
        return Ok(());
    };
    crate::params_check::check(&current, method, params.as_ref()).map_err(|misfit| {
        Failure::Usage(anyhow!(
            "{misfit}\n  checked against the server's own OpenRPC document (rpc.discover), cached at {} \
             (--no-openrpc skips the check)",
            path.display()
        ))
    })
}

/// The params to send: `None` for none.
pub(crate) fn params(args: &ParamArgs, positional: &[String]) -> anyhow::Result<Option<Box<RawValue>>> {
    if let Some(source) = &args.raw {
        if !positional.is_empty() {
            bail!("--raw takes the whole params value; give no PARAMS with it");
        }
        let text = read_source(source)?;
        let raw: Box<RawValue> = serde_json::from_str(text.trim()).context("--raw is not JSON")?;
        if !matches!(raw.get().as_bytes().first(), Some(b'[' | b'{')) {
            bail!("--raw must be a JSON array or object");
        }
        return Ok(Some(raw));
    }
    if !args.named.is_empty() {
        if !positional.is_empty() {
            bail!("give either positional PARAMS or --named params, not both");
        }
        let mut object = serde_json::Map::new();
        let mut raw_members = Vec::new();
        for pair in &args.named {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| anyhow!("--named {pair:?}: expected KEY=VALUE"))?;
            if object.insert(key.to_owned(), serde_json::Value::Null).is_some() {
                bail!("--named {key} given twice");
            }
            raw_members.push(format!(
                "{}:{}",
                serde_json::to_string(key)?,
                json_word(value)?.get()
            ));
        }
        return Ok(Some(RawValue::from_string(format!(
            "{{{}}}",
            raw_members.join(",")
        ))?));
    }
    line_params(positional)
}

/// Whether a PARAM word is `NAME=VALUE`: a named param.
pub(crate) fn is_named(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    })
}

/// The params of PARAM words, by the one rule of `jrpc call`, `jrpc
/// connect` and `jrpc mcp`: `NAME=VALUE` words are named params (VALUE is
/// JSON or a bare string), any other word is a positional one (JSON or a
/// bare string); a string with `=` in it is written as JSON (`'"a=b"'`).
/// The two kinds do not mix.
pub(crate) fn line_params(words: &[String]) -> anyhow::Result<Option<Box<RawValue>>> {
    if words.is_empty() {
        return Ok(None);
    }
    let named = words.iter().filter(|w| is_named(w)).count();
    if named == words.len() {
        let named = ParamArgs {
            named: words.to_vec(),
            raw: None,
        };
        return params(&named, &[]);
    }
    if named > 0 {
        let example = words
            .iter()
            .find(|w| is_named(w))
            .map(String::as_str)
            .unwrap_or_default();
        bail!(
            "{example:?} is a named param (NAME=VALUE) among positional ones: give all params named \
             or all positional (a string with = in it is written as JSON: '\"{example}\"')"
        );
    }
    let items = words
        .iter()
        .map(|w| json_word(w).map(|raw| raw.get().to_owned()))
        .collect::<anyhow::Result<Vec<String>>>()?;
    Ok(Some(RawValue::from_string(format!("[{}]", items.join(",")))?))
}

/// One entry of a `--batch`.
#[derive(Deserialize)]
struct BatchEntry {
    method: String,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Box<RawValue>>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// Sends the user's batch with this client's own ids and prints the replies
/// under the user's ids, in the user's order.
async fn batch(client: &Client, text: &str, compact: bool) -> Result<(), Failure> {
    let entries: Vec<BatchEntry> = serde_json::from_str(text)
        .context("--batch must be a JSON array of request objects")
        .map_err(Failure::Usage)?;
    if entries.is_empty() {
        return Err(Failure::Usage(anyhow!(
            "--batch is empty: a batch needs at least one request"
        )));
    }
    let mut batch = client.batch();
    let mut calls = Vec::new();
    for entry in &entries {
        match &entry.id {
            Some(id) => calls.push((id, batch.call::<Box<RawValue>>(&entry.method, &entry.params))),
            None => {
                batch.notify(&entry.method, &entry.params);
            }
        }
    }
    batch.send().await?;
    let mut replies = Vec::new();
    let mut any_error = false;
    for (id, call) in calls {
        let reply = match call.await {
            Ok(result) => format!(
                r#"{{"jsonrpc":"2.0","result":{},"id":{}}}"#,
                result.get(),
                id.get()
            ),
            Err(CallError::Rpc(error)) => {
                any_error = true;
                let error = serde_json::to_string(&error).map_err(|e| Failure::Transport(e.into()))?;
                format!(r#"{{"jsonrpc":"2.0","error":{error},"id":{}}}"#, id.get())
            }
            Err(other) => return Err(other.into()),
        };
        replies.push(reply);
    }
    if replies.is_empty() {
        client.clone().close().await;
        return Ok(());
    }
    println!("{}", format_json(&format!("[{}]", replies.join(",")), !compact));
    if any_error {
        return Err(Failure::BatchErrors);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse_duration, Target};
    use std::time::Duration;

    #[test]
    fn a_bare_host_and_port_is_an_http_target() {
        for (text, url) in [
            ("127.0.0.1:4000", "http://127.0.0.1:4000"),
            ("localhost:4000/rpc", "http://localhost:4000/rpc"),
            ("[::1]:4000", "http://[::1]:4000"),
            ("tcp://127.0.0.1:4001", "tcp://127.0.0.1:4001"),
        ] {
            match Target::parse(text) {
                Ok(Target::Url(got)) => assert_eq!(got, url, "{text}"),
                other => panic!("{text}: {:?}", other.map(|t| t.to_string())),
            }
        }
        // Method names are not targets.
        for method in [
            "subtract",
            "rpc.discover",
            "ns:method",
            "a:b:c",
            "host:0",
            "host:99999",
            ":4000",
        ] {
            assert!(Target::parse(method).is_err(), "{method} read as a target");
        }
    }

    #[test]
    fn durations_take_every_unit() {
        for (text, expected) in [
            ("250ms", Duration::from_millis(250)),
            ("10s", Duration::from_secs(10)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1.5", Duration::from_millis(1500)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        for bad in ["", "ms", "ten", "-1s", "1d"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
