//! The write subagent's fixture: a real git repository standing for the
//! main checkout, inside the probe directory, and a real worktree of it,
//! made by [`crate::changes::start`] as a write delegation makes one; then
//! the parent's look at what the probes must have left as it was.
//!
//! The main checkout holds a committed file, a `claimed/` folder (the
//! claim) and a committed symlink `escape-link` to a file of the probe
//! directory, outside the repository: its checkout in the worktree points
//! out of the worktree.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use super::targets::ORIGINAL_CONTENT;
use crate::changes::git::Git;
use crate::changes::records::Layout;
use crate::changes::{self, Start, WriteRoots};

/// The main checkout, in the probe directory.
const MAIN_DIR: &str = "main";
/// A committed file of the main checkout.
pub(super) const MAIN_FILE: &str = "main-file.txt";
/// The committed symlink that points out of the repository.
pub(super) const ESCAPE_LINK: &str = "escape-link";
/// Its target, in the probe directory.
const LINK_TARGET: &str = "link-target.txt";
/// The write subagent's claim, a committed folder.
pub(super) const CLAIM: &str = "claimed";
/// The change set id of the probe's worktree.
const CHANGE_ID: &str = "sandbox-check";
/// The object folder the object probe writes in (made beforehand, so that
/// only the file's creation is tried).
pub(super) const OBJECT_DIR: &str = "objects/ab";
/// An untracked clone in the main checkout, which the base records as a
/// gitlink: where the nested-repository probe builds its repository.
pub(super) const NESTED: &str = "vendor/lib";
/// What the nested repository's filter writes, in the probe directory,
/// should the parent's git ever run it.
pub(super) const NESTED_MARKER: &str = "nested-filter-ran";

/// Where the main checkout and the worktree are, from the probe directory:
/// the parent and the child find them by the same rule.
#[derive(Debug, Clone)]
pub(super) struct WorktreePaths {
    /// The main checkout.
    pub main: PathBuf,
    layout: Layout,
    link_target: PathBuf,
}

impl WorktreePaths {
    pub fn of(dir: &Path) -> WorktreePaths {
        let main = dir.join(MAIN_DIR);
        WorktreePaths {
            layout: Layout::new(&main, CHANGE_ID),
            link_target: dir.join(LINK_TARGET),
            main,
        }
    }

    /// The main checkout's `.git`.
    pub fn main_git(&self) -> PathBuf {
        self.main.join(".git")
    }

    /// The worktree (the write subagent's workspace).
    pub fn tree(&self) -> PathBuf {
        self.layout.tree()
    }

    /// The write subagent's private repository.
    pub fn git_dir(&self) -> PathBuf {
        self.layout.git_dir()
    }

    /// Where the nested-repository probe's filter would leave its mark.
    pub fn nested_marker(&self) -> PathBuf {
        self.main.parent().unwrap_or(&self.main).join(NESTED_MARKER)
    }

    /// The environment a write subagent's commands get
    /// ([`WriteRoots::git_env`]).
    pub fn git_env(&self) -> Vec<(&'static str, OsString)> {
        WriteRoots {
            workspace: self.tree(),
            write: vec![self.tree()],
            read: Vec::new(),
            git_dir: self.git_dir(),
        }
        .git_env()
    }
}

/// The parent's side: the worktree's roots for the child's sandbox, and
/// what the main repository and the private one held before the probes.
#[derive(Debug)]
pub(super) struct WorktreeFixture {
    pub roots: WriteRoots,
    /// The worktree and its start, to build its change set as a
    /// delegation's end does.
    worktree: changes::Worktree,
    start: Start,
    paths: WorktreePaths,
    head: Vec<u8>,
    config: Vec<u8>,
    private_config: Vec<u8>,
    refs: Vec<u8>,
}

impl WorktreeFixture {
    /// Makes the main checkout in `dir` and the worktree of it.
    pub fn create(dir: &Path) -> io::Result<WorktreeFixture> {
        let paths = WorktreePaths::of(dir);
        std::fs::write(&paths.link_target, ORIGINAL_CONTENT)?;
        make_main(&paths)?;
        let start = Start {
            task: "fido sandbox check".to_owned(),
            claim: vec![CLAIM.to_owned()],
            plan_item: None,
        };
        let worktree = changes::start(&paths.main, CHANGE_ID, &start).map_err(other)?;
        let main_git = paths.main_git();
        Ok(WorktreeFixture {
            roots: worktree.roots(),
            worktree,
            start,
            head: std::fs::read(main_git.join("HEAD"))?,
            config: std::fs::read(main_git.join("config"))?,
            private_config: std::fs::read(paths.git_dir().join("config"))?,
            refs: main_refs(&paths.main)?,
            paths,
        })
    }

