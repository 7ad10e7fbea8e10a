//! What a person relies on around write delegation, through the real
//! binary, a real write child and the fake model server: a change set
//! with symlinks and a submodule, a write child that tries to leave its
//! worktree, and `delegate_write = "ask"` with nobody to ask. Each proof is
//! the test's own look at the files, byte for byte, not Fido's report.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::write_delegation::{
    DONE, delegate, patch, repo, repository_state, result_of, run, turn,
};
use crate::common::git;
use crate::common::process::{assert_nothing_left, run_in};
use crate::common::sse;
use crate::common::tree::{assert_tree_unchanged, changed_paths, tree_bytes};
use crate::common::{FakeServer, Reply, fido_cmd};

/// What Fido itself keeps in a workspace (its state and its plan): left
/// out when the checkout is compared.
const FIDO_OWN: [&str; 2] = [".fido-state", ".fido-plan.json"];

/// [`repo`] with a real submodule `sub` (committed, checked out, its
/// repository in `.git/modules/sub`); the upstream lives in `upstream`.
fn repo_with_submodule(upstream: &Path) -> tempfile::TempDir {
    git(upstream, &["init", "-q", "-b", "main"]);
    std::fs::write(upstream.join("f.txt"), "upstream\n").unwrap();
    git(upstream, &["add", "-A"]);
    git(upstream, &["commit", "-q", "-m", "upstream"]);
    let dir = repo();
    let root = dir.path();
    let url = upstream.to_str().unwrap();
    let add = ["-c", "protocol.file.allow=always", "submodule", "add", "-q"];
    git(root, &[&add[..], &[url, "sub"]].concat());
    git(root, &["commit", "-q", "-m", "submodule"]);
    dir
}

fn bash(id: &str, script: &str) -> Reply {
    let args = json!({ "command": script }).to_string();
    Reply::sse(sse::tool_call_turn(&[(id, "bash_exec", &args)]))
}

/// `fido ARGS…` in `root`: its output.
fn fido(root: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(root).args(args);
    run_in(root, cmd, None, Duration::from_secs(30))
}

