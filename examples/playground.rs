//! The playground in a server of your own: `HttpServer::playground(true)`
//! serves a page at `/playground` that lists the methods below (from
//! `rpc.discover`), builds a form for each from its schema (a text box, a
//! choice for the enum, a yes/no for the flag, JSON for the struct), and
//! shows what the server sends back on its own: `countdown` notifies the
//! page once a number, `ask` sends the page a request of its own.
//!
//! ```sh
//! cargo run --example playground                  # 127.0.0.1:4000, until Ctrl-C
//! cargo run --example playground -- 127.0.0.1:0   # any free port
//! ```

use std::time::Duration;

use jrpc::openrpc::Info;
use jrpc::server::http::HttpServer;
use jrpc::{Error, RequestContext};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How to greet.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Style {
    Plain,
    Loud,
    Whisper,
}

/// A window's size in pixels.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Window {
    width: u32,
    height: u32,
}

/// Methods that show off the playground's forms and its inbox.
#[jrpc::rpc]
pub trait Showcase {
    /// Greets someone, in a style.
    fn greet(&self, name: String, style: Style, excited: Option<bool>) -> Result<String, Error>;

    /// The area of a window.
    fn area(&self, window: Window) -> Result<u64, Error>;

    /// Counts down from `from` (at most 10), sending the caller a `tick`
    /// notification per number, then answers "liftoff".
    async fn countdown(&self, from: u8, cx: RequestContext) -> Result<String, Error>;

    /// Asks the caller to `confirm` the question (a request from the
    /// server) and returns what it answered.
    async fn ask(&self, question: String, cx: RequestContext) -> Result<String, Error>;
}

struct Demo;

impl Showcase for Demo {
    fn greet(&self, name: String, style: Style, excited: Option<bool>) -> Result<String, Error> {
        let mark = if excited.unwrap_or(false) { "!" } else { "." };
        Ok(match style {
            Style::Plain => format!("Hello, {name}{mark}"),
            Style::Loud => format!("HELLO, {}{mark}", name.to_uppercase()),
            Style::Whisper => format!("(hello, {}{mark})", name.to_lowercase()),
        })
    }

    fn area(&self, window: Window) -> Result<u64, Error> {
        Ok(u64::from(window.width) * u64::from(window.height))
    }

    async fn countdown(&self, from: u8, cx: RequestContext) -> Result<String, Error> {
        if from > 10 {
            return Err(Error::invalid_params().with_data("count down from 10 at most"));
        }
        let peer = cx
            .peer()
            .ok_or_else(|| Error::new(-32000, "no connection to notify"))?;
        for n in (1..=from).rev() {
            peer.notify("tick", [n])
                .await
                .map_err(|e| Error::new(-32000, "the caller went away").with_data(&e.to_string()))?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok("liftoff".to_owned())
    }

    async fn ask(&self, question: String, cx: RequestContext) -> Result<String, Error> {
        let peer = cx
            .peer()
            .ok_or_else(|| Error::new(-32000, "no connection to ask"))?;
        Ok(match peer.call::<String>("confirm", [question]).await {
            Ok(answer) => format!("the caller answered: {answer}"),
            Err(e) => format!("the caller could not answer: {e}"),
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4000".to_owned());
    let router = Demo
        .into_router()
        .discover(Info::new("playground showcase", "1.0.0"));
    let serving = HttpServer::new(router).playground(true).bind(&addr).await?;
    // The address on stdout, for whoever started us (the browser test).
    println!("{}/playground", serving.local_addr());
    tokio::signal::ctrl_c().await?;
    serving.shutdown().await;
    Ok(())
}
