//! Atomic file replacement, the one way Fido rewrites a file: a temp file
//! in the same directory, fsync, rename over the target, fsync of the
//! directory. A crash at any instant leaves the old or the new content.

use std::fs::{self, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

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
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return 0;
    };
    let prefix = temp_prefix(&name.to_string_lossy());
    let Ok(entries) = fs::read_dir(parent) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_file()))
        .filter(|entry| fs::remove_file(entry.path()).is_ok())
        .count()
}

/// Replaces `path` with `bytes` atomically: a temp file in the same
/// directory, synced, then renamed over it. `mode` sets the permission
/// bits; `None` keeps those of an existing file (else the default).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<()> {
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
    let temp = parent.join(format!(
        "{}{}-{:08x}",
        temp_prefix(&name.to_string_lossy()),
        std::process::id(),
        fastrand::u32(..)
    ));
    let written = (|| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        if let Some(mode) = mode {
            options.mode(mode);
        }
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        // The mode is set at creation; a mode change follows only when the
        // umask took bits away, so a process whose seccomp filter refuses
        // mode changes (a write subagent) still writes with the usual
        // modes.
        if let Some(mode) = mode
            && file.metadata()?.permissions().mode() & 0o7777 != mode & 0o7777
        {
            file.set_permissions(Permissions::from_mode(mode))?;
        }
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    } else if let Ok(dir) = fs::File::open(parent) {
        // Makes the rename durable; a failure here loses nothing visible.
        let _ = dir.sync_all();
    }
    written
}
