//! The Skills extension on the server (`io.modelcontextprotocol/skills`,
//! SEP-2640): skills made in code or read from a folder, each file a
//! resource at `skill://<skill-path>/<file-path>`; `skills/list` (paged),
//! `skills/get`, and `resources/directory/read` over the skills' folders.

pub(crate) mod set;
mod skill;

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use jrpc::message::codes::INVALID_PARAMS;
use jrpc::{Error, RequestContext};

use set::SkillSet;
pub use skill::{Skill, SkillError, MAX_SKILL_BYTES, MAX_SKILL_FILES};

use super::catalog::ReadHandler;
use super::era::Era;
use super::shape::Stamped;
use super::McpServer;
use crate::types::{
    GetSkillParams, GetSkillResult, ListSkillsResult, PaginatedParams, ReadDirectoryParams,
    ReadDirectoryResult, Resource, ResourceContents, DIRECTORY_MIME_TYPE,
};

/// The MIME type of a skill's file, by its extension (text files that say
/// nothing else are `text/plain`).
fn mime_type(path: &str, bytes: &[u8]) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match extension.as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("txt") => "text/plain",
        Some("py") => "text/x-python",
        Some("sh") => "text/x-shellscript",
        Some("js" | "mjs") => "text/javascript",
        Some("ts") => "text/x-typescript",
        Some("json") => "application/json",
        Some("yaml" | "yml") => "application/yaml",
        Some("toml") => "application/toml",
        Some("html" | "htm") => "text/html",
        Some("css") => "text/css",
        Some("csv") => "text/csv",
        Some("xml") => "application/xml",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("svg") => "image/svg+xml",
        _ if std::str::from_utf8(bytes).is_ok() => "text/plain",
        _ => "application/octet-stream",
    }
}

fn unknown_skill(uri: &str) -> Error {
    Error::new(INVALID_PARAMS, "Unknown skill").with_data(&serde_json::json!({ "uri": uri }))
}

impl McpServer {
    fn skill_set(&self) -> Result<&Arc<SkillSet>, Error> {
        self.inner.skills.as_ref().ok_or_else(Error::method_not_found)
    }

    /// `skills/list`: one page of the skills' entries.
    pub(crate) fn list_skills(
        &self,
        p: PaginatedParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ListSkillsResult>, Error> {
        let era = Era::of(ctx)?;
        let snapshot = self.skill_set()?.snapshot();
        let (skills, next_cursor) = self.listed(&p, &snapshot.skills, |skill| skill.entry().clone())?;
        let result = ListSkillsResult {
            skills,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    /// `skills/get`: the entry of the skill whose `SKILL.md` is at the URI.
    pub(crate) fn get_skill(
        &self,
        p: GetSkillParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<GetSkillResult>, Error> {
        let era = Era::of(ctx)?;
        let snapshot = self.skill_set()?.snapshot();
        let skill = snapshot.skill(&p.uri).ok_or_else(|| unknown_skill(&p.uri))?;
        let result = GetSkillResult {
            skill: skill.entry().clone(),
            result_type: None,
            ttl_ms: None,
            cache_scope: None,
            meta: None,
        };
        Ok(self.shaped(&era, result, self.inner.read_cache))
    }

    /// `resources/directory/read`: one page of a directory's children.
    pub(crate) fn read_directory(
        &self,
        p: ReadDirectoryParams,
        ctx: &RequestContext,
    ) -> Result<Stamped<ReadDirectoryResult>, Error> {
        let era = Era::of(ctx)?;
        let snapshot = self.skill_set()?.snapshot();
        let Some(children) = snapshot.directory(&p.uri) else {
            let why = if snapshot.file(&p.uri).is_some() {
                "not a directory"
            } else {
                "no such directory"
            };
            return Err(Error::new(INVALID_PARAMS, "Not a directory")
                .with_data(&serde_json::json!({ "uri": p.uri, "reason": why })));
        };
        let children: Vec<(&String, &bool)> = children.iter().collect();
        let paging = PaginatedParams {
            cursor: p.cursor,
            meta: None,
        };
        let (resources, next_cursor) = self.listed(&paging, &children, |(uri, is_dir)| {
            let name = uri.rsplit('/').next().unwrap_or(uri).to_owned();
            if **is_dir {
                return Resource::new(uri.as_str(), name).mime_type(DIRECTORY_MIME_TYPE);
            }
            let Some((skill, index)) = snapshot.file(uri) else {
                return Resource::new(uri.as_str(), name);
            };
            let file = &skill.files()[index];
            let mut resource =
                Resource::new(uri.as_str(), name).mime_type(mime_type(&file.path, &file.bytes));
            resource.size = Some(file.bytes.len() as u64);
            resource
        })?;
        let result = ReadDirectoryResult {
            resources,
            next_cursor,
            ..Default::default()
        };
        Ok(self.shaped(&era, result, self.inner.list_cache))
    }

    /// The `SKILL.md` of every skill, as `resources/list` shows them: named
    /// and described by their frontmatter.
    pub(crate) fn skill_resources(&self) -> Vec<Resource> {
        let Some(set) = &self.inner.skills else {
            return Vec::new();
        };
        set.snapshot()
            .skills
            .iter()
            .map(|skill| {
                let entry = skill.entry();
                let mut resource = Resource::new(entry.uri.as_str(), entry.name())
                    .description(entry.description())
                    .mime_type("text/markdown");
                resource.size = entry.file(&entry.uri).map(|f| f.size);
                resource
            })
            .collect()
    }

    /// What reads the skill file at `uri`, when it is one.
    pub(crate) fn skill_file(&self, uri: &str) -> Option<ReadHandler> {
        let snapshot = self.inner.skills.as_ref()?.snapshot();
        let (skill, index) = snapshot.file(uri)?;
        let file = skill.files()[index].clone();
        let mime = mime_type(&file.path, &file.bytes);
        Some(Arc::new(move |uri: String, _: BTreeMap<String, String>, _| {
            let contents = match std::str::from_utf8(&file.bytes) {
                Ok(text) => ResourceContents::text(uri, Some(mime), text),
                Err(_) => ResourceContents::blob(
                    uri,
                    Some(mime),
                    base64::engine::general_purpose::STANDARD.encode(&file.bytes),
                ),
            };
            Box::pin(std::future::ready(Ok(contents.into())))
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_get_mime_types_by_extension() {
        for (path, bytes, mime) in [
            ("SKILL.md", &b"x"[..], "text/markdown"),
            ("scripts/extract.py", b"x", "text/x-python"),
            ("data.JSON", b"{}", "application/json"),
            ("LICENSE", b"MIT", "text/plain"),
            ("blob", &[0xff, 0xfe][..], "application/octet-stream"),
        ] {
            assert_eq!(mime_type(path, bytes), mime, "{path}");
        }
    }
}
