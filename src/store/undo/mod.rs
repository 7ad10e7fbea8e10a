//! The undo journal: every change a file tool makes can be rolled back, last
//! first.
//!
//! Layout under `<workspace>/.fido-state/undo/`:
//! - `journal.jsonl`: one JSON object per change, oldest first, e.g.
//!   `{"id":7,"kind":"patch","path":"src/a.rs","before":{"state":"file","mode":420}}`.
//!   `path` is workspace-relative with `/`; `created_dirs` lists parent
//!   directories the change created (removed again on undo when empty).
//! - `blobs/<id>`: the before-state of entry `id` when it has bytes: a copy
//!   of the file's content (`patch`), or the removed file, symlink or whole
//!   directory itself, moved here by a rename (`rm`, state `stashed`), which
//!   keeps content, permissions and links exactly.
//!
//! Invariants:
//! - A change is journalled before it happens ([`UndoLog::record`]) or is
//!   itself the journalling ([`UndoLog::remove`] moves the thing into the
//!   journal). When journalling fails the tool makes no change.
//! - No `.fido-*` path is ever an undoable path.
//! - Undo pops the last entry only after it was restored; a failed undo
//!   leaves the journal as it was.
//! - The journal keeps the last [`MAX_ENTRIES`] changes; older ones (and
//!   their blobs) are dropped.
//!
//! One Fido process owns a workspace at a time; a mutex serialises tools of
//! that process. There is no redo.

use std::ffi::OsStr;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::protocol::op::UndoneKind;
use crate::store::atomic::write_atomic;

mod change_set;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, PathError, Resolved, UNDO_DIR, Workspace, is_state_name};
pub use change_set::SetFile;
/// The journal's own paths are absolute: no directory handle for them.
use nix::fcntl::AT_FDCWD as AT_CWD;

/// Most entries kept; recording one more drops the oldest.
pub const MAX_ENTRIES: usize = 200;

/// What a change was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UndoKind {
    /// A file's content was edited or overwritten.
    Patch,
    /// A file was created.
    Create,
    /// A file, symlink or directory tree was removed.
    Rm,
    /// A directory was created.
    Mkdir,
    /// An empty directory was removed.
    Rmdir,
    /// A write subagent's change set was applied (`path` is its id).
    ChangeSet,
}

/// How `/undo` names the change it reverted.
impl From<UndoKind> for UndoneKind {
    fn from(kind: UndoKind) -> UndoneKind {
        match kind {
            UndoKind::Patch => UndoneKind::Patch,
            UndoKind::Create => UndoneKind::Create,
            UndoKind::Rm => UndoneKind::Rm,
            UndoKind::Mkdir => UndoneKind::Mkdir,
            UndoKind::Rmdir => UndoneKind::Rmdir,
            UndoKind::ChangeSet => UndoneKind::ChangeSet,
        }
    }
}

impl fmt::Display for UndoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(UndoneKind::from(*self).as_str())
    }
}

/// What was at the path before the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: the change created the path.
    Absent,
    /// A regular file with these bytes and permission bits.
    File { content: Vec<u8>, mode: u32 },
    /// An empty directory with these permission bits.
    EmptyDir { mode: u32 },
    /// The removed thing itself, kept in the journal's blob store.
    Stashed,
    /// Each file of an applied change set, before and after.
    ChangeSet(Vec<SetFile>),
}

/// One undoable change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoEntry {
    pub kind: UndoKind,
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub before: Before,
    /// Parent directories the change created, outermost first.
    pub created_dirs: Vec<String>,
}

impl UndoEntry {
    /// A file's content is about to be replaced.
    pub fn patch(path: impl Into<String>, content: Vec<u8>, mode: u32) -> Self {
        UndoEntry {
            kind: UndoKind::Patch,
            path: path.into(),
            before: Before::File { content, mode },
            created_dirs: Vec::new(),
        }
    }

    /// A file is about to be created, with these missing parents.
    pub fn create(path: impl Into<String>, created_dirs: Vec<String>) -> Self {
        UndoEntry {
            kind: UndoKind::Create,
            path: path.into(),
            before: Before::Absent,
            created_dirs,
        }
    }

    /// A directory is about to be created, with these missing parents.
    pub fn mkdir(path: impl Into<String>, created_dirs: Vec<String>) -> Self {
        UndoEntry {
            kind: UndoKind::Mkdir,
            path: path.into(),
            before: Before::Absent,
            created_dirs,
        }
    }

