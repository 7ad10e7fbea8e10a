//! Protected paths: under `workspace-write`, the main agent's commands
//! cannot write the workspace's `.git` (and the git directory a `.git`
//! file names), `.fido-state/`, `.fido/` or `fido.toml`. Fido and git
//! later read or run what is there outside the sandbox (git's config and
//! hooks, Fido's change-set records, hooks and MCP servers in
//! `fido.toml`), so writing them would be a way out.
//!
//! Landlock only allows: it cannot take a folder back out of the writable
//! workspace. So each command gets a mount namespace of its own, made
//! between fork and exec, in which every protected path is bind-mounted
//! onto itself read-only:
//!
//! 1. `unshare(CLONE_NEWNS)` where the process may (root with
//!    `CAP_SYS_ADMIN`), else `unshare(CLONE_NEWUSER | CLONE_NEWNS)` with
//!    the user mapped to itself;
//! 2. every mount becomes a slave, so nothing done here reaches the
//!    user's namespace;
//! 3. each protected path is bound onto itself and the bind remounted
//!    read-only; then the path must still be the inode seen before the
//!    fork, else a concurrent process swapped it, and the command does not
//!    start (it fails closed). Once bound, the path is a mount point in
//!    the command's namespace: the command itself cannot rename it.
//!
//! The Landlock ruleset applied afterwards denies every mount operation,
//! so the command cannot undo the binds; a read-only mount refuses writes,
//! creation, removal and renames inside it (`EROFS`), a mount point cannot
//! be renamed or removed (`EBUSY`), and neither a symlink (resolved to the
//! same mount) nor a hard link (no link across mounts) reaches around it.
//!
//! A protected path that does not exist cannot be bound. `.fido-state/`
//! is made before the first command; a `fido.toml` or `.fido/` that a
//! command creates carries no trust (workspace trust follows content,
//! README "Workspace trust"), and a `.git` it creates at the top
//! (`git init`) is moved aside when the command ends
//! (`super::new_repository`).
//!
//! Where no mount namespace can be made, the fallback is Landlock alone:
//! write access is granted entry by entry beneath the workspace, leaving
//! out the protected paths (see [`super::ruleset`]), so creating a new
//! entry at the top of the workspace needs an approved escalation too.
//! [`Mechanism`] says which one is in force; it is shown at start-up and
//! by `fido sandbox check`.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::gitlinks::Gitlinks;
use super::nested_clones::{CommandRunning, NestedClones};

use super::pidns::SelfMapping;
pub use crate::workspace::{PROTECTED_NAMES, protected_paths};

/// How protected paths are kept read-only on this kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// A mount namespace per command (the process may make one).
    MountNamespace,
    /// A user and mount namespace per command.
    UserAndMountNamespace,
    /// Landlock write rules per entry, leaving the protected paths out;
    /// new top-level entries need an escalation. The reason says why no
    /// namespace could be made.
    LandlockPerEntry { reason: String },
}

impl Mechanism {
    /// Whether commands get a mount namespace of their own.
    pub fn uses_namespace(&self) -> bool {
        !matches!(self, Mechanism::LandlockPerEntry { .. })
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mechanism::MountNamespace => {
                f.write_str("read-only bind mounts in a mount namespace per command")
            }
            Mechanism::UserAndMountNamespace => {
                f.write_str("read-only bind mounts in a user and mount namespace per command")
            }
            Mechanism::LandlockPerEntry { reason } => write!(
                f,
                "landlock write rules per workspace entry, so a new top-level entry needs an escalation ({reason})"
            ),
        }
    }
}

/// Which mechanism this kernel allows: a child that tries the namespaces
/// and reports. Blocking (a fork and a wait).
pub fn mechanism() -> Mechanism {
    let attempts = [libc::CLONE_NEWNS, libc::CLONE_NEWUSER | libc::CLONE_NEWNS];
    match super::pidns::first_unshare_allowed(&attempts) {
        Ok(Some(0)) => Mechanism::MountNamespace,
        Ok(Some(_)) => Mechanism::UserAndMountNamespace,
        Ok(None) => Mechanism::LandlockPerEntry {
            reason: "this kernel allows no mount namespace here".into(),
        },
        Err(err) => Mechanism::LandlockPerEntry {
            reason: format!("cannot test namespaces: {err}"),
        },
    }
}

/// The protected paths of one workspace, and how they are kept.
#[derive(Debug, Clone)]
pub(super) struct Protection {
    pub(super) workspace: PathBuf,
    pub(super) mechanism: Mechanism,
    /// The gitlink folders, whose `.git` is protected too.
    gitlinks: Arc<Gitlinks>,
    /// The other repositories below the top, kept current (a walk, then
    /// a watch).
    clones: Arc<NestedClones>,
}

