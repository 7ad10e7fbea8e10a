//! The repositories inside the workspace that git's index does not name:
//! a clone the user keeps in `third_party/`, ignored or untracked.
//!
//! Git does not enter such a repository from the workspace's own, but the
//! user does, with `git -C third_party/lib pull` or a `cd` and a
//! `git status`: its configuration then runs as the user. A sandboxed
//! command that planted a `core.fsmonitor` there would be out. So the
//! `.git` of every repository found below the top when the session's
//! sandbox is made is protected like the top-level one (`super::protect`).
//!
//! They are found once, on a thread of its own that the sandbox starts
//! (the first command waits for it if it has not ended), by a walk of the
//! workspace that descends into ignored folders too (a clone is often
//! ignored) but not into a `.git` nor Fido's state. A repository that a
//! command makes later is the model's own work, which the user did not
//! clone; one the user clones later is protected from the next session
//! on.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;

use crate::workspace::STATE_DIR;

/// At most this many repositories are protected (each is a bind mount
/// per command).
pub const MAX_CLONES: usize = 64;
/// The walk stops after this many entries: a workspace past it is
/// searched in part, and the log says so.
const MAX_ENTRIES: usize = 500_000;

/// The folders (relative to `workspace`) below its top that hold a
/// `.git`, in walk order, at most [`MAX_CLONES`]. Blocking: a walk.
pub fn find(workspace: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let walker = WalkBuilder::new(workspace)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|entry| {
            let name = entry.file_name();
            name != ".git" && name != STATE_DIR
        })
        .build();
    for (seen, entry) in walker.flatten().enumerate() {
        if seen == MAX_ENTRIES {
            tracing::warn!(
                entries = MAX_ENTRIES,
                "the workspace is too large to look for every nested repository"
            );
            break;
        }
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        let path = entry.path();
        if !is_dir || path == workspace {
            continue;
        }
        if std::fs::symlink_metadata(path.join(".git")).is_err() {
            continue;
        }
        let Ok(relative) = path.strip_prefix(workspace) else {
            continue;
        };
        if found.len() == MAX_CLONES {
            tracing::warn!(
                "more than {MAX_CLONES} nested repositories; the rest are not protected from commands"
            );
            break;
        }
        found.push(relative.to_path_buf());
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_repositories_are_found_in_ignored_folders_too_but_not_inside_a_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for folder in [
            ".git/modules/inside/.git",
            "third_party/lib/.git",
            "ignored/deep/clone/.git",
            "src",
            ".fido-state/set-aside/x/.git",
        ] {
            std::fs::create_dir_all(root.join(folder)).unwrap();
        }
        std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        // A submodule's `.git` is a file.
        std::fs::create_dir_all(root.join("mods/sub")).unwrap();
        std::fs::write(
            root.join("mods/sub/.git"),
            "gitdir: ../../.git/modules/sub\n",
        )
        .unwrap();
        let mut found = find(root);
        found.sort();
        assert_eq!(
            found,
            [
                PathBuf::from("ignored/deep/clone"),
                PathBuf::from("mods/sub"),
                PathBuf::from("third_party/lib"),
            ]
        );
    }

    #[test]
    fn a_workspace_with_none_has_none() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
        assert!(find(dir.path()).is_empty());
    }
}
