//! JSON Schemas from Rust types (`schemars`), shaped for OpenRPC: draft 7,
//! subschemas inlined (only recursive types stay `$ref`s, to
//! `#/components/schemas/NAME`), only standard `format`s, and a params
//! struct split into one named param per field, in field order.

use schemars::generate::{Contract, SchemaSettings};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ContentDescriptor, MethodDoc, ParamStructure};

/// Where definitions go, as a JSON pointer; refs read `#/components/schemas/NAME`.
const DEFINITIONS_PATH: &str = "/components/schemas";

/// The schema of `T` as a value is accepted (`Deserialize`): draft 7,
/// subschemas inlined. A recursive type refers to definitions this drops;
/// describe such types with [`MethodDoc::params_of`] or
/// [`MethodDoc::result_of`], which keep them.
pub fn schema_for<T: JsonSchema>() -> Value {
    generate::<T>(Contract::Deserialize).0
}

/// The schema of `T` and the definitions it refers to.
fn generate<T: JsonSchema>(contract: Contract) -> (Value, Map<String, Value>) {
    let mut settings = SchemaSettings::draft07();
    settings.definitions_path = DEFINITIONS_PATH.into();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    settings.contract = contract;
    let mut generator = settings.into_generator();
    let mut schema = generator.subschema_for::<T>();
    // A subschema skips the draft's transforms (tuples as `items: [...]`
    // rather than 2020-12's `prefixItems`, ...); apply them here.
    for transform in generator.transforms_mut() {
        transform.transform(&mut schema);
    }
    let mut schema = schema.to_value();
    let mut definitions = generator.take_definitions(true);
    standard_formats_only(&mut schema);
    for definition in definitions.values_mut() {
        standard_formats_only(definition);
    }
    (schema, definitions)
}

/// The `format`s JSON Schema defines; schemars adds `int64`, `uint8` and
/// the like, which strict validators refuse.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes every `format` JSON Schema does not define, at any depth.
pub fn standard_formats_only(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            let odd = map
                .get("format")
                .and_then(Value::as_str)
                .is_some_and(|f| !STANDARD_FORMATS.contains(&f));
            if odd {
                map.remove("format");
            }
            map.values_mut().for_each(standard_formats_only);
        }
        Value::Array(items) => items.iter_mut().for_each(standard_formats_only),
        _ => {}
    }
}

impl MethodDoc {
    /// Describes the params as the router decodes them into `P`:
    /// - a struct: one param per field, in field order, by name or by
    ///   position (`paramStructure: "either"`), each required unless it may
    ///   be omitted (an `Option`, or a `#[serde(default)]`);
    /// - `()`: no params;
    /// - a tuple: one param per element (`param1`, `param2`, ...), by
    ///   position;
    /// - anything else: one param, `params`, with `P`'s schema.
    ///
    /// ```
    /// use jrpc::openrpc::{MethodDoc, ParamStructure};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Subtract {
    ///     /// The number to subtract from.
    ///     minuend: f64,
    ///     subtrahend: f64,
    /// }
    ///
    /// let doc = MethodDoc::new().params_of::<Subtract>();
    /// let names: Vec<&str> = doc.params.iter().map(|p| p.name.as_str()).collect();
    /// assert_eq!(names, ["minuend", "subtrahend"]);
    /// assert_eq!(doc.params[0].description.as_deref(), Some("The number to subtract from."));
    /// assert_eq!(doc.param_structure, Some(ParamStructure::Either));
    /// ```
    pub fn params_of<P: JsonSchema + DeserializeOwned>(mut self) -> Self {
        let (schema, definitions) = generate::<P>(Contract::Deserialize);
        self.definitions.extend(definitions);
        let (params, structure) = split_params(schema, struct_fields::<P>());
        self.params = params;
        self.param_structure = Some(structure);
        self
    }

    /// Describes the result as `R` serializes, under `name`.
    pub fn result_of<R: JsonSchema>(mut self, name: impl Into<String>) -> Self {
        let (schema, definitions) = generate::<R>(Contract::Serialize);
        self.definitions.extend(definitions);
        self.result = Some(ContentDescriptor::new(name, schema));
        self
    }
}