    /// An empty directory is about to be removed.
    pub fn rmdir(path: impl Into<String>, mode: u32) -> Self {
        UndoEntry {
            kind: UndoKind::Rmdir,
            path: path.into(),
            before: Before::EmptyDir { mode },
            created_dirs: Vec::new(),
        }
    }
}

/// Why an undo did not happen. The journal is unchanged in every case.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("undo journal is unreadable: {0}")]
    Journal(#[source] io::Error),
    #[error("cannot undo {kind} of `{path}`: {source}")]
    Path {
        kind: UndoKind,
        path: String,
        #[source]
        source: PathError,
    },
    #[error("cannot undo {kind} of `{path}`: {reason}")]
    Conflict {
        kind: UndoKind,
        path: String,
        reason: String,
    },
    #[error("cannot undo {kind} of `{path}`: {source}")]
    Io {
        kind: UndoKind,
        path: String,
        #[source]
        source: io::Error,
    },
}

/// The before-state as journalled (bytes live in `blobs/<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum StoredBefore {
    Absent,
    File { mode: u32 },
    EmptyDir { mode: u32 },
    Stashed,
    ChangeSet,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Line {
    id: u64,
    kind: UndoKind,
    path: String,
    before: StoredBefore,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    created_dirs: Vec<String>,
}

/// The undo journal of one workspace, or a disabled one that records nothing.
/// Clones share the lock, so a clone handed to the blocking pool still
/// serialises with the tools.
#[derive(Debug, Clone)]
pub struct UndoLog {
    dir: Option<PathBuf>,
    lock: Arc<Mutex<()>>,
}

impl UndoLog {
    /// The journal of the workspace at `workspace_root`; nothing is created
    /// until the first change is recorded.
    pub fn new(workspace_root: &Path) -> UndoLog {
        UndoLog {
            dir: Some(workspace_root.join(UNDO_DIR)),
            lock: Arc::default(),
        }
    }

