//! The change-set life cycle on real git repositories.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::*;
use crate::protocol::changes::{FileStatus, MergeState};
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

/// Runs git in `dir` with a fixed author; its stdout.
pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
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

/// A repository with a commit, an uncommitted edit, a staged file, an
/// untracked file and an ignored one.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    fs::create_dir(root.join("src")).unwrap();
    fs::write(
        root.join("src/a.rs"),
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\n",
    )
    .unwrap();
    fs::write(root.join("README.md"), "readme\n").unwrap();
    fs::write(root.join(".gitignore"), "target/\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "first"]);
    fs::write(root.join("README.md"), "readme, edited\n").unwrap();
    fs::write(root.join("staged.txt"), "staged\n").unwrap();
    git(root, &["add", "staged.txt"]);
    fs::write(root.join("src/untracked.rs"), "new\n").unwrap();
    fs::create_dir(root.join("target")).unwrap();
    fs::write(root.join("target/out"), "ignored\n").unwrap();
    dir
}

/// What a test compares to prove the user's repository was not touched.
fn repository_state(root: &Path) -> (String, String, String, String, Vec<u8>) {
    (
        git(root, &["status", "--porcelain=v1", "--untracked-files=all"]),
        git(root, &["for-each-ref"]),
        git(root, &["worktree", "list", "--porcelain"]),
        git(root, &["stash", "list"]),
        fs::read(root.join(".git/index")).unwrap(),
    )
}

fn start_for(root: &Path, id: &str, claim: &[&str]) -> (Worktree, Start) {
    let start = Start {
        task: "t".into(),
        claim: claim.iter().map(|c| c.to_string()).collect(),
        plan_item: None,
    };
    (super::start(root, id, &start).unwrap(), start)
}

#[test]
fn the_base_is_the_parents_state_and_the_users_repository_is_untouched() {
    let dir = repo();
    let root = dir.path();
    let before = repository_state(root);
    let (worktree, _) = start_for(root, "subagent-1", &["src"]);
    let tree = worktree.layout.tree();
    assert_eq!(
        fs::read_to_string(tree.join("README.md")).unwrap(),
        "readme, edited\n"
    );
    assert_eq!(
        fs::read_to_string(tree.join("staged.txt")).unwrap(),
        "staged\n"
    );
    assert_eq!(
        fs::read_to_string(tree.join("src/untracked.rs")).unwrap(),
        "new\n"
    );
    assert!(!tree.join("target").exists(), "ignored files stay out");
    assert!(!tree.join(".fido-state").exists(), "Fido's state stays out");
    // Read-only git works in the worktree, on the base, with the
    // environment the subagent gets.
    let in_tree = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(tree.join("src"))
            .envs(worktree.roots().git_env())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let log = in_tree(&["log", "--format=%s", "-n", "2"]);
    assert_eq!(log, "fido: the base of a write subagent\nfirst\n");
    assert_eq!(in_tree(&["status", "--porcelain"]), "");
    assert!(
        !tree.join(".git").exists(),
        "no git link the subagent could rewrite"
    );
    assert_eq!(repository_state(root), before);
}