    /// Whether the main checkout's committed file changed.
    pub fn main_file_changed(&self) -> bool {
        differs(&self.paths.main.join(MAIN_FILE), ORIGINAL_CONTENT)
    }

    /// Whether the main `HEAD` no longer holds what it held.
    pub fn main_head_changed(&self) -> bool {
        differs(&self.paths.main_git().join("HEAD"), &self.head)
    }

    /// Whether the main `.git/config` no longer holds what it held.
    pub fn main_config_changed(&self) -> bool {
        differs(&self.paths.main_git().join("config"), &self.config)
    }

    /// Whether anything is at `name` in the main `.git`.
    pub fn main_git_has(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.paths.main_git().join(name)).is_ok()
    }

    /// Whether the main repository's refs or `HEAD` changed (or cannot
    /// be listed any more).
    pub fn main_refs_changed(&self) -> bool {
        main_refs(&self.paths.main).map_or(true, |refs| refs != self.refs)
            || self.main_head_changed()
    }

    /// Whether the private repository's configuration changed.
    pub fn private_config_changed(&self) -> bool {
        differs(&self.paths.git_dir().join("config"), &self.private_config)
    }

    /// Whether the file the escape link points at changed.
    pub fn link_target_changed(&self) -> bool {
        differs(&self.paths.link_target, ORIGINAL_CONTENT)
    }

    /// Whether the parent, building the worktree's change set as a
    /// delegation's end does, ran a program the probe child planted in a
    /// nested repository (its mark is there afterwards).
    pub fn nested_filter_ran(&self) -> bool {
        let built = changes::Claim::parse(&self.start.claim)
            .map_err(|e| e.to_string())
            .and_then(|claim| {
                changes::build::build(&self.worktree, &claim, &self.start.task, 1024)
                    .map_err(|e| e.to_string())
            });
        if let Err(err) = built {
            tracing::debug!(error = %err, "the probe worktree's change set was not built");
        }
        self.paths.nested_marker().exists()
    }

    /// Whether anything is at `name` in the worktree.
    pub fn tree_has(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.paths.tree().join(name)).is_ok()
    }
}

/// `true` when `path` no longer holds `before` (or cannot be read).
fn differs(path: &Path, before: &[u8]) -> bool {
    std::fs::read(path).ok().as_deref() != Some(before)
}

/// The main checkout: a committed file, the claim's folder and the link
/// out of the repository, in one commit on `main`.
fn make_main(paths: &WorktreePaths) -> io::Result<()> {
    std::fs::create_dir_all(paths.main.join(CLAIM))?;
    std::fs::write(paths.main.join(MAIN_FILE), ORIGINAL_CONTENT)?;
    std::fs::write(paths.main.join(CLAIM).join("keep.txt"), ORIGINAL_CONTENT)?;
    std::os::unix::fs::symlink(&paths.link_target, paths.main.join(ESCAPE_LINK))?;
    let git = Git::user(&paths.main);
    git.run(["init", "-q", "-b", "main"]).map_err(other)?;
    git.run(["add", "-A"]).map_err(other)?;
    git.run([
        "-c",
        "user.name=fido",
        "-c",
        "user.email=fido@localhost",
        "-c",
        "commit.gpgsign=false",
        "commit",
        "-q",
        "-m",
        "fido sandbox check",
    ])
    .map_err(other)?;
    // The untracked clone, made after the commit: the base records it as
    // a gitlink.
    let nested = paths.main.join(NESTED);
    std::fs::create_dir_all(&nested)?;
    std::fs::write(nested.join("f.txt"), ORIGINAL_CONTENT)?;
    let git = Git::new(&nested);
    git.run(["init", "-q"]).map_err(other)?;
    git.run(["add", "f.txt"]).map_err(other)?;
    git.run(["commit", "-q", "-m", "nested"]).map_err(other)?;
    // Where the hook and object probes create their files: the folders
    // exist, so only the sandbox can refuse the file.
    std::fs::create_dir_all(paths.main_git().join("hooks"))?;
    std::fs::create_dir_all(paths.main_git().join(OBJECT_DIR))
}

/// Every ref of the main repository with its object, as git lists them.
fn main_refs(main: &Path) -> io::Result<Vec<u8>> {
    Git::user(main)
        .run(["for-each-ref", "--format=%(refname) %(objectname)"])
        .map_err(other)
}

fn other(err: impl std::fmt::Display) -> io::Error {
    io::Error::other(err.to_string())
}
