//! One skill: its `SKILL.md` and supporting files, checked against the
//! Agent Skills rules and the extension's bounds, with the entry
//! (`skills/list`, `skills/get`) computed once.

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::types::{
    is_valid_skill_name, parse_frontmatter, skill_digest, JsonObject, SkillEntry, SkillFileDigest,
    SkillResources,
};

/// The most files a skill may have, `SKILL.md` included.
pub const MAX_SKILL_FILES: usize = 512;

/// The most bytes a skill's files may hold together: 16 MiB.
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;

/// Why a skill cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// No `SKILL.md` at the skill's root.
    #[error("{0}: no SKILL.md")]
    NoSkillMd(String),
    /// `SKILL.md` does not begin with YAML frontmatter (a mapping between
    /// `---` lines).
    #[error("{0}: SKILL.md does not begin with YAML frontmatter between --- lines")]
    NoFrontmatter(String),
    /// The frontmatter lacks `name` or `description` (or one is not text).
    #[error("{skill}: the frontmatter has no {field} (text)")]
    MissingField {
        /// The skill.
        skill: String,
        /// The field.
        field: &'static str,
    },
    /// The name breaks the Agent Skills naming rules.
    #[error("{0:?}: not a skill name (1 to 64 lowercase letters, digits and single hyphens, no hyphen at either end)")]
    BadName(String),
    /// The name is not the last segment of the skill's path (its folder).
    #[error("{path}: the frontmatter names the skill {name:?}, not its folder's name")]
    NameMismatch {
        /// The skill's path.
        path: String,
        /// The frontmatter's name.
        name: String,
    },
    /// More files than a skill may have.
    #[error("{skill}: {count} files, more than a skill may have ({MAX_SKILL_FILES})")]
    TooManyFiles {
        /// The skill.
        skill: String,
        /// How many it has.
        count: usize,
    },
    /// More bytes than a skill may hold.
    #[error("{skill}: {bytes} bytes, more than a skill may hold (16 MiB)")]
    TooLarge {
        /// The skill.
        skill: String,
        /// How many it holds.
        bytes: u64,
    },
    /// A file path that is not a plain relative path within the skill.
    #[error("{0:?}: not a relative path within the skill")]
    BadPath(String),
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One file of a skill.
#[derive(Debug, Clone)]
pub(crate) struct SkillFile {
    /// Relative to the skill's root, `/`-separated.
    pub(crate) path: String,
    pub(crate) bytes: Bytes,
}

/// A skill to serve: a `SKILL.md` whose frontmatter names it, and the
/// files beside it. Made in code ([`Skill::new`], [`Skill::file`]) or read
/// from a folder ([`Skill::from_dir`]); served with
/// [`McpServerBuilder::skill`](crate::server::McpServerBuilder::skill).
///
/// ```
/// use jrpc_mcp::server::Skill;
///
/// let skill = Skill::new("---\nname: git-workflow\ndescription: Our Git conventions\n---\nBranch from main.\n")?
///     .file("references/COMMITS.md", "Write commit messages in the imperative.\n")?;
/// assert_eq!(skill.uri(), "skill://git-workflow/SKILL.md");
/// assert_eq!(skill.entry().resources.files().len(), 2);
/// # Ok::<(), jrpc_mcp::server::SkillError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Skill {
    /// `<skill-path>`: a prefix of folders, then the name.
    path: String,
    files: Vec<SkillFile>,
    entry: SkillEntry,
}

impl Skill {
    /// A skill of one `SKILL.md`, at `skill://NAME/` (its frontmatter's
    /// name).
    pub fn new(skill_md: impl Into<String>) -> Result<Skill, SkillError> {
        let text: String = skill_md.into();
        let frontmatter =
            parse_frontmatter(&text).ok_or_else(|| SkillError::NoFrontmatter("SKILL.md".into()))?;
        let name = required(&frontmatter, "name", "SKILL.md")?.to_owned();
        required(&frontmatter, "description", &name)?;
        if !is_valid_skill_name(&name) {
            return Err(SkillError::BadName(name));
        }
        Skill::assemble(
            name,
            frontmatter,
            vec![SkillFile {
                path: "SKILL.md".into(),
                bytes: Bytes::from(text),
            }],
        )
    }

    /// Adds (or replaces) the file at `path`, relative to the skill's root
    /// (`references/FORMS.md`).
    pub fn file(mut self, path: &str, bytes: impl Into<Bytes>) -> Result<Skill, SkillError> {
        check_path(path)?;
        if path == "SKILL.md" {
            return Err(SkillError::BadPath(format!(
                "{path} (use Skill::new for the SKILL.md)"
            )));
        }
        let bytes = bytes.into();
        match self.files.iter_mut().find(|f| f.path == path) {
            Some(file) => file.bytes = bytes,
            None => self.files.push(SkillFile {
                path: path.to_owned(),
                bytes,
            }),
        }
        let Skill { path, files, entry } = self;
        Skill::assemble(path, entry.frontmatter, files)
    }