/// Splits a params schema into named params.
fn split_params(
    schema: Value,
    fields: Option<&'static [&'static str]>,
) -> (Vec<ContentDescriptor>, ParamStructure) {
    let kind = schema.get("type").and_then(Value::as_str);
    if kind == Some("null") {
        return (Vec::new(), ParamStructure::Either);
    }
    if let (Some("object"), Some(Value::Object(properties))) = (kind, schema.get("properties")) {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // serde's field order is the positional order; the schema's map
        // may be sorted.
        let mut names: Vec<&str> = fields
            .map(|f| {
                f.iter()
                    .copied()
                    .filter(|f| properties.contains_key(*f))
                    .collect()
            })
            .unwrap_or_default();
        for name in properties.keys() {
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let params = names
            .into_iter()
            .map(|name| {
                let mut schema = properties[name].clone();
                let description = match &mut schema {
                    Value::Object(map) => map
                        .remove("description")
                        .and_then(|d| d.as_str().map(str::to_owned)),
                    _ => None,
                };
                ContentDescriptor {
                    description,
                    required: required.contains(&name),
                    ..ContentDescriptor::new(name, schema)
                }
            })
            .collect();
        return (params, ParamStructure::Either);
    }
    if let (Some("array"), Some(Value::Array(items))) = (kind, schema.get("items")) {
        let fixed = schema.get("minItems") == schema.get("maxItems");
        if fixed {
            let params = items
                .iter()
                .enumerate()
                .map(|(i, item)| ContentDescriptor::new(format!("param{}", i + 1), item.clone()).required())
                .collect();
            return (params, ParamStructure::ByPosition);
        }
    }
    let structure = if kind == Some("array") {
        ParamStructure::ByPosition
    } else {
        ParamStructure::ByName
    };
    (
        vec![ContentDescriptor::new("params", schema).required()],
        structure,
    )
}

/// The field names a struct's `Deserialize` asks for, in order: what
/// `deserialize_struct` is told. `None` for anything but a struct.
fn struct_fields<P: DeserializeOwned>() -> Option<&'static [&'static str]> {
    use serde::de::{self, Visitor};
    use std::cell::Cell;

    struct Probe<'a>(&'a Cell<Option<&'static [&'static str]>>);

    impl<'de> de::Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.set(Some(fields));
            Err(de::Error::custom("probed"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    let fields = Cell::new(None);
    let _ = P::deserialize(Probe(&fields));
    fields.get()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Later {
        zeta: u32,
        alpha: Option<String>,
        #[serde(default)]
        middle: bool,
    }

    #[test]
    fn struct_params_keep_field_order_and_requiredness() {
        let doc = MethodDoc::new().params_of::<Later>();
        let summary: Vec<(&str, bool)> = doc.params.iter().map(|p| (p.name.as_str(), p.required)).collect();
        assert_eq!(summary, [("zeta", true), ("alpha", false), ("middle", false)]);
        // `uint32` is not a JSON Schema format.
        assert_eq!(doc.params[0].schema, json!({"type": "integer", "minimum": 0}));
        assert_eq!(doc.param_structure, Some(ParamStructure::Either));
    }

    #[test]
    fn tuples_units_and_others() {
        let doc = MethodDoc::new().params_of::<(i64, String)>();
        assert_eq!(doc.params.len(), 2);
        assert_eq!(doc.params[1].name, "param2");
        assert_eq!(doc.params[1].schema, json!({"type": "string"}));
        assert_eq!(doc.param_structure, Some(ParamStructure::ByPosition));

        let doc = MethodDoc::new().params_of::<()>();
        assert!(doc.params.is_empty());

        let doc = MethodDoc::new().params_of::<Vec<i64>>();
        assert_eq!(doc.params[0].name, "params");
        assert_eq!(doc.param_structure, Some(ParamStructure::ByPosition));
    }

    #[derive(serde::Serialize, Deserialize, JsonSchema)]
    struct Tree {
        children: Vec<Tree>,
    }

    #[test]
    fn recursive_types_refer_to_components() {
        let doc = MethodDoc::new().result_of::<Tree>("tree");
        let schema = &doc.result.as_ref().unwrap().schema;
        assert!(
            schema
                .to_string()
                .contains(r##""$ref":"#/components/schemas/Tree""##),
            "{schema}"
        );
        assert!(doc.definitions.contains_key("Tree"));
    }
}
