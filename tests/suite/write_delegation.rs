//! Write delegation end to end: the real binary, real sandboxed write
//! subagents in their own worktrees, real git, the fake model server.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::catalog::{advertised_fingerprint, child_catalogs};
use crate::common::git;
use crate::common::process::{exec_cmd_with_flags, run_in};
use crate::common::sse;
use crate::common::{FakeServer, Reply};

pub(super) const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A git workspace with two committed source files and an uncommitted
/// edit of one.
pub(super) fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.rs"), "fn a() {\n    println!(\"a\");\n}\n").unwrap();
    std::fs::write(root.join("b.rs"), "fn b() {}\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "first"]);
    std::fs::write(root.join("b.rs"), "fn b() { /* uncommitted */ }\n").unwrap();
    dir
}

/// `git status`, without the lines of Fido's own plan file at the
/// workspace root (`.fido-state/`, which holds its lock, ignores itself).
pub(super) fn status(root: &Path) -> String {
    git(root, &["status", "--porcelain=v1", "--untracked-files=all"])
        .lines()
        .filter(|line| !line.contains(".fido-plan"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Everything of the user's repository a write delegation must leave
/// alone until an apply: status, refs, worktrees, stash, index, HEAD.
pub(super) fn repository_state(root: &Path) -> Vec<Vec<u8>> {
    let mut state: Vec<Vec<u8>> = vec![status(root).into_bytes()];
    state.extend(
        [
            &["for-each-ref"][..],
            &["worktree", "list", "--porcelain"],
            &["stash", "list"],
        ]
        .iter()
        .map(|args| git(root, args).into_bytes()),
    );
    state.push(std::fs::read(root.join(".git/index")).unwrap());
    state.push(std::fs::read(root.join(".git/HEAD")).unwrap());
    state
}

pub(super) fn delegate(id: &str, task: &str, claim: &[&str]) -> (String, String, String) {
    let args = json!({"task": task, "mode": "write", "scope": {"paths": claim}});
    (id.to_string(), "delegate".to_string(), args.to_string())
}

pub(super) fn turn(calls: &[(String, String, String)]) -> Reply {
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Reply::sse(sse::tool_call_turn(&calls))
}

pub(super) fn patch(id: &str, path: &str, old: &str, new: &str) -> Reply {
    let args = json!({"path": path, "edits": [{"old_text": old, "new_text": new}]});
    Reply::sse(sse::tool_call_turn(&[(id, "patch", &args.to_string())]))
}

pub(super) const DONE: &str = r#"{"summary": "changed it", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

pub(super) fn run(
    root: &Path,
    server: &FakeServer,
    flags: &[&str],
    env: &[(&str, &str)],
) -> String {
    let cmd = exec_cmd_with_flags(root, server, flags, "go", env);
    let output = run_in(root, cmd, None, RUN_TIMEOUT);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "stderr: {stderr}");
    stderr
}

/// The `delegate_result` of call `id`, as the parent's last request saw it.
pub(super) fn result_of(server: &FakeServer, id: &str) -> Value {
    let requests = server.model_requests();
    let last = requests.last().unwrap().body().clone();
    let message = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
        .clone();
    serde_json::from_str(message["content"].as_str().unwrap()).unwrap()
}

/// One write subagent that patches `a.rs`.
fn one_writer(server_tail: &str) -> FakeServer {
    FakeServer::start(vec![
        turn(&[delegate("d1", "Make a print hello", &["a.rs"])]),
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"hello\")"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn(server_tail)),
    ])
}

#[test]
fn with_auto_merge_the_change_lands_and_one_undo_restores_it() {
    let ws = repo();
    let root = ws.path();
    let before = std::fs::read(root.join("a.rs")).unwrap();
    let repository = repository_state(root);
    let server = one_writer("applied");
    let env = [("FIDO_DELEGATE_MERGE", "auto"), ("RUST_LOG", "info")];
    let stderr = run(root, &server, &["--allow-write-delegation"], &env);
    // The write child built the parent's catalog byte for byte: the
    // fingerprint it logged of its own is the one the parent advertised.
    let requests = server.model_requests();
    assert_eq!(
        child_catalogs(&stderr),
        [advertised_fingerprint(requests[0].body())],
        "stderr: {stderr}"
    );
    let result = result_of(&server, "d1");
    assert_eq!(result["status"], "completed", "{result:#}");
    let changes = &result["changes"];
    assert_eq!(changes["merge"], "applied", "{result:#}");
    assert_eq!(changes["files"][0]["path"], "a.rs");
    assert_eq!(changes["files"][0]["status"], "modified");
    assert!(
        changes["diff"]
            .as_str()
            .unwrap()
            .contains("+    println!(\"hello\");")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("a.rs")).unwrap(),
        "fn a() {\n    println!(\"hello\");\n}\n"
    );
    // The subagent's changes and the parent's uncommitted edit both stand.
    assert_eq!(
        std::fs::read_to_string(root.join("b.rs")).unwrap(),
        "fn b() { /* uncommitted */ }\n"
    );
    let workspace = fido::workspace::Workspace::new(root).unwrap();
    let undo = fido::store::undo::UndoLog::new(root);
    let undone = undo.undo_last(&workspace).unwrap().unwrap();
    assert_eq!(
        undone.path,
        result["identity"]["agent_id"].as_str().unwrap()
    );
    assert_eq!(std::fs::read(root.join("a.rs")).unwrap(), before);
    let after = repository_state(root);
    assert_eq!(
        after[..4],
        repository[..4],
        "status, refs, worktrees, stash"
    );
}

#[test]
fn with_manual_merge_the_checkout_is_untouched_until_an_apply() {
    let ws = repo();
    let root = ws.path();
    let before = repository_state(root);
    let server = one_writer("pending");
    run(root, &server, &["--allow-write-delegation"], &[]);
    let result = result_of(&server, "d1");
    let changes = &result["changes"];
    assert_eq!(changes["merge"], "pending", "{result:#}");
    let id = changes["id"].as_str().unwrap();
    let next = result["recommended_next_steps"][0].as_str().unwrap();
    assert!(next.contains(&format!("changes apply {id}")), "{next}");
    assert_eq!(
        repository_state(root),
        before,
        "nothing changed before the apply"
    );
    let patch_file = root.join(changes["patch"].as_str().unwrap());
    assert!(
        std::fs::read_to_string(patch_file)
            .unwrap()
            .contains("hello")
    );
    // Apply as the model would, later, then check nothing of the worktree
    // is left in the repository.
    let workspace = fido::workspace::Workspace::new(root).unwrap();
    let undo = fido::store::undo::UndoLog::new(root);
    let applied = fido::changes::apply::apply(&workspace, &undo, id).unwrap();
    assert_eq!(applied.set.merge.as_str(), "applied");
    assert!(
        std::fs::read_to_string(root.join("a.rs"))
            .unwrap()
            .contains("hello")
    );
    let after = repository_state(root);
    assert_eq!(
        after[1..4],
        before[1..4],
        "no ref, worktree or stash is left"
    );
    assert_eq!(
        status(root),
        " M a.rs\n M b.rs\n",
        "one new line: the applied change"
    );
}

#[test]
fn write_delegation_is_refused_unless_allowed_and_outside_git() {
    // Policy never (fido exec's default): refused, nothing started.
    let ws = repo();
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(ws.path(), &server, &[], &[]);
    let result = result_of(&server, "d1");
    assert_eq!(result["error"]["code"], "write_not_allowed", "{result:#}");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--allow-write-delegation")
    );
    assert_eq!(
        server.model_requests().len(),
        2,
        "no subagent request was made"
    );
    assert!(
        !ws.path().join(".fido-state/changes").exists()
            || std::fs::read_dir(ws.path().join(".fido-state/changes"))
                .unwrap()
                .next()
                .is_none()
    );

    // Not a git repository.
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(plain.path().join("a.rs"), "x\n").unwrap();
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(plain.path(), &server, &["--allow-write-delegation"], &[]);
    let result = result_of(&server, "d1");
    assert_eq!(
        result["error"]["code"], "not_a_git_repository",
        "{result:#}"
    );

    // A claim is required.
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &[])]),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(ws.path(), &server, &["--allow-write-delegation"], &[]);
    let result = result_of(&server, "d1");
    assert_eq!(result["error"]["code"], "invalid_arguments", "{result:#}");
}