    /// Puts the skill under a prefix of folders: `acme/billing` makes
    /// `skill://acme/billing/NAME/SKILL.md`.
    pub fn under(self, prefix: &str) -> Result<Skill, SkillError> {
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            return Ok(self);
        }
        check_path(prefix)?;
        let Skill { path, files, entry } = self;
        Skill::assemble(format!("{prefix}/{path}"), entry.frontmatter, files)
    }

    /// Reads the skill in folder `dir`: its `SKILL.md` and every file
    /// below it (hidden ones, starting with `.`, left out). The folder's
    /// name must be the skill's name.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Skill, SkillError> {
        let dir = dir.as_ref();
        let folder = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Skill::read_dir(dir, folder)
    }

    /// The skill in `dir`, at `<skill-path>` `path`.
    pub(crate) fn read_dir(dir: &Path, path: String) -> Result<Skill, SkillError> {
        let skill_md = dir.join("SKILL.md");
        let text = match std::fs::read(&skill_md) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(SkillError::NoSkillMd(path)),
            Err(source) => {
                return Err(SkillError::Io {
                    path: skill_md,
                    source,
                })
            }
        };
        let frontmatter = parse_frontmatter(&text).ok_or_else(|| SkillError::NoFrontmatter(path.clone()))?;
        let name = required(&frontmatter, "name", &path)?.to_owned();
        required(&frontmatter, "description", &path)?;
        if !is_valid_skill_name(&name) {
            return Err(SkillError::BadName(name));
        }
        if path.rsplit('/').next() != Some(name.as_str()) {
            return Err(SkillError::NameMismatch { path, name });
        }
        let mut files = Vec::new();
        let mut total = 0u64;
        collect(dir, "", &mut files, &mut total, &path)?;
        Skill::assemble(path, frontmatter, files)
    }

    /// Checks the bounds and computes the entry.
    fn assemble(
        path: String,
        frontmatter: JsonObject,
        mut files: Vec<SkillFile>,
    ) -> Result<Skill, SkillError> {
        if files.len() > MAX_SKILL_FILES {
            return Err(SkillError::TooManyFiles {
                skill: path,
                count: files.len(),
            });
        }
        let bytes: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
        if bytes > MAX_SKILL_BYTES {
            return Err(SkillError::TooLarge { skill: path, bytes });
        }
        // SKILL.md first, then the rest in path order: a stable manifest.
        files.sort_by(|a, b| (a.path != "SKILL.md", &a.path).cmp(&(b.path != "SKILL.md", &b.path)));
        let root = format!("skill://{path}");
        let resources = files
            .iter()
            .map(|f| SkillFileDigest {
                uri: format!("{root}/{}", f.path),
                digest: skill_digest(&f.bytes),
                size: f.bytes.len() as u64,
            })
            .collect();
        let entry = SkillEntry {
            uri: format!("{root}/SKILL.md"),
            frontmatter,
            resources: SkillResources::Listed(resources),
        };
        Ok(Skill { path, files, entry })
    }

    /// Its name (the frontmatter's).
    pub fn name(&self) -> &str {
        self.entry.name()
    }

    /// Its `<skill-path>`: the prefix, if any, and the name.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The URI of its `SKILL.md`.
    pub fn uri(&self) -> &str {
        &self.entry.uri
    }

    /// Its entry, as `skills/list` and `skills/get` give it.
    pub fn entry(&self) -> &SkillEntry {
        &self.entry
    }

    /// Its root directory's URI (`skill://<skill-path>`).
    pub(crate) fn root(&self) -> &str {
        self.entry.root()
    }

    pub(crate) fn files(&self) -> &[SkillFile] {
        &self.files
    }
}

/// The frontmatter's text field `field`.
fn required<'f>(
    frontmatter: &'f JsonObject,
    field: &'static str,
    skill: &str,
) -> Result<&'f str, SkillError> {
    frontmatter
        .get(field)
        .and_then(|v| v.as_str())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| SkillError::MissingField {
            skill: skill.to_owned(),
            field,
        })
}

/// A relative path of plain segments: no `.`, `..`, empty segment or
/// backslash, not absolute.
fn check_path(path: &str) -> Result<(), SkillError> {
    let plain = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
    if plain {
        Ok(())
    } else {
        Err(SkillError::BadPath(path.to_owned()))
    }
}

