//! A tool's description, as `tools/list` gives it.

use serde::{Deserialize, Serialize};

use super::{Icon, JsonObject, Meta};

/// A tool as `tools/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Its programmatic name, unique on the server.
    pub name: String,
    /// A name for people to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema object (`"type": "object"`) for its arguments.
    pub input_schema: JsonObject,
    /// A JSON Schema object for its `structuredContent`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Hints about its behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Icons to show for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// Hints about a tool's behaviour (not guarantees: a client must not trust
/// them from a server it does not trust).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// A name for people to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// It changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// It may destroy data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments does no more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// It reaches outside (the web, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Tool {
    /// A tool with a name, taking no arguments (its input schema is the
    /// empty object schema).
    pub fn new(name: impl Into<String>) -> Self {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), JsonObject::new().into());
        Tool {
            name: name.into(),
            title: None,
            description: None,
            input_schema: schema,
            output_schema: None,
            annotations: None,
            icons: None,
            meta: None,
        }
    }

    /// Its description, for the model.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Its title, for people.
    pub fn title(mut self, text: impl Into<String>) -> Self {
        self.title = Some(text.into());
        self
    }

    /// The JSON Schema of its arguments (`"type": "object"` is added when
    /// missing).
    pub fn input_schema(mut self, mut schema: JsonObject) -> Self {
        schema.entry("type").or_insert_with(|| "object".into());
        self.input_schema = schema;
        self
    }

    /// The JSON Schema of its structured output.
    pub fn output_schema(mut self, schema: JsonObject) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// Hints about its behaviour.
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }
}