    /// A log that records nothing (contexts without undo, e.g. subagents).
    pub fn disabled() -> UndoLog {
        UndoLog {
            dir: None,
            lock: Arc::default(),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.dir.is_some()
    }

    /// Journals a change that is about to happen. On error the caller must
    /// not make the change.
    pub fn record(&self, entry: UndoEntry) -> io::Result<()> {
        check_path(&entry.path)?;
        for dir in &entry.created_dirs {
            check_path(dir)?;
        }
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let _guard = self.guard();
        let mut lines = read_lines(dir)?;
        let id = next_id(&lines);
        let before = match entry.before {
            Before::Absent => StoredBefore::Absent,
            Before::File { content, mode } => {
                let blobs = dir.join("blobs");
                fs::create_dir_all(&blobs)?;
                let mut file = File::create(blobs.join(id.to_string()))?;
                file.write_all(&content)?;
                file.sync_all()?;
                StoredBefore::File { mode }
            }
            Before::EmptyDir { mode } => StoredBefore::EmptyDir { mode },
            Before::Stashed | Before::ChangeSet(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "stashed entries and change sets have recorders of their own",
                ));
            }
        };
        let line = Line {
            id,
            kind: entry.kind,
            path: entry.path,
            before,
            created_dirs: entry.created_dirs,
        };
        append_line(dir, &line)?;
        lines.push(line);
        prune(dir, lines);
        Ok(())
    }

    /// Removes the file, symlink or directory tree at `abs` (workspace path
    /// `path`), keeping it in the journal so `undo_last` can put it back.
    /// A disabled log just removes it. On error nothing was removed.
    pub fn remove(&self, path: &str, abs: &Path) -> io::Result<()> {
        let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` names no entry", abs.display()),
            ));
        };
        let dir = beneath::open_root(parent)?;
        self.remove_at(path, dir.as_fd(), name)
    }

    /// [`UndoLog::remove`] for the entry `name` of the directory `dir`
    /// held open: the entry moves into the journal by a rename from that
    /// directory, so no path swapped meanwhile leads it elsewhere.
    pub fn remove_at(&self, path: &str, dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
        check_path(path)?;
        let stat = beneath::stat_at(dir, name)?;
        let Some(journal_dir) = &self.dir else {
            return beneath::remove_tree_at(dir, name);
        };
        let _guard = self.guard();
        let mut lines = read_lines(journal_dir)?;
        let id = next_id(&lines);
        let blobs = journal_dir.join("blobs");
        fs::create_dir_all(&blobs)?;
        let blob = blobs.join(id.to_string());
        let moved = match nix::fcntl::renameat(dir, name, AT_CWD, &blob) {
            Ok(()) => true,
            Err(nix::errno::Errno::EXDEV) => {
                // Another file system: keep a copy, remove after journalling.
                copy_single_at(dir, name, stat.kind, &blob)?;
                false
            }
            Err(err) => return Err(err.into()),
        };
        let line = Line {
            id,
            kind: UndoKind::Rm,
            path: path.to_string(),
            before: StoredBefore::Stashed,
            created_dirs: Vec::new(),
        };
        if let Err(err) = append_line(journal_dir, &line) {
            if moved {
                // Put it back: without a journal line it would be lost.
                nix::fcntl::renameat(AT_CWD, &blob, dir, name)?;
            } else {
                let _ = remove_any(&blob);
            }
            return Err(err);
        }
        if !moved && let Err(err) = beneath::unlink_at(dir, name, false) {
            let _ = drop_last(journal_dir);
            return Err(err);
        }
        lines.push(line);
        prune(journal_dir, lines);
        Ok(())
    }

    /// All journalled changes, oldest first, with their before-content.
    pub fn entries(&self) -> io::Result<Vec<UndoEntry>> {
        let Some(dir) = &self.dir else {
            return Ok(Vec::new());
        };
        let _guard = self.guard();
        read_lines(dir)?
            .into_iter()
            .map(|line| load_entry(dir, line))
            .collect()
    }

    /// Drops the latest entry without restoring anything: the change it
    /// announced failed and did not happen.
    pub fn discard_last(&self) -> io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let _guard = self.guard();
        drop_last(dir)
    }

    /// Journals an applied change set `id` as one entry: each file before
    /// and after. Called before the first file is written.
    pub fn record_change_set(&self, id: &str, files: &[SetFile]) -> io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        for file in files {
            check_path(&file.path)?;
        }
        let _guard = self.guard();
        let mut lines = read_lines(dir)?;
        let line_id = next_id(&lines);
        change_set::store(&dir.join("blobs").join(line_id.to_string()), files)?;
        let line = Line {
            id: line_id,
            kind: UndoKind::ChangeSet,
            path: id.to_string(),
            before: StoredBefore::ChangeSet,
            created_dirs: Vec::new(),
        };
        append_line(dir, &line)?;
        lines.push(line);
        prune(dir, lines);
        Ok(())
    }

    /// Restores the state before the latest change and drops its entry.
    /// `Ok(None)` when there is nothing to undo.
    pub fn undo_last(&self, workspace: &Workspace) -> Result<Option<UndoEntry>, UndoError> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        let _guard = self.guard();
        let mut lines = read_lines(dir).map_err(UndoError::Journal)?;
        let Some(line) = lines.pop() else {
            return Ok(None);
        };
        let entry = load_entry(dir, line.clone()).map_err(UndoError::Journal)?;
        restore(workspace, dir, &line, &entry)?;
        write_lines(dir, &lines).map_err(UndoError::Journal)?;
        if matches!(
            line.before,
            StoredBefore::File { .. } | StoredBefore::ChangeSet
        ) {
            let _ = remove_any(&dir.join("blobs").join(line.id.to_string()));
        }
        Ok(Some(entry))
    }

    fn guard(&self) -> MutexGuard<'_, ()> {
        // A poisoned lock only means another tool panicked mid-way; the
        // journal on disk is still the truth.
        self.lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Puts back what `line` describes. Touches nothing in the journal.
fn restore(
    workspace: &Workspace,
    dir: &Path,
    line: &Line,
    entry: &UndoEntry,
) -> Result<(), UndoError> {
    if let Before::ChangeSet(files) = &entry.before {
        return change_set::restore(workspace, &line.path, files);
    }
    let at = Restoring {
        line,
        target: resolve(workspace, line.kind, &line.path)?.abs,
    };
    match &entry.before {
        Before::File { content, mode } => at.put_file(content, *mode)?,
        Before::Absent => at.remove_what_was_created()?,
        Before::EmptyDir { mode } => at.recreate_dir(*mode)?,
        Before::Stashed => at.unstash(&dir.join("blobs").join(line.id.to_string()))?,
        Before::ChangeSet(_) => {}
    }
    // Parents the change created go too, innermost first, when empty.
    for created in line.created_dirs.iter().rev() {
        if let Ok(resolved) = resolve(workspace, line.kind, created) {
            let _ = fs::remove_dir(resolved.abs);
        }
    }
    Ok(())
}

fn resolve(workspace: &Workspace, kind: UndoKind, path: &str) -> Result<Resolved, UndoError> {
    workspace
        .resolve_with(path, FinalLink::Keep)
        .map_err(|source| UndoError::Path {
            kind,
            path: path.to_string(),
            source,
        })
}

/// One undo in progress: the change's line and the path it restores.
struct Restoring<'a> {
    line: &'a Line,
    target: PathBuf,
}

impl Restoring<'_> {
    fn io_err(&self, source: io::Error) -> UndoError {
        UndoError::Io {
            kind: self.line.kind,
            path: self.line.path.clone(),
            source,
        }
    }

    fn conflict(&self, reason: &str) -> UndoError {
        UndoError::Conflict {
            kind: self.line.kind,
            path: self.line.path.clone(),
            reason: reason.to_string(),
        }
    }

    fn create_parent(&self) -> Result<(), UndoError> {
        match self.target.parent() {
            Some(parent) => fs::create_dir_all(parent).map_err(|e| self.io_err(e)),
            None => Ok(()),
        }
    }

    /// The file's old bytes and mode, written back atomically.
    fn put_file(&self, content: &[u8], mode: u32) -> Result<(), UndoError> {
        self.create_parent()?;
        if self.target.is_dir() {
            return Err(self.conflict("a directory is there now"));
        }
        write_atomic(&self.target, content, Some(mode)).map_err(|e| self.io_err(e))
    }

    /// Nothing was there: what the change created goes (an empty
    /// directory for `mkdir`, a file for the others).
    fn remove_what_was_created(&self) -> Result<(), UndoError> {
        let metadata = match fs::symlink_metadata(&self.target) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(self.io_err(err)),
            Ok(metadata) => metadata,
        };
        match self.line.kind {
            UndoKind::Mkdir => self.remove_created_dir(metadata.is_dir()),
            UndoKind::Patch
            | UndoKind::Create
            | UndoKind::Rm
            | UndoKind::Rmdir
            | UndoKind::ChangeSet => {
                if metadata.is_dir() {
                    return Err(self.conflict("a directory is there now"));
                }
                fs::remove_file(&self.target).map_err(|e| self.io_err(e))
            }
        }
    }

    fn remove_created_dir(&self, is_dir: bool) -> Result<(), UndoError> {
        if !is_dir {
            return Err(self.conflict("it is no longer a directory"));
        }
        fs::remove_dir(&self.target).map_err(|err| {
            if err.kind() == io::ErrorKind::DirectoryNotEmpty {
                self.conflict("the directory is no longer empty")
            } else {
                self.io_err(err)
            }
        })
    }

    /// An empty directory was removed: it comes back with its mode.
    fn recreate_dir(&self, mode: u32) -> Result<(), UndoError> {
        match fs::symlink_metadata(&self.target) {
            Ok(metadata) if metadata.is_dir() => Ok(()),
            Ok(_) => Err(self.conflict("a file is there now")),
            Err(_) => {
                fs::create_dir_all(&self.target).map_err(|e| self.io_err(e))?;
                fs::set_permissions(&self.target, fs::Permissions::from_mode(mode))
                    .map_err(|e| self.io_err(e))
            }
        }
    }

    /// A removed tree was stashed whole: it is renamed back.
    fn unstash(&self, blob: &Path) -> Result<(), UndoError> {
        if fs::symlink_metadata(&self.target).is_ok() {
            return Err(self.conflict("something exists at that path again; move it away first"));
        }
        self.create_parent()?;
        fs::rename(blob, &self.target).map_err(|e| self.io_err(e))
    }
}

/// Refuses paths that could never be undoable: absolute, `..`, `.fido-*`.
fn check_path(path: &str) -> io::Result<()> {
    let ok = !path.is_empty()
        && Path::new(path).components().all(|c| match c {
            Component::Normal(name) => !is_state_name(name),
            Component::CurDir => true,
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => false,
        });
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{path}` is not an undoable workspace path"),
        ))
    }
}

