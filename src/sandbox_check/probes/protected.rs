//! The protected paths of a workspace (`sandbox::protect`): `.git`, its
//! hooks, `.fido-state/`, `.fido/` and `fido.toml` in the probe child's
//! workspace, which no sandbox may change, `workspace-write` included.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;

use super::super::probe::{Probe, RefusedBy};
use super::super::targets::{ESCAPED_CONTENT, ORIGINAL_CONTENT};

const GIT_CONFIG: &str = "workspace/.git/config";
const GIT_HOOK: &str = "workspace/.git/hooks/pre-commit";
const GIT_DIR: &str = "workspace/.git";
const GIT_MOVED: &str = "workspace/.git-moved";
const MOVED_HOOK: &str = "workspace/.git-moved/hooks/pre-commit";
const STATE_RECORD: &str = "workspace/.fido-state/record.json";
const FIDO_PROFILE: &str = "workspace/.fido/agents/evil.md";
const FIDO_TOML: &str = "workspace/fido.toml";
/// A clone committed as a gitlink: the user's `git status` enters it.
const GITLINK: &str = "vendor/lib";
const GITLINK_CONFIG: &str = "workspace/vendor/lib/.git/config";
/// Any object id: git records a gitlink's commit without having it.
const GITLINK_COMMIT: &str = "1111111111111111111111111111111111111111";

/// A repository's `.git` with a config and a hooks folder, Fido's state
/// and config folders and a `fido.toml`, in the workspace.
fn protected_tree(dir: &Path) -> io::Result<()> {
    for folder in [".git/hooks", ".fido-state", ".fido/agents"] {
        std::fs::create_dir_all(dir.join("workspace").join(folder))?;
    }
    for file in [GIT_CONFIG, FIDO_TOML] {
        std::fs::write(dir.join(file), ORIGINAL_CONTENT)?;
    }
    Ok(())
}

/// [`protected_tree`], with `.git` made a repository whose index holds
/// the gitlink [`GITLINK`], itself a repository with a config. The
/// config stays [`ORIGINAL_CONTENT`] (a comment, which git accepts).
fn gitlink_tree(dir: &Path) -> io::Result<()> {
    protected_tree(dir)?;
    let git_dir = dir.join("workspace/.git");
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n")?;
    for folder in ["objects", "refs/heads"] {
        std::fs::create_dir_all(git_dir.join(folder))?;
    }
    let nested = dir.join("workspace").join(GITLINK).join(".git");
    std::fs::create_dir_all(&nested)?;
    std::fs::write(dir.join(GITLINK_CONFIG), ORIGINAL_CONTENT)?;
    let cacheinfo = format!("160000,{GITLINK_COMMIT},{GITLINK}");
    let git = crate::git::Git::new(&dir.join("workspace"));
    // Without git the probe is unsupported (below): nothing enters a
    // gitlink where there is no git.
    if crate::git::version::installed().is_ok() {
        git.run(["update-index", "--add", "--cacheinfo", &cacheinfo])
            .map_err(io::Error::other)?;
    }
    Ok(())
}

fn append(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .append(true)
        .open(path)?
        .write_all(ESCAPED_CONTENT)
}

fn create(path: &Path) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(ESCAPED_CONTENT)
}

pub(in super::super) const WRITE_GIT_CONFIG: Probe =
    Probe::new("write-git-config", |t| append(&t.dir.join(GIT_CONFIG)))
        .with_setup(protected_tree)
        .refused_by(RefusedBy::ProtectedPath)
        .with_refusal_errno("EROFS")
        .with_side_effect(|f| f.changed(GIT_CONFIG));

pub(in super::super) const CREATE_GIT_HOOK: Probe =
    Probe::new("create-git-hook", |t| create(&t.dir.join(GIT_HOOK)))
        .with_setup(protected_tree)
        .refused_by(RefusedBy::ProtectedPath)
        .with_refusal_errno("EROFS")
        // Where it would be once `rename-git`, unsandboxed, moved `.git`.
        .with_side_effect(|f| f.exists(GIT_HOOK) || f.exists(MOVED_HOOK));

pub(in super::super) const RENAME_GIT: Probe = Probe::new("rename-git", |t| {
    std::fs::rename(t.dir.join(GIT_DIR), t.dir.join(GIT_MOVED))
})
.with_setup(protected_tree)
.refused_by(RefusedBy::ProtectedPath)
.with_refusal_errno("EBUSY")
.with_side_effect(|f| f.exists(GIT_MOVED) || !f.exists(GIT_DIR));

pub(in super::super) const WRITE_FIDO_STATE: Probe =
    Probe::new("write-fido-state", |t| create(&t.dir.join(STATE_RECORD)))
        .with_setup(protected_tree)
        .refused_by(RefusedBy::ProtectedPath)
        .with_refusal_errno("EROFS")
        .with_side_effect(|f| f.exists(STATE_RECORD));

pub(in super::super) const WRITE_FIDO_DIR: Probe =
    Probe::new("write-fido-dir", |t| create(&t.dir.join(FIDO_PROFILE)))
        .with_setup(protected_tree)
        .refused_by(RefusedBy::ProtectedPath)
        .with_refusal_errno("EROFS")
        .with_side_effect(|f| f.exists(FIDO_PROFILE));

pub(in super::super) const WRITE_FIDO_TOML: Probe =
    Probe::new("write-fido-toml", |t| append(&t.dir.join(FIDO_TOML)))
        .with_setup(protected_tree)
        .refused_by(RefusedBy::ProtectedPath)
        .with_refusal_errno("EROFS")
        .with_side_effect(|f| f.changed(FIDO_TOML));

pub(in super::super) const WRITE_GITLINK_GIT_CONFIG: Probe =
    Probe::new("write-gitlink-git-config", |t| {
        append(&t.dir.join(GITLINK_CONFIG))
    })
    .with_setup(gitlink_tree)
    .with_unsupported(|_| {
        crate::git::version::installed()
            .err()
            .map(|err| format!("no git to enter a gitlink ({err})"))
    })
    .refused_by(RefusedBy::ProtectedPath)
    .with_refusal_errno("EROFS")
    .with_side_effect(|f| f.changed(GITLINK_CONFIG));
