//! The protocol's messages, serde-exact to the MCP schema (revisions
//! 2026-07-28 and 2025-11-25, whose messages differ only in what
//! 2026-07-28 adds: the per-request envelope, `resultType`, cache hints,
//! multi round-trip input, subscriptions), shared by servers and clients.
//!
//! Field names follow the schema (`camelCase` on the wire, `_meta` as
//! [`meta`](Meta)); optional fields are left out when unset; unknown fields
//! from newer peers are ignored.

mod client;
mod completion;
mod content;
mod discover;
mod envelope;
mod lifecycle;
mod logging;
pub(crate) mod mrtr;
mod prompts;
mod resources;
mod skills;
mod subscriptions;
mod tasks;
mod tool;
mod tools;
pub(crate) mod utilities;
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
pub use discover::DiscoverResult;
pub use envelope::{
    meta_keys, CacheHint, CacheScope, MissingCapabilityData, RequestEnvelope, ResultType,
    UnsupportedVersionData,
};
pub use lifecycle::{
    ClientCapabilities, ElicitationCapability, Icon, Implementation, InitializeParams, InitializeResult,
    ListChangedCapability, ResourcesCapability, RootsCapability, ServerCapabilities,
};
pub use logging::{LoggingLevel, LoggingMessageParams, SetLevelParams};
pub use mrtr::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
pub use prompts::{
    GetPromptParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
};
pub use resources::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceParams, ReadResourceResult, Resource,
    ResourceTemplate,
};
pub use skills::{
    is_valid_skill_name, parse_frontmatter, skill_digest, GetSkillParams, GetSkillResult, ListSkillsResult,
    ReadDirectoryParams, ReadDirectoryResult, SkillEntry, SkillFileDigest, SkillResources, SkillsCapability,
    DIRECTORY_MIME_TYPE, SKILLS_EXTENSION,
};
pub use subscriptions::{AcknowledgedParams, ListenParams, ResourceUpdatedParams, SubscriptionFilter};
pub use tasks::{Task, TaskParams, TaskStatus, TaskUpdateParams, TASKS_EXTENSION};
pub use tool::{Tool, ToolAnnotations};
pub use tools::{CallToolParams, CallToolResult, ListToolsResult};
pub use utilities::{CancelledParams, PaginatedParams, ProgressParams, ProgressToken, RequestMeta};
pub use version::{
    is_modern, negotiate_version, LATEST_LEGACY_VERSION, LATEST_PROTOCOL_VERSION, LEGACY_PROTOCOL_VERSIONS,
    MODERN_PROTOCOL_VERSIONS, SUPPORTED_PROTOCOL_VERSIONS,
};

/// The `_meta` member every message may carry: free-form, reserved for
/// protocol-level metadata.
pub type Meta = serde_json::Map<String, serde_json::Value>;

/// A JSON object: tool arguments, structured content, JSON Schemas.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// MCP's error codes beside JSON-RPC's own.
pub mod codes {
    /// A resource URI that names no resource (legacy revisions; 2026-07-28
    /// uses `-32602`, invalid params).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// Elicitation in URL mode is required (from a server, in an error;
    /// 2025-11-25 only).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// HTTP headers that do not match the body, or required ones missing
    /// (2026-07-28; HTTP 400).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability the client did not declare
    /// (2026-07-28; `data.requiredCapabilities`; HTTP 400).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The request's protocol version is not one the server speaks
    /// (2026-07-28; `data: {supported, requested}`; HTTP 400).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

#[cfg(test)]
mod tests;
