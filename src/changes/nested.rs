//! Nested repositories in a write subagent's worktree are never entered.
//!
//! Git enters a repository nested in the one it works on in two ways: a
//! gitlink of the index (a submodule, or a clone the base recorded as one)
//! is asked for its status, which runs git inside it with its own
//! configuration (a clean filter there is a program of the subagent's
//! choosing); and a folder with a `.git` is added as a new gitlink. So,
//! before the parent's git reads a worktree:
//!
//! - every gitlink of the index is marked skip-worktree
//!   ([`hide_gitlinks`]): `git add -A` then leaves it as the base had it
//!   and never looks inside (`diff.ignoreSubmodules=all` and
//!   `submodule.recurse=false` do not stop it; the mark does);
//! - every `.git` the subagent made, at any depth, as a folder, a file, a
//!   link, in any letter case, is found ([`find`]) and refused by name:
//!   the folder that holds it is left out of the change set whole, so no
//!   git looks inside, and the change set says so ([`Refused`]).
//!
//! The worktree never holds a `.git` of its own: the base is checked out
//! without one (README: "Write-capable delegation").

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::git::{Git, GitError};

const GITLINK_MODE: &[u8] = b"160000";

/// A path of the worktree the change set refuses, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    /// The `.git` entry, relative to the workspace.
    pub path: String,
    pub reason: String,
}

/// A `.git` entry the subagent made, and what the build leaves out for
/// it (repository paths).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The `.git` entry itself.
    pub entry: PathBuf,
    /// What the build leaves out: the folder that holds an exact `.git`
    /// (git would take it for a repository), else the entry alone (git
    /// refuses such a path outright, which would fail the whole build).
    pub left_out: PathBuf,
}

impl Found {
    /// The pathspec that keeps git out of [`Found::left_out`].
    pub fn exclude(&self) -> OsString {
        let mut spec = OsString::from(":(top,exclude,literal)");
        spec.push(self.left_out.as_os_str());
        spec
    }

    /// The refusal the change set names, with `path` its entry as the
    /// workspace sees it.
    pub fn refusal(&self, path: String) -> Refused {
        let reason = if self.left_out == self.entry {
            "a .git made in the worktree: git refuses such a path, so it is never applied".into()
        } else {
            format!(
                "a nested repository made in the worktree: Fido's git never enters one, so nothing under {}/ was taken",
                self.left_out.display()
            )
        };
        Refused { path, reason }
    }
}

/// Every `.git` entry (any letter case, any kind) beneath `tree`, without
/// following links; folders that cannot be read are skipped (git cannot
/// read them either). The top's own entry, were one made, is found too:
/// git is pointed at the private repository, never at it.
pub fn find(tree: &Path) -> io::Result<Vec<Found>> {
    let mut found = Vec::new();
    let mut folders = vec![PathBuf::new()];
    let mut first = true;
    while let Some(relative) = folders.pop() {
        let entries = match fs::read_dir(tree.join(&relative)) {
            Ok(entries) => entries,
            Err(err) if first => return Err(err),
            Err(_) => continue,
        };
        first = false;
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name();
            let path = relative.join(&name);
            if name.as_encoded_bytes().eq_ignore_ascii_case(b".git") {
                let nested = name == ".git" && !relative.as_os_str().is_empty();
                let left_out = if nested {
                    relative.clone()
                } else {
                    path.clone()
                };
                found.push(Found {
                    entry: path,
                    left_out,
                });
            } else if entry.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push(path);
            }
        }
    }
    found.sort_by(|a, b| a.entry.cmp(&b.entry));
    Ok(found)
}

/// Marks every gitlink of the index `git` uses skip-worktree, so that no
/// git command on it looks into a gitlink's folder.
pub fn hide_gitlinks(git: &Git) -> Result<(), GitError> {
    let listed = git.run(["ls-files", "-s", "-z"])?;
    let mut paths = Vec::new();
    for record in listed.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        // `<mode> <id> <stage>\t<path>`
        let Some(tab) = record.iter().position(|b| *b == b'\t') else {
            continue;
        };
        if record.starts_with(GITLINK_MODE) {
            paths.extend_from_slice(&record[tab + 1..]);
            paths.push(0);
        }
    }
    if paths.is_empty() {
        return Ok(());
    }
    git.run_with_input(
        ["update-index", "-z", "--skip-worktree", "--stdin"],
        Some(&paths),
    )?;
    Ok(())
}