/// Every file below `dir` (at `prefix` within the skill), bounded as it
/// goes so that a huge folder is refused before it is read whole.
fn collect(
    dir: &Path,
    prefix: &str,
    files: &mut Vec<SkillFile>,
    total: &mut u64,
    skill: &str,
) -> Result<(), SkillError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| SkillError::Io { path, source }
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<_, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        // Symbolic links are followed: a skill may be assembled from links.
        let meta = std::fs::metadata(&path).map_err(io(&path))?;
        if meta.is_dir() {
            collect(&path, &relative, files, total, skill)?;
            continue;
        }
        if !meta.is_file() {
            continue;
        }
        if files.len() >= MAX_SKILL_FILES {
            return Err(SkillError::TooManyFiles {
                skill: skill.to_owned(),
                count: files.len() + 1,
            });
        }
        *total += meta.len();
        if *total > MAX_SKILL_BYTES {
            return Err(SkillError::TooLarge {
                skill: skill.to_owned(),
                bytes: *total,
            });
        }
        let bytes = std::fs::read(&path).map_err(io(&path))?;
        files.push(SkillFile {
            path: relative,
            bytes: Bytes::from(bytes),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str =
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\nBody.\n";

    #[test]
    fn a_skill_made_in_code_has_its_manifest() {
        let skill = Skill::new(MD)
            .unwrap()
            .file("references/FORMS.md", "Forms.\n")
            .unwrap()
            .under("docs")
            .unwrap();
        assert_eq!(skill.uri(), "skill://docs/pdf-processing/SKILL.md");
        let files = skill.entry().resources.files();
        assert_eq!(files[0].uri, "skill://docs/pdf-processing/SKILL.md");
        assert_eq!(files[0].size, MD.len() as u64);
        assert_eq!(files[0].digest, skill_digest(MD.as_bytes()));
        assert_eq!(files[1].uri, "skill://docs/pdf-processing/references/FORMS.md");
    }

    #[test]
    fn bad_skills_are_refused_saying_why() {
        let cases: Vec<(Result<Skill, SkillError>, &str)> = vec![
            (Skill::new("no frontmatter"), "frontmatter"),
            (Skill::new("---\ndescription: d\n---\n"), "no name"),
            (Skill::new("---\nname: a\n---\n"), "no description"),
            (
                Skill::new("---\nname: Bad_Name\ndescription: d\n---\n"),
                "not a skill name",
            ),
            (
                Skill::new(MD).unwrap().file("../escape", "x"),
                "not a relative path",
            ),
            (Skill::new(MD).unwrap().file("/abs", "x"), "not a relative path"),
            (Skill::new(MD).unwrap().file("a//b", "x"), "not a relative path"),
            (
                Skill::new(MD)
                    .unwrap()
                    .file("big", vec![0u8; MAX_SKILL_BYTES as usize]),
                "more than a skill may hold",
            ),
        ];
        for (result, says) in cases {
            let e = result.unwrap_err().to_string();
            assert!(e.contains(says), "{e:?} should say {says:?}");
        }
        let mut many = Skill::new(MD).unwrap();
        for i in 0..MAX_SKILL_FILES - 1 {
            many = many.file(&format!("f{i}"), "x").unwrap();
        }
        let e = many.file("one-too-many", "x").unwrap_err();
        assert!(matches!(e, SkillError::TooManyFiles { count: 513, .. }), "{e}");
    }

    #[test]
    fn a_folder_is_read_whole_and_must_be_named_as_its_skill() {
        let root = std::env::temp_dir().join(format!("jrpc-skill-{}", std::process::id()));
        let dir = root.join("pdf-processing");
        std::fs::create_dir_all(dir.join("references")).unwrap();
        std::fs::write(dir.join("SKILL.md"), MD).unwrap();
        std::fs::write(dir.join("references/FORMS.md"), "Forms.\n").unwrap();
        std::fs::write(dir.join(".hidden"), "not served").unwrap();
        let skill = Skill::from_dir(&dir).unwrap();
        let uris: Vec<&str> = skill
            .entry()
            .resources
            .files()
            .iter()
            .map(|f| f.uri.as_str())
            .collect();
        assert_eq!(
            uris,
            [
                "skill://pdf-processing/SKILL.md",
                "skill://pdf-processing/references/FORMS.md"
            ]
        );
        let wrong = root.join("other-name");
        std::fs::create_dir_all(&wrong).unwrap();
        std::fs::write(wrong.join("SKILL.md"), MD).unwrap();
        assert!(matches!(
            Skill::from_dir(&wrong),
            Err(SkillError::NameMismatch { .. })
        ));
        assert!(matches!(
            Skill::from_dir(root.join("missing")),
            Err(SkillError::NoSkillMd(_))
        ));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
