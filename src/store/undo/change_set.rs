//! An applied change set in the undo journal: one entry for all its
//! files. Its blob is a folder: `manifest.json` lists each file with its
//! mode before and after (`null`: absent), and `before-N` / `after-N` hold
//! the bytes.
//!
//! Undo checks every file first: each must still be exactly what the apply
//! wrote. If one changed since, the undo is refused and nothing is
//! restored, so no later edit is ever lost; the message names the file.

use std::fs;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::UndoError;
use crate::store::atomic::write_atomic;
use crate::workspace::{FinalLink, Workspace};

/// One file of an applied change set: its bytes and mode before and after
/// the apply (`None`: the file did not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetFile {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub before: Option<(Vec<u8>, u32)>,
    pub after: Option<(Vec<u8>, u32)>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ManifestLine {
    path: String,
    before: Option<u32>,
    after: Option<u32>,
}

/// Writes `files` into the blob folder `dir`.
pub(super) fn store(dir: &Path, files: &[SetFile]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut manifest = Vec::with_capacity(files.len());
    for (n, file) in files.iter().enumerate() {
        for (side, content) in [("before", &file.before), ("after", &file.after)] {
            if let Some((bytes, _)) = content {
                fs::write(dir.join(format!("{side}-{n}")), bytes)?;
            }
        }
        manifest.push(ManifestLine {
            path: file.path.clone(),
            before: file.before.as_ref().map(|(_, mode)| *mode),
            after: file.after.as_ref().map(|(_, mode)| *mode),
        });
    }
    let json = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
    write_atomic(&dir.join("manifest.json"), &json, Some(0o600))
}

/// Reads the files of the blob folder `dir`.
pub(super) fn load(dir: &Path) -> io::Result<Vec<SetFile>> {
    let manifest: Vec<ManifestLine> =
        serde_json::from_slice(&fs::read(dir.join("manifest.json"))?).map_err(io::Error::other)?;
    let read = |side: &str, n: usize, mode: Option<u32>| -> io::Result<Option<(Vec<u8>, u32)>> {
        match mode {
            Some(mode) => Ok(Some((fs::read(dir.join(format!("{side}-{n}")))?, mode))),
            None => Ok(None),
        }
    };
    manifest
        .into_iter()
        .enumerate()
        .map(|(n, line)| {
            Ok(SetFile {
                before: read("before", n, line.before)?,
                after: read("after", n, line.after)?,
                path: line.path,
            })
        })
        .collect()
}

/// Puts every file of the change set `id` back as it was before the
/// apply, after checking that none changed since.
pub(super) fn restore(workspace: &Workspace, id: &str, files: &[SetFile]) -> Result<(), UndoError> {
    let conflict = |path: &str, reason: String| UndoError::Conflict {
        kind: super::UndoKind::ChangeSet,
        path: format!("{id} ({path})"),
        reason,
    };
    let mut targets = Vec::with_capacity(files.len());
    for file in files {
        let resolved = workspace
            .resolve_with(&file.path, FinalLink::Keep)
            .map_err(|source| UndoError::Path {
                kind: super::UndoKind::ChangeSet,
                path: file.path.clone(),
                source,
            })?;
        let now = current(&resolved.abs).map_err(|e| conflict(&file.path, e.to_string()))?;
        let expected = file.after.as_ref().map(|(bytes, _)| bytes.as_slice());
        if now.as_deref() != expected {
            return Err(conflict(
                &file.path,
                "it changed since the change set was applied; nothing was undone. Revert that file by hand first, or keep the change set".into(),
            ));
        }
        targets.push(resolved.abs);
    }
    for (file, target) in files.iter().zip(targets) {
        let io_err = |source| UndoError::Io {
            kind: super::UndoKind::ChangeSet,
            path: file.path.clone(),
            source,
        };
        match &file.before {
            Some((bytes, mode)) => {
                if let Some(parent) = target.parent() {
                    fs::create_dir_all(parent).map_err(io_err)?;
                }
                write_atomic(&target, bytes, Some(*mode)).map_err(io_err)?;
            }
            None => remove_file_and_empty_parents(workspace, &target).map_err(io_err)?,
        }
    }
    Ok(())
}

/// The file's bytes, `None` when nothing is there; an error for a
/// directory or a symlink, which an apply never writes.
fn current(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => fs::read(path).map(Some),
        Ok(_) => Err(io::Error::other("a directory or symlink is there now")),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// Removes a file the apply created, and the folders that held only it.
fn remove_file_and_empty_parents(workspace: &Workspace, target: &Path) -> io::Result<()> {
    match fs::remove_file(target) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(err),
    }
    let mut dir = target.parent();
    while let Some(parent) = dir {
        if parent == workspace.root || fs::remove_dir(parent).is_err() {
            break;
        }
        dir = parent.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{UndoKind, UndoLog};
    use super::*;

    #[test]
    fn a_change_set_is_undone_whole_and_never_over_a_later_edit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("a.txt"), "after\n").unwrap();
        fs::create_dir_all(root.join("new/deep")).unwrap();
        fs::write(root.join("new/deep/b.txt"), "created\n").unwrap();
        let workspace = Workspace::new(root).unwrap();
        let undo = UndoLog::new(root);
        let files = vec![
            SetFile {
                path: "a.txt".into(),
                before: Some((b"before\n".to_vec(), 0o644)),
                after: Some((b"after\n".to_vec(), 0o644)),
            },
            SetFile {
                path: "new/deep/b.txt".into(),
                before: None,
                after: Some((b"created\n".to_vec(), 0o644)),
            },
            SetFile {
                path: "gone.txt".into(),
                before: Some((b"old\n".to_vec(), 0o755)),
                after: None,
            },
        ];
        undo.record_change_set("subagent-1", &files).unwrap();
        // A later edit of one file: the undo is refused, nothing restored.
        fs::write(root.join("a.txt"), "after, then edited\n").unwrap();
        let err = undo.undo_last(&workspace).unwrap_err().to_string();
        assert!(
            err.contains("a.txt") && err.contains("changed since"),
            "{err}"
        );
        assert!(root.join("new/deep/b.txt").exists());
        assert!(!root.join("gone.txt").exists());
        // Put back as the apply left it: the undo restores everything.
        fs::write(root.join("a.txt"), "after\n").unwrap();
        let entry = undo.undo_last(&workspace).unwrap().unwrap();
        assert_eq!(
            (entry.kind, entry.path.as_str()),
            (UndoKind::ChangeSet, "subagent-1")
        );
        assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "before\n");
        assert!(!root.join("new").exists(), "created folders go too");
        assert_eq!(fs::read_to_string(root.join("gone.txt")).unwrap(), "old\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(root.join("gone.txt"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(undo.undo_last(&workspace).unwrap().is_none());
    }
}
