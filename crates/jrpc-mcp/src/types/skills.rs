//! The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640):
//! Agent Skills served as resources (`skill://<skill-path>/<file-path>`),
//! enumerated by `skills/list`, described one by one by `skills/get`, and
//! browsed by `resources/directory/read`.

use serde::{Deserialize, Serialize};

use super::{CacheScope, JsonObject, Meta, Resource, ResultType};

/// The extension's identifier, under `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The MIME type of a directory resource (`resources/directory/read`).
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// What a server declares under `extensions["io.modelcontextprotocol/skills"]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsCapability {
    /// The server answers `resources/directory/read`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub directory_read: bool,
}

/// One skill as `skills/list` and `skills/get` describe it: where its
/// `SKILL.md` is, its frontmatter verbatim, and the manifest of its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillEntry {
    /// The resource URI of the skill's `SKILL.md`.
    pub uri: String,
    /// The `SKILL.md` YAML frontmatter as a JSON object (`name` and
    /// `description` at least).
    pub frontmatter: JsonObject,
    /// Every file of the skill with its digest and size, or `"dynamic"` for
    /// a skill generated on demand.
    pub resources: SkillResources,
}

impl SkillEntry {
    /// The skill's name (the frontmatter's `name`).
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
    }

    /// The skill's description (the frontmatter's `description`).
    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(|d| d.as_str())
            .unwrap_or_default()
    }

    /// The skill's root directory: its URI without `/SKILL.md`.
    pub fn root(&self) -> &str {
        self.uri.strip_suffix("/SKILL.md").unwrap_or(&self.uri)
    }

    /// The manifest's entry for `uri`, if the skill lists it.
    pub fn file(&self, uri: &str) -> Option<&SkillFileDigest> {
        match &self.resources {
            SkillResources::Listed(files) => files.iter().find(|f| f.uri == uri),
            SkillResources::Dynamic => None,
        }
    }
}

/// A skill's files: listed with digests, or generated on demand.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillResources {
    /// Every file, each once, `SKILL.md` included.
    Listed(Vec<SkillFileDigest>),
    /// `"dynamic"`: no manifest (nothing to verify against).
    Dynamic,
}

impl Serialize for SkillResources {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            SkillResources::Listed(files) => files.serialize(serializer),
            SkillResources::Dynamic => serializer.serialize_str("dynamic"),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Listed(Vec<SkillFileDigest>),
            Word(String),
        }
        match Wire::deserialize(deserializer)? {
            Wire::Listed(files) => Ok(SkillResources::Listed(files)),
            Wire::Word(word) if word == "dynamic" => Ok(SkillResources::Dynamic),
            Wire::Word(word) => Err(serde::de::Error::custom(format!(
                "resources is {word:?}: expected a list of files or \"dynamic\""
            ))),
        }
    }
}

impl SkillResources {
    /// The listed files (none for a dynamic skill).
    pub fn files(&self) -> &[SkillFileDigest] {
        match self {
            SkillResources::Listed(files) => files,
            SkillResources::Dynamic => &[],
        }
    }
}

/// One file of a skill's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFileDigest {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits of its raw bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// The result of `skills/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// One page of skills.
    pub skills: Vec<SkillEntry>,
    /// Where the next page starts, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `resultType` (modern results).
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `ttlMs` (modern results).
    #[serde(rename = "ttlMs", default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `cacheScope` (modern results).
    #[serde(rename = "cacheScope", default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSkillParams {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
}

/// The result of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSkillResult {
    /// The skill's entry, as `skills/list` would give it.
    pub skill: SkillEntry,
    /// `resultType` (modern results).
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `ttlMs` (modern results).
    #[serde(rename = "ttlMs", default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `cacheScope` (modern results).
    #[serde(rename = "cacheScope", default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The params of `resources/directory/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadDirectoryParams {
    /// The directory's URI (no trailing slash).
    pub uri: String,
    /// The `nextCursor` of the previous page; none for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The result of `resources/directory/read`: the directory's direct
