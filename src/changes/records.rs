//! Change sets on disk, so they survive a restart of Fido:
//! `.fido-state/changes/<id>/change.json` (the [`Record`]), `patch` (the
//! full patch) and, while it is open, `git/` (the private repository whose
//! objects an apply reads). `tree/` (the worktree) lives only while the
//! subagent runs, or until the orphan sweep builds the change set of a
//! Fido that died.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ChangesError;
use crate::protocol::changes::{ChangeSet, MergeState};
use crate::store::atomic::write_atomic;
use crate::store::state_file::{StateFile, StateLock};
use crate::workspace::STATE_DIR;

/// The change sets' folder, relative to the workspace.
pub const CHANGES_DIR: &str = ".fido-state/changes";

/// The paths of one change set's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `.fido-state/changes/<id>`.
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(workspace: &Path, id: &str) -> Layout {
        Layout {
            dir: changes_dir(workspace).join(id),
        }
    }
    /// The private repository.
    pub fn git_dir(&self) -> PathBuf {
        self.dir.join("git")
    }
    /// The checkout of the base the subagent works in.
    pub fn tree(&self) -> PathBuf {
        self.dir.join("tree")
    }
    pub fn record(&self) -> PathBuf {
        self.dir.join("change.json")
    }
    pub fn patch(&self) -> PathBuf {
        self.dir.join("patch")
    }
    /// `PID START`: the Fido that runs the subagent, its pid and start
    /// time (for the orphan sweep and other Fidos' claims,
    /// [`super::worktree::owner`]).
    pub fn owner(&self) -> PathBuf {
        self.dir.join("owner")
    }
}

pub fn changes_dir(workspace: &Path) -> PathBuf {
    workspace.join(CHANGES_DIR)
}

/// One file an apply writes: its blob and mode in the base (`old`) and in
/// the worktree (`new`); `None` where the file does not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    /// The old path of a rename (removed by the apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub old: Option<(String, String)>,
    pub new: Option<(String, String)>,
}

/// A change set and what Fido needs to apply it later.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    #[serde(flatten)]
    pub set: ChangeSet,
    pub task: String,
    pub claim: Vec<String>,
    /// The workspace inside the repository: `""` or `sub/dir/`.
    pub prefix: String,
    pub base_tree: String,
    pub entries: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_item: Option<String>,
    pub created_ms: u64,
    /// Paths of the worktree left out of the change set, and why
    /// ([`super::nested`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<super::nested::Refused>,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A change set id is a subagent id: letters, digits and `-` only, so it
/// never names a path outside the folder.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

impl Record {
    /// Writes the record atomically.
    pub fn save(&self, workspace: &Path) -> Result<(), ChangesError> {
        let layout = Layout::new(workspace, &self.set.id);
        fs::create_dir_all(&layout.dir)?;
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        write_atomic(&layout.record(), &json, Some(0o600))?;
        Ok(())
    }

    /// The record `id`.
    pub fn load(workspace: &Path, id: &str) -> Result<Record, ChangesError> {
        if !valid_id(id) {
            return Err(ChangesError::Unknown(id.to_string()));
        }
        let path = Layout::new(workspace, id).record();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return Err(ChangesError::Unknown(id.to_string()));
            }
            Err(err) => return Err(err.into()),
        };
        serde_json::from_slice(&bytes).map_err(|err| ChangesError::Corrupt {
            path: path.display().to_string(),
            message: err.to_string(),
        })
    }
}

/// Takes the lock of change set `id`: one apply or discard at a time, also
/// across Fido processes (a TUI and `fido changes apply` in another
/// terminal). The record must exist, so that no folder is made for an
/// unknown id. Blocking.
pub fn lock(workspace: &Path, id: &str) -> Result<StateLock, ChangesError> {
    let record = Layout::new(workspace, id).record();
    if !valid_id(id) || !record.is_file() {
        return Err(ChangesError::Unknown(id.to_string()));
    }
    Ok(StateFile::new(record, "change set").lock()?)
}

/// Every readable record, oldest first; unreadable ones are skipped with
/// a warning.
pub fn list(workspace: &Path) -> Vec<Record> {
    let Ok(entries) = fs::read_dir(changes_dir(workspace)) else {
        return Vec::new();
    };
    let mut records: Vec<Record> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|id| valid_id(id))
        .filter_map(|id| match Record::load(workspace, &id) {
            Ok(record) => Some(record),
            Err(ChangesError::Unknown(_)) => None,
            Err(err) => {
                tracing::warn!(%id, error = %err, "skipping an unreadable change set");
                None
            }
        })
        .collect();
    records.sort_by_key(|r| (r.created_ms, r.set.id.clone()));
    records
}

