//! The workspace: its root, the confinement of every path a tool touches,
//! and the names of Fido's own state in it.
//!
//! This module sits below `tools` and `session` (both use it) and imports
//! neither, nor any other module of the crate.
//!
//! Invariants, for every path that [`Workspace::resolve`] returns:
//! - it lies inside the canonical workspace root, after following every
//!   symlink on the way (the final component too, unless the caller asks
//!   for the link itself with [`FinalLink::Keep`], as `rm` does);
//! - no component of its workspace-relative form starts with `.fido-`
//!   (Fido's own state, see [`is_state_name`]), neither as written nor after
//!   following symlinks;
//! - `..` is applied lexically and may not climb above the root.
//!
//! Relative paths are relative to the root; absolute paths are accepted only
//! when they name something inside the root. A dangling symlink on the way is
//! refused: where it points cannot be checked until it exists.

pub mod beneath;
mod confine;
mod place;
mod protected;
mod state_names;

use std::io;
use std::path::{Component, Path, PathBuf};

pub use confine::{FinalLink, PathError, Resolved, is_missing};
pub use place::{Entry, FileInTheWay, Place};
pub use protected::{PROTECTED_NAMES, git_dir, is_protected, nested_git_paths, protected_paths};
pub use state_names::{
    DEFAULT_PLAN_FILE, HISTORY_FILE, LOGS_DIR, RUN_DIR, SESSIONS_DIR, SET_ASIDE_DIR, STATE_DIR,
    STATE_PREFIX, TODO_FILE, UNDO_DIR, is_state_name,
};

/// The directory the agent works in. `root` is canonical (absolute, no
/// symlinks), so prefix checks on canonical paths are meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub root: PathBuf,
    /// The root as given, before canonicalisation; absolute paths the model
    /// copies from a shell prompt may use this spelling.
    given: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root`, which must exist and be a directory.
    pub fn new(root: &Path) -> io::Result<Workspace> {
        let canonical = root.canonicalize()?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace `{}` is not a directory", root.display()),
            ));
        }
        let given = if root.is_absolute() {
            normalise_lexically(root)
        } else {
            canonical.clone()
        };
        Ok(Workspace {
            root: canonical,
            given,
        })
    }

    /// The workspace-relative form of `path` with `/` separators (`.` for the
    /// root). A path outside the workspace is shown as it is.
    pub fn display(&self, path: &Path) -> String {
        let relative = if path.is_absolute() {
            match self.strip_root(path) {
                Some(relative) => relative,
                None => return path.to_string_lossy().into_owned(),
            }
        } else {
            path
        };
        slash_form(relative)
    }

    /// `path` relative to the root, in its canonical or its given spelling.
    fn strip_root<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        path.strip_prefix(&self.root)
            .or_else(|_| path.strip_prefix(&self.given))
            .ok()
    }
}

/// `a/b/c` from the components of a relative path; `.` when empty.
fn slash_form(relative: &Path) -> String {
    let parts: Vec<_> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_string_lossy()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

/// Applies `.` and `..` without touching the file system.
pub(crate) fn normalise_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_workspace_relative() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        assert_eq!(ws.display(&ws.root.join("a").join("b.rs")), "a/b.rs");
        assert_eq!(ws.display(&ws.root), ".");
        assert_eq!(ws.display(Path::new("x/y")), "x/y");
        assert_eq!(ws.display(Path::new("/elsewhere/z")), "/elsewhere/z");
    }

    #[test]
    fn a_file_is_no_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = Workspace::new(&file).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotADirectory);
        assert!(Workspace::new(&dir.path().join("missing")).is_err());
    }
}
