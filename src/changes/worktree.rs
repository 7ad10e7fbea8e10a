//! A write subagent's worktree: a private repository and a checkout of the
//! base, both under `.fido-state/changes/<id>/`, made without touching the
//! user's index, stash, branches, HEAD or `git worktree list`.
//!
//! The base is the parent's state at call time: the user's index is copied
//! to the private repository, `git add -A` runs on that copy in the main
//! checkout (new objects go to the private repository's object folder,
//! which borrows the main one's through `objects/info/alternates`), and
//! `write-tree` plus `commit-tree` make the base commit. Nothing is
//! written to the user's `.git`. The private repository's `HEAD` is that
//! commit, detached; its checkout is the subagent's workspace.
//!
//! The subagent can read its repository (so `git status`, `git diff`,
//! `git log` and `git blame` work) but write only its `tree/`: the private
//! repository, the user's `.git` and the main checkout stay read-only to
//! it (see [`WriteRoots`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::git::{EMPTY_TREE, Git, GitError};
use super::records::Layout;
use super::{ChangesError, joined};

/// The configuration of a private repository. The subagent cannot change
/// it; the parent's git reads no other.
const PRIVATE_CONFIG: &str = "[core]
\trepositoryformatversion = 0
\tbare = false
\tautocrlf = false
\tfilemode = true
\thooksPath = /dev/null
\tfsmonitor = false
[gc]
\tauto = 0
";

/// What the owner file of a worktree made by this process holds.
pub(super) fn owner_stamp() -> String {
    let pid = std::process::id();
    match crate::procfs::start_time(pid as i32) {
        Some(start) => format!("{pid} {start}\n"),
        None => format!("{pid}\n"),
    }
}

/// Who runs the write subagent of a worktree, by its owner file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// No owner file, or a process that has ended.
    Gone,
    ThisProcess,
    /// Another Fido that still runs: its pid.
    Another(i32),
    /// A live process that is no Fido (its command name): an owner file
    /// planted in a repository may name `init`. It holds no claim, and the
    /// sweep leaves its folder alone (a Fido installed under another name
    /// keeps its worktree).
    Stranger(i32),
}

/// The owner of the worktree of `layout`. A pid with its start time is
/// checked exactly, so a pid the kernel has given to another process since
/// is no owner. A bare pid (written by an older Fido) counts while any
/// process has it, except this one: a session sweeps at its start, before
/// it makes any worktree.
pub fn owner(layout: &Layout) -> Owner {
    let Ok(text) = fs::read_to_string(layout.owner()) else {
        return Owner::Gone;
    };
    let mut fields = text.split_whitespace();
    let Some(Ok(pid)) = fields.next().map(str::parse::<i32>) else {
        return Owner::Gone;
    };
    let me = std::process::id() as i32;
    let alive = match fields.next().map(str::parse::<u64>) {
        Some(Ok(start)) if crate::procfs::is_running(pid, start) => true,
        Some(_) => false,
        None if pid == me => return Owner::Gone,
        None => nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok(),
    };
    let is_fido = || crate::procfs::command_name(pid).is_some_and(|name| name.starts_with("fido"));
    match (alive, pid == me) {
        (false, _) => Owner::Gone,
        (true, true) => Owner::ThisProcess,
        (true, false) if is_fido() => Owner::Another(pid),
        (true, false) => Owner::Stranger(pid),
    }
}

/// Where the user's repository is, seen from the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// The top of the main checkout.
    pub top: PathBuf,
    /// The workspace inside it: `""` or `sub/dir/`.
    pub prefix: String,
    /// The main repository's object folder (the private one borrows it).
    pub objects: PathBuf,
    /// The main repository's index file.
    pub index: PathBuf,
    /// The commit `HEAD` names; `None` before the first commit.
    pub head: Option<String>,
}

