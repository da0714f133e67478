//! The skills a server serves: those made in code and those read from a
//! folder (read again when it changes on disk), as one snapshot that
//! requests read without waiting.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, SystemTime};

use super::skill::{Skill, SkillError};
use crate::server::changes::Changes;

/// How often a folder of skills is looked at for changes.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The skills served, and where they come from.
pub(crate) struct SkillSet {
    made: Vec<Arc<Skill>>,
    dir: Option<PathBuf>,
    current: RwLock<Arc<Snapshot>>,
    /// What the folder looked like when it was last read.
    seen: std::sync::Mutex<u64>,
}

/// One consistent view of the skills.
#[derive(Default)]
pub(crate) struct Snapshot {
    /// In URI order.
    pub(crate) skills: Vec<Arc<Skill>>,
    by_uri: HashMap<String, usize>,
    /// Each file's URI: its skill and its place among the skill's files.
    files: HashMap<String, (usize, usize)>,
    /// Each directory's URI: its children's URIs, and whether each is a
    /// directory.
    dirs: HashMap<String, BTreeMap<String, bool>>,
}

impl Snapshot {
    fn of(mut skills: Vec<Arc<Skill>>) -> Snapshot {
        skills.sort_by(|a, b| a.uri().cmp(b.uri()));
        skills.dedup_by(|a, b| a.uri() == b.uri());
        let mut snapshot = Snapshot::default();
        for (i, skill) in skills.iter().enumerate() {
            snapshot.by_uri.insert(skill.uri().to_owned(), i);
            for (j, file) in skill.files().iter().enumerate() {
                let uri = format!("{}/{}", skill.root(), file.path);
                // A file of a nested skill is its enclosing skill's too:
                // either serves it.
                snapshot.files.entry(uri.clone()).or_insert((i, j));
                snapshot.add_path(&uri);
            }
        }
        snapshot.skills = skills;
        snapshot
    }

    /// Records every directory above `uri` (`skill://a/b/c.md`: `skill://a`
    /// holds `skill://a/b`, which holds the file).
    fn add_path(&mut self, uri: &str) {
        let Some(rest) = uri.strip_prefix("skill://") else {
            return;
        };
        let mut child_is_dir = false;
        let mut child = uri.to_owned();
        let mut cut = rest.len();
        while let Some(at) = rest[..cut].rfind('/') {
            let parent = format!("skill://{}", &rest[..at]);
            self.dirs
                .entry(parent.clone())
                .or_default()
                .insert(child, child_is_dir);
            child = parent;
            child_is_dir = true;
            cut = at;
        }
    }

    pub(crate) fn skill(&self, uri: &str) -> Option<&Arc<Skill>> {
        self.by_uri.get(uri).map(|i| &self.skills[*i])
    }

    /// The file at `uri`: its skill and path within it.
    pub(crate) fn file(&self, uri: &str) -> Option<(&Arc<Skill>, usize)> {
        self.files.get(uri).map(|(i, j)| (&self.skills[*i], *j))
    }

    /// The children of the directory at `uri`, when it is one.
    pub(crate) fn directory(&self, uri: &str) -> Option<&BTreeMap<String, bool>> {
        self.dirs.get(uri)
    }
}

impl SkillSet {
    pub(crate) fn new(made: Vec<Skill>, dir: Option<PathBuf>) -> SkillSet {
        let set = SkillSet {
            made: made.into_iter().map(Arc::new).collect(),
            dir,
            current: RwLock::default(),
            seen: std::sync::Mutex::new(0),
        };
        set.reload();
        set
    }

    /// The skills now.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Reads the folder again (when there is one) and makes a new snapshot.
    fn reload(&self) {
        let mut skills = self.made.clone();
        if let Some(dir) = &self.dir {
            *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = fingerprint(dir);
            let (read, errors) = read_skills(dir);
            for error in errors {
                tracing::warn!(%error, "skills: not served");
            }
            skills.extend(read.into_iter().map(Arc::new));
        }
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(Snapshot::of(skills));
    }

    /// Reads the folder again if it changed since it was last read; whether
    /// it did.
    fn refresh(&self) -> bool {
        let Some(dir) = &self.dir else {
            return false;
        };
        let now = fingerprint(dir);
        if now == *self.seen.lock().unwrap_or_else(|p| p.into_inner()) {
            return false;
        }
        self.reload();
        true
    }

