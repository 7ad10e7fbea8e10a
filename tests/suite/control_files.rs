//! Change sets that touch control files (`fido.toml`, `.fido/`,
//! `AGENTS.md`, `.gitattributes`, `.gitmodules`): never applied by
//! `delegate_merge = "auto"`, marked in the result, in `fido changes` and
//! in `fido changes show`, and still applied by hand after a review. Real
//! binary, real sandboxed write subagent, real git, the fake model server.

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use super::tui::{Tmux, start_fido};
use crate::common::process::{exec_cmd_with_flags, run_in};
use crate::common::{FakeServer, Reply, fido_cmd, git, sse};

const DONE: &str = r#"{"summary": "changed it", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

/// A git workspace with a source file and a `.gitattributes`, committed.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    fs::write(root.join("a.rs"), "fn a() {}\n").unwrap();
    fs::write(root.join(".gitattributes"), "*.rs text\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "first"]);
    dir
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(sse::tool_call_turn(&[(id, name, &args.to_string())]))
}

fn patch(id: &str, path: &str, old: &str, new: &str) -> Reply {
    let args = json!({"path": path, "edits": [{"old_text": old, "new_text": new}]});
    call(id, "patch", args)
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

fn fido(root: &Path, args: &[&str]) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(root).args(args);
    run_in(root, cmd, None, Duration::from_secs(30))
}

