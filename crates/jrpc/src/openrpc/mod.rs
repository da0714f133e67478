//! Describing a service: [OpenRPC](https://spec.open-rpc.org/) 1.3.2
//! documents, built from the descriptions attached to a router's methods
//! and answered by `rpc.discover` when [`Router::discover`] is on.
//!
//! A method is described by a [`MethodDoc`]: its params (each a named
//! [`ContentDescriptor`] with a JSON Schema), its result, the errors it
//! may answer and which params forms it accepts. Typed methods (see
//! [`typed`](crate::typed)) bring their own; a closure method gets one with
//! [`Router::describe`]. With the `schemars` feature, [`MethodDoc::params_of`]
//! and [`MethodDoc::result_of`] derive the schemas from Rust types.
//!
//! ```
//! use jrpc::openrpc::{ContentDescriptor, Info, MethodDoc, ParamStructure};
//! use jrpc::Router;
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let router = Router::new()
//!     .sync_method("subtract", |(a, b): (i64, i64)| Ok(a - b))
//!     .describe(
//!         "subtract",
//!         MethodDoc::new()
//!             .summary("Subtracts the subtrahend from the minuend")
//!             .param(ContentDescriptor::new("minuend", json!({"type": "integer"})).required())
//!             .param(ContentDescriptor::new("subtrahend", json!({"type": "integer"})).required())
//!             .result(ContentDescriptor::new("difference", json!({"type": "integer"})))
//!             .param_structure(ParamStructure::ByPosition),
//!     )
//!     .discover(Info::new("calculator", "1.0.0"));
//!
//! let reply = router.handle(br#"{"jsonrpc":"2.0","method":"rpc.discover","id":1}"#).await.unwrap();
//! let reply: serde_json::Value = serde_json::from_slice(&reply).unwrap();
//! assert_eq!(reply["result"]["openrpc"], "1.3.2");
//! assert_eq!(reply["result"]["methods"][0]["params"][1]["name"], "subtrahend");
//! # });
//! ```
//!
//! [`Router::discover`]: crate::Router::discover
//! [`Router::describe`]: crate::Router::describe

#[cfg(feature = "schemars")]
mod schema;

#[cfg(feature = "schemars")]
pub use schema::{schema_for, standard_formats_only};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The OpenRPC version documents are written in.
pub const OPENRPC_VERSION: &str = "1.3.2";

/// The method that answers a router's OpenRPC document.
pub const DISCOVER_METHOD: &str = "rpc.discover";

/// An OpenRPC document: what a service is and the methods it serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Document {
    /// The OpenRPC version (`"1.3.2"`).
    pub openrpc: String,
    /// The service.
    pub info: Info,
    /// Its methods, sorted by name.
    pub methods: Vec<MethodDoc>,
    /// Schemas the methods' schemas refer to (`#/components/schemas/NAME`).
    #[serde(default, skip_serializing_if = "Components::is_empty")]
    pub components: Components,
}

impl Document {
    /// The method called `name`.
    pub fn method(&self, name: &str) -> Option<&MethodDoc> {
        self.methods.iter().find(|m| m.name == name)
    }
}

/// Reusable parts of a document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Components {
    /// Named schemas, referred to as `#/components/schemas/NAME`.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub schemas: Map<String, Value>,
}

impl Components {
    fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }
}

/// What the service is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Info {
    /// Its name.
    pub title: String,
    /// Its version (of the service, not of OpenRPC).
    pub version: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl Info {
    /// A service called `title`, at `version`.
    pub fn new(title: impl Into<String>, version: impl Into<String>) -> Self {
        Info {
            title: title.into(),
            version: version.into(),
            description: None,
        }
    }

    /// Says what the service is for.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

impl Default for Info {
    fn default() -> Self {
        Info::new("JSON-RPC service", "0.0.0")
    }
}

/// Which forms of params a method accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ParamStructure {
    /// Only an object of named members.
    ByName,
    /// Only an array, in the order of the params.
    ByPosition,
    /// Either (how a router decodes params into a struct).
    Either,
}

