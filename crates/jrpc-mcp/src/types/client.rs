//! What a server may ask of its client: sampling an LLM, eliciting input
//! from the user, listing roots.

use serde::{Deserialize, Serialize};

use super::{
    AudioContent, ContentBlock, ImageContent, JsonObject, Meta, RequestMeta, Role, TextContent, Tool,
};

/// One value or a list of them (sampling content may be either).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// Every value, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        match self {
            OneOrMany::One(one) => std::slice::from_ref(one).iter(),
            OneOrMany::Many(many) => many.iter(),
        }
    }
}

/// A model's request to use a tool, in sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// An id the matching result names.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub input: JsonObject,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The result of a tool use, in sampling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The id of the tool use this answers.
    pub tool_use_id: String,
    /// What the tool returned.
    pub content: Vec<ContentBlock>,
    /// The same result as a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<JsonObject>,
    /// Whether the tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Content of a sampling message, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SamplingContent {
    /// `"text"`.
    Text(TextContent),
    /// `"image"`.
    Image(ImageContent),
    /// `"audio"`.
    Audio(AudioContent),
    /// `"tool_use"`.
    ToolUse(ToolUseContent),
    /// `"tool_result"`.
    ToolResult(ToolResultContent),
}

impl SamplingContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        SamplingContent::Text(TextContent {
            text: text.into(),
            annotations: None,
            meta: None,
        })
    }

    /// The text, when this is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            SamplingContent::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// One message of a sampling conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who it is from.
    pub role: Role,
    /// What it says.
    pub content: OneOrMany<SamplingContent>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SamplingMessage {
    /// A text message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        SamplingMessage {
            role: Role::User,
            content: OneOrMany::One(SamplingContent::text(text)),
            meta: None,
        }
    }
}

/// A hint at which model to use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelHint {
    /// A full or partial model name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// What matters in picking a model, each from 0 to 1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Models to consider, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Vec<ModelHint>>,
    /// How much cost matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<f64>,
    /// How much speed matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<f64>,
    /// How much capability matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<f64>,
}

/// Which MCP servers' context to include in a sampling request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum IncludeContext {
    /// None.
    None,
    /// The requesting server's.
    ThisServer,
    /// Every connected server's.
    AllServers,
}

/// The params of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageParams {
    /// The conversation so far.
    pub messages: Vec<SamplingMessage>,
    /// The most tokens to generate.
    pub max_tokens: u32,
    /// A system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// What matters in picking a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// Which servers' context to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<IncludeContext>,
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Where to stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequences: Option<Vec<String>>,
    /// Tools the model may use (clients declaring `sampling.tools`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// Provider-specific metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

impl CreateMessageParams {
    /// One user message, answered in at most `max_tokens`.
    pub fn new(prompt: impl Into<String>, max_tokens: u32) -> Self {
        CreateMessageParams {
            messages: vec![SamplingMessage::user(prompt)],
            max_tokens,
            system_prompt: None,
            model_preferences: None,
            include_context: None,
            temperature: None,
            stop_sequences: None,
            tools: None,
            metadata: None,
            meta: None,
        }
    }
}

/// The result of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Who the message is from (the assistant).
    pub role: Role,
    /// What it says.
    pub content: OneOrMany<SamplingContent>,
    /// The model that wrote it.
    pub model: String,
    /// Why generation stopped (`endTurn`, `stopSequence`, `maxTokens`,
    /// `toolUse`, or another).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CreateMessageResult {
    /// The text of every text block, joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self.content.iter().filter_map(SamplingContent::as_text).collect();
        texts.join("\n")
    }
}

/// The params of `elicitation/create` in form mode: a message and a flat
/// JSON Schema object of primitive properties for the user to fill in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitParams {
    /// `"form"` (left out for clients of revisions before modes existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to ask the user.
    pub message: String,
    /// The form: `{"type": "object", "properties": {...}, "required": [...]}`.
    pub requested_schema: JsonObject,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// What the user did with an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted the form.
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it without choosing.
    Cancel,
}

/// The result of `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The submitted values, on accept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<JsonObject>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A root: a directory or file the client lets servers work in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// Its URI (`file://` for now).
    pub uri: String,
    /// A name for people to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The result of `roots/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}
