//! Which revision each request is served in. A request whose `_meta`
//! carries `io.modelcontextprotocol/protocolVersion` (or that came through
//! a path that serves only 2026-07-28, such as Streamable HTTP's stateless
//! POST) is *modern*: served statelessly, by what its own envelope says.
//! Anything else belongs to the connection's *legacy* session, opened by
//! `initialize`. The choice is made per request, so one connection can
//! carry both.

use std::sync::{Arc, Mutex};

use jrpc::message::codes::INVALID_PARAMS;
use jrpc::message::RawValue;
use jrpc::middleware::{BoxCallService, Call, CallFuture, Layer, RawResult, Service};
use jrpc::{Error, RequestContext};
use serde::de::IgnoredAny;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::envelopes::Envelopes;
use super::round_params::{read_with_meta, ReadAlready};
use super::session::{Phase, Session};
use crate::types::{
    codes, is_modern, meta_keys, RequestEnvelope, UnsupportedVersionData, MODERN_PROTOCOL_VERSIONS,
};

/// A modern request's facts: its envelope and, over HTTP, the outlet its
/// notifications go to. Kept in the call's extensions.
pub(crate) struct Modern {
    /// Shared with the other requests that carry the same envelope text
    /// ([`Envelopes`](super::envelopes::Envelopes)).
    pub(crate) envelope: Arc<RequestEnvelope>,
    /// The revision, one of [`MODERN_PROTOCOL_VERSIONS`].
    pub(crate) version: &'static str,
    /// Where the request's own notifications go when its transport carries
    /// them with the reply (Streamable HTTP); on a connection (stdio) they
    /// go to the peer.
    pub(crate) stream: Option<jrpc::dispatch::CallOutlet>,
    /// Cancelled when the server shuts down: long-lived requests
    /// (`subscriptions/listen`, the only ones given it over HTTP) end
    /// gracefully then.
    pub(crate) closing: Option<CancellationToken>,
    /// The request's params, when they were read with the envelope (the
    /// call then carries none, so that nobody reads them twice).
    read: Mutex<Option<ReadAlready>>,
}

impl Modern {
    /// The facts of a request with `envelope` (already checked to name a
    /// modern revision).
    pub(crate) fn new(envelope: impl Into<Arc<RequestEnvelope>>) -> Self {
        let envelope = envelope.into();
        let version = MODERN_PROTOCOL_VERSIONS
            .iter()
            .copied()
            .find(|v| *v == envelope.protocol_version)
            .unwrap_or(MODERN_PROTOCOL_VERSIONS[0]);
        Modern {
            envelope,
            version,
            stream: None,
            closing: None,
            read: Mutex::new(None),
        }
    }

    /// The facts of a request whose params were read already.
    pub(crate) fn with_params(envelope: impl Into<Arc<RequestEnvelope>>, params: ReadAlready) -> Self {
        let modern = Modern::new(envelope);
        *modern
            .read
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(params);
        modern
    }

    /// Whether the params were read already.
    pub(crate) fn has_read(&self) -> bool {
        self.read
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_some()
    }

    /// The params read already, once.
    pub(crate) fn take_read(&self) -> Option<ReadAlready> {
        self.read
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }
}

/// The era a handler serves its request in.
#[derive(Clone)]
pub(crate) enum Era {
    /// A legacy session's request (initialized).
    Legacy(Arc<Session>),
    /// A modern request.
    Modern(Arc<Modern>),
}

impl Era {
    /// The era of the request `ctx` is for: modern when the era layer said
    /// so, else the connection's session, which must be initialized.
    pub(crate) fn of(ctx: &RequestContext) -> Result<Era, Error> {
        if let Some(modern) = ctx.get::<Arc<Modern>>() {
            return Ok(Era::Modern(Arc::clone(modern)));
        }
        Session::ready(ctx).map(Era::Legacy)
    }

    pub(crate) fn modern(&self) -> Option<&Arc<Modern>> {
        match self {
            Era::Modern(modern) => Some(modern),
            Era::Legacy(_) => None,
        }
    }
}

/// Methods of the legacy revisions that 2026-07-28 removed: a modern
/// request for one gets `-32601`.
const LEGACY_ONLY: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Methods 2026-07-28 added: they are served only as modern requests, so
/// one without the envelope is told what it lacks (`-32602`).
const MODERN_ONLY: &[&str] = &[
    "server/discover",
    "subscriptions/listen",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
];

