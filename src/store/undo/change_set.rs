//! An applied change set in the undo journal: one entry for all its
//! files. Its blob is a folder: `pack` holds the bytes of every file, its
//! before then its after, one after another, and `manifest.json` lists
//! each file with its mode and length before and after (`null`: absent).
//! One pack written and synced once, rather than a file per side, keeps
//! recording a change set of a hundred files from costing more than the
//! apply itself. Folders written before the pack (`before-N` / `after-N`
//! files, no lengths in the manifest) are still read.
//!
//! Undo checks every file first: each must still be exactly what the apply
//! wrote. If one changed since, the undo is refused and nothing is
//! restored, so no later edit is ever lost; the message names the file.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::UndoError;
use crate::store::atomic::{remove_dead_writers_temps, write_atomic};
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
    /// The lengths in `pack`; absent in folders written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lengths: Option<[u64; 2]>,
}

const PACK: &str = "pack";

/// Writes `files` into the blob folder `dir`: the pack, synced, before the
/// manifest that makes the entry readable.
pub(super) fn store(dir: &Path, files: &[SetFile]) -> io::Result<()> {
    fs::create_dir_all(dir)?;
    let mut pack = io::BufWriter::new(fs::File::create(dir.join(PACK))?);
    let mut manifest = Vec::with_capacity(files.len());
    let length = |side: &Option<(Vec<u8>, u32)>| side.as_ref().map_or(0, |(b, _)| b.len() as u64);
    for file in files {
        for (bytes, _) in file.before.iter().chain(file.after.iter()) {
            pack.write_all(bytes)?;
        }
        manifest.push(ManifestLine {
            path: file.path.clone(),
            before: file.before.as_ref().map(|(_, mode)| *mode),
            after: file.after.as_ref().map(|(_, mode)| *mode),
            lengths: Some([length(&file.before), length(&file.after)]),
        });
    }
    pack.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    let json = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
    write_atomic(&dir.join("manifest.json"), &json, Some(0o600))
}

/// Reads the files of the blob folder `dir`.
pub(super) fn load(dir: &Path) -> io::Result<Vec<SetFile>> {
    let manifest: Vec<ManifestLine> =
        serde_json::from_slice(&fs::read(dir.join("manifest.json"))?).map_err(io::Error::other)?;
    let packed = manifest.iter().all(|line| line.lengths.is_some());
    let pack = if packed {
        fs::read(dir.join(PACK))?
    } else {
        Vec::new()
    };
    let mut offset = 0usize;
    let mut take = |len: u64| -> io::Result<Vec<u8>> {
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| offset.checked_add(len))
            .filter(|end| *end <= pack.len())
            .ok_or_else(|| {
                io::Error::other("the change set's pack is shorter than its manifest")
            })?;
        let bytes = pack[offset..end].to_vec();
        offset = end;
        Ok(bytes)
    };
    let mut files = Vec::with_capacity(manifest.len());
    for (n, line) in manifest.into_iter().enumerate() {
        let mut side = |name: &str, mode: Option<u32>, len: Option<u64>| -> io::Result<_> {
            let Some(mode) = mode else { return Ok(None) };
            let bytes = match len {
                Some(len) => take(len)?,
                None => fs::read(dir.join(format!("{name}-{n}")))?,
            };
            Ok(Some((bytes, mode)))
        };
        let [before_len, after_len] = line
            .lengths
            .map_or([None, None], |[b, a]| [Some(b), Some(a)]);
        files.push(SetFile {
            before: side("before", line.before, before_len)?,
            after: side("after", line.after, after_len)?,
            path: line.path,
        });
    }
    Ok(files)
}

/// Puts every file of the change set `id` back as it was before the
/// apply, after checking that none changed since (a file still as it was
/// before is one a killed apply never reached, and stays).
pub(super) fn restore(workspace: &Workspace, id: &str, files: &[SetFile]) -> Result<(), UndoError> {
    let conflict = |path: &str, reason: String| UndoError::Conflict {
        kind: super::UndoKind::ChangeSet,
        path: format!("{id} ({path})"),
        reason,
    };
    let mut targets = Vec::with_capacity(files.len());
    let mut unwritten = Vec::with_capacity(files.len());
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
        // Still as before: an apply killed part-way never reached it.
        let untouched = now.as_deref() == file.before.as_ref().map(|(bytes, _)| bytes.as_slice());
        if now.as_deref() != expected && !untouched {
            return Err(conflict(
                &file.path,
                "it changed since the change set was applied; nothing was undone. Revert that file by hand first, or keep the change set".into(),
            ));
        }
        // What a killed apply staged beside it and never renamed.
        remove_dead_writers_temps(&resolved.abs);
        unwritten.push(untouched);
        targets.push(resolved.abs);
    }
    for ((file, target), untouched) in files.iter().zip(targets).zip(unwritten) {
        if untouched {
            continue;
        }
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

    #[test]
    fn a_pack_round_trips_and_a_short_one_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let files = vec![
            SetFile {
                path: "a".into(),
                before: Some((b"one".to_vec(), 0o644)),
                after: None,
            },
            SetFile {
                path: "b".into(),
                before: None,
                after: Some((b"two, longer".to_vec(), 0o755)),
            },
            SetFile {
                path: "c".into(),
                before: Some((Vec::new(), 0o600)),
                after: Some((b"3".to_vec(), 0o600)),
            },
        ];
        store(dir.path(), &files).unwrap();
        assert_eq!(load(dir.path()).unwrap(), files);
        fs::write(dir.path().join(PACK), b"one, two").unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("shorter than its manifest"), "{err}");
    }

    #[test]
    fn a_folder_written_before_the_pack_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("before-0"), "old").unwrap();
        fs::write(dir.path().join("after-1"), "new").unwrap();
        fs::write(
            dir.path().join("manifest.json"),
            r#"[{"path":"a","before":420,"after":null},{"path":"b","before":null,"after":493}]"#,
        )
        .unwrap();
        let files = load(dir.path()).unwrap();
        assert_eq!(files[0].before, Some((b"old".to_vec(), 0o644)));
        assert_eq!(files[0].after, None);
        assert_eq!(files[1].after, Some((b"new".to_vec(), 0o755)));
    }
}