fn next_id(lines: &[Line]) -> u64 {
    lines.iter().map(|l| l.id).max().unwrap_or(0) + 1
}

fn journal(dir: &Path) -> PathBuf {
    dir.join("journal.jsonl")
}

fn read_lines(dir: &Path) -> io::Result<Vec<Line>> {
    let file = match File::open(journal(dir)) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut lines = Vec::new();
    for text in BufReader::new(file).lines() {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        // A torn last line (crash mid-append) is skipped, not fatal.
        if let Ok(line) = serde_json::from_str::<Line>(&text) {
            lines.push(line);
        }
    }
    Ok(lines)
}

fn append_line(dir: &Path, line: &Line) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut text = serde_json::to_string(line).map_err(io::Error::other)?;
    text.push('\n');
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal(dir))?;
    file.write_all(text.as_bytes())?;
    file.sync_data()
}

fn write_lines(dir: &Path, lines: &[Line]) -> io::Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(&serde_json::to_string(line).map_err(io::Error::other)?);
        text.push('\n');
    }
    write_atomic(&journal(dir), text.as_bytes(), None)
}

/// Drops the latest line and its blob.
fn drop_last(dir: &Path) -> io::Result<()> {
    let mut lines = read_lines(dir)?;
    if let Some(line) = lines.pop() {
        write_lines(dir, &lines)?;
        let _ = remove_any(&dir.join("blobs").join(line.id.to_string()));
    }
    Ok(())
}