/// The write child adds two symlinks (one inside the repository, one to
/// an absolute path outside) and writes into the submodule's folder; its
/// change set names each symlink, never writes one, and the patch, applied
/// by hand, brings each back as a symlink with its target. The submodule
/// is never entered: its folder and `.git/modules` stay byte for byte.
#[test]
fn symlinks_come_back_by_name_and_a_submodule_is_never_entered() {
    let upstream = tempfile::tempdir().unwrap();
    let ws = repo_with_submodule(upstream.path());
    let root = ws.path();
    let before = tree_bytes(root, &FIDO_OWN);
    let script = "set -e; mkdir links; ln -s ../a.rs links/to-a; ln -s /etc/hostname links/out; \
                  echo changed > sub/f.txt; echo new > sub/new.txt; echo made";
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Link and edit", &["a.rs", "links", "sub"])]),
        bash("s1", script),
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"linked\")"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(root, &server, &["--allow-write-delegation"], &[]);
    let made = server.model_requests()[2].body().to_string();
    assert!(made.contains("made"), "the child's script failed: {made}");
    let result = result_of(&server, "d1");
    let changes = &result["changes"];
    assert_eq!(changes["merge"], "pending", "{result:#}");
    let id = changes["id"].as_str().unwrap().to_owned();
    let diff = changes["diff"].as_str().unwrap();
    for link in ["links/out", "links/to-a"] {
        assert!(diff.contains(&format!("symlink {link} (added)")), "{diff}");
    }
    let paths: Vec<&str> = changes["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(!paths.iter().any(|p| p.starts_with("sub")), "{paths:?}");
    assert_tree_unchanged(root, &FIDO_OWN, &before);

    // The apply refuses each symlink by name and writes nothing.
    let apply = fido(root, &["changes", "apply", &id]);
    let said = String::from_utf8_lossy(&apply.stderr).into_owned();
    assert_eq!(apply.status.code(), Some(1), "{said}");
    for link in ["links/out", "links/to-a"] {
        assert!(said.contains(link), "{link} not named: {said}");
    }
    assert!(said.contains("nothing was written"), "{said}");
    assert_tree_unchanged(root, &FIDO_OWN, &before);

    // Applied by hand, the patch makes real symlinks with their targets.
    let patch_file = root.join(changes["patch"].as_str().unwrap());
    git(root, &["apply", patch_file.to_str().unwrap()]);
    let target = |link: &str| std::fs::read_link(root.join(link)).unwrap();
    assert_eq!(target("links/to-a"), Path::new("../a.rs"));
    assert_eq!(target("links/out"), Path::new("/etc/hostname"));
    let after = tree_bytes(root, &FIDO_OWN);
    let mut changed = changed_paths(&before, &after);
    changed.retain(|p| !p.starts_with("links"));
    assert_eq!(
        changed,
        [Path::new("a.rs")],
        "only the claimed edit besides"
    );
    assert_nothing_left(root);
}

/// The real write child tries every way out of its worktree it has: the
/// main checkout by absolute path, `..`, the repositories' configuration
/// by `git config`, and a symlink out of its tree written through. The
/// main repository, `.git` included, is byte for byte what it was.
#[test]
fn a_write_child_cannot_write_outside_its_worktree() {
    let ws = repo();
    let root = std::fs::canonicalize(ws.path()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let spot = outside.path().join("spot.txt");
    std::fs::write(&spot, "outside\n").unwrap();
    let before = tree_bytes(&root, &FIDO_OWN);
    let outside_before = tree_bytes(outside.path(), &[]);
    let main = root.display();
    let attempts = [
        format!("echo main > {main}/a.rs"),
        format!("echo main > {main}/new-in-main.txt"),
        format!("echo hook > {main}/.git/hooks/pre-commit"),
        format!("git -C {main} config user.name evil"),
        format!("git --git-dir={main}/.git config core.fsmonitor evil"),
        "git config user.name evil".to_owned(),
        "git config --global user.name evil".to_owned(),
        "echo up > ../up.txt".to_owned(),
        "echo up > ../../up.txt".to_owned(),
        format!("ln -s {main}/b.rs out-link && echo through > out-link"),
        format!(
            "ln -s {} spot-link && echo through > spot-link",
            spot.display()
        ),
        format!("ln -s {main}/.git/config cfg-link && echo x >> cfg-link"),
    ];
    let script: String = attempts
        .iter()
        .map(|a| format!("( {a} ) 2>/dev/null && echo 'WROTE: {a}'\n"))
        .chain(["echo tried-all\n".to_owned()])
        .collect();
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        bash("s1", &script),
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"inside\")"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("ok")),
    ]);
    let state = repository_state(&root);
    // A home of this test's own: `git config --global` aims at it.
    let home = tempfile::tempdir().unwrap();
    let home_before = tree_bytes(home.path(), &[]);
    let home_env = [("HOME", home.path().to_str().unwrap())];
    run(&root, &server, &["--allow-write-delegation"], &home_env);
    let said = server.model_requests()[2].body().to_string();
    assert!(said.contains("tried-all"), "{said}");
    assert_tree_unchanged(home.path(), &[], &home_before);
    let result = result_of(&server, "d1");
    assert_eq!(result["changes"]["merge"], "pending", "{result:#}");
    assert_tree_unchanged(&root, &FIDO_OWN, &before);
    assert_tree_unchanged(outside.path(), &[], &outside_before);
    assert_eq!(repository_state(&root), state);
    // `..` of the worktree lies in Fido's state: nothing landed there.
    let changes = root.join(".fido-state/changes");
    for up in ["up.txt", "../up.txt"] {
        let id = result["changes"]["id"].as_str().unwrap();
        assert!(!changes.join(id).join(up).exists(), "{up} was written");
    }
    assert_nothing_left(&root);
}

/// `delegate_write = "ask"` headless: nobody can approve, so the call is
/// refused with the sentence that says how to allow it; no child starts,
/// no worktree is made and the checkout is as it was.
#[test]
fn write_delegation_under_ask_is_refused_headless_and_writes_nothing() {
    let ws = repo();
    let root = ws.path();
    let before = tree_bytes(root, &FIDO_OWN);
    for (flags, env) in [
        (&["-c", "delegate_write=ask"][..], &[][..]),
        (&[][..], &[("FIDO_DELEGATE_WRITE", "ask")][..]),
    ] {
        let server = FakeServer::start(vec![
            turn(&[delegate("d1", "Edit a", &["a.rs"])]),
            Reply::sse(sse::text_turn("ok")),
        ]);
        run(root, &server, flags, env);
        let result = result_of(&server, "d1");
        assert_eq!(result["status"], "failed", "{result:#}");
        let message = result["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("delegate_write is ask, and nobody can approve in a headless run"),
            "{message}"
        );
        assert!(message.contains("--allow-write-delegation"), "{message}");
        assert_eq!(server.model_requests().len(), 2, "no child request");
        assert_tree_unchanged(root, &FIDO_OWN, &before);
        let changes = root.join(".fido-state/changes");
        let made: Vec<_> = std::fs::read_dir(&changes)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name())
            .collect();
        assert!(made.is_empty(), "a worktree was made: {made:?}");
        assert_nothing_left(root);
    }
}