impl Repository {
    /// The repository of `workspace`; `NotARepository` when there is none.
    /// One git process: `rev-parse` exits 1 (with the paths printed) when
    /// `HEAD` names no commit yet, 128 outside a repository.
    pub fn find(workspace: &Path) -> Result<Repository, ChangesError> {
        let not_a_repository = || ChangesError::NotARepository(workspace.display().to_string());
        let (code, out) = Git::user(workspace).status([
            "rev-parse",
            "--show-toplevel",
            "--show-prefix",
            "--git-path",
            "objects",
            "--git-path",
            "index",
            "--verify",
            "-q",
            "HEAD^{commit}",
        ])?;
        let text = String::from_utf8_lossy(&out);
        let lines: Vec<&str> = text.lines().collect();
        let (paths, head) = match (code, &lines[..]) {
            (0, [paths @ .., head]) if paths.len() == 4 => (paths, Some(head.to_string())),
            (1, paths) if paths.len() == 4 => (paths, None),
            _ => return Err(not_a_repository()),
        };
        let [top, prefix, objects, index] = paths else {
            return Err(not_a_repository());
        };
        Ok(Repository {
            top: PathBuf::from(top),
            prefix: prefix.to_string(),
            objects: workspace.join(objects),
            index: workspace.join(index),
            head,
        })
    }
}

/// The base of a write delegation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    pub commit: String,
    pub tree: String,
}

/// The subagent's view: where it works and what its sandbox lets it read
/// and write besides the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRoots {
    /// Its workspace (the worktree, or the workspace's folder inside it).
    pub workspace: PathBuf,
    /// Writable: the worktree.
    pub write: Vec<PathBuf>,
    /// Readable: the worktree, the private repository and the main object
    /// folder it borrows from.
    pub read: Vec<PathBuf>,
    /// The private repository (read-only to the subagent).
    pub git_dir: PathBuf,
}

impl WriteRoots {
    /// The environment that points the subagent's git at its private
    /// repository and worktree: read-only git works from any folder of
    /// the worktree, never writes the private index, and never looks
    /// above the worktree for another repository.
    pub fn git_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let tree = self.write.first().cloned().unwrap_or_default();
        let ceiling = tree.parent().map(Path::to_path_buf).unwrap_or_default();
        vec![
            ("GIT_DIR", self.git_dir.clone().into_os_string()),
            ("GIT_WORK_TREE", tree.into_os_string()),
            ("GIT_OPTIONAL_LOCKS", "0".into()),
            ("GIT_CEILING_DIRECTORIES", ceiling.into_os_string()),
        ]
    }
}

/// A created worktree.
#[derive(Debug, Clone)]
pub struct Worktree {
    pub id: String,
    pub layout: Layout,
    pub repo: Repository,
    pub base: Base,
    /// The sandbox of the git that reads the child's tree, set by the
    /// caller that can build one (`sandbox::git_wall`): a second wall
    /// should a filter slip past the first (nested repositories never
    /// entered, a child's `.git` refused).
    pub git_wall: Option<crate::git::PreExec>,
}

impl Worktree {
    /// Takes the base of `workspace` (in `repo`) and checks it out for
    /// `id`. On error nothing of its folder is left.
    pub fn create(workspace: &Path, repo: Repository, id: &str) -> Result<Worktree, ChangesError> {
        let layout = Layout::new(workspace, id);
        super::records::ensure_state_ignored(workspace);
        let made = (|| {
            init_private(&layout, &repo)?;
            snapshot(&layout, &repo)
        })();
        match made {
            Ok(base) => Ok(Worktree {
                id: id.to_string(),
                layout,
                repo,
                base,
                git_wall: None,
            }),
            Err(err) => {
                let _ = fs::remove_dir_all(&layout.dir);
                Err(err)
            }
        }
    }

    /// What the subagent's sandbox needs.
    pub fn roots(&self) -> WriteRoots {
        let tree = self.layout.tree();
        WriteRoots {
            workspace: tree.join(&self.repo.prefix),
            write: vec![tree.clone()],
            read: vec![tree, self.layout.git_dir(), self.repo.objects.clone()],
            git_dir: self.layout.git_dir(),
        }
    }

    /// Git on the private repository and the worktree.
    pub fn git(&self) -> Git {
        Git::worktree(&self.layout.git_dir(), &self.layout.tree()).confined(self.git_wall.clone())
    }
}

