//! Applying a change set: a three-way merge onto the main checkout as it is
//! now (the parent or the person may have edited since the base).
//!
//! Every file is decided before anything is written: the current file
//! equals the base (take the subagent's), equals the subagent's (nothing
//! to do), or both changed (`git merge-file`, clean or a conflict). One
//! conflict, or one path that is unsafe to write, and nothing at all is
//! written: the change set stays open with the conflicts named. A clean
//! apply is journalled as one undoable edit first, then each file is
//! written atomically.
//!
//! Whatever the patch says, an apply writes only inside the claim and the
//! workspace: a path with `..`, an absolute path, `.git` or `.fido-*`, or
//! a path whose folders in the main checkout include a symlink is refused.
//! Symlinks and submodules are never written; they count as conflicts.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::claim::Claim;
use super::git::Git;
use super::records::Layout;
use super::records::{self, Entry, Record};
use super::{ChangesError, joined};
use crate::protocol::changes::{FileConflict, MergeState};
use crate::store::atomic::{Staged, remove_dead_writers_temps, stage, sync_dir, write_atomic};
use crate::store::undo::{SetFile, UndoLog};
use crate::workspace::{STATE_PREFIX, Workspace};

/// Bytes and permission bits of one side of a file.
type Content = Option<(Vec<u8>, u32)>;

/// The private repository, and the blobs of a change set's regular files
/// read ahead by one `git cat-file --batch` (a git per blob cost the apply
/// of 100 files about a second).
struct Sides<'a> {
    git: &'a Git,
    blobs: HashMap<String, Vec<u8>>,
}

