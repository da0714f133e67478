//! The Skills extension on the client (`io.modelcontextprotocol/skills`,
//! SEP-2640): listing skills, describing one, and fetching its files —
//! each verified against the skill's manifest (size and SHA-256 digest),
//! the `SKILL.md` frontmatter against the entry's. Nothing is fetched
//! before it is asked for.

use base64::Engine as _;
use bytes::Bytes;

use super::error::SkillVerifyError;
use super::{McpClient, McpClientError};
use crate::types::{
    parse_frontmatter, skill_digest, GetSkillResult, ListSkillsResult, ReadDirectoryResult, Resource,
    ResourceContents, SkillEntry, SkillResources, SKILLS_EXTENSION,
};

/// A skill loaded: its entry and its `SKILL.md`, verified.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    /// The entry it was loaded from.
    pub entry: SkillEntry,
    /// The `SKILL.md` text.
    pub skill_md: String,
}

/// One file of a skill, verified.
#[derive(Debug, Clone)]
pub struct SkillFile {
    /// Its path within the skill (`references/FORMS.md`).
    pub path: String,
    /// Its bytes.
    pub bytes: Bytes,
}

impl McpClient {
    /// Whether the server declares the Skills extension.
    pub fn serves_skills(&self) -> bool {
        self.server_capabilities()
            .extensions
            .as_ref()
            .is_some_and(|e| e.contains_key(SKILLS_EXTENSION))
    }

    /// Every skill the server lists (`skills/list`, following cursors). A
    /// server may list none of its skills, or some: a skill's URI is enough
    /// to [`get`](Self::get_skill) it.
    pub async fn list_skills(&self) -> Result<Vec<SkillEntry>, McpClientError> {
        self.list_all("skills/list", |page: ListSkillsResult| {
            (page.skills, page.next_cursor)
        })
        .await
    }

    /// The entry of the skill whose `SKILL.md` is at `uri` (`skills/get`).
    pub async fn get_skill(&self, uri: &str) -> Result<SkillEntry, McpClientError> {
        let result: GetSkillResult = self
            .request("skills/get", serde_json::json!({ "uri": uri }))
            .await?;
        Ok(result.skill)
    }

    /// The children of the directory resource at `uri`
    /// (`resources/directory/read`, following cursors), for servers that
    /// declare `directoryRead`.
    pub async fn read_directory(&self, uri: &str) -> Result<Vec<Resource>, McpClientError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let params = match &cursor {
                Some(cursor) => serde_json::json!({ "uri": uri, "cursor": cursor }),
                None => serde_json::json!({ "uri": uri }),
            };
            let page: ReadDirectoryResult = self.request("resources/directory/read", params).await?;
            all.extend(page.resources);
            match page.next_cursor {
                Some(next) if Some(&next) != cursor.as_ref() => cursor = Some(next),
                _ => break,
            }
        }
        Ok(all)
    }

    /// Reads the skill file at `uri` and checks it against `entry`'s
    /// manifest: a file it does not list, a length or a digest that
    /// differs, is [`SkillVerifyError`] and its content is not given out.
    /// (A skill served `"dynamic"` has no manifest: its files are read
    /// unverified.)
    pub async fn read_skill_file(&self, entry: &SkillEntry, uri: &str) -> Result<Bytes, McpClientError> {
        let expected = match &entry.resources {
            SkillResources::Listed(_) => Some(
                entry
                    .file(uri)
                    .ok_or_else(|| SkillVerifyError::Unlisted { uri: uri.to_owned() })?,
            ),
            SkillResources::Dynamic => None,
        };
        let read = self.read_resource(uri).await?;
        let bytes = match read.contents.into_iter().next() {
            Some(ResourceContents::Text(text)) => Bytes::from(text.text),
            Some(ResourceContents::Blob(blob)) => base64::engine::general_purpose::STANDARD
                .decode(blob.blob.as_bytes())
                .map(Bytes::from)
                .map_err(|_| SkillVerifyError::Empty { uri: uri.to_owned() })?,
            None => return Err(SkillVerifyError::Empty { uri: uri.to_owned() }.into()),
        };
        if let Some(expected) = expected {
            // The length first: cheaper, and a mismatch of its own.
            if bytes.len() as u64 != expected.size {
                return Err(SkillVerifyError::Size {
                    uri: uri.to_owned(),
                    expected: expected.size,
                    got: bytes.len() as u64,
                }
                .into());
            }
            let digest = skill_digest(&bytes);
            if digest != expected.digest {
                return Err(SkillVerifyError::Digest {
                    uri: uri.to_owned(),
                    expected: expected.digest.clone(),
                    got: digest,
                }
                .into());
            }
        }
        Ok(bytes)
    }

    /// Loads the skill `entry` describes: fetches its `SKILL.md` (only
    /// now), verifies it against the manifest, and compares its
    /// frontmatter with the entry's field by field. Its other files are
    /// fetched when read ([`read_skill_file`](Self::read_skill_file)).
    pub async fn load_skill(&self, entry: &SkillEntry) -> Result<LoadedSkill, McpClientError> {
        let bytes = self.read_skill_file(entry, &entry.uri).await?;
        let skill_md = String::from_utf8_lossy(&bytes).into_owned();
        let frontmatter = parse_frontmatter(&skill_md).ok_or_else(|| SkillVerifyError::NoFrontmatter {
            uri: entry.uri.clone(),
        })?;
        let differs = frontmatter
            .keys()
            .chain(entry.frontmatter.keys())
            .find(|field| frontmatter.get(*field) != entry.frontmatter.get(*field));
        if let Some(field) = differs {
            return Err(SkillVerifyError::Frontmatter {
                uri: entry.uri.clone(),
                field: field.clone(),
            }
            .into());
        }
        Ok(LoadedSkill {
            entry: entry.clone(),
            skill_md,
        })
    }

    /// Every file of the skill `entry` describes, verified: its `SKILL.md`
    /// first (loaded as [`load_skill`](Self::load_skill) does; nothing else
    /// is fetched when it fails), then the rest of its manifest in order.
    pub async fn fetch_skill(&self, entry: &SkillEntry) -> Result<Vec<SkillFile>, McpClientError> {
        let loaded = self.load_skill(entry).await?;
        let root = format!("{}/", entry.root());
        let mut files = vec![SkillFile {
            path: "SKILL.md".into(),
            bytes: Bytes::from(loaded.skill_md),
        }];
        for file in entry.resources.files() {
            if file.uri == entry.uri {
                continue;
            }
            let path = file
                .uri
                .strip_prefix(&root)
                .ok_or_else(|| SkillVerifyError::Unlisted {
                    uri: file.uri.clone(),
                })?;
            let bytes = self.read_skill_file(entry, &file.uri).await?;
            files.push(SkillFile {
                path: path.to_owned(),
                bytes,
            });
        }
        Ok(files)
    }
}
