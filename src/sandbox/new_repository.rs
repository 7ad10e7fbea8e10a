//! A git repository that a sandboxed command makes at the top of the
//! workspace (`git init` where there was none).
//!
//! A protected path that does not exist when a command starts cannot be
//! bound read-only (`super::protect`): a command may create `.git` and, in
//! the same run, write hooks or a `core.fsmonitor` into it, which git would
//! later run outside the sandbox at the user's next `git commit` or
//! `git status`. No mount can stop the creation without touching the
//! user's workspace, so the command runs, and when it ends whatever `.git`
//! appeared is moved out of git's way into `.fido-state/set-aside/`, which
//! commands cannot write. The model hears why, and that `git init` with
//! `escalate: true` (which the user approves) makes a repository that
//! stays. The check is one `lstat` before and one after; under Landlock's
//! per-entry fallback the kernel refuses the new entry itself, so there
//! is nothing to watch.

use std::io;
use std::path::{Path, PathBuf};

use crate::workspace::SET_ASIDE_DIR;

/// The top of one workspace with no `.git` when a command started.
#[derive(Debug)]
pub struct RepositoryWatch {
    workspace: PathBuf,
}

/// Where a `.git` made by a command went.
#[derive(Debug)]
pub struct SetAside {
    /// Relative to the workspace.
    pub shown: String,
}

impl RepositoryWatch {
    /// A watch over `workspace`, where it has no `.git` now (one `lstat`).
    pub fn before(workspace: &Path) -> Option<RepositoryWatch> {
        let absent = matches!(
            std::fs::symlink_metadata(workspace.join(".git")),
            Err(err) if err.kind() == io::ErrorKind::NotFound
        );
        absent.then(|| RepositoryWatch {
            workspace: workspace.to_path_buf(),
        })
    }

    /// After the command: moves a `.git` that appeared (a folder, a file
    /// or a link) into the set-aside folder. `Ok(None)` when none did.
    /// Blocking.
    pub fn set_aside(self) -> io::Result<Option<SetAside>> {
        let dot_git = self.workspace.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
            Ok(_) => {}
        }
        let dir = self.workspace.join(SET_ASIDE_DIR);
        std::fs::create_dir_all(&dir)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis());
        let name = format!("git-{stamp}-{:04x}", fastrand::u16(..));
        std::fs::rename(&dot_git, dir.join(&name))?;
        Ok(Some(SetAside {
            shown: format!("{SET_ASIDE_DIR}/{name}"),
        }))
    }
}

impl SetAside {
    /// What the model and the user read after the command's output.
    pub fn note(&self) -> String {
        format!(
            "note: this command created a git repository at the top of the workspace (.git). Its hooks and config would run outside the sandbox whenever git is used there, so Fido moved it to {} (commands cannot write there). To make a repository that stays, run `git init` again with escalate: true; the user decides.",
            self.shown
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_made_after_the_look_is_moved_aside_whole() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path()).expect("no .git yet");
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::write(dir.path().join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let moved = watch.set_aside().unwrap().expect("set aside");
        assert!(!dir.path().join(".git").exists());
        let hook = dir.path().join(&moved.shown).join("hooks/pre-commit");
        assert_eq!(std::fs::read_to_string(hook).unwrap(), "#!/bin/sh\n");
        assert!(moved.note().contains(&moved.shown), "{}", moved.note());
    }

    #[test]
    fn a_git_file_or_link_is_moved_too() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path()).unwrap();
        std::os::unix::fs::symlink("/nonexistent/elsewhere", dir.path().join(".git")).unwrap();
        assert!(watch.set_aside().unwrap().is_some());
        assert!(std::fs::symlink_metadata(dir.path().join(".git")).is_err());
    }

    #[test]
    fn nothing_is_watched_where_a_git_is_already_and_nothing_moves_when_none_appeared() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path()).unwrap();
        assert!(watch.set_aside().unwrap().is_none());
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        assert!(RepositoryWatch::before(dir.path()).is_none());
    }
}