#[test]
fn a_change_set_names_claimed_and_outside_files_and_applies_three_way() {
    let dir = repo();
    let root = dir.path();
    let (worktree, start) = start_for(root, "subagent-2", &["src", "new"]);
    let tree = worktree.layout.tree();
    // The subagent: edits line 2, adds a file, deletes one, and writes
    // outside its claim.
    fs::write(
        tree.join("src/a.rs"),
        "one\nTWO\nthree\nfour\nfive\nsix\nseven\n",
    )
    .unwrap();
    fs::create_dir(tree.join("new")).unwrap();
    fs::write(tree.join("new/b.rs"), "b\n").unwrap();
    fs::remove_file(tree.join("src/untracked.rs")).unwrap();
    fs::write(tree.join("README.md"), "hijacked\n").unwrap();
    let record = finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
    assert!(
        !tree.exists(),
        "the worktree is gone once the change set is built"
    );
    let set = &record.set;
    assert_eq!(set.merge, MergeState::Pending);
    let files: Vec<(&str, FileStatus, u64, u64)> = set
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.added, f.removed))
        .collect();
    assert_eq!(
        files,
        [
            ("new/b.rs", FileStatus::Added, 1, 0),
            ("src/a.rs", FileStatus::Modified, 1, 1),
            ("src/untracked.rs", FileStatus::Deleted, 0, 1),
        ]
    );
    assert_eq!(set.outside_claim.len(), 1);
    assert_eq!(set.outside_claim[0].path, "README.md");
    assert!(set.diff.contains("+TWO"), "{}", set.diff);
    assert!(!set.diff.contains("hijacked"));
    let patch = fs::read_to_string(root.join(&set.patch)).unwrap();
    assert!(patch.contains("+TWO") && !patch.contains("hijacked"));

    // Meanwhile the person edits line 6 of the same file.
    fs::write(
        root.join("src/a.rs"),
        "one\ntwo\nthree\nfour\nfive\nSIX\nseven\n",
    )
    .unwrap();
    let before = fs::read(root.join("src/a.rs")).unwrap();
    let workspace = Workspace::new(root).unwrap();
    let undo = UndoLog::new(root);
    let applied = apply::apply(&workspace, &undo, "subagent-2").unwrap();
    assert_eq!(applied.set.merge, MergeState::Applied);
    assert_eq!(
        fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "one\nTWO\nthree\nfour\nfive\nSIX\nseven\n"
    );
    assert_eq!(fs::read_to_string(root.join("new/b.rs")).unwrap(), "b\n");
    assert!(!root.join("src/untracked.rs").exists());
    assert_eq!(
        fs::read_to_string(root.join("README.md")).unwrap(),
        "readme, edited\n"
    );
    assert!(
        !worktree.layout.git_dir().exists(),
        "the private repository goes"
    );
    // One undo restores every file byte for byte.
    undo.undo_last(&workspace).unwrap().unwrap();
    assert_eq!(fs::read(root.join("src/a.rs")).unwrap(), before);
    assert!(!root.join("new").exists());
    assert_eq!(
        fs::read_to_string(root.join("src/untracked.rs")).unwrap(),
        "new\n"
    );
    let again = apply::apply(&workspace, &undo, "subagent-2").unwrap_err();
    assert!(again.to_string().contains("applied already"), "{again}");
}

#[test]
fn a_conflict_writes_nothing_and_stays_open() {
    let dir = repo();
    let root = dir.path();
    let (worktree, start) = start_for(root, "subagent-3", &["src"]);
    let tree = worktree.layout.tree();
    fs::write(
        tree.join("src/a.rs"),
        "one\nsubagent\nthree\nfour\nfive\nsix\nseven\n",
    )
    .unwrap();
    fs::write(tree.join("src/c.rs"), "c\n").unwrap();
    finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
    fs::write(
        root.join("src/a.rs"),
        "one\nperson\nthree\nfour\nfive\nsix\nseven\n",
    )
    .unwrap();
    let workspace = Workspace::new(root).unwrap();
    let undo = UndoLog::new(root);
    let record = apply::apply(&workspace, &undo, "subagent-3").unwrap();
    assert_eq!(record.set.merge, MergeState::Conflict);
    assert_eq!(record.set.conflicts.len(), 1);
    assert_eq!(record.set.conflicts[0].path, "src/a.rs");
    assert_eq!(record.set.conflicts[0].hunks, ["2-6"]);
    assert!(
        !root.join("src/c.rs").exists(),
        "a conflict writes nothing at all"
    );
    assert_eq!(
        fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "one\nperson\nthree\nfour\nfive\nsix\nseven\n"
    );
    assert!(undo.entries().unwrap().is_empty());
    assert_eq!(records::open(root).len(), 1);
    let discarded = apply::discard(root, "subagent-3").unwrap();
    assert_eq!(discarded.set.merge, MergeState::Discarded);
    assert!(records::open(root).is_empty());
}

