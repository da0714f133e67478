//! `jrpc mcp skills`: list a server's skills (the Skills extension), or
//! get one — its SKILL.md printed, or every file saved to a folder — each
//! file verified against the skill's manifest.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;

use jrpc_mcp::client::{McpClient, SkillFile};
use jrpc_mcp::types::SkillEntry;

use super::args::SkillsArgs;
use super::session::{connect, failure, finish, target, unknown, usage};
use crate::call::Failure;

pub(super) async fn skills(args: SkillsArgs) -> ExitCode {
    finish(skills_inner(args).await)
}

async fn skills_inner(args: SkillsArgs) -> Result<ExitCode, Failure> {
    let (url, words) = target(args.words, &args.client)?;
    let wanted = match words.as_slice() {
        [] => None,
        [get, name] if get == "get" => Some(name.clone()),
        _ => {
            return Err(usage(
                "jrpc mcp skills [TARGET] lists the skills; jrpc mcp skills [TARGET] get NAME|URI [--save DIR] gets one",
            ))
        }
    };
    if args.save.is_some() && wanted.is_none() {
        return Err(usage("--save DIR goes with get NAME: which skill?"));
    }
    let client = connect(url, &args.client).await?;
    if !client.serves_skills() {
        client.close().await;
        return Err(Failure::Transport(anyhow::anyhow!(
            "the server does not declare the Skills extension (io.modelcontextprotocol/skills)"
        )));
    }
    let outcome = match wanted {
        None => list(&client, args.json).await,
        Some(name) => get(&client, &name, args.save.as_deref(), args.json).await,
    };
    client.close().await;
    outcome
}

async fn list(client: &McpClient, json: bool) -> Result<ExitCode, Failure> {
    let skills = client.list_skills().await.map_err(failure)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&skills).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    println!("skills ({}):", skills.len());
    let width = skills.iter().map(|s| s.name().len()).max().unwrap_or(0);
    for skill in &skills {
        let files = skill.resources.files();
        let size: u64 = files.iter().map(|f| f.size).sum();
        let files = if files.is_empty() {
            "dynamic".to_owned()
        } else {
            format!("{} file(s), {size} bytes", files.len())
        };
        println!("  {:width$}  {}", skill.name(), skill.description());
        println!("  {:width$}  {} ({files})", "", skill.uri);
    }
    Ok(ExitCode::SUCCESS)
}

/// The entry of the skill named `name` (or at URI `name`): ambiguous names
/// are refused with the URIs that share them (skill names need not be
/// unique).
async fn find(client: &McpClient, name: &str) -> Result<SkillEntry, Failure> {
    if name.contains("://") {
        return client.get_skill(name).await.map_err(failure);
    }
    let skills = client.list_skills().await.map_err(failure)?;
    let mut matching: Vec<SkillEntry> = skills.iter().filter(|s| s.name() == name).cloned().collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => {
            let known: Vec<String> = skills.iter().map(|s| s.name().to_owned()).collect();
            Err(unknown("skill", name, &known))
        }
        _ => {
            let uris: Vec<String> = matching.into_iter().map(|s| s.uri).collect();
            Err(usage(format!(
                "{} skills are named {name:?}: get one by its URI ({})",
                uris.len(),
                uris.join(", ")
            )))
        }
    }
}

async fn get(client: &McpClient, name: &str, save: Option<&Path>, json: bool) -> Result<ExitCode, Failure> {
    let entry = find(client, name).await?;
    let Some(dir) = save else {
        if json {
            println!("{}", serde_json::to_string_pretty(&entry).unwrap_or_default());
            return Ok(ExitCode::SUCCESS);
        }
        let loaded = client.load_skill(&entry).await.map_err(failure)?;
        print!("{}", loaded.skill_md);
        return Ok(ExitCode::SUCCESS);
    };
    let files = client.fetch_skill(&entry).await.map_err(failure)?;
    let folder = dir.join(entry.name());
    // Every path is checked before anything is written.
    let targets = files
        .iter()
        .map(|file| within(&folder, &file.path).map(|path| (path, file)))
        .collect::<Result<Vec<(PathBuf, &SkillFile)>, Failure>>()?;
    for (path, file) in &targets {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Failure::Transport(anyhow::anyhow!("{}: {e}", parent.display())))?;
            // A link in the way must not lead out of the folder.
            let real = parent
                .canonicalize()
                .map_err(|e| Failure::Transport(anyhow::anyhow!("{}: {e}", parent.display())))?;
            let root = dir
                .canonicalize()
                .map_err(|e| Failure::Transport(anyhow::anyhow!("{}: {e}", dir.display())))?;
            if !real.starts_with(&root) {
                return Err(refused(&file.path, dir));
            }
        }
        std::fs::write(path, &file.bytes)
            .map_err(|e| Failure::Transport(anyhow::anyhow!("{}: {e}", path.display())))?;
    }
    eprintln!(
        "jrpc: saved {} ({} file(s), verified) to {}",
        entry.uri,
        targets.len(),
        folder.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `path` (from the server) under `folder`, when it is a plain relative
/// path: no root, no `..`, nothing that leaves the folder.
fn within(folder: &Path, path: &str) -> Result<PathBuf, Failure> {
    let relative = Path::new(path);
    let plain = !path.is_empty()
        && !path.contains('\\')
        && relative.components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(refused(path, folder));
    }
    Ok(folder.join(relative))
}

fn refused(path: &str, dir: &Path) -> Failure {
    eprintln!(
        "jrpc: the skill names a file {path:?} outside {}: nothing saved",
        dir.display()
    );
    Failure::ErrorShown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_saved() {
        let folder = Path::new("/tmp/skills/pdf");
        assert_eq!(
            within(folder, "references/FORMS.md").ok(),
            Some(PathBuf::from("/tmp/skills/pdf/references/FORMS.md"))
        );
        for bad in ["../x", "a/../../x", "/etc/passwd", "", "a\\..\\b", "./a"] {
            assert!(within(folder, bad).is_err(), "{bad}");
        }
    }
}
