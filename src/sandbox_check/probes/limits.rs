//! A command's limits (`sandbox::limits`): more processes than its PID
//! namespace's `pid_max` allows, more bytes than its `TMPDIR` holds. The
//! probe sandbox is prepared with small limits ([`PROBE_LIMITS`]) so that
//! running into them costs several hundred `sleep`s and one MiB.

use std::io::{self, ErrorKind, Write};
use std::path::PathBuf;

use super::super::probe::{Probe, RefusedBy};
use crate::sandbox::limits::CommandLimits;

/// The limits of the probes' command sandboxes: the smallest process limit
/// the kernel takes, and a `TMPDIR` of one MiB.
pub const PROBE_LIMITS: CommandLimits = CommandLimits {
    max_processes: 299,
    tmpdir_mib: 1,
};

/// More than a fresh namespace holds: the limit, the PIDs of its first
/// round (`sandbox::limits::RESERVED_PIDS`), and some.
pub(super) const PAST_THE_LIMIT: usize =
    PROBE_LIMITS.max_processes as usize + crate::sandbox::limits::RESERVED_PIDS as usize + 64;

pub(in super::super) const EXCEED_PROCESS_LIMIT: Probe = Probe::new("exceed-process-limit", |_| {
    super::sleepers::start_sleepers(PAST_THE_LIMIT)
})
.with_unsupported(|_| {
    crate::sandbox::limits::process_limit_support()
        .err()
        .map(|reason| reason.to_string())
})
.refused_by(RefusedBy::Always("pid_max of its PID namespace"))
.with_refusal_errno("EAGAIN");

pub(in super::super) const FILL_TMPDIR: Probe = Probe::new("fill-tmpdir", |_| fill_tmpdir())
    .refused_by(RefusedBy::Always("tmpfs size"))
    .with_refusal_errno("ENOSPC");

fn tmpdir() -> io::Result<PathBuf> {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .ok_or_else(|| io::Error::new(ErrorKind::NotFound, "no TMPDIR"))
}

/// Writes twice the probe's `TMPDIR` size; removes what it wrote.
fn fill_tmpdir() -> io::Result<()> {
    let path = tmpdir()?.join("fido-probe-fill");
    let chunk = vec![b'x'; 64 * 1024];
    let result = (|| {
        let mut file = std::fs::File::create(&path)?;
        for _ in 0..(2 * PROBE_LIMITS.tmpdir_mib * 16) {
            file.write_all(&chunk)?;
        }
        file.sync_all()
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// Whether a `workspace-write` command is probed for its `TMPDIR` size:
/// where it has a tmpfs of its own. The probe child sees its `TMPDIR`;
/// the parent, which prepared that sandbox, whether it may mount one (a
/// sandboxed child never may), so both plan the same.
pub fn tmpdir_limit_probed() -> bool {
    tmpdir_is_own_tmpfs() || crate::sandbox::limits::tmpfs_mountable()
}

/// Whether this process's `TMPDIR` is a tmpfs of its own (mounted on
/// the folder itself, not a folder in a tmpfs `/tmp`).
fn tmpdir_is_own_tmpfs() -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = tmpdir() else {
        return false;
    };
    let tmpfs = nix::sys::statfs::statfs(&dir)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    let device = |path: &std::path::Path| std::fs::metadata(path).map(|meta| meta.dev()).ok();
    let mounted = match dir.parent() {
        Some(parent) => device(&dir).is_some() && device(&dir) != device(parent),
        None => false,
    };
    tmpfs && mounted
}