/// children, subdirectories with the MIME type [`DIRECTORY_MIME_TYPE`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryResult {
    /// One page of children.
    pub resources: Vec<Resource>,
    /// Where the next page starts, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// `resultType` (modern results).
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// `ttlMs` (modern results).
    #[serde(rename = "ttlMs", default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// `cacheScope` (modern results).
    #[serde(rename = "cacheScope", default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// Metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The digest the extension writes: `sha256:` and the lowercase hex of the
/// SHA-256 of `bytes`.
pub fn skill_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// Reads the YAML frontmatter at the start of a `SKILL.md` (between `---`
/// lines) as a JSON object; `None` when there is none or it is not a
/// mapping of readable YAML.
pub fn parse_frontmatter(text: &str) -> Option<JsonObject> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("---")?;
    let rest = rest.strip_prefix("\r\n").or_else(|| rest.strip_prefix('\n'))?;
    // The block ends at a line that is `---` (trailing blanks allowed).
    let mut offset = 0;
    let mut end = None;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']).trim_end_matches([' ', '\t']) == "---" {
            end = Some(offset);
            break;
        }
        offset += line.len();
    }
    let yaml = &rest[..end?];
    let docs = yaml_rust2::YamlLoader::load_from_str(yaml).ok()?;
    match docs.into_iter().next().map(yaml_to_json)? {
        serde_json::Value::Object(map) => Some(map),
        _ => None,
    }
}

fn yaml_to_json(yaml: yaml_rust2::Yaml) -> serde_json::Value {
    use serde_json::Value;
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(text), Value::Number),
        Yaml::Integer(n) => Value::from(n),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(items) => Value::Array(items.into_iter().map(yaml_to_json).collect()),
        Yaml::Hash(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s,
                        Yaml::Integer(n) => n.to_string(),
                        Yaml::Real(r) => r,
                        Yaml::Boolean(b) => b.to_string(),
                        _ => String::new(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// Whether `name` follows the Agent Skills naming rules: 1 to 64
/// characters, lowercase letters, digits and hyphens, no hyphen at either
/// end nor two in a row.
pub fn is_valid_skill_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frontmatter_is_read_as_json() {
        let text = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nlicense: Apache-2.0\nmetadata:\n  version: \"2.1.0\"\n  tags: [pdf, forms]\n  weight: 2.5\n  count: 3\n---\n\nBody.\n";
        let front = parse_frontmatter(text).unwrap();
        assert_eq!(
            serde_json::Value::Object(front),
            json!({"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents",
                   "license": "Apache-2.0",
                   "metadata": {"version": "2.1.0", "tags": ["pdf", "forms"], "weight": 2.5, "count": 3}})
        );
        // CRLF, a byte-order mark, trailing blanks after the closing line.
        let crlf = "\u{feff}---\r\nname: a\r\ndescription: b\r\n--- \r\nBody";
        assert_eq!(parse_frontmatter(crlf).unwrap()["name"], "a");
        // Nothing to read.
        for bad in [
            "no frontmatter",
            "---\nname: a\n",
            "---\n- a list\n---\n",
            "---\nname: [\n---\n",
        ] {
            assert!(parse_frontmatter(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn digests_and_names() {
        assert_eq!(
            skill_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        for good in ["a", "pdf-processing", "x1-2", &"a".repeat(64)] {
            assert!(is_valid_skill_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a.b", &"a".repeat(65)] {
            assert!(!is_valid_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn entries_read_both_forms_of_resources() {
        let listed: SkillEntry = serde_json::from_value(json!({
            "uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
            "resources": [{"uri": "skill://a/SKILL.md", "digest": "sha256:00", "size": 3}]}))
        .unwrap();
        assert_eq!(listed.root(), "skill://a");
        assert_eq!(listed.file("skill://a/SKILL.md").unwrap().size, 3);
        let dynamic: SkillEntry = serde_json::from_value(json!({
            "uri": "skill://b/SKILL.md", "frontmatter": {"name": "b", "description": "d"},
            "resources": "dynamic"}))
        .unwrap();
        assert_eq!(dynamic.resources, SkillResources::Dynamic);
        assert_eq!(serde_json::to_value(&dynamic).unwrap()["resources"], "dynamic");
    }
}
