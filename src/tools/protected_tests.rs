//! The file tools refuse to change the protected paths (`.git` at any
//! depth, `.fido/`, `.fido-state/`, `fido.toml`, and the git directory a
//! `.git` file names), as named and through symlinks, and change nothing.

use super::mkdir::Mkdir;
use super::patch::Patch;
use super::rm::Rm;
use super::rmdir::Rmdir;
use super::testing::{call, env};
use serde_json::json;
use std::os::unix::fs::symlink;
use std::path::Path;

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in [
        ".git/hooks",
        ".fido/agents",
        "vendor/lib/.git",
        "real-git",
        "sub",
    ] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    for file in [
        ".git/config",
        ".git/description",
        ".fido/agents/a.md",
        "fido.toml",
        "vendor/lib/.git/config",
        "real-git/config",
    ] {
        std::fs::write(root.join(file), "original\n").unwrap();
    }
    symlink(".git/config", root.join("cfg")).unwrap();
    symlink(".git", root.join("gitlink")).unwrap();
    symlink(".fido", root.join("fidolink")).unwrap();
    dir
}

/// Every file and folder beneath `root`, with the files' bytes.
fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap().flatten() {
            let meta = entry.path().symlink_metadata().unwrap();
            let name = entry
                .path()
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string();
            if meta.is_dir() {
                stack.push(entry.path());
                out.push((name, Vec::new()));
            } else if meta.is_file() {
                out.push((name, std::fs::read(entry.path()).unwrap()));
            } else {
                out.push((name, b"link".to_vec()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn file_tools_refuse_protected_paths_and_change_nothing() {
    let dir = workspace();
    let env = env(dir.path());
    let before = snapshot(dir.path());
    let write = |path: &str| json!({"path": path, "content": "evil\n"});
    let calls: Vec<(&dyn super::Tool, serde_json::Value)> = vec![
        (&Patch, write(".git/config")),
        (&Patch, write(".git/hooks/pre-commit")),
        (&Patch, write("./.git/../.git/info/attributes")),
        (&Patch, write("fido.toml")),
        (&Patch, write(".fido/agents/a.md")),
        (&Patch, write(".fido/new.toml")),
        (&Patch, write("vendor/lib/.git/config")),
        (&Patch, write("cfg")),
        (&Patch, write("gitlink/description")),
        (&Patch, write("fidolink/agents/b.md")),
        (
            &Patch,
            json!({"path": ".git/description", "edits": [{"old_text": "original", "new_text": "evil"}]}),
        ),
        (&Mkdir, json!({"path": ".git/hooks2"})),
        (&Mkdir, json!({"path": "gitlink/x"})),
        (&Rm, json!({"path": ".git/config"})),
        (&Rm, json!({"path": "fido.toml"})),
        (&Rm, json!({"path": ".fido", "recursive": true})),
        (&Rmdir, json!({"path": ".git/hooks"})),
    ];
    for (tool, args) in calls {
        let out = call(tool, &env, args.clone()).await;
        assert!(!out.ok, "{args} was allowed: {}", out.content);
        assert!(
            out.content.contains("is protected"),
            "{args}: {}",
            out.content
        );
    }
    assert_eq!(snapshot(dir.path()), before);
}

/// A top-level `.git` file (a linked worktree's, a submodule checked out
/// alone) names the git directory that git reads: it is protected too.
#[tokio::test]
async fn the_git_directory_a_git_file_names_is_refused() {
    let dir = workspace();
    let root = dir.path();
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    std::fs::write(root.join(".git"), "gitdir: real-git\n").unwrap();
    let env = env(root);
    let out = call(
        &Patch,
        &env,
        json!({"path": "real-git/config", "content": "evil\n"}),
    )
    .await;
    assert!(out.content.contains("is protected"), "{}", out.content);
    assert_eq!(
        std::fs::read(root.join("real-git/config")).unwrap(),
        b"original\n"
    );
    let out = call(
        &Patch,
        &env,
        json!({"path": ".git", "content": "gitdir: /tmp\n"}),
    )
    .await;
    assert!(out.content.contains("is protected"), "{}", out.content);
}

#[tokio::test]
async fn file_tools_still_change_ordinary_files_and_read_protected_ones() {
    let dir = workspace();
    let env = env(dir.path());
    let out = call(
        &Patch,
        &env,
        json!({"path": "src/fido.toml", "content": "x\n"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    let out = call(
        &Patch,
        &env,
        json!({"path": ".gitignore", "content": "x\n"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    let out = call(
        &super::read_file::ReadFile,
        &env,
        json!({"path": "fido.toml"}),
    )
    .await;
    assert!(
        out.ok && out.content.contains("original"),
        "{}",
        out.content
    );
}
