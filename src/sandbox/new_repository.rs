//! A git repository that a sandboxed command makes where git would use
//! it: at the top of the workspace (`git init` where there was none), or
//! in a gitlink folder that has no `.git` (a submodule not checked out),
//! which git enters on the user's next `git status`.
//!
//! A protected path that does not exist when a command starts cannot be
//! bound read-only (`super::protect`): a command may create `.git` and, in
//! the same run, write hooks or a `core.fsmonitor` into it, which git would
//! later run outside the sandbox at the user's next `git commit` or
//! `git status`. No mount can stop the creation without touching the
//! user's workspace, so the command runs, and when it ends whatever `.git`
//! appeared is moved out of git's way into `.fido-state/set-aside/`, which
//! commands cannot write. The model hears why, and that the same command
//! with `escalate: true` (which the user approves) makes a repository that
//! stays. The check is one `lstat` per watched folder before and after;
//! under Landlock's per-entry fallback the kernel refuses the new entry
//! itself, so there is nothing to watch.

use std::io;
use std::path::{Path, PathBuf};

use crate::workspace::SET_ASIDE_DIR;

/// The folders of one workspace where git would use a `.git`, and what
/// each `.git` was when a command started.
#[derive(Debug)]
pub struct RepositoryWatch {
    workspace: PathBuf,
    /// Relative to the workspace (empty: the top), with the device and
    /// inode of its `.git` then (`None`: there was none).
    seen: Vec<(PathBuf, Option<(u64, u64)>)>,
}

/// Where the `.git` entries made by a command went.
#[derive(Debug)]
pub struct SetAside {
    /// Each `.git` made, and where it went, relative to the workspace.
    pub moved: Vec<(String, String)>,
}

/// The device and inode of `path` itself (`None`: nothing there).
fn identity(path: &Path) -> io::Result<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

impl RepositoryWatch {
    /// A watch over the top of `workspace` and its `gitlinks` folders
    /// (relative): an `lstat` of each one's `.git`. A gitlink folder can
    /// be renamed away with its read-only `.git` inside and a new one made
    /// in its place, so a `.git` that is not the one seen here counts as
    /// made by the command too.
    pub fn before(workspace: &Path, gitlinks: &[PathBuf]) -> RepositoryWatch {
        let seen = std::iter::once(PathBuf::new())
            .chain(gitlinks.iter().cloned())
            .map(|folder| {
                let was = identity(&workspace.join(&folder).join(".git")).unwrap_or(None);
                (folder, was)
            })
            .collect();
        RepositoryWatch {
            workspace: workspace.to_path_buf(),
            seen,
        }
    }

    /// After the command: moves each `.git` that appeared or was replaced
    /// (a folder, a file or a link) into the set-aside folder. `Ok(None)` when none
    /// did. Blocking.
    pub fn set_aside(self) -> io::Result<Option<SetAside>> {
        let mut moved = Vec::new();
        for (folder, was) in &self.seen {
            let dot_git = self.workspace.join(folder).join(".git");
            let now = identity(&dot_git)?;
            if now.is_none() || now == *was {
                continue;
            }
            let dir = self.workspace.join(SET_ASIDE_DIR);
            std::fs::create_dir_all(&dir)?;
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis());
            let name = format!("git-{stamp}-{:04x}", fastrand::u16(..));
            std::fs::rename(&dot_git, dir.join(&name))?;
            let made = folder.join(".git").display().to_string();
            moved.push((made, format!("{SET_ASIDE_DIR}/{name}")));
        }
        Ok((!moved.is_empty()).then_some(SetAside { moved }))
    }
}

impl SetAside {
    /// What the model and the user read after the command's output.
    pub fn note(&self) -> String {
        let moves: Vec<String> = self
            .moved
            .iter()
            .map(|(made, to)| format!("{made} to {to}"))
            .collect();
        format!(
            "note: this command created a git repository where git would use it. Its hooks and config would run outside the sandbox whenever git is used there, so Fido moved {} (commands cannot write there). To make a repository that stays, run the command again with escalate: true; the user decides.",
            crate::text::sanitize(&moves.join(", "), false)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_git_made_after_the_look_is_moved_aside_whole() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path(), &[]);
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::write(dir.path().join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let moved = watch.set_aside().unwrap().expect("set aside");
        assert!(!dir.path().join(".git").exists());
        let (made, to) = &moved.moved[0];
        assert_eq!(made, ".git");
        let hook = dir.path().join(to).join("hooks/pre-commit");
        assert_eq!(std::fs::read_to_string(hook).unwrap(), "#!/bin/sh\n");
        assert!(moved.note().contains(to.as_str()), "{}", moved.note());
    }

    #[test]
    fn a_git_file_or_link_is_moved_too() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path(), &[]);
        std::os::unix::fs::symlink("/nonexistent/elsewhere", dir.path().join(".git")).unwrap();
        assert!(watch.set_aside().unwrap().is_some());
        assert!(std::fs::symlink_metadata(dir.path().join(".git")).is_err());
    }

    #[test]
    fn nothing_moves_when_no_git_appeared_or_the_one_there_stayed() {
        let dir = tempfile::tempdir().unwrap();
        let watch = RepositoryWatch::before(dir.path(), &[]);
        assert!(watch.set_aside().unwrap().is_none());
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let watch = RepositoryWatch::before(dir.path(), &[]);
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        assert!(watch.set_aside().unwrap().is_none());
        assert!(dir.path().join(".git/config").exists());
    }

    /// The gitlink folder renamed away with its `.git`, and a new one
    /// made in its place: the new `.git` is moved, the renamed one stays.
    #[test]
    fn a_git_put_in_place_of_the_one_seen_is_moved() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("lib/.git")).unwrap();
        let watch = RepositoryWatch::before(dir.path(), &[PathBuf::from("lib")]);
        std::fs::rename(dir.path().join("lib"), dir.path().join("old")).unwrap();
        std::fs::create_dir_all(dir.path().join("lib/.git")).unwrap();
        let moved = watch.set_aside().unwrap().expect("set aside");
        assert_eq!(moved.moved.len(), 1, "{moved:?}");
        assert_eq!(moved.moved[0].0, "lib/.git");
        assert!(!dir.path().join("lib/.git").exists());
        assert!(dir.path().join("old/.git").is_dir());
    }

    #[test]
    fn a_git_made_in_a_gitlink_folder_is_moved_and_one_already_there_is_left() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::create_dir_all(dir.path().join("vendor/empty")).unwrap();
        std::fs::create_dir_all(dir.path().join("vendor/full/.git")).unwrap();
        let gitlinks = [PathBuf::from("vendor/empty"), PathBuf::from("vendor/full")];
        let watch = RepositoryWatch::before(dir.path(), &gitlinks);
        std::fs::write(dir.path().join("vendor/empty/.git"), "gitdir: /tmp/evil\n").unwrap();
        std::fs::write(dir.path().join("vendor/full/.git/config"), "[core]\n").unwrap();
        let moved = watch.set_aside().unwrap().expect("set aside");
        assert_eq!(moved.moved.len(), 1, "{moved:?}");
        assert_eq!(moved.moved[0].0, "vendor/empty/.git");
        assert!(std::fs::symlink_metadata(dir.path().join("vendor/empty/.git")).is_err());
        assert!(dir.path().join("vendor/full/.git/config").exists());
        assert!(dir.path().join(".git").is_dir());
    }
}
