//! Path confinement: how a path a tool received is resolved, under the
//! invariants listed in [`crate::workspace`].

use std::io;
use std::path::{Component, Path, PathBuf};

use super::{Workspace, is_state_name, normalise_lexically, slash_form};

/// Why a path was refused. Messages name the path as the model wrote it.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("`{path}` is outside the workspace; use a path relative to the workspace root")]
    Outside { path: String },
    #[error("`{path}` leaves the workspace through the symlink `{link}`")]
    SymlinkEscape { path: String, link: String },
    #[error("`{path}` goes through the symlink `{link}`, whose target does not exist")]
    DanglingSymlink { path: String, link: String },
    #[error("`{path}`: `.fido-*` files are Fido's own state and cannot be changed with file tools")]
    FidoState { path: String },
    #[error(
        "`{path}` is protected: file tools and commands cannot change .git, .fido/, .fido-state/ or fido.toml, which git and Fido read outside the sandbox; ask the user to make this change"
    )]
    Protected { path: String },
    #[error("cannot resolve `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// Whether the final component, when it is a symlink, is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalLink {
    /// Resolve to the link's target, which must be inside the workspace.
    Follow,
    /// Resolve to the link itself (removing a link does not touch its target).
    Keep,
}

/// A path that passed confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Where to operate: absolute, inside the root, symlinks resolved as asked.
    pub abs: PathBuf,
    /// The path as the model named it, normalised and workspace-relative
    /// (`.` for the root), for messages.
    pub shown: String,
}

impl Resolved {
    /// Whether this is the workspace root itself.
    pub fn is_root(&self, workspace: &Workspace) -> bool {
        self.abs == workspace.root
    }
}