impl Protection {
    /// Finds how this kernel keeps protected paths (a fork and a wait,
    /// once per session), and makes `.fido-state/` so that it is there to
    /// protect from the first command on.
    pub(super) fn prepare(workspace: &Path) -> Protection {
        let state = workspace.join(crate::workspace::STATE_DIR);
        if let Err(err) = std::fs::create_dir(&state)
            && err.kind() != std::io::ErrorKind::AlreadyExists
        {
            tracing::warn!(error = %err, "cannot create .fido-state");
        }
        Protection {
            workspace: workspace.to_path_buf(),
            mechanism: mechanism(),
            gitlinks: Arc::new(Gitlinks::new(workspace)),
            // Looked for at the first command (`sandbox::nested_clones`).
            clones: Arc::new(NestedClones::new(workspace)),
        }
    }

    /// Every repository below the top whose `.git` is protected: the
    /// gitlinks as the index says now, and the other repositories as the
    /// disk holds them now (`sandbox::nested_clones`). Blocking.
    pub(super) fn nested(&self) -> Vec<PathBuf> {
        let mut nested = self.gitlinks.current();
        nested.extend(self.clones.current());
        nested.sort();
        nested.dedup();
        nested
    }

    /// Marks a command as running while the guard lives.
    pub(super) fn command_started(&self) -> CommandRunning {
        self.clones.command_started()
    }
}

/// One path to bind read-only, prepared before the fork.
#[derive(Debug)]
struct Bind {
    path: CString,
    /// Its device and inode when prepared: the child checks that what it
    /// made read-only is still that, else a concurrent rename moved it.
    dev: libc::dev_t,
    ino: libc::ino_t,
    /// The mount flags the kernel keeps locked in a user namespace
    /// (`nosuid`, `nodev`, `noexec`, atime), which a remount must repeat.
    locked: libc::c_ulong,
}

/// The binds of one command, prepared before the fork.
#[derive(Debug)]
pub struct ReadOnlyBinds {
    binds: Vec<Bind>,
    mapping: SelfMapping,
}

impl ReadOnlyBinds {
    /// Looks at each of `paths` for the child to bind. A path that
    /// vanished or is neither a folder nor a file is left out. Blocking.
    pub fn prepare(paths: &[PathBuf]) -> ReadOnlyBinds {
        ReadOnlyBinds {
            binds: paths.iter().filter_map(|path| Bind::look(path)).collect(),
            mapping: SelfMapping::for_current_user(),
        }
    }

    /// How many paths will be bound.
    pub fn len(&self) -> usize {
        self.binds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.binds.is_empty()
    }

    /// Steps 1–3 of the module comment, in the forked child.
    ///
    /// # Safety
    /// Only between fork and exec, in a single-threaded child: plain
    /// syscalls on memory prepared before the fork.
    pub unsafe fn enter(&self) -> io::Result<()> {
        if self.binds.is_empty() {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe {
            if libc::unshare(libc::CLONE_NEWNS) != 0 {
                check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS))?;
                self.mapping.write();
            }
            let flags = libc::MS_REC | libc::MS_SLAVE;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ))?;
            for bind in &self.binds {
                bind.mount_read_only()?;
            }
        }
        Ok(())
    }
}

impl Bind {
    fn look(path: &Path) -> Option<Bind> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.is_dir() && !meta.is_file() {
            return None;
        }
        Some(Bind {
            path: CString::new(path.as_os_str().as_bytes()).ok()?,
            dev: meta.dev(),
            ino: meta.ino(),
            locked: locked_flags(path)?,
        })
    }

    /// Binds the path onto itself, remounts the bind read-only, and checks
    /// that the path is still the one prepared (`EBUSY` if not).
    ///
    /// # Safety
    /// Only between fork and exec (plain syscalls on prepared memory).
    unsafe fn mount_read_only(&self) -> io::Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            check(libc::mount(
                self.path.as_ptr(),
                self.path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
            let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | self.locked;
            check(libc::mount(
                std::ptr::null(),
                self.path.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            ))?;
            let mut stat = std::mem::MaybeUninit::<libc::stat>::zeroed();
            check(libc::lstat(self.path.as_ptr(), stat.as_mut_ptr()))?;
            let stat = stat.assume_init();
            if stat.st_dev != self.dev || stat.st_ino != self.ino {
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
        }
        Ok(())
    }
}

/// The flags of the mount `path` is on that a remount in a user
/// namespace must keep.
fn locked_flags(path: &Path) -> Option<libc::c_ulong> {
    let stat = nix::sys::statvfs::statvfs(path).ok()?;
    let flags = stat.flags();
    use nix::sys::statvfs::FsFlags;
    let pairs = [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ];
    Some(
        pairs
            .iter()
            .filter(|(st, _)| flags.contains(*st))
            .fold(0, |acc, (_, ms)| acc | ms),
    )
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
