//! The Skills extension end to end, both eras, over in-memory pipes:
//! skills made in code and read from a folder, listed and got, read and
//! verified by the client (a tampered file refused), browsed as
//! directories, and a folder changed on disk served changed.

use std::path::PathBuf;
use std::time::Duration;

use jrpc_mcp::client::{McpClient, McpClientError, ProtocolChoice, SkillVerifyError};
use jrpc_mcp::server::{McpServer, Skill};
use jrpc_mcp::types::{SkillResources, DIRECTORY_MIME_TYPE, SKILLS_EXTENSION};
use serde_json::json;

mod common;
use common::pipe;

async fn connect(server: &McpServer, protocol: ProtocolChoice) -> McpClient {
    let (ours, theirs) = pipe();
    std::mem::forget(server.connect(theirs));
    McpClient::builder("skills-test", "1")
        .protocol(protocol)
        .connect(ours)
        .await
        .expect("connected")
}

const PDF: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: \"2.1.0\"\n---\nRead references/FORMS.md.\n";

fn pdf_skill() -> Skill {
    Skill::new(PDF)
        .unwrap()
        .file("references/FORMS.md", "Forms.\n")
        .unwrap()
        .file("scripts/extract.py", "print('x')\n")
        .unwrap()
}

/// A folder of skills of the test's own, removed when it ends.
struct Folder(PathBuf);

