//! Write delegation end to end: the real binary, real sandboxed write
//! subagents in their own worktrees, real git, the fake model server.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::process::{exec_cmd_with_flags, run_in};
use crate::common::sse;
use crate::common::{FakeServer, Reply};

const RUN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A git workspace with two committed source files and an uncommitted
/// edit of one.
fn repo() -> tempfile::TempDir {
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

/// `git status`, without the lines of Fido's own plan files at the
/// workspace root (`.fido-plan.json.lock` exists once any Fido ran here;
/// `.fido-state/` ignores itself).
fn status(root: &Path) -> String {
    git(root, &["status", "--porcelain=v1", "--untracked-files=all"])
        .lines()
        .filter(|line| !line.contains(".fido-plan"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Everything of the user's repository a write delegation must leave
/// alone until an apply: status, refs, worktrees, stash, index, HEAD.
fn repository_state(root: &Path) -> Vec<Vec<u8>> {
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

fn delegate(id: &str, task: &str, claim: &[&str]) -> (String, String, String) {
    let args = json!({"task": task, "mode": "write", "scope": {"paths": claim}});
    (id.to_string(), "delegate".to_string(), args.to_string())
}

fn turn(calls: &[(String, String, String)]) -> Reply {
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Reply::sse(sse::tool_call_turn(&calls))
}

fn patch(id: &str, path: &str, old: &str, new: &str) -> Reply {
    let args = json!({"path": path, "edits": [{"old_text": old, "new_text": new}]});
    Reply::sse(sse::tool_call_turn(&[(id, "patch", &args.to_string())]))
}

const DONE: &str = r#"{"summary": "changed it", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

fn run(root: &Path, server: &FakeServer, flags: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let cmd = exec_cmd_with_flags(root, server, flags, "go", env);
    let output = run_in(root, cmd, None, RUN_TIMEOUT);
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    crate::common::parse_events(&output.stdout)
}

/// The `delegate_result` of call `id`, as the parent's last request saw it.
fn result_of(server: &FakeServer, id: &str) -> Value {
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
    run(
        root,
        &server,
        &["--allow-write-delegation"],
        &[("FIDO_DELEGATE_MERGE", "auto")],
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
