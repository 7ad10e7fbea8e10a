//! The user's terminal and device nodes: a command leads a session of its
//! own with no controlling terminal, makes no character or block device
//! (a copy of `/dev/tty` in the workspace would reach the terminal), and
//! cannot type into a terminal or drive the console by `ioctl`.

use std::ffi::CString;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::super::probe::{Probe, RefusedBy};
use super::super::targets::ProbeTargets;

const CHAR_NODE: &str = "workspace/tty-copy";
const BLOCK_NODE: &str = "workspace/disk-copy";

/// The folder the nodes would be made in: the workspace of a command.
fn workspace(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir.join("workspace"))
}

pub(in super::super) const OWN_SESSION: Probe = Probe::new("open-terminal", open_terminal)
    .refused_by(RefusedBy::Always("own session"))
    .with_refusal_errno("ENXIO");

pub(in super::super) const MAKE_CHAR_DEVICE: Probe = Probe::new("make-char-device", |t| {
    // 5,0 is /dev/tty: the terminal of whoever opens the copy.
    make_node(t, CHAR_NODE, libc::S_IFCHR, 5, 0)
})
.with_setup(workspace)
.refused_by(RefusedBy::SeccompOnEperm)
.with_side_effect(|f| f.exists(CHAR_NODE));

pub(in super::super) const MAKE_BLOCK_DEVICE: Probe = Probe::new("make-block-device", |t| {
    // 8,0 is the first SCSI disk: raw access below every file permission.
    make_node(t, BLOCK_NODE, libc::S_IFBLK, 8, 0)
})
.with_setup(workspace)
.refused_by(RefusedBy::SeccompOnEperm)
.with_side_effect(|f| f.exists(BLOCK_NODE));

pub(in super::super) const TYPE_INTO_TERMINAL: Probe =
    Probe::new("type-into-terminal", |_| terminal_ioctl(libc::TIOCSTI))
        .refused_by(RefusedBy::Always("seccomp"));

pub(in super::super) const DRIVE_CONSOLE: Probe =
    Probe::new("drive-console", |_| terminal_ioctl(libc::TIOCLINUX))
        .refused_by(RefusedBy::Always("seccomp"));

/// Got through when the child shares the parent's session, or when it
/// can open a controlling terminal (`/dev/tty`); with a session of its
/// own and no terminal, the open fails with ENXIO.
fn open_terminal(t: &ProbeTargets) -> io::Result<()> {
    // SAFETY: getsid has no memory arguments.
    let (own, parents) = unsafe { (libc::getsid(0), libc::getsid(t.parent.as_raw())) };
    if own == parents {
        return Ok(());
    }
    // Read-only: Landlock lets every sandbox read `/dev`, so what answers
    // is the terminal layer (ENXIO: no controlling terminal).
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/tty")
        .map(drop)
}

fn make_node(
    t: &ProbeTargets,
    name: &str,
    kind: libc::mode_t,
    major: u32,
    minor: u32,
) -> io::Result<()> {
    let path = CString::new(t.dir.join(name).as_os_str().as_bytes())?;
    // SAFETY: a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mknod(path.as_ptr(), kind | 0o600, libc::makedev(major, minor)) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The terminal `ioctl` `request` on `/dev/null`: a kernel that lets the
/// call through answers ENOTTY (not a terminal), which counts as got
/// through; only the filter's EPERM is a refusal.
fn terminal_ioctl(request: libc::c_ulong) -> io::Result<()> {
    let null = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let byte: libc::c_char = b'y' as libc::c_char;
    // SAFETY: both requests read at most one byte at the pointer given.
    let rc = unsafe { libc::ioctl(null.as_raw_fd(), request, &byte) };
    let err = io::Error::last_os_error();
    match (rc, err.raw_os_error()) {
        (0, _) => Ok(()),
        (_, Some(libc::ENOTTY | libc::EINVAL)) => Ok(()),
        _ => Err(err),
    }
}