/// A person saves a file after the apply decided on it and before its
/// rename: the save stays (the apply stops there, puts back what it had
/// written and names the file), and the next apply merges with the save.
/// Its undo then brings the person's save back, byte for byte.
#[test]
fn a_save_between_the_decision_and_the_rename_is_never_overwritten() {
    let dir = repo();
    let root = dir.path();
    let (worktree, start) = start_for(root, "subagent-4", &["src"]);
    let tree = worktree.layout.tree();
    let seven = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n";
    fs::write(tree.join("src/a.rs"), seven.replace("two", "TWO")).unwrap();
    for name in ["b.rs", "c.rs", "d.rs"] {
        fs::write(tree.join("src").join(name), "new\n").unwrap();
    }
    finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
    let workspace = Workspace::new(root).unwrap();
    let undo = UndoLog::new(root);
    let saved = seven.replace("six", "SIX");
    let save = || fs::write(root.join("src/a.rs"), &saved).unwrap();
    let record = apply::apply_then(&workspace, &undo, "subagent-4", save).unwrap();
    assert_eq!(record.set.merge, MergeState::Conflict);
    assert_eq!(record.set.conflicts.len(), 1, "{:?}", record.set.conflicts);
    assert_eq!(record.set.conflicts[0].path, "src/a.rs");
    assert_eq!(fs::read_to_string(root.join("src/a.rs")).unwrap(), saved);
    for name in ["b.rs", "c.rs", "d.rs"] {
        assert!(!root.join("src").join(name).exists(), "{name} stayed");
    }
    assert!(undo.entries().unwrap().is_empty(), "no undo entry");
    let leftovers: Vec<_> = fs::read_dir(root.join("src")).unwrap().flatten().collect();
    assert_eq!(leftovers.len(), 2, "a temp file was left: {leftovers:?}");

    let record = apply::apply(&workspace, &undo, "subagent-4").unwrap();
    assert_eq!(record.set.merge, MergeState::Applied);
    let merged = saved.replace("two", "TWO");
    assert_eq!(fs::read_to_string(root.join("src/a.rs")).unwrap(), merged);
    undo.undo_last(&workspace).unwrap().unwrap();
    assert_eq!(fs::read_to_string(root.join("src/a.rs")).unwrap(), saved);
    assert!(!root.join("src/b.rs").exists());
}

#[test]
fn outside_a_repository_there_is_no_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let start = Start {
        task: "t".into(),
        claim: vec!["a".into()],
        plan_item: None,
    };
    let err = super::start(dir.path(), "subagent-4", &start).unwrap_err();
    assert!(matches!(err, ChangesError::NotARepository(_)), "{err}");
    assert!(!dir.path().join(".fido-state/changes/subagent-4").exists());
}

#[test]
fn an_orphaned_worktree_becomes_a_pending_change_set() {
    let dir = repo();
    let root = dir.path();
    let (worktree, _) = start_for(root, "subagent-5", &["src"]);
    fs::write(worktree.layout.tree().join("src/a.rs"), "rewritten\n").unwrap();
    // A dead owner: a pid that cannot exist.
    fs::write(worktree.layout.owner(), "2147483646").unwrap();
    assert_eq!(sweep_orphans(root, &no_box), ["subagent-5"]);
    assert!(!worktree.layout.tree().exists());
    let open = records::open(root);
    assert_eq!(open.len(), 1);
    assert_eq!(open[0].set.files[0].path, "src/a.rs");
}

/// The owner file names this process by pid and start time: the sweep
/// keeps the worktree while that process runs, and sweeps it once the pid
/// belongs to another start (a reused pid).
#[test]
fn an_owner_is_its_pid_and_start_time_so_a_reused_pid_is_no_owner() {
    let dir = repo();
    let root = dir.path();
    let (worktree, _) = start_for(root, "subagent-6", &["src"]);
    let stamp = fs::read_to_string(worktree.layout.owner()).unwrap();
    let me = std::process::id() as i32;
    let start = crate::procfs::start_time(me).unwrap();
    assert_eq!(stamp, format!("{me} {start}\n"));
    assert!(sweep_orphans(root, &no_box).is_empty());
    assert!(
        worktree.layout.tree().is_dir(),
        "a live owner's worktree stays"
    );
    fs::write(worktree.layout.owner(), format!("{me} {}\n", start + 1)).unwrap();
    fs::write(worktree.layout.tree().join("src/a.rs"), "rewritten\n").unwrap();
    assert_eq!(sweep_orphans(root, &no_box), ["subagent-6"]);
    assert!(!worktree.layout.tree().exists());
}

