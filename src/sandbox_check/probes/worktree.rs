//! Forbidden to a write subagent: reaching the main checkout or its `.git`
//! from its worktree, by path, through git pointed there (a rewritten git
//! link, `-C`, `GIT_DIR`), through a link, or by changing its private
//! repository's configuration; and the controls: it writes its claim and
//! reads its repository with git.
//!
//! Its git commands run as a write subagent's do, with the environment of
//! [`crate::changes::WriteRoots::git_env`] (set here explicitly, so that
//! the probes do the same outside the sandbox, in the tests), through
//! Fido's one git runner ([`crate::git::Git`]).

use std::fs::OpenOptions;
use std::io::{self, ErrorKind, Write};
use std::path::Path;

use super::super::fixture::ProbeFixture;
use super::super::probe::{Probe, RefusedBy};
use super::super::targets::{ESCAPED_CONTENT, ProbeTargets};
use super::super::worktree::{
    CLAIM, ESCAPE_LINK, MAIN_FILE, NESTED, OBJECT_DIR, WorktreeFixture, WorktreePaths,
};
use super::controls::shell_error;

/// What the ref probe creates in the main `.git`.
const NEW_REF: &str = "refs/heads/probe-ref";
/// A loose object name under [`OBJECT_DIR`].
const NEW_OBJECT: &str = "cdef0123456789abcdef0123456789abcdef01";
const NEW_HOOK: &str = "hooks/post-checkout";
/// The hard link the link probe tries in the worktree.
const HARDLINK_NAME: &str = "main-link";
/// The file the claim control writes.
const CLAIMED_FILE: &str = "probe.txt";
/// Where the config probes point git.
const EVIL: &str = "/tmp/evil";

fn paths(t: &ProbeTargets) -> WorktreePaths {
    WorktreePaths::of(&t.dir)
}

/// Whether the parent sees `effect` in the worktree fixture; without one
/// it cannot look, which counts as an effect.
fn seen(f: &ProbeFixture, effect: fn(&WorktreeFixture) -> bool) -> bool {
    f.worktree.as_ref().is_none_or(effect)
}

pub(in super::super) const REWRITE_GIT_LINK: Probe =
    Probe::new("rewrite-worktree-git-link", rewrite_git_link)
        .with_side_effect(|f| seen(f, WorktreeFixture::main_refs_changed));

pub(in super::super) const CHECKOUT_IN_MAIN: Probe = Probe::new("git-checkout-in-main", |t| {
    let p = paths(t);
    let main = p.main.to_string_lossy().into_owned();
    let args = [
        "-C",
        main.as_str(),
        "checkout",
        "-q",
        "-b",
        "probe-checkout",
    ];
    git(&p, &args, GitDir::Unset, Some(&p.main_git().join("HEAD")))
})
.with_side_effect(|f| seen(f, WorktreeFixture::main_refs_changed));

pub(in super::super) const GIT_DIR_MAIN: Probe = Probe::new("git-dir-main-update-ref", |t| {
    let p = paths(t);
    let args = ["update-ref", "refs/heads/probe-git-dir", "HEAD"];
    let head = p.main_git().join("HEAD");
    git(&p, &args, GitDir::Main, Some(&head))
})
.with_side_effect(|f| seen(f, WorktreeFixture::main_refs_changed));

pub(in super::super) const CONFIG_HOOKS_PATH: Probe = Probe::new("git-config-hooks-path", |t| {
    git(
        &paths(t),
        &["config", "core.hooksPath", EVIL],
        GitDir::Own,
        None,
    )
})
.with_side_effect(|f| seen(f, WorktreeFixture::private_config_changed));

pub(in super::super) const CONFIG_FSMONITOR: Probe = Probe::new("git-config-fsmonitor", |t| {
    git(
        &paths(t),
        &["config", "core.fsmonitor", EVIL],
        GitDir::Own,
        None,
    )
})
.with_side_effect(|f| seen(f, WorktreeFixture::private_config_changed));

pub(in super::super) const WRITE_MAIN_CHECKOUT: Probe = Probe::new("write-main-checkout", |t| {
    write_existing(&paths(t).main.join(MAIN_FILE))
})
.with_side_effect(|f| seen(f, WorktreeFixture::main_file_changed));

