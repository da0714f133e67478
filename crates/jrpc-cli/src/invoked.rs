//! How this program was started, for commands it prints for the user to
//! paste: `jrpc` when that is what the shell finds, else the path it was
//! started by (after `cargo run`, `target/debug/jrpc`: there is no `jrpc`
//! on the PATH then).

use std::path::{Path, PathBuf};

/// The word that starts this program again from the current directory.
pub(crate) fn program() -> String {
    let argv0 = std::env::args_os().next().map(PathBuf::from);
    let current = std::env::current_exe().ok();
    let on_path = find_on_path("jrpc");
    program_word(
        argv0.as_deref(),
        current.as_deref(),
        on_path.as_deref(),
        std::env::current_dir().ok().as_deref(),
    )
}

fn program_word(
    argv0: Option<&Path>,
    current: Option<&Path>,
    on_path: Option<&Path>,
    cwd: Option<&Path>,
) -> String {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    let Some(me) = current.or(argv0) else {
        return "jrpc".to_owned();
    };
    if on_path.is_some_and(|found| same(found, me)) {
        return "jrpc".to_owned();
    }
    // A path relative to where the user is, when it is below there.
    let shown = cwd
        .and_then(|cwd| me.strip_prefix(cwd).ok())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| me.to_path_buf());
    let text = shown.display().to_string();
    if shown.is_relative() && !text.contains('/') {
        // `jrpc` in the current directory is `./jrpc` to a shell.
        format!("./{text}")
    } else {
        text
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_is_jrpc_only_when_the_shell_finds_this_program() {
        let built = Path::new("/work/jrpc/target/debug/jrpc");
        let cwd = Path::new("/work/jrpc");
        // After `cargo run`: no jrpc on the PATH.
        assert_eq!(
            program_word(None, Some(built), None, Some(cwd)),
            "target/debug/jrpc"
        );
        // Another jrpc on the PATH is not this one.
        let other = Path::new("/usr/local/bin/jrpc");
        assert_eq!(
            program_word(None, Some(built), Some(other), Some(cwd)),
            "target/debug/jrpc"
        );
        // Elsewhere, the whole path.
        assert_eq!(
            program_word(None, Some(built), None, Some(Path::new("/tmp"))),
            "/work/jrpc/target/debug/jrpc"
        );
        // Installed and found.
        assert_eq!(program_word(None, Some(other), Some(other), Some(cwd)), "jrpc");
        // In the current directory.
        assert_eq!(
            program_word(None, Some(Path::new("/w/jrpc")), None, Some(Path::new("/w"))),
            "./jrpc"
        );
    }
}
