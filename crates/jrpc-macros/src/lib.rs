//! `#[jrpc::rpc]`: write a trait of JSON-RPC methods once; get the server
//! (implement the trait, call `into_router`), a typed client for any
//! `jrpc::Caller` and an OpenRPC description of every method. See the
//! `rpc` attribute in the `jrpc` crate (feature `macros`) for the full
//! story; this crate only holds the macro.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// Turns a trait of JSON-RPC methods into a server, a typed client and
/// OpenRPC descriptions; re-exported as `jrpc::rpc` (feature `macros`).
///
/// ```
/// use jrpc::{Error, RequestContext};
///
/// /// A calculator.
/// #[jrpc::rpc(namespace = "calc")]
/// pub trait Calculator {
///     /// Subtracts the subtrahend from the minuend.
///     async fn subtract(&self, minuend: i64, subtrahend: i64) -> Result<i64, Error>;
///
///     /// Plain functions run inline.
///     fn add(&self, a: i64, b: i64) -> Result<i64, Error>;
///
///     /// A notification: no reply.
///     #[rpc(notification)]
///     fn log(&self, line: String);
///
///     /// The request context comes last, if wanted; it is not a param.
///     #[rpc(name = "whoAmI")]
///     async fn who_am_i(&self, cx: RequestContext) -> Result<String, Error>;
/// }
///
/// struct Impl;
/// impl Calculator for Impl {
///     async fn subtract(&self, minuend: i64, subtrahend: i64) -> Result<i64, Error> {
///         Ok(minuend - subtrahend)
///     }
///     fn add(&self, a: i64, b: i64) -> Result<i64, Error> {
///         Ok(a + b)
///     }
///     fn log(&self, line: String) {
///         eprintln!("{line}");
///     }
///     async fn who_am_i(&self, cx: RequestContext) -> Result<String, Error> {
///         Ok(format!("request {:?}", cx.id()))
///     }
/// }
///
/// # fn main() {
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let router = Impl.into_router();       // every method, named "calc.subtract", ...
/// let reply = router
///     .handle(br#"{"jsonrpc":"2.0","method":"calc.subtract","params":{"minuend":42,"subtrahend":23},"id":1}"#)
///     .await;
/// assert_eq!(reply.unwrap(), r#"{"jsonrpc":"2.0","result":19,"id":1}"#);
/// // Positional params work too, and the OpenRPC document names them.
/// let doc = router.openrpc();
/// assert_eq!(doc.method("calc.subtract").unwrap().params[1].name, "subtrahend");
///
/// // The typed client works on any `jrpc::Caller`.
/// let serving = jrpc::server::Server::new(router).bind_tcp("127.0.0.1:0").await.unwrap();
/// let client = jrpc::Client::connect(serving.local_addr()).await.unwrap();
/// let calc = CalculatorClient::new(&client);
/// assert_eq!(calc.subtract(42, 23).await.unwrap(), 19);
/// calc.log("hi".to_owned()).await.unwrap();
/// # serving.shutdown().await;
/// # });
/// # }
/// ```
///
/// The trait must be declared at module level (not inside a function): the
/// generated module refers to it as `super::Calculator`.
///
/// What it generates, for a trait `Calculator`:
/// - the trait itself, with `Send + Sync + 'static` as supertraits, each
///   `async fn` as a function returning a `Send` future (implement it with
///   `async fn`), and `into_router(self) -> jrpc::Router`;
/// - a module `calculator_rpc` with, per method, a marker type
///   (`Subtract`, implementing `jrpc::typed::Method` or `Notification`)
///   and a params struct (`SubtractParams`, its fields the arguments), and
///   `router(server)`;
/// - `CalculatorClient<'_, C>`: the same methods (without the context),
///   each calling through any `jrpc::Caller` and returning
///   `Result<T, jrpc::CallError>`.
///
/// Params are accepted by name (the argument names; a leading `_` is
/// dropped) and by position. Doc comments become the OpenRPC summary (the
/// first paragraph) and description. Argument and result types implement
/// `serde`'s traits and `schemars::JsonSchema`.
///
/// Settings: `#[rpc(namespace = "ns")]` (and `separator = "/"`, default
/// `.`) on the trait; `#[rpc(name = "wireName")]` and
/// `#[rpc(notification)]` on a method. Methods take `&self`, named owned
/// arguments, optionally the request context last (`cx: RequestContext`
/// for async methods, `cx: &RequestContext` for plain ones), and return
/// `Result<T, jrpc::Error>` (notifications return nothing); anything else
/// is a compile error at the offending item.
#[proc_macro_attribute]
pub fn rpc(attr: TokenStream, item: TokenStream) -> TokenStream {
    let parsed = parse::parse(attr.into(), item.into());
    match parsed {
        Ok(service) => expand::expand(&service).into(),
        Err(error) => error.to_compile_error().into(),
    }
}
