//! A write subagent's nested repositories, on real git: the attack of a
//! repository built by hand in a gitlink's folder of its worktree, with a
//! clean filter that writes a marker, and its variants. Building, listing,
//! applying and discarding the change set never runs the filter.

use std::fs;
use std::path::{Path, PathBuf};

use super::tests::git;
use super::*;
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

const IDENTITY: [&str; 4] = ["-c", "user.name=t", "-c", "user.email=t@t"];

/// Commits everything of `dir` with a fixed identity.
fn commit(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(
        dir,
        &[&IDENTITY[..], &["commit", "-q", "-m", message]].concat(),
    );
}

/// A repository at `dir` with one committed file; its commit.
fn small_repo(dir: &Path, file: &str) -> String {
    fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    fs::write(dir.join(file), "lib\n").unwrap();
    commit(dir, "lib");
    git(dir, &["rev-parse", "HEAD"]).trim().to_string()
}

/// The main checkout (`main/` in `dir`): a committed file and a claimed
/// folder, a real submodule `sub` (cloned from `upstream/`), and an
/// untracked clone `vendor/lib` that the base records as a gitlink.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    marker: PathBuf,
    sub_commit: String,
    clone_commit: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("main");
    fs::create_dir_all(root.join("src")).unwrap();
    git(&root, &["init", "-q", "-b", "main"]);
    fs::write(root.join("a.txt"), "one\n").unwrap();
    fs::write(root.join("src/lib.rs"), "fn lib() {}\n").unwrap();
    let upstream = dir.path().join("upstream");
    let sub_commit = small_repo(&upstream, "s.txt");
    let upstream_arg = upstream.to_string_lossy().into_owned();
    git(
        &root,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            &upstream_arg,
            "sub",
        ],
    );
    commit(&root, "first");
    let clone_commit = small_repo(&root.join("vendor/lib"), "f.txt");
    Fixture {
        marker: dir.path().join("filter-ran"),
        _dir: dir,
        root,
        sub_commit,
        clone_commit,
    }
}

/// What the child does in its worktree: builds a repository by hand in
/// `folder` (its own `.git/config` with a clean filter that writes the
/// marker, `.git/info/attributes` selecting it for every file, `HEAD` the
/// gitlink's `commit`, objects borrowed from `objects`, an index, files
/// checked out and then given an old mtime, so that a status must hash
/// them through the filter).
fn plant(folder: &Path, commit: &str, objects: &Path, marker: &Path) {
    fs::create_dir_all(folder).unwrap();
    git(folder, &["init", "-q"]);
    let dot_git = folder.join(".git");
    fs::write(
        dot_git.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .unwrap();
    fs::write(dot_git.join("HEAD"), format!("{commit}\n")).unwrap();
    git(folder, &["read-tree", "HEAD"]);
    git(folder, &["checkout-index", "-a", "-f"]);
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch '{}'; cat\"\n\trequired = true\n",
        marker.display()
    );
    let config = fs::read_to_string(dot_git.join("config")).unwrap() + &filter;
    fs::write(dot_git.join("config"), config).unwrap();
    fs::create_dir_all(dot_git.join("info")).unwrap();
    fs::write(dot_git.join("info/attributes"), "* filter=x\n").unwrap();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    for entry in fs::read_dir(folder).unwrap().filter_map(Result::ok) {
        if entry.file_type().unwrap().is_file() {
            let file = fs::File::options().write(true).open(entry.path()).unwrap();
            file.set_modified(old).unwrap();
        }
    }
}

/// Starts a write delegation claiming `src`, lets `child` act in its
/// worktree, then builds its change set.
fn delegate(f: &Fixture, id: &str, child: impl FnOnce(&Path)) -> Record {
    let start = Start {
        task: "t".into(),
        claim: vec!["src".into()],
        plan_item: None,
    };
    let worktree = super::start(&f.root, id, &start).unwrap();
    assert!(!f.marker.exists(), "the filter ran at the base snapshot");
    let tree = worktree.layout.tree();
    fs::write(tree.join("src/lib.rs"), "fn lib() { /* edited */ }\n").unwrap();
    child(&tree);
    finish(&f.root, &worktree, &start, DEFAULT_DIFF_CAP).unwrap()
}

fn apply_it(root: &Path, id: &str) -> Record {
    let workspace = Workspace::new(root).unwrap();
    let undo = UndoLog::new(root);
    apply::apply(&workspace, &undo, id).unwrap()
}