pub(in super::super) const WRITE_MAIN_HEAD: Probe = Probe::new("write-main-git-head", |t| {
    write_existing(&paths(t).main_git().join("HEAD"))
})
.with_side_effect(|f| seen(f, WorktreeFixture::main_head_changed));

pub(in super::super) const WRITE_MAIN_CONFIG: Probe = Probe::new("write-main-git-config", |t| {
    write_existing(&paths(t).main_git().join("config"))
})
.with_side_effect(|f| seen(f, WorktreeFixture::main_config_changed));

pub(in super::super) const CREATE_MAIN_REF: Probe = Probe::new("create-main-git-ref", |t| {
    create_new(&paths(t).main_git().join(NEW_REF))
})
.with_side_effect(|f| seen(f, |w| w.main_git_has(NEW_REF)));

pub(in super::super) const CREATE_MAIN_OBJECT: Probe = Probe::new("create-main-git-object", |t| {
    create_new(&paths(t).main_git().join(OBJECT_DIR).join(NEW_OBJECT))
})
.with_side_effect(|f| seen(f, |w| w.main_git_has(&format!("{OBJECT_DIR}/{NEW_OBJECT}"))));

pub(in super::super) const CREATE_MAIN_HOOK: Probe = Probe::new("create-main-git-hook", |t| {
    create_new(&paths(t).main_git().join(NEW_HOOK))
})
.with_side_effect(|f| seen(f, |w| w.main_git_has(NEW_HOOK)));

pub(in super::super) const WRITE_THROUGH_ESCAPE_LINK: Probe =
    Probe::new("write-through-escape-link", |t| {
        write_existing(&paths(t).tree().join(ESCAPE_LINK))
    })
    .with_side_effect(|f| seen(f, WorktreeFixture::link_target_changed));

// Landlock refuses a link that would give the file more rights in its new
// place than in its old one with EXDEV, a missing right with EACCES.
pub(in super::super) const HARDLINK_MAIN_FILE: Probe = Probe::new("hardlink-main-file", |t| {
    let p = paths(t);
    let link = p.tree().join(HARDLINK_NAME);
    std::fs::hard_link(p.main.join(MAIN_FILE), &link)?;
    write_existing(&link)
})
.with_refusal_errno("EXDEV")
.with_side_effect(|f| seen(f, |w| w.tree_has(HARDLINK_NAME) || w.main_file_changed()));

/// A repository built by hand in a gitlink's folder of the worktree, with
/// a clean filter that would leave a mark: the child may write there, so
/// planting it succeeds; what is probed is the parent's git, which must
/// never enter it. The child cannot see that, so once it has planted the
/// repository it reports `ENOEXEC` (nothing it planted ran), and the
/// parent decides: it builds the worktree's change set as a delegation's
/// end does and looks for the mark ([`WorktreeFixture::nested_filter_ran`]).
pub(in super::super) const NESTED_REPOSITORY: Probe =
    Probe::new("nested-repository-in-worktree", plant_nested_repository)
        .refused_by(RefusedBy::Always(
            "fido git: nested repositories never entered",
        ))
        .with_refusal_errno("ENOEXEC")
        .with_side_effect(|f| seen(f, WorktreeFixture::nested_filter_ran));

pub(in super::super) const WRITE_CLAIMED: Probe = Probe::new("write-claimed-file", |t| {
    let file = paths(t).tree().join(CLAIM).join(CLAIMED_FILE);
    std::fs::write(&file, ESCAPED_CONTENT)?;
    if std::fs::read(&file)? == ESCAPED_CONTENT {
        Ok(())
    } else {
        Err(io::Error::from(ErrorKind::InvalidData))
    }
});

pub(in super::super) const GIT_READS: Probe = Probe::new("git-status-and-log", |t| {
    let p = paths(t);
    git(&p, &["status", "--porcelain"], GitDir::Own, None)?;
    git(&p, &["log", "-1", "--format=%H"], GitDir::Own, None)
});

