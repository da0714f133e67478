//! The protocol's messages, serde-exact to the MCP schema (revision
//! 2025-11-25), shared by servers and clients.
//!
//! Field names follow the schema (`camelCase` on the wire, `_meta` as
//! [`meta`](Meta)); optional fields are left out when unset; unknown fields
//! from newer peers are ignored.

mod client;
mod completion;
mod content;
mod lifecycle;
mod logging;
mod prompts;
mod resources;
mod tools;
mod utilities;
mod version;

pub use client::{
    CreateMessageParams, CreateMessageResult, ElicitAction, ElicitParams, ElicitResult, IncludeContext,
    ListRootsResult, ModelHint, ModelPreferences, OneOrMany, Root, SamplingContent, SamplingMessage,
    ToolResultContent, ToolUseContent,
};
pub use completion::{
    CompleteParams, CompleteResult, Completion, CompletionArgument, CompletionContext, CompletionReference,
};
pub use content::{
    Annotations, AudioContent, BlobResourceContents, ContentBlock, EmbeddedResource, ImageContent,
    ResourceContents, ResourceLink, Role, TextContent, TextResourceContents,
};
pub use lifecycle::{
    ClientCapabilities, ElicitationCapability, Icon, Implementation, InitializeParams, InitializeResult,
    ListChangedCapability, ResourcesCapability, RootsCapability, ServerCapabilities,
};
pub use logging::{LoggingLevel, LoggingMessageParams, SetLevelParams};
pub use prompts::{
    GetPromptParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
};
pub use resources::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceParams, ReadResourceResult, Resource,
    ResourceTemplate,
};
pub use tools::{CallToolParams, CallToolResult, ListToolsResult, Tool, ToolAnnotations};
pub use utilities::{CancelledParams, PaginatedParams, ProgressParams, ProgressToken, RequestMeta};
pub use version::{negotiate_version, LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS};

/// The `_meta` member every message may carry: free-form, reserved for
/// protocol-level metadata.
pub type Meta = serde_json::Map<String, serde_json::Value>;

/// A JSON object: tool arguments, structured content, JSON Schemas.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// MCP's error codes beside JSON-RPC's own.
pub mod codes {
    /// A resource URI that names no resource.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// Elicitation in URL mode is required (from a server, in an error).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
}

#[cfg(test)]
mod tests;