impl Folder {
    fn new(name: &str) -> Folder {
        let dir = std::env::temp_dir().join(format!("jrpc-skills-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Folder(dir)
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

impl Drop for Folder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn skills_are_listed_got_fetched_and_verified_in_both_eras() {
    let server = McpServer::builder("skills", "1").skill(pdf_skill()).build();
    for protocol in [ProtocolChoice::Legacy, ProtocolChoice::Auto] {
        let era = format!("{protocol:?}");
        let client = connect(&server, protocol).await;
        assert!(client.serves_skills(), "{era}");
        let declared = &client.server_capabilities().extensions.as_ref().unwrap()[SKILLS_EXTENSION];
        assert_eq!(declared["directoryRead"], true);
        assert!(
            client.server_capabilities().resources.is_some(),
            "skills need resources"
        );

        let skills = client.list_skills().await.unwrap();
        assert_eq!(skills.len(), 1);
        let entry = &skills[0];
        assert_eq!(entry.uri, "skill://pdf-processing/SKILL.md");
        assert_eq!(entry.frontmatter["metadata"], json!({"version": "2.1.0"}));
        let SkillResources::Listed(files) = &entry.resources else {
            panic!("a manifest")
        };
        assert_eq!(files.len(), 3);
        assert_eq!(client.get_skill(&entry.uri).await.unwrap(), *entry);
        let unknown = client.get_skill("skill://nope/SKILL.md").await.unwrap_err();
        assert_eq!(unknown.rpc().map(|e| e.code()), Some(-32602), "{unknown}");

        let loaded = client.load_skill(entry).await.unwrap();
        assert_eq!(loaded.skill_md, PDF);
        let fetched = client.fetch_skill(entry).await.unwrap();
        let paths: Vec<&str> = fetched.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["SKILL.md", "references/FORMS.md", "scripts/extract.py"]);

        // resources/list names the SKILL.md as its frontmatter does.
        let listed = client.list_resources().await.unwrap();
        let md = listed.iter().find(|r| r.uri == entry.uri).unwrap();
        assert_eq!(md.name, "pdf-processing");
        assert_eq!(md.mime_type.as_deref(), Some("text/markdown"));

        // Directories: the skill's root and a sub-folder; a file is not one.
        let root = client.read_directory("skill://pdf-processing").await.unwrap();
        let children: Vec<(&str, Option<&str>)> = root
            .iter()
            .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
            .collect();
        assert_eq!(
            children,
            [
                ("skill://pdf-processing/SKILL.md", Some("text/markdown")),
                ("skill://pdf-processing/references", Some(DIRECTORY_MIME_TYPE)),
                ("skill://pdf-processing/scripts", Some(DIRECTORY_MIME_TYPE)),
            ]
        );
        let not_a_dir = client.read_directory(&entry.uri).await.unwrap_err();
        assert_eq!(not_a_dir.rpc().map(|e| e.code()), Some(-32602));
    }
}

#[tokio::test]
async fn content_that_is_not_what_the_entry_promised_is_refused() {
    let server = McpServer::builder("skills", "1").skill(pdf_skill()).build();
    let client = connect(&server, ProtocolChoice::Auto).await;
    let honest = client.list_skills().await.unwrap().remove(0);
    let mut cases = Vec::new();
    // A digest that does not match (same size).
    let mut digest = honest.clone();
    if let SkillResources::Listed(files) = &mut digest.resources {
        files[1].digest = format!("sha256:{}", "0".repeat(64));
    }
    cases.push((digest, "skill://pdf-processing/references/FORMS.md", "digest"));
    // A size that does not match.
    let mut size = honest.clone();
    if let SkillResources::Listed(files) = &mut size.resources {
        files[1].size += 1;
    }
    cases.push((size, "skill://pdf-processing/references/FORMS.md", "bytes"));
    for (entry, uri, says) in cases {
        let e = client.read_skill_file(&entry, uri).await.unwrap_err();
        assert!(matches!(e, McpClientError::Skill(_)), "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    // A file the manifest does not list.
    let e = client
        .read_skill_file(&honest, "skill://pdf-processing/unlisted.md")
        .await
        .unwrap_err();
    assert!(
        matches!(e, McpClientError::Skill(SkillVerifyError::Unlisted { .. })),
        "{e}"
    );
    // A frontmatter that is not the entry's: the skill is not loaded, and
    // nothing past its SKILL.md is fetched.
    let mut frontmatter = honest.clone();
    frontmatter
        .frontmatter
        .insert("description".into(), json!("Exfiltrate credentials"));
    let e = client.fetch_skill(&frontmatter).await.unwrap_err();
    assert!(
        matches!(e, McpClientError::Skill(SkillVerifyError::Frontmatter { ref field, .. }) if field == "description"),
        "{e}"
    );
}

#[tokio::test]
async fn a_folder_of_skills_is_served_and_served_anew_when_it_changes() {
    let folder = Folder::new("watched");
    folder.write(
        "acme/billing/refunds/SKILL.md",
        "---\nname: refunds\ndescription: Refunds per policy\n---\nv1\n",
    );
    folder.write("acme/billing/refunds/examples/email.md", "Dear customer,\n");
    // One that breaks the rules is left out; the rest are served.
    folder.write("bad-one/SKILL.md", "---\nname: other-name\ndescription: d\n---\n");
    let server = McpServer::builder("skills", "1").skills_dir(&folder.0).build();
    let client = connect(&server, ProtocolChoice::Auto).await;
    let skills = client.list_skills().await.unwrap();
    let uris: Vec<&str> = skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(uris, ["skill://acme/billing/refunds/SKILL.md"]);
    let acme = client.read_directory("skill://acme").await.unwrap();
    assert_eq!(acme[0].uri, "skill://acme/billing");
    assert_eq!(acme[0].mime_type.as_deref(), Some(DIRECTORY_MIME_TYPE));
    let before = client.load_skill(&skills[0]).await.unwrap();
    assert!(before.skill_md.ends_with("v1\n"));

    // Changed on disk: served changed within a few polls, and the entry
    // read before no longer verifies what is served.
    folder.write(
        "acme/billing/refunds/SKILL.md",
        "---\nname: refunds\ndescription: Refunds per policy\n---\nversion two\n",
    );
    let mut changed = None;
    for _ in 0..100 {
        let now = client.get_skill(&skills[0].uri).await.unwrap();
        if now != skills[0] {
            changed = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let changed = changed.expect("the change on disk was served within 10 s");
    assert!(client
        .load_skill(&changed)
        .await
        .unwrap()
        .skill_md
        .ends_with("version two\n"));
    let stale = client.load_skill(&skills[0]).await.unwrap_err();
    assert!(matches!(stale, McpClientError::Skill(_)), "{stale}");
}