#[test]
fn a_change_outside_the_claim_is_reported_and_never_applied() {
    let ws = repo();
    let root = ws.path();
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"A\")"),
        patch("p2", "b.rs", "uncommitted", "sneaky"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(
        root,
        &server,
        &["--allow-write-delegation"],
        &[("FIDO_DELEGATE_MERGE", "auto")],
    );
    let result = result_of(&server, "d1");
    let changes = &result["changes"];
    assert_eq!(changes["merge"], "applied", "{result:#}");
    assert_eq!(changes["outside_claim"][0]["path"], "b.rs");
    assert!(
        std::fs::read_to_string(root.join("a.rs"))
            .unwrap()
            .contains("\"A\"")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("b.rs")).unwrap(),
        "fn b() { /* uncommitted */ }\n"
    );
}

#[test]
fn disjoint_claims_run_in_parallel_and_overlapping_ones_conflict() {
    let ws = repo();
    let root = ws.path();
    let server = FakeServer::start(vec![
        turn(&[
            delegate("d1", "alpha", &["a.rs"]),
            delegate("d2", "beta", &["b.rs"]),
            delegate("d3", "gamma", &["a.rs", "c.rs"]),
        ]),
        Reply::sse(sse::text_turn("ok")),
    ]);
    server.push_keyed(
        "Task: alpha",
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"alpha\")"),
    );
    server.push_keyed("Edited a.rs", Reply::sse(sse::text_turn(DONE)));
    server.push_keyed("Task: beta", patch("p2", "b.rs", "uncommitted", "beta"));
    server.push_keyed("Edited b.rs", Reply::sse(sse::text_turn(DONE)));
    server.push_keyed("Task: gamma", Reply::sse(sse::text_turn(DONE)));
    run(
        root,
        &server,
        &["--allow-write-delegation"],
        &[("FIDO_DELEGATE_MERGE", "auto")],
    );
    let results: Vec<Value> = ["d1", "d2", "d3"]
        .iter()
        .map(|id| result_of(&server, id))
        .collect();
    let conflicts: Vec<&Value> = results
        .iter()
        .filter(|r| r["error"]["code"] == "write_conflict")
        .collect();
    // d3 overlaps d1: exactly one of the two ran.
    assert_eq!(conflicts.len(), 1, "{results:#?}");
    assert!(
        conflicts[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a.rs")
    );
    assert_eq!(
        results[1]["changes"]["merge"], "applied",
        "{:#}",
        results[1]
    );
    assert!(
        std::fs::read_to_string(root.join("b.rs"))
            .unwrap()
            .contains("beta")
    );
}

