//! Path confinement: every path a tool touches is resolved here.
//!
//! Invariants, for every path that [`Workspace::resolve`] returns:
//! - it lies inside the canonical workspace root, after following every
//!   symlink on the way (the final component too, unless the caller asks
//!   for the link itself with [`FinalLink::Keep`], as `rm` does);
//! - no component of its workspace-relative form starts with `.fido-`
//!   (Fido's own state), neither as written nor after following symlinks;
//! - `..` is applied lexically and may not climb above the root.
//!
//! Relative paths are relative to the root; absolute paths are accepted only
//! when they name something inside the root. A dangling symlink on the way is
//! refused: where it points cannot be checked until it exists.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Prefix of Fido's own state files and directories in the workspace.
pub const STATE_PREFIX: &str = ".fido-";

/// The directory the agent works in. `root` is canonical (absolute, no
/// symlinks), so prefix checks on canonical paths are meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    pub root: PathBuf,
    /// The root as given, before canonicalisation; absolute paths the model
    /// copies from a shell prompt may use this spelling.
    given: PathBuf,
}

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

/// Whether a file name is one of Fido's state entries (`.fido-*`).
pub fn is_state_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(STATE_PREFIX.as_bytes())
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

    /// Resolves a path a tool received, following a final symlink.
    pub fn resolve(&self, path: &str) -> Result<Resolved, PathError> {
        self.resolve_with(path, FinalLink::Follow)
    }

    /// Resolves a path a tool received; see the module invariants.
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

    /// The workspace-relative form of `path` with `/` separators (`.` for the
    /// root). A path outside the workspace is shown as it is.
    pub fn display(&self, path: &Path) -> String {
        let relative = if path.is_absolute() {
            match path
                .strip_prefix(&self.root)
                .or_else(|_| path.strip_prefix(&self.given))
            {
                Ok(relative) => relative,
                Err(_) => return path.to_string_lossy().into_owned(),
            }
        } else {
            path
        };
        slash_form(relative)
    }

    /// The lexically normalised, workspace-relative form of `path`, refusing
    /// anything outside the root and any `.fido-*` component.
    fn relative_of(&self, path: &str) -> Result<PathBuf, PathError> {
        let written = Path::new(path);
        let relative = if written.is_absolute() {
            let normal = normalise_lexically(written);
            match normal
                .strip_prefix(&self.root)
                .or_else(|_| normal.strip_prefix(&self.given))
            {
                Ok(relative) => relative.to_path_buf(),
                Err(_) => {
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
fn normalise_lexically(path: &Path) -> PathBuf {
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

/// Shared helpers for the tools' unit tests: a workspace environment and a
/// way to drive a tool through [`Tool::invoke`](super::Tool::invoke).
#[cfg(test)]
pub(crate) mod testing {
    use std::path::Path;

    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    use super::Workspace;
    use crate::session::undo::UndoLog;
    use crate::tools::{Invocation, InvocationContext, Tool, ToolEnv, ToolLimits, ToolOutput};

    pub(crate) fn env(root: &Path) -> ToolEnv {
        let workspace = Workspace::new(root).unwrap();
        let undo = UndoLog::new(&workspace.root);
        let plan = crate::plan::PlanStore::new(workspace.root.join(".fido-plan.json"));
        ToolEnv {
            workspace,
            undo,
            plan,
            delegator: None,
            limits: ToolLimits::default(),
            user: None,
            sandbox: std::sync::Arc::new(crate::sandbox::CommandSandbox::unconfined()),
            approvals: crate::tools::approval::Approvals::new(
                crate::protocol::SafetySettings {
                    sandbox_mode: crate::protocol::SandboxMode::DangerFullAccess,
                    approval_policy: crate::protocol::ApprovalPolicy::Never,
                    network: true,
                },
                None,
            ),
        }
    }

    pub(crate) async fn call(tool: &dyn Tool, env: &ToolEnv, args: Value) -> ToolOutput {
        call_with(tool, env, args, &CancellationToken::new()).await
    }

    pub(crate) async fn call_with(
        tool: &dyn Tool,
        env: &ToolEnv,
        args: Value,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        let ctx = InvocationContext::main();
        tool.invoke(Invocation {
            call_id: "test-call",
            args,
            env,
            ctx: &ctx,
            cancel,
            conversation: &[],
        })
        .await
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
    fn nested_new_file_inside_is_fine() {
        let (_dir, ws) = setup();
        let r = ws.resolve("new/dir/file.rs").unwrap();
        assert_eq!(r.abs, ws.root.join("new/dir/file.rs"));
        assert_eq!(r.shown, "new/dir/file.rs");
    }

    #[test]
    fn display_is_workspace_relative() {
        let (_dir, ws) = setup();
        assert_eq!(ws.display(&ws.root.join("a").join("b.rs")), "a/b.rs");
        assert_eq!(ws.display(&ws.root), ".");
        assert_eq!(ws.display(Path::new("x/y")), "x/y");
        assert_eq!(ws.display(Path::new("/elsewhere/z")), "/elsewhere/z");
    }
}
