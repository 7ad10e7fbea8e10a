//! The protected paths of a workspace: what git and Fido later read or
//! run outside the sandbox, so that no sandboxed party may change it
//! (README "Protected paths"). The command sandbox keeps them read-only
//! (`sandbox::protect`); the file tools refuse to change them
//! ([`super::Workspace::resolve_for_change`]).

use std::path::{Path, PathBuf};

/// The names at the top of the workspace that commands may not write.
pub const PROTECTED_NAMES: [&str; 4] = [".git", ".fido-state", ".fido", "fido.toml"];

/// The protected paths of `workspace` that exist now: the
/// [`PROTECTED_NAMES`], a link's target, and for a `.git` file the git
/// directory it names and that directory's common directory ([`entry`]).
/// Blocking (a few `lstat`s and small reads).
pub fn protected_paths(workspace: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for name in PROTECTED_NAMES {
        let path = workspace.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&path) {
            paths.extend(entry(workspace, path, name == ".git", &meta));
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// The `.git` of each nested repository's folder (`folders`, relative to
/// `workspace`): a submodule's, a clone committed as a gitlink, or a
/// clone the user keeps untracked. Git enters the first two when the user
/// runs `git status` in the workspace's repository, and the user enters
/// the last; either reads its configuration there, so each is protected
/// like the top-level one ([`entry`]), and its path also where nothing is
/// there yet. Blocking (a few `lstat`s and small reads per folder).
pub fn nested_git_paths(workspace: &Path, folders: &[PathBuf]) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for nested in folders {
        let folder = workspace.join(nested);
        let dot_git = folder.join(".git");
        match std::fs::symlink_metadata(&dot_git) {
            Ok(meta) => paths.extend(entry(&folder, dot_git, true, &meta)),
            Err(_) => paths.push(dot_git),
        }
    }
    paths.sort();
    paths.dedup();
    paths
}

/// The paths that protect the existing entry `path` of `folder` (`meta`,
/// its `lstat`): the entry itself; a link's target, which is what git and
/// Fido would read; and, for a `.git` (`is_git`) that is a file, the git
/// directory it names.
fn entry(folder: &Path, path: PathBuf, is_git: bool, meta: &std::fs::Metadata) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if meta.file_type().is_symlink() {
        paths.extend(std::fs::canonicalize(&path));
    } else if is_git && meta.is_file() {
        paths.extend(linked_git_dirs(folder, &path));
    }
    paths.push(path);
    paths
}

/// The git directory of the repository whose work tree is `folder`: its
/// `.git` folder, or the one its `.git` file names.
pub fn git_dir(folder: &Path) -> Option<PathBuf> {
    let dot_git = folder.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if meta.is_file() {
        return linked_git_dirs(folder, &dot_git).into_iter().next();
    }
    std::fs::canonicalize(&dot_git).ok()
}

/// The git directory a `.git` file names (`gitdir: DIR`), and the common
/// directory a linked worktree's git directory names (`commondir`), where
/// the repository's config and hooks are. A relative name is relative to
/// `folder`, the folder that holds `dot_git`.
fn linked_git_dirs(folder: &Path, dot_git: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(dot_git) else {
        return Vec::new();
    };
    let Some(named) = text.lines().find_map(|line| line.strip_prefix("gitdir:")) else {
        return Vec::new();
    };
    let Ok(git_dir) = std::fs::canonicalize(folder.join(named.trim())) else {
        return Vec::new();
    };
    let common = std::fs::read_to_string(git_dir.join("commondir"))
        .ok()
        .and_then(|rel| std::fs::canonicalize(git_dir.join(rel.trim())).ok());
    std::iter::once(git_dir).chain(common).collect()
}

/// Whether `abs`, a path inside the canonical `root`, is or lies beneath a
/// protected path: a `.git` at any depth (a nested repository's too), the
/// top-level `.fido`, `.fido-state` and `fido.toml`, or the git directory
/// a top-level `.git` file names.
pub fn is_protected(root: &Path, abs: &Path) -> bool {
    let Ok(inside) = abs.strip_prefix(root) else {
        return false;
    };
    if inside.components().any(|c| c.as_os_str() == ".git") {
        return true;
    }
    let top = inside.components().next().map(|c| c.as_os_str());
    if top.is_some_and(|top| PROTECTED_NAMES.iter().any(|name| top == *name)) {
        return true;
    }
    let dot_git = root.join(".git");
    dot_git.is_file()
        && linked_git_dirs(root, &dot_git)
            .iter()
            .any(|dir| abs.starts_with(dir))
}