/// The patch file is git's own patch of the claimed files, whether Fido
/// cut it from its one listing or (a type change makes two sections of one
/// file) asked git for it: compared with `diff-index` of the result index,
/// limited to the claim.
#[test]
fn the_patch_is_gits_own_for_the_claimed_files() {
    let dir = repo();
    let root = dir.path();
    for (id, type_change) in [("subagent-7", false), ("subagent-8", true)] {
        let (worktree, start) = start_for(root, id, &["src"]);
        let tree = worktree.layout.tree();
        fs::write(tree.join("src/a.rs"), "one\nTWO\n").unwrap();
        fs::write(tree.join("src/bin.dat"), [0u8, 159, 146, 150]).unwrap();
        fs::write(tree.join("README.md"), "outside\n").unwrap();
        if type_change {
            fs::remove_file(tree.join("src/untracked.rs")).unwrap();
            std::os::unix::fs::symlink("a.rs", tree.join("src/untracked.rs")).unwrap();
        }
        let record = finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
        let patch = fs::read(root.join(&record.set.patch)).unwrap();
        let git_dir = worktree.layout.git_dir();
        let expected = Command::new("git")
            .args(["diff-index", "--cached", "--full-index", "--binary", "-r"])
            .args(["-p", "-M", &record.base_tree, "--", ":(top,literal)src"])
            .env("GIT_DIR", &git_dir)
            .env("GIT_INDEX_FILE", git_dir.join("result-index"))
            .output()
            .unwrap();
        assert!(expected.status.success());
        assert_eq!(
            String::from_utf8_lossy(&patch),
            String::from_utf8_lossy(&expected.stdout)
        );
        let sections = patch.windows(11).filter(|w| w == b"diff --git ").count();
        assert_eq!(sections, if type_change { 4 } else { 2 }, "{id}");
        assert_eq!(record.set.outside_claim[0].path, "README.md");
    }
}

/// A copy of an index keeps the original's modification time, which git
/// compares every entry with to tell a racily clean file (see
/// `worktree::copy_index`); a missing index copies to nothing.
#[test]
fn an_index_copy_keeps_the_originals_time() {
    let dir = tempfile::tempdir().unwrap();
    let (from, to) = (dir.path().join("index"), dir.path().join("copy"));
    fs::write(&from, "DIRC").unwrap();
    let then = std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 123_456_789);
    fs::File::options()
        .write(true)
        .open(&from)
        .unwrap()
        .set_modified(then)
        .unwrap();
    worktree::copy_index(&from, &to).unwrap();
    assert_eq!(fs::read(&to).unwrap(), b"DIRC");
    assert_eq!(fs::metadata(&to).unwrap().modified().unwrap(), then);
    let missing = dir.path().join("none");
    worktree::copy_index(&missing, &dir.path().join("copy2")).unwrap();
    assert!(!dir.path().join("copy2").exists());
}