/// The catalog does not depend on the write policies: `fido tool list`
/// prints the same bytes under each of them.
#[test]
fn the_catalog_is_the_same_under_every_write_policy() {
    let ws = repo();
    let list = |write: &str, merge: &str| {
        let output = Command::new(crate::common::process::fido_bin())
            .args(["tool", "list", "-C"])
            .arg(ws.path())
            .env("FIDO_DELEGATE_WRITE", write)
            .env("FIDO_DELEGATE_MERGE", merge)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    };
    let never = list("never", "manual");
    assert!(String::from_utf8_lossy(&never).contains("\"write\""));
    assert_eq!(list("ask", "ask"), never);
    assert_eq!(list("allow", "auto"), never);
}

/// SIGKILL of the parent while its write subagent runs: the main checkout,
/// its index and its refs are byte-identical, no process is left, and the
/// next Fido keeps the dead run's change set pending and removes its
/// worktree.
#[test]
fn a_killed_parent_leaves_the_checkout_alone_and_the_next_fido_keeps_the_change_set() {
    use crate::common::process::{assert_nothing_left, send_signal, wait_with_timeout};
    let ws = repo();
    let root = ws.path();
    let before = repository_state(root);
    let files_before: Vec<Vec<u8>> = ["a.rs", "b.rs"]
        .iter()
        .map(|f| std::fs::read(root.join(f)).unwrap())
        .collect();
    let sleep = json!({"command": "sleep 30"}).to_string();
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        patch("p1", "a.rs", "println!(\"a\")", "println!(\"killed\")"),
        Reply::sse(sse::tool_call_turn(&[("s1", "bash_exec", &sleep)])),
    ]);
    let child = exec_cmd_with_flags(root, &server, &["--allow-write-delegation"], "go", &[])
        .spawn()
        .unwrap();
    let pid = child.id();
    // The third request asked for the sleep: the patch has landed in the
    // worktree and the subagent's shell is about to run.
    server.wait_for_requests(3, RUN_TIMEOUT);
    let changes = root.join(".fido-state/changes");
    let id = std::fs::read_dir(&changes)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().into_string().unwrap())
        .find(|name| name.starts_with("subagent-"))
        .expect("a worktree exists while the subagent runs");
    let tree = changes.join(&id).join("tree");
    assert!(
        std::fs::read_to_string(tree.join("a.rs"))
            .unwrap()
            .contains("killed")
    );
    send_signal(pid, libc::SIGKILL);
    let output = wait_with_timeout(child, RUN_TIMEOUT);
    assert!(!output.status.success());
    assert_nothing_left(root);
    assert_eq!(repository_state(root), before);
    for (file, bytes) in ["a.rs", "b.rs"].iter().zip(&files_before) {
        assert_eq!(&std::fs::read(root.join(file)).unwrap(), bytes, "{file}");
    }
    // The next Fido sweeps the orphan: pending change set, no worktree.
    let next = FakeServer::start(vec![Reply::sse(sse::text_turn("hello"))]);
    run(root, &next, &[], &[]);
    assert!(!tree.exists(), "the dead run's worktree is removed");
    let record: Value =
        serde_json::from_slice(&std::fs::read(changes.join(&id).join("change.json")).unwrap())
            .unwrap();
    assert_eq!(record["merge"], "pending");
    assert_eq!(record["files"][0]["path"], "a.rs");
    assert_eq!(repository_state(root)[1..], before[1..]);
}

