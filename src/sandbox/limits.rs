//! What one sandboxed command may use: how many processes (and threads)
//! at once, and how much its private `TMPDIR` may hold.
//!
//! Processes: each command has a PID namespace of its own
//! ([`super::pidns`]). Since Linux 6.14 `kernel.pid_max` is a property of
//! the PID namespace, and the kernel checks it at every level of nesting,
//! so the namespace's init sets it for the command's namespace before the
//! command starts: a fork bomb gets `EAGAIN` at the limit, whatever uid
//! it runs as (`RLIMIT_NPROC` never binds root). On older kernels that
//! file is the whole machine's, so Fido never writes it there and says
//! the limit is not in force.
//!
//! The kernel hands out the PIDs below 300 in a namespace's first round
//! only: once its PIDs wrapped, new ones come from 300 up to `pid_max`
//! (`RESERVED_PIDS`). A `pid_max` of the limit plus two would leave a
//! long-lived namespace (a subagent's, or a command running a build's
//! many short processes) room for one process after its first 300, so
//! `pid_max` is the limit plus [`RESERVED_PIDS`] plus two: the limit
//! holds once the PIDs wrapped, and before that up to 300 more fit.
//!
//! `TMPDIR`: the session's private folder becomes a size-limited tmpfs
//! where Fido may mount one (`CAP_SYS_ADMIN`, as root outside a locked-down
//! container). It lasts the session, as the folder did, so a file a
//! command leaves there is still there for the next one. Elsewhere the
//! folder stays a plain one and Fido says it is not limited.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The limits of one command, as configured (`command_max_processes`,
/// `command_tmpdir_mib`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandLimits {
    /// Processes and threads one command may have at once.
    pub max_processes: u32,
    /// Bytes the session's `TMPDIR` may hold, in MiB.
    pub tmpdir_mib: u64,
}

impl Default for CommandLimits {
    fn default() -> Self {
        CommandLimits {
            max_processes: DEFAULT_MAX_PROCESSES,
            tmpdir_mib: DEFAULT_TMPDIR_MIB,
        }
    }
}

pub const DEFAULT_MAX_PROCESSES: u32 = 4096;
pub const DEFAULT_TMPDIR_MIB: u64 = 1024;
/// The smallest limit Fido takes (the kernel once refused a `pid_max`
/// below 301, two of whose numbers the namespace's init and the command's
/// own process take).
pub const MIN_MAX_PROCESSES: u64 = 299;
/// The PIDs the kernel gives out in a namespace's first round only.
pub const RESERVED_PIDS: u64 = 300;

/// The first kernel whose `pid_max` belongs to the PID namespace.
const PID_MAX_PER_NAMESPACE: (u32, u32) = (6, 14);

/// Why this kernel cannot keep a command to a process limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoProcessLimit {
    /// A kernel before 6.14: its `pid_max` is the whole machine's.
    #[error("kernel {release} keeps pid_max for the whole machine (per PID namespace since 6.14)")]
    MachineWide { release: String },
    /// The release `uname` gave does not read as a version.
    #[error("cannot read the kernel version from {release:?}")]
    UnknownRelease { release: String },
}

/// Whether this kernel keeps `pid_max` per PID namespace; else why the
/// process limit cannot be set.
pub fn process_limit_support() -> Result<(), NoProcessLimit> {
    let release = kernel_release();
    match parse_release(&release) {
        Some(version) if version >= PID_MAX_PER_NAMESPACE => Ok(()),
        Some(_) => Err(NoProcessLimit::MachineWide { release }),
        None => Err(NoProcessLimit::UnknownRelease { release }),
    }
}

/// What the namespace's init writes to `/proc/sys/kernel/pid_max` for a
/// command of at most `max_processes` processes.
pub(super) fn pid_max_bytes(max_processes: u32) -> Vec<u8> {
    let pid_max = u64::from(max_processes) + 2 + RESERVED_PIDS;
    format!("{pid_max}\n").into_bytes()
}

fn kernel_release() -> String {
    // SAFETY: uname fills the zeroed struct it is given.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut name) } != 0 {
        return String::new();
    }
    // SAFETY: the kernel NUL-terminates the release.
    unsafe { std::ffi::CStr::from_ptr(name.release.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// `6.18.44-fc` → (6, 18).
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Mounts a tmpfs of `mib` MiB, private to this user (0700), on `dir`.
/// Blocking (one syscall).
pub(super) fn mount_tmpfs(dir: &Path, mib: u64) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: getuid and getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let options = CString::new(format!("size={mib}m,mode=0700,uid={uid},gid={gid}"))?;
    // SAFETY: NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            c"fido-tmpdir".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether this process may mount a tmpfs (tried once on a folder of its
/// own, then remembered): what decides whether a `workspace-write`
/// sandbox prepared here gets a size-limited `TMPDIR`. Blocking.
pub fn tmpfs_mountable() -> bool {
    static MOUNTABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MOUNTABLE.get_or_init(|| {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!(
            "fido-{}-mount-check-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
            return false;
        }
        let mounted = mount_tmpfs(&dir, 1).is_ok();
        if mounted {
            unmount(&dir);
        }
        let _ = std::fs::remove_dir(&dir);
        mounted
    })
}

/// Detaches whatever is mounted on `dir` (nothing: `EINVAL`, ignored).
pub(super) fn unmount(dir: &Path) {
    let Ok(target) = CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe {
        libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW);
    }
}

/// How the session's `TMPDIR` is kept to its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TmpdirLimit {
    /// A tmpfs of this many MiB.
    Tmpfs { mib: u64 },
    /// A plain folder; why.
    None { reason: String },
}

impl std::fmt::Display for TmpdirLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TmpdirLimit::Tmpfs { mib } => write!(f, "at most {mib} MiB (a tmpfs of its own)"),
            TmpdirLimit::None { reason } => write!(f, "not limited ({reason})"),
        }
    }
}

/// The process limit of a command, for the report.
pub fn describe_process_limit(max_processes: u32) -> String {
    match process_limit_support() {
        Ok(()) => {
            format!(
                "at most {max_processes} processes and threads (pid_max of its PID namespace; up to {RESERVED_PIDS} more until its PIDs first wrap)"
            )
        }
        Err(reason) => format!("not limited ({reason})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_read_as_major_and_minor() {
        assert_eq!(parse_release("6.18.44-fc-v1272"), Some((6, 18)));
        assert_eq!(parse_release("6.14"), Some((6, 14)));
        assert_eq!(parse_release("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_release("garbage"), None);
        assert!((6, 9) < PID_MAX_PER_NAMESPACE && (7, 0) > PID_MAX_PER_NAMESPACE);
    }

    #[test]
    fn pid_max_leaves_room_for_init_and_the_first_rounds_pids() {
        assert_eq!(pid_max_bytes(4096), b"4398\n");
        assert_eq!(pid_max_bytes(299), b"601\n");
    }
}