/// One method (or notification) of a service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MethodDoc {
    /// The method's name (set by the router from the name it is served at).
    #[serde(default)]
    pub name: String,
    /// A short summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its params, in positional order.
    #[serde(default)]
    pub params: Vec<ContentDescriptor>,
    /// Its result; none for a notification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<ContentDescriptor>,
    /// Which params forms it accepts (OpenRPC's default: by name).
    #[serde(default, rename = "paramStructure", skip_serializing_if = "Option::is_none")]
    pub param_structure: Option<ParamStructure>,
    /// Errors it may answer with, besides the standard ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorDoc>,
    /// Whether it is on its way out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// Whether any params are accepted and none are described: a method
    /// served by a closure no description was attached to, or one that
    /// ignores its params. Checks of params against the document skip it.
    #[serde(default, rename = "x-any-params", skip_serializing_if = "std::ops::Not::not")]
    pub any_params: bool,
    /// Whether the last param may repeat (`[n, ...]`): OpenRPC has no word
    /// for it, so this extension says it.
    #[serde(default, rename = "x-variadic", skip_serializing_if = "std::ops::Not::not")]
    pub variadic: bool,
    /// Schemas its params' and result's schemas refer to; merged into the
    /// document's components.
    #[serde(skip)]
    pub definitions: Map<String, Value>,
}

impl MethodDoc {
    /// An empty description: no params, no result yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A short summary.
    pub fn summary(mut self, summary: impl Into<String>) -> Self {
        self.summary = Some(summary.into());
        self
    }

    /// What the method does.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Adds a param (positional order is the order added).
    pub fn param(mut self, param: ContentDescriptor) -> Self {
        self.params.push(param);
        self
    }

    /// Sets the result.
    pub fn result(mut self, result: ContentDescriptor) -> Self {
        self.result = Some(result);
        self
    }

    /// Which params forms the method accepts.
    pub fn param_structure(mut self, structure: ParamStructure) -> Self {
        self.param_structure = Some(structure);
        self
    }

    /// Adds an error the method may answer with.
    pub fn error(mut self, code: i64, message: impl Into<String>) -> Self {
        self.errors.push(ErrorDoc {
            code,
            message: message.into(),
            data: None,
        });
        self
    }

    /// Marks the method deprecated.
    pub fn deprecated(mut self) -> Self {
        self.deprecated = true;
        self
    }

    /// Says the method accepts any params (none are described).
    pub fn any_params(mut self) -> Self {
        self.any_params = true;
        self
    }

    /// Says the last param may repeat: the method takes `[a, b, ...]`.
    pub fn variadic(mut self) -> Self {
        self.variadic = true;
        self
    }

    /// The description of a method nothing is known of.
    pub(crate) fn undescribed(name: &str, notification: bool) -> Self {
        MethodDoc {
            name: name.to_owned(),
            result: (!notification).then(|| ContentDescriptor::new("result", Value::Object(Map::new()))),
            any_params: true,
            ..MethodDoc::default()
        }
    }
}

/// A named value with its schema: a param or a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContentDescriptor {
    /// Its name (the member name when params are passed by name).
    pub name: String,
    /// A short summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given (a param).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    /// Its JSON Schema (draft 7).
    pub schema: Value,
    /// Whether it is on its way out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
}

impl ContentDescriptor {
    /// A value called `name` of the given schema, not required.
    pub fn new(name: impl Into<String>, schema: Value) -> Self {
        ContentDescriptor {
            name: name.into(),
            summary: None,
            description: None,
            required: false,
            schema,
            deprecated: false,
        }
    }

    /// Marks it required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Says what it is.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// An error a method may answer with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ErrorDoc {
    /// Its code.
    pub code: i64,
    /// Its message.
    pub message: String,
    /// Its data, if always the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Builds the document of `methods` (described ones, and names with no
/// description), sorted by name, their definitions gathered.
pub(crate) fn document(info: Info, mut methods: Vec<MethodDoc>) -> Document {
    methods.sort_by(|a, b| a.name.cmp(&b.name));
    let mut components = Components::default();
    for method in &mut methods {
        for (name, schema) in std::mem::take(&mut method.definitions) {
            components.schemas.entry(name).or_insert(schema);
        }
    }
    Document {
        openrpc: OPENRPC_VERSION.to_owned(),
        info,
        methods,
        components,
    }
}