/// [`repo`] with an untracked clone at `vendor/lib` (a repository with a
/// commit, which the base snapshot records as a gitlink).
fn repo_with_clone() -> tempfile::TempDir {
    let dir = repo();
    let lib = dir.path().join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q", "-b", "main"]);
    std::fs::write(lib.join("f.txt"), "lib\n").unwrap();
    git(&lib, &["add", "-A"]);
    git(&lib, &["commit", "-q", "-m", "lib"]);
    dir
}

/// What the write subagent runs in its worktree: a repository built by
/// hand in the gitlink's folder, `HEAD` the gitlink's commit, a clean
/// filter (writing `marker`) selected for every file, and a file whose
/// stat data no longer matches its index entry.
fn plant_nested_repository(marker: &Path) -> String {
    format!(
        r#"set -e
commit=$(git ls-files -s vendor/lib | cut -d' ' -f2)
mkdir -p vendor/lib/.git/objects vendor/lib/.git/refs/heads vendor/lib/.git/info
cd vendor/lib
printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n' > .git/config
printf 'ref: refs/heads/main\n' > .git/HEAD
printf 'lib\n' > f.txt
env -u GIT_DIR -u GIT_WORK_TREE git add f.txt
printf '[filter "x"]\n\tclean = "touch {marker}; cat"\n' >> .git/config
printf '* filter=x\n' > .git/info/attributes
printf '%s\n' "$commit" > .git/HEAD
touch -d 2001-01-01 f.txt
echo "a repository by hand at $commit""#,
        marker = marker.display()
    )
}