/// Every legacy request that needs an initialized session.
const GATED: &[&str] = &[
    "logging/setLevel",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The layer that decides each request's era, refuses what neither era
/// allows, checks a modern request's envelope and gates legacy ones on the
/// session's lifecycle; it runs before any params are decoded.
#[derive(Clone)]
pub(crate) struct EraLayer {
    gated: Gated,
    /// The server's envelopes read last, shared by the services the layer
    /// makes.
    envelopes: Arc<Envelopes>,
}

const _: () = assert!(GATED.len() <= 32, "one bit each in Gated");

/// Which of [`GATED`] a router has, one bit each (a short list, compared
/// by length first: cheaper than hashing the method for every request).
#[derive(Clone, Copy)]
struct Gated(u32);

impl Gated {
    fn contains(self, method: &str) -> bool {
        GATED
            .iter()
            .position(|gated| *gated == method)
            .is_some_and(|n| self.0 & (1 << n) != 0)
    }
}

impl EraLayer {
    /// For a router that has `methods`, reading envelopes through the
    /// server's `envelopes`.
    pub(crate) fn new<'a>(methods: impl IntoIterator<Item = &'a str>, envelopes: Arc<Envelopes>) -> Self {
        let gated = methods
            .into_iter()
            .filter_map(|name| GATED.iter().position(|known| *known == name))
            .fold(0, |bits, n| bits | (1 << n));
        EraLayer {
            gated: Gated(gated),
            envelopes,
        }
    }
}

impl Layer<BoxCallService> for EraLayer {
    type Service = EraService;

    fn layer(&self, inner: BoxCallService) -> EraService {
        EraService {
            gated: self.gated,
            envelopes: Arc::clone(&self.envelopes),
            inner,
        }
    }
}

#[derive(Clone)]
pub(crate) struct EraService {
    gated: Gated,
    envelopes: Arc<Envelopes>,
    inner: BoxCallService,
}

impl Service<Call> for EraService {
    type Response = RawResult;
    type Error = Error;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut call: Call) -> CallFuture {
        if let Some(refusal) = refuse_request(&call) {
            return Box::pin(async move { Err(refusal) });
        }
        // The inner service was made ready by `poll_ready`: it is called
        // as it is, not cloned and boxed again for every call.
        if call.is_notification() {
            return self.inner.call(call);
        }
        let decided = call.get::<Arc<Modern>>().is_some();
        if !decided {
            match modern(call.method(), call.params(), &self.envelopes) {
                Ok(Some(modern)) => {
                    if modern.has_read() {
                        // The handler takes them as read.
                        call.take_params();
                    }
                    call.extensions_mut().insert(Arc::new(modern));
                }
                Ok(None) => return self.legacy(call),
                Err(refusal) => return Box::pin(async move { Err(refusal) }),
            }
        }
        if let Some(refusal) = removed(call.method()) {
            return Box::pin(async move { Err(refusal) });
        }
        self.inner.call(call)
    }
}

/// What the era layer refuses of a request already known to be modern
/// (Streamable HTTP's modern POST, which runs this itself and calls the
/// method table without the layer).
#[cfg(feature = "http")]
pub(crate) fn refuse_modern(call: &Call) -> Option<Error> {
    refuse_request(call).or_else(|| removed(call.method()))
}

/// `-32601` for a method 2026-07-28 removed.
fn removed(method: &str) -> Option<Error> {
    LEGACY_ONLY
        .contains(&method)
        .then(|| Error::method_not_found().with_data(&method))
}

impl EraService {
    fn legacy(&mut self, call: Call) -> CallFuture {
        if self.gated.contains(call.method()) {
            // Outside `initialize`'s connections there is no session at all.
            let new = call
                .get::<Arc<Session>>()
                .map_or(true, |s| s.state().phase == Phase::New);
            if new {
                return Box::pin(async { Err(not_initialized()) });
            }
        }
        self.inner.call(call)
    }
}

/// What MCP forbids that JSON-RPC allows: a null or fractional request id
/// (ids are strings or integers), and a notification's method called as a
/// request (it has no result to give).
fn refuse_request(call: &Call) -> Option<Error> {
    let id = call.id()?;
    if id.is_null() {
        return Some(Error::invalid_request().with_data("MCP request ids must not be null"));
    }
    if id.as_number_text().is_some_and(|n| n.contains(['.', 'e', 'E'])) {
        return Some(Error::invalid_request().with_data("MCP request ids are strings or integers"));
    }
    if call.method().starts_with("notifications/") {
        return Some(Error::method_not_found().with_data("a notification's method, sent as a request"));
    }
    None
}

pub(crate) fn not_initialized() -> Error {
    Error::invalid_request().with_data("the session is not initialized: send initialize first")
}

