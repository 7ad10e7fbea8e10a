//! Write delegation's change sets (README: "Write-capable delegation").
//!
//! A write subagent works in a worktree of its own ([`worktree`]): a
//! checkout of the parent's state at call time, under
//! `.fido-state/changes/<id>/`, that the OS lets it write and nothing
//! else. When it ends, the parent builds its change set ([`build`]): each
//! changed file with its status and line counts, the claimed ones apart
//! from those outside the claim, a full patch and a capped diff. The
//! change set is then applied ([`apply`]: a three-way merge onto the main
//! checkout, one undoable edit) or discarded, at once or later from
//! `/changes` or `fido changes`, also after a restart ([`records`]).
//!
//! What a person sees of them is written here too ([`view`]: the text
//! `fido changes` and `/changes` share), and a session follows their
//! records as another terminal applies or discards them ([`watch`]).
//!
//! Every git write is the parent's ([`git`]), with hooks, fsmonitor and
//! the worktree's attributes off. Nothing here ever writes the user's
//! index, refs, stash, HEAD or `.git/worktrees`.
//!
//! All of it but the watch is blocking I/O and child processes: callers
//! run it on the blocking pool.

pub mod apply;
pub mod build;
pub mod claim;
pub mod control;
pub mod delegation;
pub mod git;
pub mod listing;
pub mod nested;
pub mod records;
mod stake;
pub mod view;
pub mod watch;
pub mod worktree;

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use claim::{Claim, ClaimConflict, ClaimError, Claims, HeldClaim};
pub use records::Record;
pub use worktree::{Worktree, WriteRoots};

use crate::protocol::changes::MergeState;

/// Why a change-set operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ChangesError {
    #[error("{0} is not in a git repository: a write subagent works in a git worktree of it")]
    NotARepository(String),
    #[error(transparent)]
    Git(git::GitError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("there is no change set {0:?}; `fido changes` lists them")]
    Unknown(String),
    #[error("change set {id} is {state} already")]
    Closed { id: String, state: MergeState },
    #[error("the change set record {path} is unreadable ({message}); it was left as it is")]
    Corrupt { path: String, message: String },
    #[error("refused: {0}")]
    Unsafe(String),
    /// A live write subagent of another Fido holds part of the claim.
    #[error(transparent)]
    Claimed(#[from] ClaimConflict),
    /// Another Fido held the claims lock too long.
    #[error(transparent)]
    Busy(#[from] crate::store::state_file::StateFileError),
}

/// What a scoped thread returned; its panic becomes an error naming
/// `what` ran there.
fn joined<T, E: Into<ChangesError>>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T, E>>,
    what: &str,
) -> Result<T, ChangesError> {
    match handle.join() {
        Ok(done) => done.map_err(Into::into),
        Err(_) => Err(std::io::Error::other(format!("{what} panicked")).into()),
    }
}

/// What a write delegation started with, kept beside its worktree so that
/// the orphan sweep of a later Fido can still build its change set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Start {
    pub task: String,
    pub claim: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_item: Option<String>,
}

const START_FILE: &str = "start.json";

/// Makes the worktree of a write delegation `id` and notes its start;
/// refused where the installed git is older than the hardening needs
/// ([`crate::git::version`]).
pub fn start(workspace: &Path, id: &str, start: &Start) -> Result<Worktree, ChangesError> {
    crate::git::version::required().map_err(|e| ChangesError::Unsafe(e.to_string()))?;
    let repo = worktree::Repository::find(workspace)?;
    stake::stake(workspace, id, start)?;
    Worktree::create(workspace, repo, id)
}

/// Builds and saves the pending change set of a finished worktree, then
/// removes the worktree itself (the private repository stays until the
/// change set is applied or discarded).
pub fn finish(
    workspace: &Path,
    worktree: &Worktree,
    start: &Start,
    diff_cap: usize,
) -> Result<Record, ChangesError> {
    let claim = Claim::parse(&start.claim).map_err(|e| ChangesError::Unsafe(e.to_string()))?;
    let mut record = build::build(worktree, &claim, &start.task, diff_cap)?;
    record.plan_item.clone_from(&start.plan_item);
    if record.set.files.is_empty() && record.set.outside_claim.is_empty() {
        // Nothing to review: closed as discarded at once.
        records::close(workspace, &mut record, MergeState::Discarded)?;
        return Ok(record);
    }
    record.save(workspace)?;
    records::remove_later(workspace, &worktree.layout.tree());
    let _ = std::fs::remove_file(worktree.layout.owner());
    Ok(record)
}

/// Removes a worktree whose delegation never ran (refused, or failed
/// before its child started): nothing of it is kept.
pub fn abandon(worktree: &Worktree) {
    if let Err(err) = std::fs::remove_dir_all(&worktree.layout.dir) {
        tracing::warn!(path = %worktree.layout.dir.display(), error = %err, "cannot remove a worktree");
    }
}

/// The box for the git that reads a worktree's tree, given the change
/// set's folder (`sandbox::git_wall`); `None` where it cannot be had.
pub type GitWall<'a> = &'a dyn Fn(&Path) -> Option<crate::git::PreExec>;

/// At session start: the worktrees of write subagents whose Fido died.
/// Each gets its change set built (kept pending) by a git boxed by `wall`,
/// and its worktree removed; where no box can be had, the worktree is
/// left for later, never built unboxed. Returns the ids of the change
/// sets kept.
pub fn sweep_orphans(workspace: &Path, wall: GitWall<'_>) -> Vec<String> {
    records::remove_trash(workspace);
    let Ok(entries) = std::fs::read_dir(records::changes_dir(workspace)) else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let Ok(id) = entry.file_name().into_string() else {
            continue;
        };
        let layout = records::Layout::new(workspace, &id);
        if !records::valid_id(&id)
            || !layout.tree().is_dir()
            || worktree::owner(&layout) != worktree::Owner::Gone
        {
            continue;
        }
        let Some(boxed) = wall(&layout.dir) else {
            tracing::warn!(%id, "cannot box git here; a dead session's worktree is left as it is");
            continue;
        };
        match recover(workspace, &id, boxed) {
            Ok(record) if record.set.merge.is_open() => kept.push(id),
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(%id, error = %err, "cannot recover an orphaned worktree; removing it");
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    kept
}

/// Builds the change set of the orphaned worktree `id`.
fn recover(workspace: &Path, id: &str, wall: crate::git::PreExec) -> Result<Record, ChangesError> {
    let layout = records::Layout::new(workspace, id);
    let start: Start = serde_json::from_slice(&std::fs::read(layout.dir.join(START_FILE))?)
        .map_err(|e| ChangesError::Corrupt {
            path: layout.dir.join(START_FILE).display().to_string(),
            message: e.to_string(),
        })?;
    let repo = worktree::Repository::find(workspace)?;
    let git = git::Git::private(&layout.git_dir());
    let commit = git.line(["rev-parse", "HEAD"])?;
    let tree = git.line(["rev-parse", "HEAD^{tree}"])?;
    let worktree = Worktree {
        id: id.to_string(),
        layout,
        repo,
        base: worktree::Base { commit, tree },
        git_wall: Some(wall),
    };
    finish(workspace, &worktree, &start, DEFAULT_DIFF_CAP)
}

/// Bytes of the diff a result carries, unless `delegate_diff_bytes` says
/// otherwise.
pub const DEFAULT_DIFF_CAP: usize = 32 * 1024;

#[cfg(test)]
mod nested_tests;
#[cfg(test)]
pub(crate) mod tests;