impl<'a> Sides<'a> {
    fn read(git: &'a Git, entries: &[Entry]) -> Result<Sides<'a>, ChangesError> {
        let mut ids: Vec<String> = entries
            .iter()
            .flat_map(|entry| [&entry.old, &entry.new])
            .flatten()
            .filter(|(mode, _)| mode.starts_with("100"))
            .map(|(_, id)| id.clone())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let blobs = git.blobs(&ids)?;
        Ok(Sides {
            git,
            blobs: ids.into_iter().zip(blobs).collect(),
        })
    }
}

/// One file's decision.
enum Step {
    /// Already as the subagent left it.
    Same,
    Write(SetFile),
    Conflict(FileConflict),
}

/// Applies the open change set `id`. The record comes back with `merge`
/// `applied` or `conflict` (then with its conflicts).
pub fn apply(workspace: &Workspace, undo: &UndoLog, id: &str) -> Result<Record, ChangesError> {
    apply_then(workspace, undo, id, || {})
}

/// [`apply`], running `meanwhile` once every file is decided and before
/// any is staged: where a test plays the person who saves a file then.
pub(super) fn apply_then(
    workspace: &Workspace,
    undo: &UndoLog,
    id: &str,
    meanwhile: impl FnOnce(),
) -> Result<Record, ChangesError> {
    let _lock = records::lock(&workspace.root, id)?;
    let mut record = open_record(&workspace.root, id)?;
    let (writes, conflicts) = decide_all(workspace, &record)?;
    if !conflicts.is_empty() {
        return keep_open(&workspace.root, record, conflicts);
    }
    meanwhile();
    let staged = stage_recorded(&workspace.root, undo, id, &writes)?;
    match put_in_place(staged, &writes) {
        Ok(()) => {}
        Err(Placed::Changed { placed, conflict }) => {
            roll_back(&workspace.root, undo, &writes[..placed]);
            return keep_open(&workspace.root, record, vec![conflict]);
        }
        Err(Placed::Failed(err)) => {
            roll_back(&workspace.root, undo, &writes);
            return Err(err);
        }
    }
    records::close(&workspace.root, &mut record, MergeState::Applied)?;
    Ok(record)
}

/// Every file of `record` decided: the writes, and the conflicts.
fn decide_all(
    workspace: &Workspace,
    record: &Record,
) -> Result<(Vec<SetFile>, Vec<FileConflict>), ChangesError> {
    let claim = Claim::parse(&record.claim).map_err(|e| ChangesError::Unsafe(e.to_string()))?;
    let git = Git::private(&Layout::new(&workspace.root, &record.set.id).git_dir());
    let sides = Sides::read(&git, &record.entries)?;
    let mut writes = Vec::new();
    let mut conflicts = Vec::new();
    for entry in &record.entries {
        for step in decide(workspace, &sides, &claim, entry)? {
            match step {
                Step::Same => {}
                Step::Write(file) => writes.push(file),
                Step::Conflict(conflict) => conflicts.push(conflict),
            }
        }
    }
    Ok((writes, conflicts))
}

/// The change set stays open, with `conflicts` named; nothing written.
fn keep_open(
    root: &Path,
    mut record: Record,
    conflicts: Vec<FileConflict>,
) -> Result<Record, ChangesError> {
    record.set.merge = MergeState::Conflict;
    record.set.conflicts = conflicts;
    record.save(root)?;
    Ok(record)
}

/// A write failed (a full disk, say): every file that was written goes
/// back to what it was, and the undo entry goes, so the change set stays
/// open and the checkout is as it was. Best effort: a file that cannot be
/// put back is logged, and its before-state is still in the journal.
fn roll_back(root: &Path, undo: &UndoLog, writes: &[SetFile]) {
    let mut restored = true;
    for file in writes {
        let Ok(target) = safe_target(root, &file.path) else {
            continue;
        };
        let now = read_current(&target).ok().flatten().map(|(bytes, _)| bytes);
        if now.as_ref() != file.after.as_ref().map(|(bytes, _)| bytes) {
            continue;
        }
        let back = match &file.before {
            Some((bytes, mode)) => write_atomic(&target, bytes, Some(*mode)),
            None => fs::remove_file(&target),
        };
        if let Err(err) = back {
            restored = false;
            tracing::warn!(path = %file.path, error = %err, "cannot roll back a file of a failed apply");
        }
    }
    if restored {
        let _ = undo.discard_last();
    }
}

/// Discards the open change set `id`: the main checkout is not touched.
pub fn discard(workspace: &Path, id: &str) -> Result<Record, ChangesError> {
    let _lock = records::lock(workspace, id)?;
    let mut record = open_record(workspace, id)?;
    records::close(workspace, &mut record, MergeState::Discarded)?;
    Ok(record)
}

fn open_record(workspace: &Path, id: &str) -> Result<Record, ChangesError> {
    let record = Record::load(workspace, id)?;
    if !record.set.merge.is_open() {
        return Err(ChangesError::Closed {
            id: id.to_string(),
            state: record.set.merge,
        });
    }
    Ok(record)
}

/// The steps of one entry: its path, and for a rename the removal of the
/// old path.
fn decide(
    workspace: &Workspace,
    sides: &Sides,
    claim: &Claim,
    entry: &Entry,
) -> Result<Vec<Step>, ChangesError> {
    let mut steps = Vec::new();
    if let Some(from) = &entry.from {
        let removal = Entry {
            path: from.clone(),
            from: None,
            old: entry.old.clone(),
            new: None,
        };
        steps.push(decide_one(workspace, sides, claim, &removal)?);
        let addition = Entry {
            old: None,
            from: None,
            ..entry.clone()
        };
        steps.push(decide_one(workspace, sides, claim, &addition)?);
    } else {
        steps.push(decide_one(workspace, sides, claim, entry)?);
    }
    Ok(steps)
}

fn decide_one(
    workspace: &Workspace,
    sides: &Sides,
    claim: &Claim,
    entry: &Entry,
) -> Result<Step, ChangesError> {
    let conflict = |reason: &str| {
        Ok(Step::Conflict(FileConflict {
            path: entry.path.clone(),
            reason: reason.to_string(),
            hunks: Vec::new(),
        }))
    };
    if !claim.covers(&entry.path) {
        return Err(ChangesError::Unsafe(format!(
            "{} lies outside the claim {}",
            entry.path,
            claim.display()
        )));
    }
    let target = safe_target(&workspace.root, &entry.path)?;
    let special = |side: &Option<(String, String)>| {
        side.as_ref()
            .is_some_and(|(mode, _)| !mode.starts_with("100"))
    };
    if special(&entry.old) || special(&entry.new) {
        return conflict(
            "a symlink or submodule: never applied; see the patch and apply it by hand",
        );
    }
    let base = read_side(sides, &entry.old)?;
    let theirs = read_side(sides, &entry.new)?;
    let ours = match read_current(&target) {
        Ok(ours) => ours,
        Err(err) => return conflict(&err.to_string()),
    };
    let bytes = |c: &Content| c.as_ref().map(|(b, _)| b.clone());
    if bytes(&ours) == bytes(&theirs) {
        return Ok(Step::Same);
    }
    let write = |after: Content| {
        Ok(Step::Write(SetFile {
            path: entry.path.clone(),
            before: ours.clone(),
            after,
        }))
    };
    if bytes(&ours) == bytes(&base) {
        // The subagent's bytes; the person's mode unless the subagent's
        // changed it.
        let mode = match (&ours, &base, &theirs) {
            (Some(o), Some(b), Some(t)) if b.1 == t.1 => o.1,
            (_, _, Some(t)) => t.1,
            _ => 0,
        };
        return write(theirs.as_ref().map(|t| (t.0.clone(), mode)));
    }
    let (Some(o), Some(b), Some(t)) = (&ours, &base, &theirs) else {
        return conflict("created or deleted on one side and edited on the other since the base");
    };
    if [&o.0, &b.0, &t.0].iter().any(|bytes| bytes.contains(&0)) {
        return conflict("a binary file changed both here and in the worktree");
    }
    match merge_file(sides.git, &o.0, &b.0, &t.0)? {
        Merged::Clean(merged) => write(Some((merged, t.1))),
        Merged::Conflicts(hunks) => Ok(Step::Conflict(FileConflict {
            path: entry.path.clone(),
            reason: format!(
                "{} overlap edits made here since the base",
                crate::text::counted(hunks.len() as u64, "hunk")
            ),
            hunks,
        })),
    }
}

/// The absolute path of the workspace path `path`, refused unless every
/// component is a plain name, none is `.git` or Fido's state, and no
/// folder on the way is a symlink (in the main checkout as it is now).
fn safe_target(root: &Path, path: &str) -> Result<PathBuf, ChangesError> {
    let unsafe_path = |why: &str| ChangesError::Unsafe(format!("{path}: {why}"));
    let mut target = root.to_path_buf();
    let components: Vec<Component> = Path::new(path).components().collect();
    if components.is_empty() {
        return Err(unsafe_path("an empty path"));
    }
    for (n, component) in components.iter().enumerate() {
        let Component::Normal(name) = component else {
            return Err(unsafe_path("not a plain relative path"));
        };
        if *name == ".git"
            || (n == 0 && name.as_encoded_bytes().starts_with(STATE_PREFIX.as_bytes()))
        {
            return Err(unsafe_path("the repository's or Fido's own files"));
        }
        target.push(name);
        let last = n + 1 == components.len();
        match fs::symlink_metadata(&target) {
            Ok(meta) if meta.file_type().is_symlink() && !last => {
                return Err(unsafe_path(
                    "a folder on the way is a symlink; not followed",
                ));
            }
            Ok(meta) if !meta.is_dir() && !last => {
                return Err(unsafe_path("a folder on the way is a file"));
            }
            _ => {}
        }
    }
    Ok(target)
}

fn read_side(sides: &Sides, side: &Option<(String, String)>) -> Result<Content, ChangesError> {
    let Some((mode, id)) = side else {
        return Ok(None);
    };
    let Some(bytes) = sides.blobs.get(id) else {
        return Err(ChangesError::Unsafe(format!(
            "blob {id} was not read ahead"
        )));
    };
    let mode = if mode == "100755" { 0o755 } else { 0o644 };
    Ok(Some((bytes.clone(), mode)))
}

/// The main checkout's file now: `None` when absent.
fn read_current(target: &Path) -> io::Result<Content> {
    use std::os::unix::fs::PermissionsExt;
    match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_file() => Ok(Some((
            fs::read(target)?,
            meta.permissions().mode() & 0o7777,
        ))),
        Ok(meta) if meta.file_type().is_symlink() => Err(io::Error::other(
            "a symlink is there in the main checkout; not followed",
        )),
        Ok(_) => Err(io::Error::other("a folder is there in the main checkout")),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

enum Merged {
    Clean(Vec<u8>),
    /// The conflicting hunks' line ranges in the merged file.
    Conflicts(Vec<String>),
}

/// `git merge-file` of ours, base and theirs, through temporary files in
/// the private repository.
fn merge_file(git: &Git, ours: &[u8], base: &[u8], theirs: &[u8]) -> Result<Merged, ChangesError> {
    let dir = git.dir().join(format!("merge-{:016x}", fastrand::u64(..)));
    fs::create_dir(&dir)?;
    let paths = ["ours", "base", "theirs"].map(|n| dir.join(n));
    let merged = (|| {
        for (path, bytes) in paths.iter().zip([ours, base, theirs]) {
            fs::write(path, bytes)?;
        }
        let mut args: Vec<std::ffi::OsString> = vec!["merge-file".into(), "-p".into()];
        args.extend(paths.iter().map(|p| p.as_os_str().to_owned()));
        Ok::<_, ChangesError>(git.status(&args)?)
    })();
    let _ = fs::remove_dir_all(&dir);
    let (code, out) = merged?;
    match code {
        0 => Ok(Merged::Clean(out)),
        1..=127 => Ok(Merged::Conflicts(conflict_ranges(&out))),
        _ => Err(ChangesError::Unsafe(format!(
            "git merge-file failed ({code})"
        ))),
    }
}

/// The line ranges of `<<<<<<<` … `>>>>>>>` blocks in merged output.
fn conflict_ranges(merged: &[u8]) -> Vec<String> {
    let mut ranges = Vec::new();
    let mut start = None;
    for (n, line) in merged.split(|b| *b == b'\n').enumerate() {
        if line.starts_with(b"<<<<<<< ") {
            start = Some(n + 1);
        } else if line.starts_with(b">>>>>>> ")
            && let Some(first) = start.take()
        {
            ranges.push(format!("{first}-{}", n + 1));
        }
    }
    ranges
}

/// How many threads stage a change set's files: each ends with an fsync,
/// and the fsyncs of parallel writers share the file system's journal
/// commits.
const WRITERS: usize = 8;

/// Stages every new file (synced temp files beside their targets) while
/// the undo entry is recorded: both are durable before any file of the
/// checkout changes. On an error nothing has changed and no entry is left.
fn stage_recorded(
    root: &Path,
    undo: &UndoLog,
    id: &str,
    files: &[SetFile],
) -> Result<Vec<StagedFile>, ChangesError> {
    let (staged, recorded) = std::thread::scope(|scope| {
        let recording = scope.spawn(|| undo.record_change_set(id, files));
        let staged = stage_files(root, files);
        (staged, joined(recording, "the undo record's thread"))
    });
    match (staged, recorded) {
        (Ok(staged), Ok(())) => Ok(staged),
        (Err(err), Ok(())) => {
            let _ = undo.discard_last();
            Err(err)
        }
        (_, Err(err)) => Err(err),
    }
}

/// A file of the checkout and its staged new bytes (`None`: a removal).
type StagedFile = (PathBuf, Option<Staged>);

/// Each file staged, in order, by [`WRITERS`] threads; the first error,
/// once every writer is done (the staged files of a failed call are
/// removed as they drop).
fn stage_files(root: &Path, files: &[SetFile]) -> Result<Vec<StagedFile>, ChangesError> {
    let per_writer = files.len().div_ceil(WRITERS).max(1);
    std::thread::scope(|scope| {
        let writers: Vec<_> = files
            .chunks(per_writer)
            .map(|part| scope.spawn(move || part.iter().map(|f| stage_file(root, f)).collect()))
            .collect();
        let parts: Vec<Result<Vec<_>, ChangesError>> = writers
            .into_iter()
            .map(|writer| joined(writer, "a writer thread"))
            .collect();
        let mut staged = Vec::with_capacity(files.len());
        for part in parts {
            staged.extend(part?);
        }
        Ok(staged)
    })
}

fn stage_file(root: &Path, file: &SetFile) -> Result<StagedFile, ChangesError> {
    let target = safe_target(root, &file.path)?;
    // An apply killed before its rename left its temp file here.
    remove_dead_writers_temps(&target);
    let Some((bytes, mode)) = &file.after else {
        return Ok((target, None));
    };
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    let staged = stage(&target, bytes, Some(*mode))?;
    Ok((target, Some(staged)))
}

/// Why the files were not all put in place.
enum Placed {
    /// The file after the first `placed` was no longer what was decided
    /// on (a person saved it meanwhile): it was left as it is.
    Changed {
        placed: usize,
        conflict: FileConflict,
    },
    Failed(ChangesError),
}

impl From<io::Error> for Placed {
    fn from(err: io::Error) -> Placed {
        Placed::Failed(err.into())
    }
}

/// Renames every staged file over its target and removes the removed
/// ones, then syncs each folder once, which makes it durable. Each
/// target is read just before: one that no longer holds what the apply
/// decided on stops it there (a check, then a rename: a save in between
/// those two is not seen).
fn put_in_place(staged: Vec<StagedFile>, writes: &[SetFile]) -> Result<(), Placed> {
    let mut folders = std::collections::BTreeSet::new();
    for (placed, ((target, staged), file)) in staged.into_iter().zip(writes).enumerate() {
        let now = read_current(&target).map(|c| c.map(|(bytes, _)| bytes));
        if now.ok() != Some(file.before.as_ref().map(|(bytes, _)| bytes.clone())) {
            let conflict = FileConflict {
                path: file.path.clone(),
                reason: "changed in the main checkout while the apply ran; left as it is".into(),
                hunks: Vec::new(),
            };
            return Err(Placed::Changed { placed, conflict });
        }
        match staged {
            Some(staged) => staged.commit()?,
            None => match fs::remove_file(&target) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err.into()),
            },
        }
        if let Some(parent) = target.parent() {
            folders.insert(parent.to_path_buf());
        }
    }
    for folder in folders {
        if let Err(err) = sync_dir(&folder) {
            tracing::warn!(path = %folder.display(), error = %err, "cannot sync a folder of an applied change set");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_targets_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir(root.join("src")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join("out")).unwrap();
        fs::write(root.join("file"), "x").unwrap();
        assert!(safe_target(root, "src/a.rs").is_ok());
        assert!(safe_target(root, "src/new/deep.rs").is_ok());
        for bad in [
            "../x",
            "/etc/passwd",
            "out/x",
            ".git/config",
            "src/.git/x",
            ".fido-state/x",
            "file/x",
            "",
        ] {
            assert!(safe_target(root, bad).is_err(), "{bad}");
        }
    }

    /// After a failed write: what was written goes back, what was not is
    /// left alone, and the undo entry goes.
    /// A file that cannot be staged (its folder is a file) fails the apply
    /// before anything changed: every other file as it was, no temp file
    /// left, no undo entry.
    #[test]
    fn a_staging_failure_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "old\n").unwrap();
        fs::write(root.join("blocked"), "a file, not a folder\n").unwrap();
        let undo = UndoLog::new(root);
        let writes: Vec<SetFile> = (0..20)
            .map(|n| SetFile {
                path: if n == 13 {
                    "blocked/b.txt".into()
                } else {
                    format!("f{n}.txt")
                },
                before: None,
                after: Some((b"new\n".to_vec(), 0o644)),
            })
            .chain([SetFile {
                path: "a.txt".into(),
                before: Some((b"old\n".to_vec(), 0o644)),
                after: Some((b"new\n".to_vec(), 0o644)),
            }])
            .collect();
        assert!(stage_recorded(root, &undo, "subagent-1", &writes).is_err());
        let mut names: Vec<String> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| !name.starts_with(".fido-state"))
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "blocked"]);
        assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "old\n");
        assert!(undo.entries().unwrap().is_empty(), "no undo entry");
    }

    #[test]
    fn a_failed_apply_is_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let undo = UndoLog::new(root);
        let writes = vec![
            SetFile {
                path: "written.txt".into(),
                before: Some((b"old\n".to_vec(), 0o644)),
                after: Some((b"new\n".to_vec(), 0o644)),
            },
            SetFile {
                path: "created.txt".into(),
                before: None,
                after: Some((b"made\n".to_vec(), 0o644)),
            },
            SetFile {
                path: "not-reached.txt".into(),
                before: Some((b"keep\n".to_vec(), 0o644)),
                after: Some((b"never written\n".to_vec(), 0o644)),
            },
        ];
        undo.record_change_set("subagent-1", &writes).unwrap();
        fs::write(root.join("written.txt"), "new\n").unwrap();
        fs::write(root.join("created.txt"), "made\n").unwrap();
        fs::write(root.join("not-reached.txt"), "keep\n").unwrap();
        roll_back(root, &undo, &writes);
        assert_eq!(
            fs::read_to_string(root.join("written.txt")).unwrap(),
            "old\n"
        );
        assert!(!root.join("created.txt").exists());
        assert_eq!(
            fs::read_to_string(root.join("not-reached.txt")).unwrap(),
            "keep\n"
        );
        assert!(undo.entries().unwrap().is_empty(), "the undo entry goes");
    }

    #[test]
    fn conflict_ranges_are_line_numbers() {
        let merged = b"a\n<<<<<<< ours\nb\n=======\nc\n>>>>>>> theirs\nd\n";
        assert_eq!(conflict_ranges(merged), ["2-6"]);
    }
}