fn init_private(layout: &Layout, repo: &Repository) -> Result<(), ChangesError> {
    let git_dir = layout.git_dir();
    fs::create_dir_all(git_dir.join("objects/info"))?;
    fs::create_dir_all(git_dir.join("refs/heads"))?;
    fs::create_dir_all(git_dir.join("refs/tags"))?;
    fs::write(git_dir.join("config"), PRIVATE_CONFIG)?;
    fs::write(git_dir.join("HEAD"), format!("{EMPTY_TREE}\n"))?;
    let objects = fs::canonicalize(&repo.objects)?;
    fs::write(
        git_dir.join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )?;
    copy_index(&repo.index, &git_dir.join("index"))?;
    fs::create_dir_all(layout.tree())?;
    Ok(())
}

/// Copies the index `from` (none is fine: an empty one) with its
/// modification time. Git trusts an entry's stat data only while the file
/// is older than the index ("racy git"); a copy stamped now would make an
/// edit that kept the size, in the same instant as the index was written,
/// look unchanged.
pub(super) fn copy_index(from: &Path, to: &Path) -> io::Result<()> {
    let modified = match fs::metadata(from) {
        Ok(meta) => meta.modified()?,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err),
    };
    fs::copy(from, to)?;
    fs::File::options()
        .write(true)
        .open(to)?
        .set_modified(modified)
}

/// The pathspec that keeps Fido's own state out of a snapshot.
pub fn state_exclude(prefix: &str) -> String {
    format!(":(top,exclude){prefix}{}*", crate::workspace::STATE_PREFIX)
}

/// HEAD plus the uncommitted and untracked, non-ignored files, as a commit
/// in the private repository.
fn snapshot(layout: &Layout, repo: &Repository) -> Result<Base, ChangesError> {
    let git_dir = layout.git_dir();
    let git = Git::user(&repo.top)
        .with("GIT_INDEX_FILE", git_dir.join("index"))
        .with("GIT_OBJECT_DIRECTORY", git_dir.join("objects"))
        .with("GIT_ALTERNATE_OBJECT_DIRECTORIES", &repo.objects);
    let private = Git::worktree(&git_dir, &layout.tree());
    // Git processes that need nothing of each other run side by side: the
    // empty tree (for the checkout) beside the snapshot, the base commit
    // beside the checkout.
    std::thread::scope(|scope| {
        let empty_tree = scope.spawn(|| {
            private.run_with_input(["hash-object", "-t", "tree", "-w", "--stdin"], Some(b""))
        });
        // The user's gitlinks are taken as the index has them, never
        // entered ([`super::nested`]).
        super::nested::hide_gitlinks(&git)?;
        git.run(["add", "-A", "--", ".", &state_exclude(&repo.prefix)])?;
        let tree = git.line(["write-tree"])?;
        joined(empty_tree, "a git thread of the snapshot")?;
        let checkout = scope.spawn(|| checkout(layout, repo, &private));
        let commit = commit_tree(&git, &tree, repo.head.as_deref())?;
        joined(checkout, "a git thread of the snapshot")?;
        fs::write(git_dir.join("HEAD"), format!("{commit}\n"))?;
        Ok(Base { commit, tree })
    })
}

/// The base commit: `tree` on top of `head`.
fn commit_tree(git: &Git, tree: &str, head: Option<&str>) -> Result<String, GitError> {
    let mut args = vec!["commit-tree", tree];
    if let Some(head) = head {
        args.extend(["-p", head]);
    }
    args.extend(["-m", "fido: the base of a write subagent"]);
    git.line(&args)
}

/// Writes every file of the base (the private index, once the snapshot
/// wrote it) into `tree/`; the empty tree that `GIT_ATTR_SOURCE` names
/// must exist. No git link is written there: anything in `tree/` is the
/// subagent's to rewrite, so its git finds the private repository through
/// `GIT_DIR`, which the parent sets ([`WriteRoots::git_env`]), and the
/// parent never reads a link from the worktree.
fn checkout(layout: &Layout, repo: &Repository, private: &Git) -> Result<(), ChangesError> {
    private.run(["checkout-index", "-a", "-f", "-u"])?;
    fs::create_dir_all(layout.tree().join(&repo.prefix))?;
    Ok(())
}

impl From<GitError> for ChangesError {
    fn from(err: GitError) -> Self {
        ChangesError::Git(err)
    }
}