/// The attack, in both gitlinks of the base: the change set is built
/// (the claimed edit in it, nothing of the nested repositories) and
/// applied, and the filter never runs.
#[test]
fn a_repository_planted_in_a_gitlink_folder_is_never_entered() {
    let f = fixture();
    let clone_objects = f.root.join("vendor/lib/.git/objects");
    let sub_objects = f.root.join(".git/modules/sub/objects");
    let record = delegate(&f, "subagent-1", |tree| {
        plant(
            &tree.join("vendor/lib"),
            &f.clone_commit,
            &clone_objects,
            &f.marker,
        );
        plant(&tree.join("sub"), &f.sub_commit, &sub_objects, &f.marker);
    });
    assert!(!f.marker.exists(), "the filter ran building the change set");
    let paths: Vec<&str> = record.set.files.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["src/lib.rs"]);
    assert!(
        record.set.outside_claim.is_empty(),
        "{:?}",
        record.set.outside_claim
    );
    let refused: Vec<&str> = record.refused.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(refused, ["sub/.git", "vendor/lib/.git"]);
    assert!(
        record
            .set
            .diff
            .starts_with("refused sub/.git: a nested repository"),
        "{}",
        record.set.diff
    );
    // Listed and shown (the record read back), then applied.
    let listed = records::list(&f.root);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].refused, record.refused);
    let applied = apply_it(&f.root, "subagent-1");
    assert_eq!(applied.set.merge, MergeState::Applied);
    assert!(!f.marker.exists(), "the filter ran applying the change set");
    assert_eq!(
        fs::read_to_string(f.root.join("src/lib.rs")).unwrap(),
        "fn lib() { /* edited */ }\n"
    );
}

/// Variants of the `.git` a child can make: a `gitdir:` file pointing at
/// the main repository, a repository whose `core.worktree` names the main
/// checkout, a symlink named `.git`, a `.git` inside the claimed folder,
/// upper-case `.GIT` (git refuses such a path outright: without the
/// refusal the whole build would fail). Each is refused by name and
/// nothing ran; the folder of a nested repository is left out whole (the
/// claimed folder too, so its edit does not come back).
#[test]
fn every_kind_of_dot_git_the_child_makes_is_refused_by_name() {
    let f = fixture();
    let main_git = f.root.join(".git");
    let record = delegate(&f, "subagent-2", |tree| {
        fs::create_dir_all(tree.join("linked")).unwrap();
        fs::write(tree.join("linked/x.txt"), "x\n").unwrap();
        fs::write(
            tree.join("linked/.git"),
            format!("gitdir: {}\n", main_git.display()),
        )
        .unwrap();
        plant(
            &tree.join("elsewhere"),
            &f.clone_commit,
            &f.root.join("vendor/lib/.git/objects"),
            &f.marker,
        );
        let config = tree.join("elsewhere/.git/config");
        let text = fs::read_to_string(&config).unwrap()
            + &format!("[core]\n\tworktree = {}\n", f.root.display());
        fs::write(&config, text).unwrap();
        fs::create_dir_all(tree.join("symlinked")).unwrap();
        std::os::unix::fs::symlink(&main_git, tree.join("symlinked/.git")).unwrap();
        fs::create_dir_all(tree.join("src/.git")).unwrap();
        fs::write(tree.join("src/.git/config"), "[core]\n\tfsmonitor = true\n").unwrap();
        fs::create_dir_all(tree.join("up/.GIT")).unwrap();
        fs::write(tree.join("up/.GIT/config"), "x\n").unwrap();
        fs::write(tree.join("up/kept.txt"), "kept\n").unwrap();
    });
    assert!(!f.marker.exists(), "the filter ran building the change set");
    let refused: Vec<&str> = record.refused.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        refused,
        [
            "elsewhere/.git",
            "linked/.git",
            "src/.git",
            "symlinked/.git",
            "up/.GIT"
        ]
    );
    // A nested repository's folder is left out whole; an upper-case one
    // alone.
    let outside: Vec<&str> = record
        .set
        .outside_claim
        .iter()
        .map(|c| c.path.as_str())
        .collect();
    assert_eq!(outside, ["up/kept.txt"]);
    assert!(record.set.files.is_empty(), "{:?}", record.set.files);
    assert!(!f.marker.exists());
}

/// Plain files written into a gitlink's folder are neither entered nor
/// taken: the gitlink stays as the base had it.
#[test]
fn files_in_a_gitlink_folder_are_not_taken() {
    let f = fixture();
    let record = delegate(&f, "subagent-3", |tree| {
        fs::create_dir_all(tree.join("vendor/lib")).unwrap();
        fs::write(tree.join("vendor/lib/f.txt"), "replaced\n").unwrap();
        fs::remove_dir_all(tree.join("sub")).ok();
        fs::write(tree.join("sub"), "now a file\n").unwrap();
    });
    let paths: Vec<&str> = record.set.files.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["src/lib.rs"]);
    assert!(
        record.set.outside_claim.is_empty(),
        "{:?}",
        record.set.outside_claim
    );
    assert!(record.refused.is_empty());
}