fn fido_ok(root: &Path, args: &[&str]) -> String {
    let output = fido(root, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "fido {args:?}: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// A write subagent under `delegate_merge = "auto"` edits a source file
/// and `.gitattributes` (which selects the filter drivers git runs): the
/// change set stays pending, marked, with the reason in the result; the
/// checkout is untouched. `fido changes show` lists the control file
/// first; after that review, `fido changes apply` applies it.
#[test]
fn auto_merge_leaves_a_change_set_touching_control_files_pending_and_a_manual_apply_works() {
    let ws = repo();
    let root = ws.path();
    let delegate =
        json!({"task": "tidy", "mode": "write", "scope": {"paths": ["a.rs", ".gitattributes"]}});
    let server = FakeServer::start(vec![
        call("d1", "delegate", delegate),
        patch("p1", "a.rs", "fn a() {}", "fn a() { /* tidy */ }"),
        patch("p2", ".gitattributes", "*.rs text", "*.rs text filter=tidy"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("left pending")),
    ]);
    let cmd = exec_cmd_with_flags(
        root,
        &server,
        &["--allow-write-delegation"],
        "go",
        &[("FIDO_DELEGATE_MERGE", "auto")],
    );
    let output = run_in(root, cmd, None, Duration::from_secs(60));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result = result_of(&server, "d1");
    let changes = &result["changes"];
    assert_eq!(changes["merge"], "pending", "{result:#}");
    assert_eq!(changes["control_files"], json!([".gitattributes"]));
    let id = changes["id"].as_str().unwrap();
    let next = result["recommended_next_steps"][0].as_str().unwrap();
    assert!(
        next.contains("touches control files: .gitattributes")
            && next.contains(&format!("changes show {id}")),
        "{next}"
    );
    assert_eq!(
        fs::read_to_string(root.join("a.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert_eq!(
        fs::read_to_string(root.join(".gitattributes")).unwrap(),
        "*.rs text\n"
    );

    let listed = fido_ok(root, &["changes"]);
    assert!(
        listed.contains(&format!("{id}  pending"))
            && listed.contains("touches control files: .gitattributes"),
        "{listed}"
    );
    let shown = fido_ok(root, &["changes", "show", id]);
    let files: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("  modified"))
        .collect();
    assert_eq!(
        files,
        [
            "  modified  .gitattributes  +1 -1  (control file)",
            "  modified  a.rs  +1 -1"
        ],
        "{shown}"
    );
    assert!(
        shown.contains("touches control files: .gitattributes"),
        "{shown}"
    );
    let json: Value =
        serde_json::from_str(&fido_ok(root, &["changes", "show", id, "--json"])).unwrap();
    assert_eq!(json["control_files"], json!([".gitattributes"]), "{json:#}");

    let applied = fido_ok(root, &["changes", "apply", id]);
    assert!(
        applied.starts_with(&format!("applied {id}: 2 files")),
        "{applied}"
    );
    assert_eq!(
        fs::read_to_string(root.join(".gitattributes")).unwrap(),
        "*.rs text filter=tidy\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("a.rs")).unwrap(),
        "fn a() { /* tidy */ }\n"
    );
}

/// The same policy with a change set of source files only still applies
/// at once: only control files hold it back.
#[test]
fn auto_merge_still_applies_a_change_set_without_control_files() {
    let ws = repo();
    let root = ws.path();
    let delegate = json!({"task": "tidy", "mode": "write", "scope": {"paths": ["a.rs"]}});
    let server = FakeServer::start(vec![
        call("d1", "delegate", delegate),
        patch("p1", "a.rs", "fn a() {}", "fn a() { /* tidy */ }"),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("applied")),
    ]);
    let cmd = exec_cmd_with_flags(
        root,
        &server,
        &["--allow-write-delegation"],
        "go",
        &[("FIDO_DELEGATE_MERGE", "auto")],
    );
    let output = run_in(root, cmd, None, Duration::from_secs(60));
    assert!(output.status.success());
    let result = result_of(&server, "d1");
    assert_eq!(result["changes"]["merge"], "applied", "{result:#}");
    assert!(
        result["changes"].get("control_files").is_none(),
        "{result:#}"
    );
}

/// A change set made as a write subagent would (no model), touching
/// `fido.toml`, a profile under `.fido/` and a nested `.gitattributes`
/// besides a source file: `fido changes` marks it and `show` puts the
/// three control files first, in its text and its JSON.
#[test]
fn fido_changes_marks_every_kind_of_control_file_and_lists_them_first() {
    let ws = repo();
    let root = ws.path();
    fs::write(root.join("fido.toml"), "max_steps = 50\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "config"]);
    let start = fido::changes::Start {
        task: "configure".into(),
        claim: vec![".".into()],
        plan_item: None,
    };
    let worktree = fido::changes::start(root, "subagent-7", &start).unwrap();
    let tree = worktree.layout.tree();
    fs::write(tree.join("a.rs"), "fn a() { 1 }\n").unwrap();
    fs::write(
        tree.join("fido.toml"),
        "max_steps = 50\n[[hooks.SessionStart]]\ncommand = \"true\"\n",
    )
    .unwrap();
    fs::create_dir_all(tree.join(".fido/agents")).unwrap();
    fs::write(tree.join(".fido/agents/x.md"), "---\ndescription: x\n---\n").unwrap();
    fs::create_dir_all(tree.join("vendor")).unwrap();
    fs::write(tree.join("vendor/.gitattributes"), "* filter=x\n").unwrap();
    let record = fido::changes::finish(root, &worktree, &start, 65536).unwrap();
    let mut control = record.set.control_files.clone();
    control.sort();
    assert_eq!(
        control,
        [".fido/agents/x.md", "fido.toml", "vendor/.gitattributes"]
    );

    let shown = fido_ok(root, &["changes", "show", "subagent-7"]);
    let files: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("  added") || l.starts_with("  modified"))
        .collect();
    assert_eq!(files.len(), 4, "{shown}");
    assert!(
        files[..3].iter().all(|l| l.ends_with("(control file)")),
        "{shown}"
    );
    assert!(
        files[3].contains("a.rs") && !files[3].contains("control"),
        "{shown}"
    );
    let listed: Value = serde_json::from_str(&fido_ok(root, &["changes", "--json"])).unwrap();
    assert_eq!(listed[0]["control_files"].as_array().unwrap().len(), 3);
}

/// In the terminal UI (`delegate_merge = "ask"`, its default) the review
/// of such a change set names the control files above the files, lists
/// `.gitattributes` before `a.rs`, marked, and shows its diff first;
/// Esc discards it and the checkout stays as it was.
#[test]
fn the_terminal_review_names_control_files_and_shows_them_first() {
    let ws = repo();
    let root = ws.path();
    // In a folder that git lists after a.rs: the review reorders.
    fs::create_dir(root.join("z")).unwrap();
    fs::write(root.join("z/.gitattributes"), "*.rs text\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "z"]);
    let delegate = json!({"task": "tidy", "mode": "write", "scope": {"paths": ["a.rs", "z"]}});
    let server = FakeServer::start(vec![
        call("d1", "delegate", delegate),
        patch("p1", "a.rs", "fn a() {}", "fn a() { /* tidy */ }"),
        patch(
            "p2",
            "z/.gitattributes",
            "*.rs text",
            "*.rs text filter=tidy",
        ),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("Discarded, as you said.")),
    ]);
    let allow = [("FIDO_DELEGATE_WRITE", "allow".to_string())];
    let tmux = Tmux::for_model(&server.base_url(), &allow);
    start_fido(&tmux, root);
    tmux.type_line("tidy up");
    let screen = tmux.wait_for("the review", |s| {
        // Its keys answer once it shows them (after a quiet moment).
        s.contains("Apply this change set")
            && s.contains("(control file)")
            && s.contains("Esc discard")
    });
    assert!(
        screen.contains("touches control files: z/.gitattributes"),
        "{screen}"
    );
    let at = |needle: &str| {
        screen
            .find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in\n{screen}"))
    };
    assert!(
        at("modified z/.gitattributes +1 -1  (control file)") < at("modified a.rs +1 -1"),
        "{screen}"
    );
    assert!(
        at("diff --git a/z/.gitattributes") < at("diff --git a/a.rs"),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.wait_for("the answer", |s| s.contains("Discarded, as you said."));
    assert_eq!(
        fs::read_to_string(root.join("a.rs")).unwrap(),
        "fn a() {}\n"
    );
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| {
        !s.contains("Discarded, as you said.")
    });
    tmux.assert_fido_gone(root);
}

/// `fido.toml` is a symlink to `conf/main.toml`, and the write subagent
/// edits `conf/main.toml`: no name of the change set is a control file's,
/// yet it edits the file Fido reads, so auto leaves it pending and marked.
#[test]
fn auto_merge_leaves_pending_an_edit_of_the_file_fido_toml_links_to() {
    let ws = repo();
    let root = ws.path();
    fs::create_dir(root.join("conf")).unwrap();
    fs::write(root.join("conf/main.toml"), "max_steps = 50\n").unwrap();
    std::os::unix::fs::symlink("conf/main.toml", root.join("fido.toml")).unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "config"]);
    let delegate = json!({"task": "tune", "mode": "write", "scope": {"paths": ["conf"]}});
    let server = FakeServer::start(vec![
        call("d1", "delegate", delegate),
        patch(
            "p1",
            "conf/main.toml",
            "max_steps = 50",
            "max_steps = 50\nsandbox_mode = \"danger-full-access\"",
        ),
        Reply::sse(sse::text_turn(DONE)),
        Reply::sse(sse::text_turn("left pending")),
    ]);
    let cmd = exec_cmd_with_flags(
        root,
        &server,
        &["--allow-write-delegation"],
        "go",
        &[("FIDO_DELEGATE_MERGE", "auto")],
    );
    let output = run_in(root, cmd, None, Duration::from_secs(60));
    assert!(output.status.success());
    let result = result_of(&server, "d1");
    assert_eq!(result["changes"]["merge"], "pending", "{result:#}");
    assert_eq!(
        result["changes"]["control_files"],
        json!(["conf/main.toml"])
    );
    assert_eq!(
        fs::read_to_string(root.join("conf/main.toml")).unwrap(),
        "max_steps = 50\n"
    );
    let id = result["changes"]["id"].as_str().unwrap();
    let shown = fido_ok(root, &["changes", "show", id]);
    assert!(
        shown.contains("conf/main.toml  +1 -0  (control file)"),
        "{shown}"
    );
}
