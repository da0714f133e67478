//! Tools on the server: how a handler's arguments are decoded and its
//! output turned into a `tools/call` result, and where their schemas come
//! from.

use std::future::Future;
use std::sync::Arc;

use jrpc::message::RawValue;
use jrpc::Error;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::context::McpContext;
use crate::types::{CallToolResult, ContentBlock, JsonObject, Tool};

pub(crate) use super::run::BoxFuture;

/// A tool call's arguments as they came: a JSON object, decoded by the
/// handler into what it takes (`None` when the call had none).
pub(crate) type Arguments<'a> = Option<&'a RawValue>;

/// A registered tool's handler, type-erased: arguments in, result (or a
/// protocol error) out.
pub(crate) type ToolHandler =
    Arc<dyn Fn(Arguments<'_>, McpContext) -> BoxFuture<Result<CallToolResult, Error>> + Send + Sync>;

/// A tool and its handler.
#[derive(Clone)]
pub(crate) struct ToolEntry {
    pub(crate) tool: Tool,
    pub(crate) handler: ToolHandler,
    /// Whether it may run as a task.
    pub(crate) tasks: super::tasks::TaskSupport,
    /// Its parameters annotated `x-mcp-header` (none when the annotations
    /// are invalid: clients drop such a tool), found once; Streamable HTTP
    /// checks a call's `Mcp-Param-*` headers against them.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) param_headers: Arc<[crate::headers::ParamHeader]>,
}

/// The text of `arguments`: `{}` when there are none.
fn arguments_text<'a>(arguments: Arguments<'a>) -> &'a str {
    arguments.map_or("{}", RawValue::get)
}

/// Why a tool failed. It reaches the client as a result with
/// `isError: true` and this text, so that the model can read it and try
/// again — unless it is a [protocol error](Self::protocol), which is a
/// JSON-RPC error.
///
/// Any error converts into one with `?`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    message: String,
    protocol: Option<Error>,
}

impl ToolError {
    /// A failure that says `message`, for the model to read.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            protocol: None,
        }
    }

    /// A failure of the protocol rather than of the tool: the request is
    /// answered with `error` (a task that fails so ends `failed`).
    pub fn protocol(error: Error) -> Self {
        ToolError {
            message: error.message().to_string(),
            protocol: Some(error),
        }
    }

    /// What it says.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The result (or error) it becomes.
    fn into_result(self) -> Result<CallToolResult, Error> {
        match self.protocol {
            Some(error) => Err(error),
            None => Ok(CallToolResult::error(self.message)),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: Into<Box<dyn std::error::Error + Send + Sync>>> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::new(error.into().to_string())
    }
}

/// What a tool handler may return: text, content blocks, a whole
/// [`CallToolResult`], or a typed value with [`Structured`].
pub trait ToolOutput: Send + 'static {
    /// The JSON Schema of the tool's `structuredContent`, published as its
    /// `outputSchema`; `None` when it has none.
    fn output_schema() -> Option<JsonObject> {
        None
    }

    /// The result to send.
    fn into_result(self) -> CallToolResult;
}

impl ToolOutput for CallToolResult {
    fn into_result(self) -> CallToolResult {
        self
    }
}

impl ToolOutput for String {
    fn into_result(self) -> CallToolResult {
        CallToolResult::text(self)
    }
}

impl ToolOutput for &'static str {
    fn into_result(self) -> CallToolResult {
        CallToolResult::text(self)
    }
}

impl ToolOutput for ContentBlock {
    fn into_result(self) -> CallToolResult {
        CallToolResult {
            content: vec![self],
            ..Default::default()
        }
    }
}

impl ToolOutput for Vec<ContentBlock> {
    fn into_result(self) -> CallToolResult {
        CallToolResult {
            content: self,
            ..Default::default()
        }
    }
}

/// A typed tool output: sent as `structuredContent` (and, for clients that
/// read only content, as text), with its JSON Schema published as the
/// tool's `outputSchema`. `T` must serialize to a JSON object.
///
/// ```
/// use jrpc_mcp::server::Structured;
///
/// #[derive(serde::Serialize, schemars::JsonSchema)]
/// struct Sum { result: f64 }
///
/// // Text "42", structured content {"result": 42.0}.
/// let output = Structured::new(Sum { result: 42.0 }).text("42");
/// ```
#[derive(Debug, Clone)]
pub struct Structured<T> {
    value: T,
    text: Option<String>,
}

impl<T> Structured<T> {
    /// `value` as structured content; its text form is its JSON.
    pub fn new(value: T) -> Self {
        Structured { value, text: None }
    }