/// Whether an error means nothing is at the path, including a file standing
/// where a parent directory should be (callers then name that file).
pub fn is_missing(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

impl Workspace {
    /// Resolves a path a tool received, following a final symlink.
    pub fn resolve(&self, path: &str) -> Result<Resolved, PathError> {
        self.resolve_with(path, FinalLink::Follow)
    }

    /// Resolves a path a tool is about to change (write, create, remove),
    /// refusing the protected paths ([`super::is_protected`]) as written
    /// and where it leads.
    pub fn resolve_for_change(
        &self,
        path: &str,
        final_link: FinalLink,
    ) -> Result<Resolved, PathError> {
        let resolved = self.resolve_with(path, final_link)?;
        let lexical = self.root.join(self.relative_of(path)?);
        if super::is_protected(&self.root, &lexical)
            || super::is_protected(&self.root, &resolved.abs)
        {
            return Err(PathError::Protected {
                path: resolved.shown,
            });
        }
        Ok(resolved)
    }

    /// Resolves a path a tool received; see the invariants of
    /// [`crate::workspace`].
    pub fn resolve_with(&self, path: &str, final_link: FinalLink) -> Result<Resolved, PathError> {
        let relative = self.relative_of(path)?;
        let shown = slash_form(&relative);
        let count = relative.components().count();
        let mut real = self.root.clone();
        let mut rest = relative.components();
        let mut index = 0;
        while let Some(component) = rest.next() {
            index += 1;
            let candidate = real.join(component);
            let metadata = match std::fs::symlink_metadata(&candidate) {
                Ok(metadata) => metadata,
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    // Nothing further exists: the rest is appended as written.
                    real = candidate;
                    real.extend(rest);
                    break;
                }
                Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
                    real = candidate;
                    real.extend(rest);
                    break;
                }
                Err(source) => {
                    return Err(PathError::Io {
                        path: shown.clone(),
                        source,
                    });
                }
            };
            let last = index == count;
            if !metadata.file_type().is_symlink() || (last && final_link == FinalLink::Keep) {
                real = candidate;
                continue;
            }
            let link = self.display(&candidate);
            match candidate.canonicalize() {
                Ok(target) if target.starts_with(&self.root) => real = target,
                Ok(_) => {
                    return Err(PathError::SymlinkEscape { path: shown, link });
                }
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    return Err(PathError::DanglingSymlink { path: shown, link });
                }
                Err(source) => {
                    return Err(PathError::Io {
                        path: shown,
                        source,
                    });
                }
            }
        }
        // A symlink inside the workspace may still lead to Fido's state.
        if let Ok(inside) = real.strip_prefix(&self.root)
            && inside.components().any(|c| is_state_name(c.as_os_str()))
        {
            return Err(PathError::FidoState { path: shown });
        }
        Ok(Resolved { abs: real, shown })
    }

    /// The lexically normalised, workspace-relative form of `path`, refusing
    /// anything outside the root and any `.fido-*` component.
    pub(super) fn relative_of(&self, path: &str) -> Result<PathBuf, PathError> {
        let written = Path::new(path);
        let relative = if written.is_absolute() {
            let normal = normalise_lexically(written);
            match self.strip_root(&normal) {
                Some(relative) => relative.to_path_buf(),
                None => {
                    return Err(PathError::Outside {
                        path: path.to_string(),
                    });
                }
            }
        } else {
            written.to_path_buf()
        };
        let mut out = PathBuf::new();
        for component in relative.components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return Err(PathError::Outside {
                            path: path.to_string(),
                        });
                    }
                }
                Component::Normal(name) => {
                    if is_state_name(name) {
                        return Err(PathError::FidoState {
                            path: path.to_string(),
                        });
                    }
                    out.push(name);
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Outside {
                        path: path.to_string(),
                    });
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        let ws = Workspace::new(&root).unwrap();
        (dir, ws)
    }

    #[test]
    fn the_root_itself() {
        let (_dir, ws) = setup();
        for p in [".", "", "./", "a/.."] {
            let r = ws.resolve(p).unwrap();
            assert_eq!(r.abs, ws.root, "{p}");
            assert_eq!(r.shown, ".");
            assert!(r.is_root(&ws));
        }
        assert_eq!(ws.resolve(ws.root.to_str().unwrap()).unwrap().abs, ws.root);
    }

    #[test]
    fn parent_that_leaves_the_root_is_refused() {
        let (_dir, ws) = setup();
        for p in ["..", "../x", "a/../../x", "./../ws/x"] {
            let err = ws.resolve(p).unwrap_err();
            assert!(matches!(err, PathError::Outside { .. }), "{p}: {err}");
            assert!(err.to_string().contains(p));
        }
        assert_eq!(ws.resolve("a/../b").unwrap().abs, ws.root.join("b"));
    }

    #[test]
    fn absolute_paths_only_inside() {
        let (dir, ws) = setup();
        let err = ws.resolve("/etc/passwd").unwrap_err();
        assert!(matches!(err, PathError::Outside { .. }));
        let sibling = dir.path().join("other");
        assert!(ws.resolve(sibling.to_str().unwrap()).is_err());
        let inside = ws.root.join("src/a.rs");
        let r = ws.resolve(inside.to_str().unwrap()).unwrap();
        assert_eq!(r.abs, inside);
        assert_eq!(r.shown, "src/a.rs");
    }

    #[test]
    fn symlink_escapes_are_refused() {
        let (dir, ws) = setup();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "x").unwrap();
        symlink(&outside, ws.root.join("out_dir")).unwrap();
        symlink(outside.join("secret"), ws.root.join("out_file")).unwrap();

        let err = ws.resolve("out_dir/secret").unwrap_err();
        assert!(matches!(err, PathError::SymlinkEscape { .. }), "{err}");
        assert!(err.to_string().contains("out_dir"));
        assert!(ws.resolve("out_dir/new_file").is_err());
        assert!(ws.resolve("out_file").is_err());
        // The link itself may be named when it is what is operated on.
        let link = ws.resolve_with("out_file", FinalLink::Keep).unwrap();
        assert_eq!(link.abs, ws.root.join("out_file"));
        // But not a path through it.
        assert!(ws.resolve_with("out_dir/secret", FinalLink::Keep).is_err());
    }

    #[test]
    fn dangling_symlinks_are_refused_unless_kept() {
        let (dir, ws) = setup();
        symlink(dir.path().join("nowhere"), ws.root.join("dangling")).unwrap();
        let err = ws.resolve("dangling").unwrap_err();
        assert!(matches!(err, PathError::DanglingSymlink { .. }), "{err}");
        assert!(ws.resolve_with("dangling", FinalLink::Keep).is_ok());
    }

    #[test]
    fn symlinks_inside_are_followed() {
        let (_dir, ws) = setup();
        std::fs::create_dir(ws.root.join("real")).unwrap();
        std::fs::write(ws.root.join("real/f.txt"), "x").unwrap();
        symlink(ws.root.join("real"), ws.root.join("alias")).unwrap();
        symlink("real/f.txt", ws.root.join("f_link")).unwrap();
        let r = ws.resolve("alias/f.txt").unwrap();
        assert_eq!(r.abs, ws.root.join("real/f.txt"));
        assert_eq!(r.shown, "alias/f.txt");
        assert_eq!(
            ws.resolve("f_link").unwrap().abs,
            ws.root.join("real/f.txt")
        );
    }

    #[test]
    fn fido_state_is_refused() {
        let (_dir, ws) = setup();
        for p in [
            ".fido-plan.json",
            ".fido-state/undo/journal.jsonl",
            "a/.fido-x",
            "./.fido-todo.json",
        ] {
            let err = ws.resolve(p).unwrap_err();
            assert!(matches!(err, PathError::FidoState { .. }), "{p}");
            assert!(err.to_string().contains("Fido's own state"));
        }
        // Not through a symlink either.
        std::fs::write(ws.root.join(".fido-plan.json"), "{}").unwrap();
        symlink(".fido-plan.json", ws.root.join("plan_link")).unwrap();
        assert!(matches!(
            ws.resolve("plan_link").unwrap_err(),
            PathError::FidoState { .. }
        ));
        // Names that merely contain the prefix are fine.
        assert!(ws.resolve("my.fido-notes").is_ok());
        assert!(ws.resolve(".fidorc").is_ok());
    }

    #[test]
    fn every_state_name_is_out_of_reach_of_the_file_tools() {
        use crate::workspace::{
            DEFAULT_PLAN_FILE, HISTORY_FILE, LOGS_DIR, RUN_DIR, SESSIONS_DIR, STATE_DIR, TODO_FILE,
            UNDO_DIR,
        };
        let (_dir, ws) = setup();
        for name in [
            DEFAULT_PLAN_FILE,
            TODO_FILE,
            STATE_DIR,
            UNDO_DIR,
            SESSIONS_DIR,
            RUN_DIR,
            LOGS_DIR,
            HISTORY_FILE,
        ] {
            let err = ws.resolve(name).unwrap_err();
            assert!(matches!(err, PathError::FidoState { .. }), "{name}: {err}");
        }
    }

    #[test]
    fn nested_new_file_inside_is_fine() {
        let (_dir, ws) = setup();
        let r = ws.resolve("new/dir/file.rs").unwrap();
        assert_eq!(r.abs, ws.root.join("new/dir/file.rs"));
        assert_eq!(r.shown, "new/dir/file.rs");
    }
}