/// What [`changed`] last saw of each record: its file's modification time
/// and its merge state.
pub type Seen = std::collections::HashMap<String, (std::time::SystemTime, MergeState)>;

/// The records whose merge state changed since `seen` was filled (new
/// ones included), and `seen` brought up to date. A closed record is read
/// again only when its file changed; an open one at every call, since two
/// writes can share a timestamp. Blocking.
pub fn changed(workspace: &Path, seen: &mut Seen) -> Vec<Record> {
    let Ok(entries) = fs::read_dir(changes_dir(workspace)) else {
        return Vec::new();
    };
    let ids = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|id| valid_id(id));
    let mut moved = Vec::new();
    for id in ids {
        let path = Layout::new(workspace, &id).record();
        let Ok(modified) = fs::metadata(&path).and_then(|meta| meta.modified()) else {
            continue;
        };
        let before = seen.get(&id).copied();
        if before.is_some_and(|(time, state)| time == modified && !state.is_open()) {
            continue;
        }
        let Ok(record) = Record::load(workspace, &id) else {
            continue;
        };
        seen.insert(id, (modified, record.set.merge));
        if before.map(|(_, state)| state) != Some(record.set.merge) {
            moved.push(record);
        }
    }
    moved
}

/// The change sets still open (pending or in conflict).
pub fn open(workspace: &Path) -> Vec<Record> {
    list(workspace)
        .into_iter()
        .filter(|r| r.set.merge.is_open())
        .collect()
}

/// Closes `record` as `state`: its record says so, and its private
/// repository and worktree go (the record and patch stay as history).
pub fn close(workspace: &Path, record: &mut Record, state: MergeState) -> Result<(), ChangesError> {
    record.set.merge = state;
    record.set.conflicts.clear();
    record.save(workspace)?;
    let layout = Layout::new(workspace, &record.set.id);
    for dir in [layout.git_dir(), layout.tree()] {
        remove_later(workspace, &dir);
    }
    let _ = fs::remove_file(layout.owner());
    Ok(())
}

/// The prefix of a folder on its way out (not a change set id).
const TRASH_PREFIX: &str = ".trash-";

/// Removes the folder `dir` off the caller's path: it is renamed into the
/// change sets' folder at once (so it is gone from where it was), then
/// deleted by a thread of its own. A worktree of thousands of files takes
/// as long to delete as to check out; nobody should wait for that. What a
/// process that exits first leaves is removed by the next start's sweep
/// ([`remove_trash`]).
pub fn remove_later(workspace: &Path, dir: &Path) {
    let trash = changes_dir(workspace).join(format!("{TRASH_PREFIX}{:016x}", fastrand::u64(..)));
    match fs::rename(dir, &trash) {
        Ok(()) => {
            let spawned = std::thread::Builder::new()
                .name("fido-trash".into())
                .spawn(move || remove_logged(&trash));
            if let Err(err) = spawned {
                tracing::warn!(error = %err, "cannot start the thread that removes a worktree");
            }
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(_) => remove_logged(dir),
    }
}

fn remove_logged(dir: &Path) {
    if let Err(err) = fs::remove_dir_all(dir)
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %dir.display(), error = %err, "cannot remove");
    }
}

/// Deletes what [`remove_later`] left behind (at session start).
pub fn remove_trash(workspace: &Path) {
    let Ok(entries) = fs::read_dir(changes_dir(workspace)) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(TRASH_PREFIX)
        {
            remove_logged(&entry.path());
        }
    }
}

/// `.fido-state/.gitignore` ignores everything, so Fido's state (change
/// sets and worktrees among it) never shows in `git status` nor enters a
/// base.
pub fn ensure_state_ignored(workspace: &Path) {
    let dir = workspace.join(STATE_DIR);
    let ignore = dir.join(".gitignore");
    if ignore.exists() {
        return;
    }
    if let Err(err) = fs::create_dir_all(&dir).and_then(|()| fs::write(&ignore, "*\n")) {
        tracing::warn!(error = %err, "cannot write .fido-state/.gitignore");
    }
}
