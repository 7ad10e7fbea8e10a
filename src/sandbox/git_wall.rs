//! The second wall around the git that reads a write subagent's tree.
//!
//! The first wall is the git runner itself (`crate::git`): a nested
//! repository in the child's tree is never entered and a `.git` the child
//! made is refused. Should a program the child configured still run when
//! the parent's git builds the change set, it would run boxed: the same
//! Landlock ruleset and seccomp filter as a command's, reading everywhere
//! but the credential paths, writing only the change set's folder (its
//! private git directory and index), no network, Docker's capabilities.
//! Prepared before the fork, entered between fork and exec.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::policy::{Enforcement, SandboxError};
use super::ruleset::{self, RulesetSpec};
use super::seccomp::{SeccompPolicy, SeccompProgram, SocketAccess};
use crate::git::PreExec;

/// The confinement of a git that may write only beneath `write_root`
/// and read everything but `deny`. An error where this kernel cannot
/// enforce it (never a silent downgrade).
pub fn git_wall(write_root: &Path, deny: Vec<PathBuf>) -> Result<PreExec, SandboxError> {
    let spec = RulesetSpec {
        deny,
        write_roots: vec![write_root.to_path_buf()],
        ..RulesetSpec::default()
    };
    let built = ruleset::build(&spec)?;
    if built.applied.enforcement != Enforcement::Full {
        return Err(SandboxError::LandlockUnavailable);
    }
    let ruleset: Option<OwnedFd> = built.created.into();
    let ruleset = ruleset.ok_or(SandboxError::LandlockUnavailable)?;
    let seccomp = SeccompProgram::compile(SeccompPolicy {
        network: SocketAccess::Off,
        metadata_writes: true,
    })?;
    Ok(PreExec(Arc::new(move || enter(&ruleset, &seccomp))))
}

/// The box for the git of the change set in `folder`, reading all but
/// the credential paths below `$HOME`; `None` (logged) where this kernel
/// cannot enforce it. Blocking.
pub fn for_change_set(folder: &Path) -> Option<PreExec> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let deny = super::credential_paths(home.as_deref(), &[]);
    git_wall(folder, deny)
        .map_err(|err| tracing::warn!(error = %err, "cannot box the git of a change set"))
        .ok()
}

/// Between fork and exec: plain syscalls on prepared memory.
fn enter(ruleset: &OwnedFd, seccomp: &SeccompProgram) -> std::io::Result<()> {
    super::caps::drop_from_bounding_set();
    // SAFETY: prctl and landlock_restrict_self with a descriptor owned by
    // the closure, no allocation.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let rc = libc::syscall(
            libc::SYS_landlock_restrict_self,
            ruleset.as_raw_fd(),
            0 as libc::c_uint,
        );
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    seccomp.apply()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::Git;

    /// A program git starts (here a shell alias, as a filter or fsmonitor
    /// driver would be) writes in the wall's folder and nowhere else, and
    /// reaches no network.
    #[test]
    fn what_a_boxed_git_starts_writes_only_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let inside = root.join("changes");
        std::fs::create_dir(&inside).unwrap();
        let outside = root.join("outside.txt");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let script = format!(
            "!echo in > {}/in.txt; echo out > {}; bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo net > {}/net.txt",
            inside.display(),
            outside.display(),
            inside.display()
        );
        let alias = format!("alias.x={script}");
        let run = |git: Git| git.status(["-c", alias.as_str(), "x"]).map(drop);
        run(Git::new(&inside).confined(Some(git_wall(&inside, Vec::new()).unwrap()))).unwrap();
        assert!(
            inside.join("in.txt").exists(),
            "the boxed git wrote nothing"
        );
        assert!(!outside.exists(), "the boxed git wrote outside its folder");
        assert!(
            !inside.join("net.txt").exists(),
            "the boxed git reached the network"
        );
        // The same git unboxed writes both: the test can fail.
        std::fs::remove_file(inside.join("in.txt")).unwrap();
        run(Git::new(&inside)).unwrap();
        assert!(outside.exists());
        assert!(inside.join("net.txt").exists());
    }
}