/// The redirect a write subagent could make: a `.git` link in its
/// worktree pointing at the main `.git`, then git there without `GIT_DIR`,
/// so that git follows the link. Writing the link is the subagent's right
/// (`tree/` is its own); the parent never reads it.
fn rewrite_git_link(t: &ProbeTargets) -> io::Result<()> {
    let p = paths(t);
    let link = format!("gitdir: {}\n", p.main_git().display());
    std::fs::write(p.tree().join(".git"), link)
        .map_err(|err| io::Error::other(format!("cannot write the git link: {err}")))?;
    let args = ["update-ref", "refs/heads/probe-link", "HEAD"];
    git(&p, &args, GitDir::Unset, Some(&p.main_git().join("HEAD")))
}

/// The nested repository: `HEAD` the gitlink's commit, an index whose
/// entry's stat data no longer matches its file, and a clean filter for
/// every file, in its own configuration.
fn plant_nested_repository(t: &ProbeTargets) -> io::Result<()> {
    let p = paths(t);
    let mut git = crate::git::Git::new(&p.tree());
    for (key, value) in p.git_env() {
        git = git.with(key, value);
    }
    let listed = git
        .line(["ls-files", "-s", "--", NESTED])
        .map_err(io::Error::other)?;
    let commit = listed
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let folder = p.tree().join(NESTED);
    let dot_git = folder.join(".git");
    for dir in ["objects", "refs/heads", "info"] {
        std::fs::create_dir_all(dot_git.join(dir))?;
    }
    std::fs::write(
        dot_git.join("config"),
        "[core]\n\trepositoryformatversion = 0\n",
    )?;
    std::fs::write(dot_git.join("HEAD"), "ref: refs/heads/main\n")?;
    std::fs::write(folder.join("f.txt"), ESCAPED_CONTENT)?;
    crate::git::Git::new(&folder)
        .run(["add", "f.txt"])
        .map_err(io::Error::other)?;
    let filter = format!(
        "[filter \"x\"]\n\tclean = \"touch '{}'; cat\"\n",
        p.nested_marker().display()
    );
    let mut config = OpenOptions::new()
        .append(true)
        .open(dot_git.join("config"))?;
    config.write_all(filter.as_bytes())?;
    std::fs::write(dot_git.join("info/attributes"), "* filter=x\n")?;
    std::fs::write(dot_git.join("HEAD"), format!("{commit}\n"))?;
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    OpenOptions::new()
        .write(true)
        .open(folder.join("f.txt"))?
        .set_modified(old)?;
    Err(io::Error::from_raw_os_error(libc::ENOEXEC))
}

fn write_existing(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(ESCAPED_CONTENT)
}

fn create_new(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(ESCAPED_CONTENT)
}

/// Which repository a probe's git is told to use.
#[derive(Clone, Copy)]
enum GitDir {
    /// The write subagent's own environment: its private repository.
    Own,
    /// `GIT_DIR` and `GIT_WORK_TREE` unset: git finds a repository itself.
    Unset,
    /// `GIT_DIR` set to the main `.git`.
    Main,
}

/// Runs git in the worktree with a write subagent's environment, changed
/// as `dir` says. A failure becomes the errno git reported. Where git only
/// says "not a git repository" (it could not open the main repository's
/// `HEAD`, so it went no further), the errno of opening `witness`, that
/// `HEAD`, tells why; any other failure is no refusal.
fn git(p: &WorktreePaths, args: &[&str], dir: GitDir, witness: Option<&Path>) -> io::Result<()> {
    let mut git = crate::git::Git::new(&p.tree());
    for (key, value) in p.git_env() {
        git = git.with(key, value);
    }
    match dir {
        GitDir::Own => {}
        GitDir::Unset => {
            git = git.without("GIT_DIR").without("GIT_WORK_TREE");
        }
        GitDir::Main => {
            git = git.with("GIT_DIR", p.main_git());
        }
    }
    let output = git
        .output(args, None)
        .map_err(|e| io::Error::other(e.to_string()))?;
    if output.code == Some(0) {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let refused = shell_error(&stderr);
    if refused.raw_os_error().is_some() {
        return Err(refused);
    }
    let unusable = stderr.contains("not a git repository");
    match witness.filter(|_| unusable).map(std::fs::File::open) {
        Some(Err(err)) if err.raw_os_error().is_some() => Err(err),
        _ => Err(io::Error::other(format!(
            "git {} failed: {}",
            args.join(" "),
            stderr.trim()
        ))),
    }
}