/// A write subagent of another live Fido (here a real process called
/// `fido`, named by its pid and start time in the owner file) keeps its
/// claimed paths from this one's; a disjoint claim runs, and once that
/// process has ended its claim holds nothing. The same owner file naming a
/// live process that is no Fido holds nothing either.
#[test]
fn another_fidos_live_claim_is_refused_across_processes() {
    let dir = repo();
    let root = dir.path();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/usr/bin/sleep", bin.path().join("fido")).unwrap();
    let mut other = Reaped(
        Command::new(bin.path().join("fido"))
            .arg("30")
            .spawn()
            .unwrap(),
    );
    let mut stranger = Reaped(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = other.0.id() as i32;
    let layout = records::Layout::new(root, "subagent-x");
    fs::create_dir_all(layout.tree()).unwrap();
    let theirs = serde_json::json!({"task": "t", "claim": ["src"]});
    fs::write(layout.dir.join(START_FILE), theirs.to_string()).unwrap();
    let start_time = crate::procfs::start_time(pid).unwrap();
    fs::write(layout.owner(), format!("{pid} {start_time}\n")).unwrap();

    let ours = |id: &str, claim: &[&str]| {
        let start = Start {
            task: "t".into(),
            claim: claim.iter().map(|c| c.to_string()).collect(),
            plan_item: None,
        };
        super::start(root, id, &start)
    };
    let refused = ours("subagent-y", &["src/a.rs"]).unwrap_err();
    let ChangesError::Claimed(conflict) = &refused else {
        panic!("{refused}");
    };
    assert_eq!(conflict.paths, ["src/a.rs"]);
    assert_eq!(
        conflict.other,
        format!("subagent-x (of another Fido, pid {pid})")
    );
    assert!(!records::Layout::new(root, "subagent-y").dir.exists());
    assert!(
        ours("subagent-z", &["README.md"]).is_ok(),
        "a disjoint claim"
    );
    assert!(
        sweep_orphans(root, &no_box).is_empty(),
        "a live owner's worktree stays"
    );

    let stranger_pid = stranger.0.id() as i32;
    let stranger_start = crate::procfs::start_time(stranger_pid).unwrap();
    fs::write(layout.owner(), format!("{stranger_pid} {stranger_start}\n")).unwrap();
    assert_eq!(
        worktree::owner(&layout),
        worktree::Owner::Stranger(stranger_pid)
    );
    assert!(
        ours("subagent-v", &["src"]).is_ok(),
        "a stranger holds nothing"
    );
    assert!(
        sweep_orphans(root, &no_box).is_empty(),
        "nor is its folder swept"
    );
    fs::write(layout.owner(), format!("{pid} {start_time}\n")).unwrap();
    stranger.0.kill().unwrap();

    other.0.kill().unwrap();
    other.0.wait().unwrap();
    assert!(
        ours("subagent-w", &["src"]).is_ok(),
        "a dead Fido holds nothing"
    );
}

/// A child process killed and reaped however the test ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An apply waits for the change set's lock (another process applying or
/// discarding it) and changes nothing while it waits.
#[test]
fn an_apply_waits_for_the_change_sets_lock() {
    let dir = repo();
    let root = dir.path();
    let (worktree, start) = start_for(root, "subagent-l", &["src"]);
    fs::write(worktree.layout.tree().join("src/a.rs"), "locked\n").unwrap();
    finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
    let held = records::lock(root, "subagent-l").unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let workspace = Workspace::new(root).unwrap();
    let applying = std::thread::spawn(move || {
        let undo = UndoLog::new(&workspace.root);
        let applied = apply::apply(&workspace, &undo, "subagent-l");
        let _ = sender.send(());
        applied
    });
    let waited = receiver.recv_timeout(std::time::Duration::from_millis(300));
    assert!(waited.is_err(), "the apply ran while the lock was held");
    assert_ne!(
        fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "locked\n"
    );
    drop(held);
    let applied = applying.join().unwrap().unwrap();
    assert_eq!(applied.set.merge, MergeState::Applied);
    assert_eq!(
        fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "locked\n"
    );
    let unknown = records::lock(root, "subagent-none");
    assert!(matches!(unknown, Err(ChangesError::Unknown(_))));
    assert!(!records::Layout::new(root, "subagent-none").dir.exists());
}

/// A repository without a commit yet: the base is a root commit of the
/// files as they are, and the worktree holds them.
#[test]
fn a_repository_without_a_commit_gets_a_root_base() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    git(root, &["init", "-q", "-b", "main"]);
    fs::write(root.join("a.txt"), "first\n").unwrap();
    let (worktree, start) = start_for(root, "subagent-u", &["a.txt"]);
    assert_eq!(worktree.repo.head, None);
    let private = worktree.layout.git_dir();
    let parents = git(
        root,
        &[
            &format!("--git-dir={}", private.display()),
            "rev-list",
            "--parents",
            "-n",
            "1",
            "HEAD",
        ],
    );
    assert_eq!(
        parents.trim(),
        worktree.base.commit,
        "a root commit: no parent"
    );
    let tree = worktree.layout.tree();
    assert_eq!(fs::read_to_string(tree.join("a.txt")).unwrap(), "first\n");
    fs::write(tree.join("a.txt"), "second\n").unwrap();
    let record = finish(root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap();
    assert_eq!(record.set.files[0].path, "a.txt");
    assert_eq!(record.set.files[0].status, FileStatus::Modified);
}

/// A box that confines nothing, for the sweep's own logic (the box itself
/// is tested in `sandbox::git_wall`).
fn no_box(_: &Path) -> Option<crate::git::PreExec> {
    Some(crate::git::PreExec(std::sync::Arc::new(|| Ok(()))))
}
