//! The gitlinks of the workspace's repository, and of the repositories
//! they hold: the folders git enters on the user's `git status`.
//!
//! A gitlink (a submodule, or a clone committed as one) is a repository
//! of its own inside the workspace. When the user runs `git status` in
//! the workspace, git runs `git status` inside each gitlink folder too,
//! with that repository's configuration: a `core.fsmonitor` planted there
//! runs as the user, outside the sandbox. So each gitlink's `.git` is a
//! protected path (`crate::workspace::nested_git_paths`), and this module
//! says where they are.
//!
//! The list comes from git (`ls-files --stage` in each repository, mode
//! 160000), which is a process per repository: it is kept, with the
//! stamps of what it was read from (each index, each `.git`), and read
//! again only when one of them changed. Commands cannot change those
//! stamps: the indexes and the `.git` entries are themselves protected,
//! and a `.git` a command makes where there was none is set aside when
//! the command ends (`super::new_repository`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use crate::git::Git;

/// Repositories nested deeper than this are not looked into.
const MAX_DEPTH: usize = 4;
/// At most this many gitlinks are kept (each is a few binds per command).
const MAX_GITLINKS: usize = 512;
/// A git that takes longer is killed; the list is then what was found.
const GIT_TIMEOUT: Duration = Duration::from_secs(10);

/// What an `lstat` of a watched path said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp(Option<(u64, u64, i64, i64, u64)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        Stamp(
            std::fs::symlink_metadata(path)
                .ok()
                .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size())),
        )
    }
}

/// The gitlinks found, and the stamps they were found with.
#[derive(Debug)]
struct Found {
    watched: Vec<(PathBuf, Stamp)>,
    gitlinks: Vec<PathBuf>,
}

impl Found {
    fn is_fresh(&self) -> bool {
        self.watched
            .iter()
            .all(|(path, stamp)| Stamp::of(path) == *stamp)
    }
}

/// The gitlinks of one workspace, kept between commands.
#[derive(Debug)]
pub struct Gitlinks {
    workspace: PathBuf,
    found: Mutex<Option<Found>>,
}

impl Gitlinks {
    pub fn new(workspace: &Path) -> Gitlinks {
        Gitlinks {
            workspace: workspace.to_path_buf(),
            found: Mutex::new(None),
        }
    }

    /// The gitlink folders, relative to the workspace. A few `lstat`s
    /// when nothing changed; else git runs, with no lock held, so that a
    /// caller on a runtime worker never waits for another's git. Blocking.
    pub fn current(&self) -> Vec<PathBuf> {
        let lock = || self.found.lock().unwrap_or_else(|err| err.into_inner());
        if let Some(found) = lock().as_ref().filter(|found| found.is_fresh()) {
            return found.gitlinks.clone();
        }
        let fresh = scan(&self.workspace);
        let gitlinks = fresh.gitlinks.clone();
        *lock() = Some(fresh);
        gitlinks
    }
}

/// Reads the gitlinks of the workspace's repository and, depth first,
/// of every gitlink that is a repository itself.
fn scan(workspace: &Path) -> Found {
    let mut found = Found {
        watched: Vec::new(),
        gitlinks: Vec::new(),
    };
    let mut repositories = vec![(PathBuf::new(), 0)];
    while let Some((folder, depth)) = repositories.pop() {
        let abs = workspace.join(&folder);
        let dot_git = abs.join(".git");
        found.watched.push((dot_git.clone(), Stamp::of(&dot_git)));
        let Some(index) = index_of(&abs, depth) else {
            continue;
        };
        found.watched.push((index.clone(), Stamp::of(&index)));
        for gitlink in gitlinks_in(&abs) {
            if found.gitlinks.len() == MAX_GITLINKS {
                tracing::warn!(at = %abs.display(), "more than {MAX_GITLINKS} gitlinks; the rest are not protected");
                return found;
            }
            let path = folder.join(gitlink);
            if depth + 1 < MAX_DEPTH {
                repositories.push((path.clone(), depth + 1));
            }
            found.gitlinks.push(path);
        }
    }
    found.gitlinks.sort();
    found
}