#[derive(Deserialize)]
struct ParamsMeta<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct VersionKey {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
    version: Option<IgnoredAny>,
}

/// The modern facts of a request for `method` with `params`: `None` when
/// the request is legacy (no `io.modelcontextprotocol/protocolVersion` in
/// its `_meta`, or it is `initialize`, which is legacy whatever it
/// carries), else its checked envelope (with its params, read in the same
/// pass, when its handler reads them in a known shape) or the refusal.
fn modern(method: &str, params: Option<&RawValue>, envelopes: &Envelopes) -> Result<Option<Modern>, Error> {
    if method == "initialize" {
        return Ok(None);
    }
    // Most requests are legacy, and their params do not name a protocol
    // version at all: that is told without parsing them (a key written
    // with escapes is parsed).
    let might_claim = params.is_some_and(|p| {
        let text = p.get();
        text.contains("protocolVersion") || text.as_bytes().contains(&b'\\')
    });
    if !might_claim && !MODERN_ONLY.contains(&method) {
        return Ok(None);
    }
    // The methods whose params are read in one known shape are read so at
    // once, their `_meta` with them, when the params are an object that
    // names a protocol version as it is (a call whose params hold only an
    // escape is most likely legacy: its `_meta` is found alone, as any
    // other method's).
    let read = params
        .filter(|p| p.get().starts_with('{') && p.get().contains("protocolVersion"))
        .and_then(|p| read_with_meta(method, p));
    let meta = match &read {
        Some((_, meta)) => Some(*meta),
        None => params
            .and_then(|p| serde_json::from_str::<ParamsMeta<'_>>(p.get()).ok())
            .and_then(|p| p.meta),
    };
    // An envelope kept names a revision: only another is looked into.
    let kept = meta.and_then(|m| envelopes.known(m.get()));
    let claims_modern = kept.is_some()
        || meta
            .and_then(|m| serde_json::from_str::<VersionKey>(m.get()).ok())
            .is_some_and(|k| k.version.is_some());
    if !claims_modern && !MODERN_ONLY.contains(&method) {
        return Ok(None);
    }
    if let Some((read, meta)) = read {
        let envelope = match kept {
            Some(envelope) => Ok(envelope),
            None => envelopes.read(meta),
        };
        if let Ok(envelope) = envelope {
            check_version(&envelope)?;
            return Ok(Some(Modern::with_params(envelope, read)));
        }
    }
    if let Some(Ok(envelope)) = meta.map(|meta| envelopes.read(meta)) {
        check_version(&envelope)?;
        return Ok(Some(Modern::new(envelope)));
    }
    // Something is wrong with it: read on its own to say what.
    envelope(params).map(|envelope| Some(Modern::new(envelope)))
}

/// The checked envelope of a modern request's `params`: `-32602` when it is
/// missing or malformed, `-32022` when it names a revision that is not
/// modern.
pub(crate) fn envelope(params: Option<&RawValue>) -> Result<RequestEnvelope, Error> {
    let envelope = parse_envelope(params)?;
    check_version(&envelope)?;
    Ok(envelope)
}

/// The envelope of `params`, not yet checked for its revision (Streamable
/// HTTP compares it with the headers first).
pub(crate) fn parse_envelope(params: Option<&RawValue>) -> Result<RequestEnvelope, Error> {
    let missing = || {
        Error::new(INVALID_PARAMS, "Invalid params").with_data(&format!(
            "params._meta must be an object carrying {:?} and {:?}",
            meta_keys::PROTOCOL_VERSION,
            meta_keys::CLIENT_CAPABILITIES
        ))
    };
    let params = params.ok_or_else(missing)?;
    let meta = serde_json::from_str::<ParamsMeta<'_>>(params.get())
        .map_err(|_| missing())?
        .meta
        .ok_or_else(missing)?;
    serde_json::from_str(meta.get())
        .map_err(|e| Error::new(INVALID_PARAMS, "Invalid params").with_data(&format!("params._meta: {e}")))
}

/// `-32022` unless the envelope names a modern revision.
pub(crate) fn check_version(envelope: &RequestEnvelope) -> Result<(), Error> {
    if is_modern(&envelope.protocol_version) {
        return Ok(());
    }
    Err(unsupported_version(&envelope.protocol_version))
}

pub(crate) fn unsupported_version(requested: &str) -> Error {
    let data = UnsupportedVersionData {
        supported: MODERN_PROTOCOL_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        requested: requested.to_owned(),
    };
    Error::new(
        codes::UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
    )
    .with_data(&data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn an_envelope_kept_decides_as_one_read() {
        let envelopes = Envelopes::default();
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let call = raw(&format!(
            r#"{{"name":"add","arguments":{{"a":1}},"_meta":{meta}}}"#
        ));
        let first = super::modern("tools/call", Some(&call), &envelopes)
            .unwrap()
            .unwrap();
        let again = super::modern("tools/call", Some(&call), &envelopes)
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(&first.envelope, &again.envelope));
        assert!(again.has_read());
        let list = raw(&format!(r#"{{"_meta":{meta}}}"#));
        let listed = super::modern("tools/list", Some(&list), &envelopes)
            .unwrap()
            .unwrap();
        assert!(Arc::ptr_eq(&first.envelope, &listed.envelope));
        // A revision that is not modern is refused, read or kept.
        let old = raw(&call.get().replace("2026-07-28", "2025-11-25"));
        for _ in 0..2 {
            let refused = super::modern("tools/call", Some(&old), &envelopes)
                .err()
                .expect("refused");
            assert_eq!(refused.code(), codes::UNSUPPORTED_PROTOCOL_VERSION);
        }
    }

    #[test]
    fn the_envelope_decides_the_era() {
        let legacy = [
            ("tools/list", None),
            ("tools/list", Some(r#"{"_meta": {"progressToken": 1}}"#)),
            ("tools/call", Some(r#"{"name": "x"}"#)),
            (
                "initialize",
                Some(r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}"#),
            ),
        ];
        for (method, params) in legacy {
            let params = params.map(raw);
            assert!(
                matches!(
                    super::modern(method, params.as_deref(), &Envelopes::default()),
                    Ok(None)
                ),
                "{method} {params:?}"
            );
        }
        let modern = raw(
            r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}"#,
        );
        let facts = super::modern("tools/list", Some(&modern), &Envelopes::default())
            .unwrap()
            .unwrap();
        assert_eq!(facts.version, "2026-07-28");
        assert!(!facts.has_read());
        // A key written with escapes claims as much as one written plainly.
        let escaped = raw(
            r#"{"_meta": {"io.modelcontextprotocol\/protocol\u0056ersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}"#,
        );
        assert!(super::modern("tools/list", Some(&escaped), &Envelopes::default())
            .unwrap()
            .is_some());
        // The words outside `_meta` claim nothing.
        let said = raw(r#"{"name": "echo", "arguments": {"text": "protocolVersion"}}"#);
        assert!(super::modern("tools/call", Some(&said), &Envelopes::default())
            .unwrap()
            .is_none());
        // The params of tools/call, resources/read and prompts/get are read
        // with the envelope, in one pass, for the handler to take.
        let call = raw(r#"{"name": "add", "arguments": {"a": 1},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}"#);
        let facts = super::modern("tools/call", Some(&call), &Envelopes::default())
            .unwrap()
            .unwrap();
        match facts.take_read() {
            Some(ReadAlready::Tool(tool)) => {
                assert_eq!(tool.name, "add");
                assert_eq!(tool.arguments.unwrap().get(), r#"{"a": 1}"#);
            }
            other => panic!("{other:?}"),
        }
        assert!(facts.take_read().is_none(), "taken once");
        // Params by position are no MCP params: a call so is legacy, however
        // its last element reads.
        let positional = raw(r#"["add", {"a": 1}, {}, "",
                {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities": {}}]"#);
        assert!(matches!(
            super::modern("tools/call", Some(&positional), &Envelopes::default()),
            Ok(None)
        ));
        // Params the handler cannot read stay with the call, to be refused
        // there with the reason.
        let bad = raw(r#"{"name": "add", "arguments": [1],
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}}}"#);
        assert!(!super::modern("tools/call", Some(&bad), &Envelopes::default())
            .unwrap()
            .unwrap()
            .has_read());
        let code = |method: &str, params: Option<&str>| {
            let params = params.map(raw);
            super::modern(method, params.as_deref(), &Envelopes::default())
                .err()
                .expect("refused")
                .code()
        };
        // A half-built envelope, or a modern-only method without one: -32602.
        assert_eq!(
            code(
                "tools/list",
                Some(r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}"#)
            ),
            INVALID_PARAMS
        );
        assert_eq!(code("server/discover", None), INVALID_PARAMS);
        assert_eq!(code("server/discover", Some("{}")), INVALID_PARAMS);
        // A revision that is not modern: -32022.
        let old = r#"{"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
                                "io.modelcontextprotocol/clientCapabilities": {}}}"#;
        assert_eq!(
            code("server/discover", Some(old)),
            codes::UNSUPPORTED_PROTOCOL_VERSION
        );
    }
}
