//! Atomic file replacement, the one way Fido rewrites a file: a temp file
//! in the same directory, fsync, rename over the target, fsync of the
//! directory. A crash at any instant leaves the old or the new content.
//!
//! Two forms: by path, for Fido's own state files, and `*_at` for the
//! entry of a directory held open, for the file tools, whose paths a
//! concurrent process may change under them (`workspace::beneath`).

use std::ffi::{OsStr, OsString};
use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::workspace::beneath;

/// The name every temp file of the file `name` starts with: hidden, and for
/// `.fido-*` state files still a `.fido-*` name, so a temp file never shows
/// up in list_files or ripgrep.
fn temp_prefix(name: &str) -> String {
    let dot = if name.starts_with('.') { "" } else { "." };
    format!("{dot}{name}.tmp-")
}

/// Removes the temp files that writers of `path` killed mid-write left
/// beside it; how many. Only for a file whose every writer holds one lock,
/// called under it: then no temp file of a live writer exists.
pub fn remove_stale_temps(path: &Path) -> usize {
    remove_temps(path, |_| true)
}

/// Removes the temp files beside `path` whose writer (the pid in their
/// name, [`temp_name`]) no longer runs: what a writer killed between its
/// staging and its rename left; how many. A live writer's are kept, so it
/// needs no lock (a pid reused since keeps its leftover, which is only
/// clutter).
pub fn remove_dead_writers_temps(path: &Path) -> usize {
    remove_temps(path, |writer| {
        writer
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
            .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
    })
}

/// Removes the temp files of `path` (regular files named by
/// [`temp_name`]) for which `doomed` holds of the name after the prefix
/// (`PID-RANDOM`); how many.
fn remove_temps(path: &Path, doomed: impl Fn(&str) -> bool) -> usize {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return 0;
    };
    let prefix = temp_prefix(&name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            file.strip_prefix(&prefix).is_some_and(&doomed)
        })
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter(|entry| fs::remove_file(entry.path()).is_ok())
        .count()
}

/// Replaces `path` with `bytes` atomically: a temp file in the same
/// directory, synced, then renamed over it. `mode` sets the permission
/// bits; `None` keeps those of an existing file (else the default).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    stage(path, bytes, mode)?.commit()?;
    if let Some(parent) = path.parent() {
        // Makes the rename durable; a failure here loses nothing visible.
        let _ = sync_dir(parent);
    }
    Ok(())
}

/// New bytes for a file, synced to a temp file beside it and not yet in
/// its place: [`Staged::commit`] renames it over the file, dropping it
/// unused removes it. Several files staged first, then committed, cost
/// one wait for the disk instead of one per file.
#[derive(Debug)]
pub struct Staged {
    spot: Option<Spot>,
}

/// Where a staged temp file is: by path, or by name in a directory held
/// open (then the rename stays in that directory, whatever happens to the
/// path that led there).
#[derive(Debug)]
enum Spot {
    Path {
        temp: PathBuf,
        path: PathBuf,
    },
    At {
        dir: OwnedFd,
        temp: OsString,
        name: OsString,
    },
}

impl Spot {
    fn commit(&self) -> io::Result<()> {
        match self {
            Spot::Path { temp, path } => fs::rename(temp, path),
            Spot::At { dir, temp, name } => beneath::rename_at(dir.as_fd(), temp, name),
        }
    }

    fn remove_temp(&self) {
        let _ = match self {
            Spot::Path { temp, .. } => fs::remove_file(temp),
            Spot::At { dir, temp, .. } => beneath::unlink_at(dir.as_fd(), temp, false),
        };
    }
}

impl Staged {
    /// Puts the new bytes in place (a rename: atomic). Durable once the
    /// folder is synced ([`sync_dir`]).
    pub fn commit(mut self) -> io::Result<()> {
        let Some(spot) = self.spot.take() else {
            return Ok(());
        };
        spot.commit().inspect_err(|_| spot.remove_temp())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(spot) = self.spot.take() {
            spot.remove_temp();
        }
    }
}

/// Writes `bytes` to a synced temp file beside `path` (see [`Staged`]);
/// `mode` as for [`write_atomic`].
pub fn stage(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<Staged> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not a file path", path.display()),
        ));
    };
    let mode = mode.or_else(|| {
        fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777)
    });
    let temp = parent.join(temp_name(name));
    let staged = Staged {
        spot: Some(Spot::Path {
            temp: temp.clone(),
            path: path.to_path_buf(),
        }),
    };
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    if let Some(mode) = mode {
        options.mode(mode);
    }
    fill(options.open(&temp)?, bytes, mode)?;
    Ok(staged)
}

/// A fresh temp file name for the file `name`.
fn temp_name(name: &OsStr) -> OsString {
    format!(
        "{}{}-{:08x}",
        temp_prefix(&name.to_string_lossy()),
        std::process::id(),
        fastrand::u32(..)
    )
    .into()
}

/// Writes and syncs a new temp file.
fn fill(mut file: fs::File, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
    file.write_all(bytes)?;
    // The mode is set at creation; a mode change follows only when the
    // umask took bits away, so a process whose seccomp filter refuses mode
    // changes (a write subagent) still writes with the usual modes.
    if let Some(mode) = mode
        && file.metadata()?.permissions().mode() & 0o7777 != mode & 0o7777
    {
        file.set_permissions(Permissions::from_mode(mode))?;
    }
    file.sync_all()
}

/// [`stage`] for the entry `name` of the directory `dir` held open: the
/// temp file is created in `dir` (`O_EXCL`, no symlink followed) and the
/// commit renames it within `dir`. `mode` is the new file's (the caller
/// read the old one's from its own handle); `None` takes the default.
pub fn stage_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    bytes: &[u8],
    mode: Option<u32>,
) -> io::Result<Staged> {
    let temp = temp_name(name);
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let create_mode = Mode::from_bits_truncate(mode.unwrap_or(0o666));
    let fd = nix::fcntl::openat(dir, temp.as_os_str(), flags, create_mode)?;
    let staged = Staged {
        spot: Some(Spot::At {
            dir: dir.try_clone_to_owned()?,
            temp,
            name: name.to_os_string(),
        }),
    };
    fill(fs::File::from(fd), bytes, mode)?;
    Ok(staged)
}

/// [`write_atomic`] for the entry `name` of the directory `dir` held
/// open ([`stage_at`]), the rename made durable by a sync of `dir`.
pub fn write_atomic_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    bytes: &[u8],
    mode: Option<u32>,
) -> io::Result<()> {
    stage_at(dir, name, bytes, mode)?.commit()?;
    // Makes the rename durable; a failure here loses nothing visible.
    let _ = beneath::sync_dir_at(dir);
    Ok(())
}

/// Syncs the folder `dir`, which makes the renames in it durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