/// The index of the repository in `folder`. At the top (`depth` 0) that
/// is whatever repository git finds there, which may hold the workspace
/// as a subfolder; deeper, only a repository whose `.git` is in `folder`
/// itself (else git would find the outer one again).
fn index_of(folder: &Path, depth: usize) -> Option<PathBuf> {
    if depth > 0 {
        return crate::workspace::git_dir(folder).map(|dir| dir.join("index"));
    }
    if !folder.is_dir() {
        return None;
    }
    let out = git(folder)
        .line(["rev-parse", "--path-format=absolute", "--git-path", "index"])
        .ok()?;
    Some(PathBuf::from(out))
}

/// The gitlinks in the index of the repository in `folder`, relative to
/// it.
fn gitlinks_in(folder: &Path) -> Vec<PathBuf> {
    match git(folder).run(["ls-files", "--stage", "-z"]) {
        Ok(listing) => parse_stage(&listing),
        Err(err) => {
            tracing::warn!(error = %err, at = %folder.display(), "cannot list gitlinks");
            Vec::new()
        }
    }
}

fn git(folder: &Path) -> Git {
    Git::new(folder).with_timeout(GIT_TIMEOUT)
}

/// The paths of mode 160000 in `ls-files --stage -z` output
/// (`MODE OBJECT STAGE\tPATH\0`).
fn parse_stage(listing: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    listing
        .split(|byte| *byte == 0)
        .filter_map(|entry| {
            let tab = entry.iter().position(|byte| *byte == b'\t')?;
            let (head, path) = (&entry[..tab], &entry[tab + 1..]);
            head.starts_with(b"160000 ")
                .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(path)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changes::tests::git as git_in;

    /// `outer` holding `name` as a committed gitlink with one commit.
    fn add_gitlink(outer: &Path, name: &str) {
        let inner = outer.join(name);
        std::fs::create_dir_all(&inner).unwrap();
        git_in(&inner, &["init", "-q"]);
        git_in(&inner, &["commit", "-q", "--allow-empty", "-m", "x"]);
        git_in(outer, &["add", name]);
        git_in(outer, &["commit", "-q", "-m", name]);
    }

    #[test]
    fn only_mode_160000_entries_are_gitlinks() {
        let listing = b"100644 aa 0\tsrc/a.rs\x00160000 bb 0\tvendor/lib\x00120000 cc 0\tlink\x00160000 dd 0\twith\ttab\x00";
        assert_eq!(
            parse_stage(listing),
            vec![PathBuf::from("vendor/lib"), PathBuf::from("with\ttab")]
        );
    }

    #[test]
    fn gitlinks_are_found_nested_and_found_again_when_the_index_changes() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        git_in(&root, &["init", "-q"]);
        git_in(&root, &["commit", "-q", "--allow-empty", "-m", "first"]);
        let links = Gitlinks::new(&root);
        assert!(links.current().is_empty());
        let vendor = root.join("vendor");
        std::fs::create_dir(&vendor).unwrap();
        git_in(&vendor, &["init", "-q"]);
        add_gitlink(&vendor, "inner");
        add_gitlink(&root, "vendor");
        assert_eq!(
            links.current(),
            vec![PathBuf::from("vendor"), PathBuf::from("vendor/inner")]
        );
        add_gitlink(&root, "second");
        assert_eq!(links.current().len(), 3, "{:?}", links.current());
    }

    #[test]
    fn a_folder_that_is_no_repository_has_none_and_a_later_git_init_counts() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let links = Gitlinks::new(&root);
        assert!(links.current().is_empty());
        git_in(&root, &["init", "-q"]);
        add_gitlink(&root, "lib");
        assert_eq!(links.current(), vec![PathBuf::from("lib")]);
    }
}