    /// Looks at the folder every [`POLL`] while the set lives, telling
    /// listeners the list of resources changed when it did (the extension
    /// names no notification of its own).
    pub(crate) fn watch(self: &Arc<Self>, changes: Changes) {
        if self.dir.is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "skills: the server was built outside a tokio runtime; changes on disk will not be seen"
            );
            return;
        };
        let set: Weak<SkillSet> = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(POLL).await;
                let Some(set) = set.upgrade() else { return };
                // Reading a folder blocks: not on the runtime's workers.
                let changed = tokio::task::spawn_blocking(move || set.refresh())
                    .await
                    .unwrap_or(false);
                if changed {
                    tracing::info!("skills: the folder changed; serving it anew");
                    let _ = changes.resources_changed();
                }
            }
        });
    }
}

/// Every skill below `root`: each folder holding a `SKILL.md` is one, at
/// its path from `root` (`acme/billing/refunds`); skills may nest. Hidden
/// folders (starting with `.`) are left out.
pub(crate) fn read_skills(root: &Path) -> (Vec<Skill>, Vec<SkillError>) {
    let mut skills = Vec::new();
    let mut errors = Vec::new();
    let mut pending = vec![(root.to_owned(), String::new())];
    while let Some((dir, path)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(source) => {
                errors.push(SkillError::Io { path: dir, source });
                continue;
            }
        };
        if !path.is_empty() && dir.join("SKILL.md").is_file() {
            match Skill::read_dir(&dir, path.clone()) {
                Ok(skill) => skills.push(skill),
                Err(e) => errors.push(e),
            }
        }
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            let child = if path.is_empty() {
                name
            } else {
                format!("{path}/{name}")
            };
            pending.push((entry.path(), child));
        }
    }
    (skills, errors)
}

/// What the files below `root` are (paths, sizes, times), in one number.
fn fingerprint(root: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            entry.path().hash(&mut hasher);
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                meta.len().hash(&mut hasher);
                meta.modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .hash(&mut hasher);
            }
        }
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(name: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} skill\n---\nBody of {name}.\n")
    }

    #[test]
    fn a_folder_of_skills_nested_and_prefixed_is_read_with_its_directories() {
        let root = std::env::temp_dir().join(format!("jrpc-skills-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (dir, name) in [
            ("pdf", "pdf"),
            ("acme/billing/refunds", "refunds"),
            ("pdf/inner", "inner"),
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join("SKILL.md"), md(name)).unwrap();
        }
        std::fs::create_dir_all(root.join("pdf/references")).unwrap();
        std::fs::write(root.join("pdf/references/FORMS.md"), "Forms.\n").unwrap();
        // A broken skill is named, the others served.
        std::fs::create_dir_all(root.join("broken")).unwrap();
        std::fs::write(root.join("broken/SKILL.md"), "no frontmatter").unwrap();
        let (skills, errors) = read_skills(&root);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].to_string().contains("broken"));
        let snapshot = Snapshot::of(skills.into_iter().map(Arc::new).collect());
        let uris: Vec<&str> = snapshot.skills.iter().map(|s| s.uri()).collect();
        assert_eq!(
            uris,
            [
                "skill://acme/billing/refunds/SKILL.md",
                "skill://pdf/SKILL.md",
                "skill://pdf/inner/SKILL.md"
            ]
        );
        // The enclosing skill lists the nested one's files too.
        let pdf = snapshot.skill("skill://pdf/SKILL.md").unwrap();
        assert!(pdf.entry().file("skill://pdf/inner/SKILL.md").is_some());
        let children = snapshot.directory("skill://pdf").unwrap();
        let listed: Vec<(&str, bool)> = children.iter().map(|(u, d)| (u.as_str(), *d)).collect();
        assert_eq!(
            listed,
            [
                ("skill://pdf/SKILL.md", false),
                ("skill://pdf/inner", true),
                ("skill://pdf/references", true)
            ]
        );
        assert!(snapshot.directory("skill://acme").is_some());
        assert!(snapshot.directory("skill://pdf/SKILL.md").is_none());
        assert!(snapshot.file("skill://pdf/references/FORMS.md").is_some());

        // A change on disk is seen once.
        let set = SkillSet::new(Vec::new(), Some(root.clone()));
        assert!(!set.refresh());
        std::fs::write(root.join("pdf/references/NEW.md"), "New.\n").unwrap();
        assert!(set.refresh());
        assert!(!set.refresh());
        assert!(set.snapshot().file("skill://pdf/references/NEW.md").is_some());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