/// Keeps the newest [`MAX_ENTRIES`]; best effort, the change is journalled.
fn prune(dir: &Path, mut lines: Vec<Line>) {
    if lines.len() <= MAX_ENTRIES {
        return;
    }
    let dropped: Vec<Line> = lines.drain(..lines.len() - MAX_ENTRIES).collect();
    if write_lines(dir, &lines).is_ok() {
        for line in dropped {
            let _ = remove_any(&dir.join("blobs").join(line.id.to_string()));
        }
    }
}

fn load_entry(dir: &Path, line: Line) -> io::Result<UndoEntry> {
    let before = match line.before {
        StoredBefore::Absent => Before::Absent,
        StoredBefore::File { mode } => Before::File {
            content: fs::read(dir.join("blobs").join(line.id.to_string()))?,
            mode,
        },
        StoredBefore::EmptyDir { mode } => Before::EmptyDir { mode },
        StoredBefore::Stashed => Before::Stashed,
        StoredBefore::ChangeSet => Before::ChangeSet(change_set::load(
            &dir.join("blobs").join(line.id.to_string()),
        )?),
    };
    Ok(UndoEntry {
        kind: line.kind,
        path: line.path,
        before,
        created_dirs: line.created_dirs,
    })
}

/// Copies the file or symlink (not a directory) `name` of `dir` to `to`.
fn copy_single_at(dir: BorrowedFd<'_>, name: &OsStr, kind: Kind, to: &Path) -> io::Result<()> {
    match kind {
        Kind::Symlink => std::os::unix::fs::symlink(beneath::read_link_at(dir, name)?, to),
        Kind::File => {
            let mut opened = beneath::open_read_at(dir, name)?;
            let mut copy = File::create(to)?;
            io::copy(&mut opened.file, &mut copy)?;
            copy.set_permissions(fs::Permissions::from_mode(opened.mode))
        }
        _ => Err(io::Error::new(
            io::ErrorKind::CrossesDevices,
            "it is on another file system than the undo journal, so it cannot be kept for undo",
        )),
    }
}

fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Workspace, UndoLog) {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let log = UndoLog::new(&ws.root);
        (dir, ws, log)
    }

    #[test]
    fn patch_then_undo_restores_bytes_and_mode_exactly() {
        let (_dir, ws, log) = setup();
        let file = ws.root.join("a.txt");
        let original = b"line one\r\nline two\n\xff\x00binary".to_vec();
        fs::write(&file, &original).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o751)).unwrap();
        log.record(UndoEntry::patch("a.txt", original.clone(), 0o751))
            .unwrap();
        fs::write(&file, "changed").unwrap();

        let undone = log.undo_last(&ws).unwrap().unwrap();
        assert_eq!(undone.kind, UndoKind::Patch);
        assert_eq!(fs::read(&file).unwrap(), original);
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
        assert!(log.entries().unwrap().is_empty());
        assert!(log.undo_last(&ws).unwrap().is_none());
    }

    #[test]
    fn create_then_undo_deletes_the_file_and_created_parents() {
        let (_dir, ws, log) = setup();
        log.record(UndoEntry::create(
            "new/deep/f.rs",
            vec!["new".into(), "new/deep".into()],
        ))
        .unwrap();
        fs::create_dir_all(ws.root.join("new/deep")).unwrap();
        fs::write(ws.root.join("new/deep/f.rs"), "x").unwrap();
        log.undo_last(&ws).unwrap().unwrap();
        assert!(!ws.root.join("new").exists());
    }

    #[test]
    fn rm_then_undo_restores_files_links_and_trees() {
        let (_dir, ws, log) = setup();
        fs::create_dir_all(ws.root.join("tree/sub")).unwrap();
        fs::write(ws.root.join("tree/sub/x"), b"\x00\x01").unwrap();
        fs::write(ws.root.join("f"), "content").unwrap();
        symlink("f", ws.root.join("link")).unwrap();

        log.remove("f", &ws.root.join("f")).unwrap();
        log.remove("link", &ws.root.join("link")).unwrap();
        log.remove("tree", &ws.root.join("tree")).unwrap();
        assert!(!ws.root.join("tree").exists());
        assert!(fs::symlink_metadata(ws.root.join("link")).is_err());
        assert_eq!(log.entries().unwrap().len(), 3);

        assert_eq!(log.undo_last(&ws).unwrap().unwrap().path, "tree");
        assert_eq!(fs::read(ws.root.join("tree/sub/x")).unwrap(), b"\x00\x01");
        log.undo_last(&ws).unwrap().unwrap();
        assert_eq!(fs::read_link(ws.root.join("link")).unwrap(), Path::new("f"));
        log.undo_last(&ws).unwrap().unwrap();
        assert_eq!(fs::read_to_string(ws.root.join("f")).unwrap(), "content");
    }

    #[test]
    fn undo_of_rm_refuses_to_clobber_a_new_file() {
        let (_dir, ws, log) = setup();
        fs::write(ws.root.join("f"), "old").unwrap();
        log.remove("f", &ws.root.join("f")).unwrap();
        fs::write(ws.root.join("f"), "new").unwrap();
        let err = log.undo_last(&ws).unwrap_err();
        assert!(matches!(err, UndoError::Conflict { .. }), "{err}");
        assert_eq!(fs::read_to_string(ws.root.join("f")).unwrap(), "new");
        assert_eq!(log.entries().unwrap().len(), 1);
    }

    #[test]
    fn mkdir_and_rmdir_undo() {
        let (_dir, ws, log) = setup();
        log.record(UndoEntry::mkdir("a/b", vec!["a".into()]))
            .unwrap();
        fs::create_dir_all(ws.root.join("a/b")).unwrap();
        fs::create_dir(ws.root.join("e")).unwrap();
        log.record(UndoEntry::rmdir("e", 0o700)).unwrap();
        fs::remove_dir(ws.root.join("e")).unwrap();

        log.undo_last(&ws).unwrap().unwrap();
        assert!(ws.root.join("e").is_dir());
        log.undo_last(&ws).unwrap().unwrap();
        assert!(!ws.root.join("a").exists());
    }

    #[test]
    fn state_paths_are_never_undoable() {
        let (_dir, _ws, log) = setup();
        assert!(
            log.record(UndoEntry::create(".fido-plan.json", vec![]))
                .is_err()
        );
        assert!(log.record(UndoEntry::create("../x", vec![])).is_err());
        assert!(log.record(UndoEntry::create("/etc/x", vec![])).is_err());
        assert!(log.entries().unwrap().is_empty());
    }

    #[test]
    fn discard_last_and_disabled() {
        let (_dir, ws, log) = setup();
        log.record(UndoEntry::patch("a", b"x".to_vec(), 0o644))
            .unwrap();
        log.discard_last().unwrap();
        assert!(log.entries().unwrap().is_empty());
        assert!(!ws.root.join(UNDO_DIR).join("blobs/1").exists());

        let off = UndoLog::disabled();
        off.record(UndoEntry::create("a", vec![])).unwrap();
        assert!(off.entries().unwrap().is_empty());
        fs::write(ws.root.join("gone"), "x").unwrap();
        off.remove("gone", &ws.root.join("gone")).unwrap();
        assert!(!ws.root.join("gone").exists());
        assert!(off.undo_last(&ws).unwrap().is_none());
    }

    #[test]
    fn journal_is_pruned() {
        let (_dir, _ws, log) = setup();
        for i in 0..MAX_ENTRIES + 3 {
            log.record(UndoEntry::patch("a", vec![i as u8], 0o644))
                .unwrap();
        }
        let entries = log.entries().unwrap();
        assert_eq!(entries.len(), MAX_ENTRIES);
        assert_eq!(
            entries[0].before,
            Before::File {
                content: vec![3],
                mode: 0o644
            }
        );
    }
}
