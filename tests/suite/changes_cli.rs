//! `fido changes` and `fido undo` through the binary, on change sets a test
//! makes with the library in a real git repository (no model).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use fido::changes::{self, Record, Start};
use serde_json::Value;

use crate::common::fido_cmd;
use crate::common::git;

const SEVEN: &str = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";

/// A repository with one commit and an uncommitted edit of README.md.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    fs::create_dir(root.join("src")).unwrap();
    fs::write(root.join("src/a.rs"), SEVEN).unwrap();
    fs::write(root.join("README.md"), "readme\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "first"]);
    fs::write(root.join("README.md"), "readme, edited\n").unwrap();
    dir
}

/// What must not change in the user's repository: status, refs and
/// worktrees.
fn repository_state(root: &Path) -> (String, String, String) {
    (
        git(root, &["status", "--porcelain=v1", "--untracked-files=all"]),
        git(root, &["for-each-ref"]),
        git(root, &["worktree", "list", "--porcelain"]),
    )
}

/// Every file of the checkout but `.git` and Fido's state, with its bytes.
fn checkout(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if dir == root && (name == ".git" || name == ".fido-state") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                out.insert(relative, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A pending change set `id` claiming `src`, made as a write subagent
/// would: `edit` changes the worktree, then the set is built with the diff
/// capped at `diff_cap` bytes.
fn change_set(root: &Path, id: &str, diff_cap: usize, edit: impl FnOnce(&Path)) -> Record {
    let start = Start {
        task: "Rename two to TWO".into(),
        claim: vec!["src".into()],
        plan_item: None,
    };
    let worktree = changes::start(root, id, &start).unwrap();
    edit(&worktree.layout.tree());
    let record = changes::finish(root, &worktree, &start, diff_cap).unwrap();
    assert_eq!(record.set.merge.as_str(), "pending");
    record
}

/// The subagent's edit most tests use: line 2 of src/a.rs and a new file.
fn edit_line_two(tree: &Path) {
    fs::write(tree.join("src/a.rs"), SEVEN.replace("two", "TWO")).unwrap();
    fs::write(tree.join("src/new.rs"), "new\n").unwrap();
}

fn fido(root: &Path, args: &[&str]) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C").arg(root).args(args);
    crate::common::process::run_in(root, cmd, None, Duration::from_secs(30))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `fido ARGS…` that must succeed; its stdout.
fn fido_ok(root: &Path, args: &[&str]) -> String {
    let output = fido(root, args);
    assert!(
        output.status.success(),
        "fido {args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    stdout(&output)
}

/// `fido ARGS…` that must fail with exit code 1; its stderr.
fn fido_fails(root: &Path, args: &[&str]) -> String {
    let output = fido(root, args);
    assert_eq!(
        output.status.code(),
        Some(1),
        "fido {args:?}: {}{}",
        stdout(&output),
        stderr(&output)
    );
    stderr(&output)
}

#[test]
fn changes_lists_and_shows_a_pending_change_set() {
    let dir = repo();
    let root = dir.path();
    assert_eq!(fido_ok(root, &["changes"]), "no pending change sets\n");
    assert_eq!(fido_ok(root, &["changes", "--json"]), "[]\n");
    let record = change_set(root, "subagent-7", 64, |tree| {
        edit_line_two(tree);
        let long: String = (1..=20)
            .map(|n| format!("line {n} of a long file\n"))
            .collect();
        fs::write(tree.join("src/long.rs"), long).unwrap();
        fs::write(tree.join("README.md"), "outside the claim\n").unwrap();
    });
    assert!(record.set.diff_truncated, "the capped diff is cut short");

    let text = fido_ok(root, &["changes"]);
    assert_eq!(
        text,
        "subagent-7  pending    3 files (+22 -1)  claim: src  Rename two to TWO\n"
    );
    let listed: Value = serde_json::from_str(&fido_ok(root, &["changes", "--json"])).unwrap();
    let mut expected = serde_json::to_value(&record.set).unwrap();
    expected["task"] = "Rename two to TWO".into();
    expected["claim"] = serde_json::json!(["src"]);
    assert_eq!(listed, serde_json::json!([expected]));
    let one: Value =
        serde_json::from_str(&fido_ok(root, &["changes", "show", "subagent-7", "--json"])).unwrap();
    assert_eq!(one, expected);

    let show = fido_ok(root, &["changes", "show", "subagent-7"]);
    for wanted in [
        "change set subagent-7 · pending",
        "task:  Rename two to TWO",
        "  modified  src/a.rs  +1 -1",
        "  added     src/new.rs  +1 -0",
        "  modified  README.md  +1 -1  (not applied)",
        "-two\n+TWO\n",
        // The full patch, not the capped diff.
        "+line 20 of a long file\n",
    ] {
        assert!(show.contains(wanted), "{wanted:?} not in\n{show}");
    }
    // README.md lies outside the claim: named, never in the diff.
    assert!(!show.contains("+outside the claim"), "{show}");
    assert!(!show.contains('\x1b'), "no colour off a terminal: {show}");
}

#[test]
fn apply_merges_a_concurrent_edit_and_undo_restores_it() {
    let dir = repo();
    let root = dir.path();
    let untouched = repository_state(root);
    change_set(root, "subagent-8", changes::DEFAULT_DIFF_CAP, edit_line_two);
    // Meanwhile the person edits line 6.
    let person = SEVEN.replace("six", "SIX");
    fs::write(root.join("src/a.rs"), &person).unwrap();
    let before_apply = checkout(root);
    let state_before_apply = repository_state(root);

    assert_eq!(
        fido_ok(root, &["changes", "apply", "subagent-8"]),
        "applied subagent-8: 2 files; `fido undo` reverts it\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("src/a.rs")).unwrap(),
        person.replace("two", "TWO")
    );
    assert_eq!(
        fs::read_to_string(root.join("src/new.rs")).unwrap(),
        "new\n"
    );
    let (status, refs, worktrees) = repository_state(root);
    assert_eq!(status, " M README.md\n M src/a.rs\n?? src/new.rs\n");
    assert_eq!(
        (refs, worktrees),
        (untouched.1.clone(), untouched.2.clone())
    );
    assert_eq!(fido_ok(root, &["changes"]), "no pending change sets\n");
    assert!(
        fido_ok(root, &["changes", "--all"]).starts_with("subagent-8  applied "),
        "--all lists the applied one"
    );
    let again = fido_fails(root, &["changes", "apply", "subagent-8"]);
    assert!(again.contains("subagent-8 is applied already"), "{again}");

    assert_eq!(
        fido_ok(root, &["undo"]),
        "undone: change set of subagent-8\n"
    );
    assert_eq!(checkout(root), before_apply, "byte for byte");
    assert_eq!(repository_state(root), state_before_apply);
    assert_eq!(fido_ok(root, &["undo"]), "nothing to undo\n");
}

#[test]
fn a_conflicting_apply_writes_nothing_and_the_set_stays_listed() {
    let dir = repo();
    let root = dir.path();
    change_set(root, "subagent-9", changes::DEFAULT_DIFF_CAP, edit_line_two);
    fs::write(root.join("src/a.rs"), SEVEN.replace("two", "person")).unwrap();
    let before = checkout(root);
    let state = repository_state(root);

    let err = fido_fails(root, &["changes", "apply", "subagent-9"]);
    for wanted in [
        "src/a.rs",
        "lines 2-6",
        "nothing was written",
        "stays pending",
    ] {
        assert!(err.contains(wanted), "{wanted:?} not in {err}");
    }
    assert_eq!(checkout(root), before, "nothing written");
    assert_eq!(repository_state(root), state);
    assert!(
        fido_ok(root, &["changes"]).starts_with("subagent-9  conflict "),
        "still listed"
    );
    let show = fido_ok(root, &["changes", "show", "subagent-9"]);
    assert!(
        show.contains("1 conflict\n  src/a.rs: 1 hunk overlap"),
        "{show}"
    );
    assert!(show.contains("(lines 2-6)"), "{show}");
    assert_eq!(fido_ok(root, &["undo"]), "nothing to undo\n");

    assert_eq!(
        fido_ok(root, &["changes", "discard", "subagent-9"]),
        "discarded subagent-9\n"
    );
    assert_eq!(fido_ok(root, &["changes"]), "no pending change sets\n");
    assert_eq!(checkout(root), before);
}

#[test]
fn discard_leaves_the_checkout_and_repository_as_they_were() {
    let dir = repo();
    let root = dir.path();
    let files = checkout(root);
    let state = repository_state(root);
    change_set(
        root,
        "subagent-10",
        changes::DEFAULT_DIFF_CAP,
        edit_line_two,
    );
    assert_eq!(
        fido_ok(root, &["changes", "discard", "subagent-10"]),
        "discarded subagent-10\n"
    );
    assert_eq!(fido_ok(root, &["changes"]), "no pending change sets\n");
    assert!(
        fido_ok(root, &["changes", "--all"]).starts_with("subagent-10  discarded "),
        "--all lists the discarded one"
    );
    assert_eq!(checkout(root), files);
    assert_eq!(repository_state(root), state);
    let again = fido_fails(root, &["changes", "discard", "subagent-10"]);
    assert!(
        again.contains("subagent-10 is discarded already"),
        "{again}"
    );
}

#[test]
fn an_unknown_change_set_is_named() {
    let dir = repo();
    let root = dir.path();
    for verb in ["show", "apply", "discard"] {
        let err = fido_fails(root, &["changes", verb, "subagent-404"]);
        assert_eq!(
            err,
            "fido: there is no change set \"subagent-404\"; `fido changes` lists them\n"
        );
    }
    let err = fido_fails(root, &["changes", "show", "../etc"]);
    assert!(err.contains("no change set \"../etc\""), "{err}");
}

/// `fido ARGS…` in `root` under strace, which kills it with SIGKILL as it
/// enters its `nth` rename (`-e inject`): a point in its work chosen by
/// count, not by time. `None` where strace is missing or cannot trace
/// (a failure under `CI=true`).
fn killed_at_rename(root: &Path, nth: u32, args: &[&str]) -> Option<Output> {
    let probe = std::process::Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        crate::common::process::skip_unless_ci("killed_at_rename", "strace cannot trace here");
        return None;
    }
    let fido = fido_cmd();
    let mut cmd = std::process::Command::new("strace");
    let renames = "rename,renameat,renameat2";
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!("trace={renames}"))
        .arg("-e")
        .arg(format!("inject={renames}:signal=SIGKILL:when={nth}"))
        .arg(fido.get_program())
        .arg("-C")
        .arg(root)
        .args(args);
    for (key, value) in fido.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    Some(crate::common::process::run_in(
        root,
        cmd,
        None,
        Duration::from_secs(30),
    ))
}

/// `fido changes apply` killed with SIGKILL part-way through putting 201
/// files in place (at its 100th rename): `fido undo` puts the checkout
/// back byte for byte, the temp files of the killed apply included, and
/// the change set, still pending, applies whole afterwards.
#[test]
fn a_killed_apply_is_undone_whole_and_applies_again() {
    let dir = repo();
    let root = dir.path();
    change_set(root, "subagent-11", changes::DEFAULT_DIFF_CAP, |tree| {
        edit_line_two(tree);
        for n in 0..200 {
            fs::write(tree.join(format!("src/f{n:03}.rs")), format!("{n}\n")).unwrap();
        }
    });
    let before = checkout(root);
    let Some(output) = killed_at_rename(root, 100, &["changes", "apply", "subagent-11"]) else {
        return;
    };
    assert!(!output.status.success(), "{}", stderr(&output));
    let placed = (0..200)
        .filter(|n| root.join(format!("src/f{n:03}.rs")).exists())
        .count();
    assert!(
        (1..200).contains(&placed),
        "{placed} of 200 in place: not part-way"
    );

    assert_eq!(
        fido_ok(root, &["undo"]),
        "undone: change set of subagent-11\n"
    );
    assert_eq!(checkout(root), before, "byte for byte, no temp file left");
    assert!(
        fido_ok(root, &["changes"]).starts_with("subagent-11  pending "),
        "still pending"
    );
    assert_eq!(
        fido_ok(root, &["changes", "apply", "subagent-11"]),
        "applied subagent-11: 202 files; `fido undo` reverts it\n"
    );
    assert_eq!(checkout(root).len(), before.len() + 201);
}
