//! `jrpc mcp serve --skills DIR` and `jrpc mcp skills`: a folder of skills
//! served, listed, printed and saved to a folder of the same shape.

mod common;

use common::{jrpc, mcp_serve, text};

#[test]
fn a_folder_of_skills_is_served_listed_and_saved_back_verified() {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../jrpc-mcp/tests/fixtures/skills");
    let (_server, url) = mcp_serve(&["--skills", fixtures]);

    let out = jrpc(&["mcp", "skills", &url]);
    assert!(out.status.success(), "{}", text(&out));
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("skills (2):"), "{listed}");
    assert!(
        listed.contains("skill://acme/billing/refunds/SKILL.md"),
        "{listed}"
    );

    // Printed: the SKILL.md, by name or by URI.
    for which in ["pdf-processing", "skill://pdf-processing/SKILL.md"] {
        let out = jrpc(&["mcp", "skills", &url, "get", which]);
        assert!(out.status.success(), "{}", text(&out));
        let printed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            printed,
            std::fs::read_to_string(format!("{fixtures}/pdf-processing/SKILL.md")).unwrap()
        );
    }

    // Saved: the same files, byte for byte, under DIR/NAME.
    let save = std::env::temp_dir().join(format!("jrpc-saved-skills-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&save);
    let out = jrpc(&[
        "mcp",
        "skills",
        &url,
        "get",
        "refunds",
        "--save",
        save.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    for file in ["SKILL.md", "examples/email.md"] {
        assert_eq!(
            std::fs::read(save.join("refunds").join(file)).unwrap(),
            std::fs::read(format!("{fixtures}/acme/billing/refunds/{file}")).unwrap(),
            "{file}"
        );
    }
    std::fs::remove_dir_all(&save).unwrap();

    // What is not there, and what makes no sense.
    let out = jrpc(&["mcp", "skills", &url, "get", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pdf-processing"));
    let out = jrpc(&["mcp", "skills", &url, "--save", "/tmp/x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn a_missing_skills_folder_is_a_usage_error_and_a_server_without_skills_is_named() {
    let out = jrpc(&[
        "mcp",
        "serve",
        "--http",
        "127.0.0.1:0",
        "--skills",
        "/nonexistent/skills",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let (_server, url) = mcp_serve(&[]);
    let out = jrpc(&["mcp", "skills", &url]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Skills extension"));
}