/// The nested-repository escape, through the real binary, under
/// `delegate_merge` `manual` and `auto`: building (and applying) the
/// change set never runs the child's filter; the result names the
/// refused `.git`; the claimed edit still comes back.
#[test]
fn a_repository_the_child_builds_in_a_gitlink_folder_never_runs_in_the_parent() {
    for merge in ["manual", "auto"] {
        let ws = repo_with_clone();
        let root = ws.path();
        let outside = tempfile::tempdir().unwrap();
        let marker = outside.path().join("filter-ran");
        let script = json!({"command": plant_nested_repository(&marker)}).to_string();
        let server = FakeServer::start(vec![
            turn(&[delegate("d1", "Edit a", &["a.rs"])]),
            Reply::sse(sse::tool_call_turn(&[("s1", "bash_exec", &script)])),
            patch("p1", "a.rs", "println!(\"a\")", "println!(\"nested\")"),
            Reply::sse(sse::text_turn(DONE)),
            Reply::sse(sse::text_turn("ok")),
        ]);
        let env = [("FIDO_DELEGATE_MERGE", merge)];
        run(root, &server, &["--allow-write-delegation"], &env);
        let requests = server.model_requests();
        let planted = requests[2].body().to_string();
        // The script's output (not its text): the gitlink's commit id.
        let built = planted
            .match_indices("by hand at ")
            .any(|(at, m)| planted[at + m.len()..].starts_with(|c: char| c.is_ascii_hexdigit()));
        assert!(built, "{merge}: the child could not build it: {planted}");
        let result = result_of(&server, "d1");
        assert!(
            !marker.exists(),
            "{merge}: the child's filter ran in the parent"
        );
        let changes = &result["changes"];
        let expected = if merge == "auto" {
            "applied"
        } else {
            "pending"
        };
        assert_eq!(changes["merge"], expected, "{result:#}");
        assert_eq!(changes["files"][0]["path"], "a.rs", "{result:#}");
        assert_eq!(changes["files"].as_array().unwrap().len(), 1, "{result:#}");
        let diff = changes["diff"].as_str().unwrap();
        assert!(
            diff.starts_with("refused vendor/lib/.git: a nested repository"),
            "{diff}"
        );
        if merge == "manual" {
            let id = changes["id"].as_str().unwrap();
            let workspace = fido::workspace::Workspace::new(root).unwrap();
            let undo = fido::store::undo::UndoLog::new(root);
            fido::changes::apply::apply(&workspace, &undo, id).unwrap();
            assert!(!marker.exists(), "the child's filter ran at the apply");
        }
        assert!(
            std::fs::read_to_string(root.join("a.rs"))
                .unwrap()
                .contains("nested")
        );
        crate::common::process::assert_nothing_left(root);
    }
}

/// Below git 2.42 (here a `git` on `PATH` that says it is 2.41.0 and
/// passes everything else to the real one), write delegation is refused
/// with the version found and the one needed; nothing is started.
#[test]
fn write_delegation_is_refused_with_a_git_older_than_the_hardening_needs() {
    let ws = repo();
    let bin = tempfile::tempdir().unwrap();
    let real = git(ws.path(), &["--exec-path"]);
    let wrapper = format!(
        "#!/bin/sh\nfor a; do [ \"$a\" = --version ] && {{ echo 'git version 2.41.0'; exit 0; }}; done\nexec '{}/git' \"$@\"\n",
        real.trim()
    );
    let fake = bin.path().join("git");
    std::fs::write(&fake, wrapper).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let server = FakeServer::start(vec![
        turn(&[delegate("d1", "Edit a", &["a.rs"])]),
        Reply::sse(sse::text_turn("ok")),
    ]);
    run(
        ws.path(),
        &server,
        &["--allow-write-delegation"],
        &[("PATH", &path)],
    );
    let result = result_of(&server, "d1");
    assert_eq!(result["status"], "failed", "{result:#}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("git 2.41.0 is too old"), "{message}");
    assert!(message.contains("git 2.42.0 or later"), "{message}");
    assert_eq!(server.model_requests().len(), 2, "no subagent request");
    let changes = ws.path().join(".fido-state/changes");
    assert!(!changes.exists() || std::fs::read_dir(&changes).unwrap().next().is_none());
}