    /// The text content to send beside the structured content (by default
    /// the value's JSON).
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }
}

impl<T: Serialize + JsonSchema + Send + 'static> ToolOutput for Structured<T> {
    fn output_schema() -> Option<JsonObject> {
        schema_object::<T>().filter(is_object_schema)
    }

    fn into_result(self) -> CallToolResult {
        let value = match serde_json::to_value(&self.value) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return CallToolResult::error("the tool's structured output is not a JSON object"),
            Err(e) => return CallToolResult::error(format!("the tool's output could not be encoded: {e}")),
        };
        let text = match self.text {
            Some(text) => text,
            None => serde_json::to_string(&value).unwrap_or_default(),
        };
        CallToolResult {
            content: vec![ContentBlock::text(text)],
            structured_content: Some(value),
            ..Default::default()
        }
    }
}

/// Arguments of a tool that takes none: its input schema is the empty
/// object schema, and it accepts `{}` or no arguments at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoArgs {}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object", "properties": {} })
    }
}

/// The JSON Schema of `T`, as an object that strict validators accept:
/// draft 2020-12 without a `$schema` member (validators set up for draft 7
/// reject the 2020-12 meta-schema URI), subschemas inlined (no `$ref`s to
/// resolve), no root `title` (a Rust type name is noise to a model), and
/// only the formats JSON Schema defines (schemars adds `uint64` and the
/// like, which strict validators refuse).
pub(crate) fn schema_object<T: JsonSchema>() -> Option<JsonObject> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let serde_json::Value::Object(mut map) = serde_json::to_value(schema).ok()? else {
        return None;
    };
    map.remove("title");
    let mut value = serde_json::Value::Object(map);
    jrpc::openrpc::standard_formats_only(&mut value);
    match value {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

fn is_object_schema(schema: &JsonObject) -> bool {
    schema.get("type").and_then(|t| t.as_str()) == Some("object")
}

/// The input schema of a tool whose arguments are `A`: always an object
/// schema, as MCP requires. A type whose schema also allows other types
/// (`Option<T>`: `["object", "null"]`) or says so only through `oneOf` (an
/// enum of structs) is made `"type": "object"` at its root, keeping the
/// rest, so that its fields stay described.
pub(crate) fn input_schema<A: JsonSchema>() -> JsonObject {
    let Some(mut schema) = schema_object::<A>() else {
        return empty_object_schema();
    };
    if !is_object_schema(&schema) {
        let allows_object = match schema.get("type") {
            Some(serde_json::Value::Array(types)) => types.iter().any(|t| t == "object"),
            None => true,
            _ => false,
        };
        if !allows_object {
            return empty_object_schema();
        }
        schema.insert("type".into(), "object".into());
    }
    schema
}

/// `{"type": "object", "properties": {}}`.
pub(crate) fn empty_object_schema() -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), "object".into());
    schema.insert("properties".into(), JsonObject::new().into());
    schema
}

/// A handler for a tool with typed arguments `A` and output `R`.
pub(crate) fn typed_handler<A, R, F, Fut>(handler: F) -> ToolHandler
where
    A: DeserializeOwned + Send + 'static,
    R: ToolOutput,
    F: Fn(A, McpContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    Arc::new(move |arguments: Arguments<'_>, cx: McpContext| {
        // Read before the future is made, so that it need not own the text.
        let args: A = match serde_json::from_str(arguments_text(arguments)) {
            Ok(args) => args,
            // Bad arguments are the model's mistake: it gets to read why
            // and try again.
            Err(e) => {
                let refusal = CallToolResult::error(format!("invalid arguments: {e}"));
                return Box::pin(std::future::ready(Ok(refusal)));
            }
        };
        let handler = Arc::clone(&handler);
        Box::pin(async move {
            match handler(args, cx).await {
                Ok(output) => Ok(output.into_result()),
                Err(e) => e.into_result(),
            }
        })
    })
}

/// A handler for a tool that takes its arguments as a JSON object.
pub(crate) fn raw_handler<F, Fut>(handler: F) -> ToolHandler
where
    F: Fn(JsonObject, McpContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
{
    let handler = Arc::new(handler);
    Arc::new(move |arguments: Arguments<'_>, cx: McpContext| {
        // The call's params were checked to carry an object.
        let arguments: JsonObject = serde_json::from_str(arguments_text(arguments)).unwrap_or_default();
        let handler = Arc::clone(&handler);
        Box::pin(async move {
            match handler(arguments, cx).await {
                Ok(result) => Ok(result),
                Err(e) => e.into_result(),
            }
        })
    })
}
