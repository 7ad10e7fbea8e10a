//! Forbidden file-system operations in the fixture directory (the subagent
//! probe's workspace, outside a command probe's), and reads of what no
//! sandbox may read.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::super::probe::{Probe, RefusedBy};
use super::super::targets::{
    CREATED, ESCAPED_CONTENT, ORIGINAL_CONTENT, READ_ME, SECRET_DIR, outside_file,
};
use super::needs;
use crate::sandbox::ruleset::MIN_READ_ONLY_ABI;

const WRITE_ME: &str = "write-me.txt";
const TRUNCATE_ME: &str = "truncate-me.txt";
const UNLINK_ME: &str = "unlink-me.txt";
const RENAME_FROM: &str = "rename-from.txt";
const RENAME_TO: &str = "rename-to.txt";
const NEW_DIR: &str = "new-dir";
const LINK_NAME: &str = "symlink";
const HARDLINK_NAME: &str = "hardlink";
const CHMOD_ME: &str = "chmod-me.txt";
/// The mode of [`CHMOD_ME`] before the probes, and what the probe tries.
const ORIGINAL_MODE: u32 = 0o600;
const ESCAPED_MODE: u32 = 0o777;

/// Writes `name` in the fixture directory with the original content.
fn original(dir: &Path, name: &str) -> io::Result<()> {
    std::fs::write(dir.join(name), ORIGINAL_CONTENT)
}

pub(in super::super) const WRITE_EXISTING: Probe = Probe::new("write-existing", |t| {
    let mut file = OpenOptions::new().write(true).open(t.dir.join(WRITE_ME))?;
    file.write_all(ESCAPED_CONTENT)
})
.with_setup(|dir| original(dir, WRITE_ME))
.with_side_effect(|f| f.changed(WRITE_ME));

pub(in super::super) const CREATE: Probe = Probe::new("create", |t| {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(t.dir.join(CREATED))?;
    file.write_all(ESCAPED_CONTENT)
})
.with_side_effect(|f| f.exists(CREATED));

pub(in super::super) const UNLINK: Probe =
    Probe::new("unlink", |t| std::fs::remove_file(t.dir.join(UNLINK_ME)))
        .with_setup(|dir| original(dir, UNLINK_ME))
        .with_side_effect(|f| !f.exists(UNLINK_ME));

pub(in super::super) const RENAME: Probe = Probe::new("rename", |t| {
    std::fs::rename(t.dir.join(RENAME_FROM), t.dir.join(RENAME_TO))
})
.with_setup(|dir| original(dir, RENAME_FROM))
.with_side_effect(|f| f.exists(RENAME_TO) || !f.exists(RENAME_FROM));

pub(in super::super) const TRUNCATE: Probe = Probe::new("truncate", |t| {
    nix::unistd::truncate(&t.dir.join(TRUNCATE_ME), 0).map_err(io::Error::from)
})
.with_setup(|dir| original(dir, TRUNCATE_ME))
.with_unsupported(|report| {
    let abi = report.landlock_abi.unwrap_or(0);
    needs(
        report,
        abi >= MIN_READ_ONLY_ABI,
        "truncate rules",
        MIN_READ_ONLY_ABI,
    )
})
.with_side_effect(|f| f.changed(TRUNCATE_ME));

pub(in super::super) const MKDIR: Probe =
    Probe::new("mkdir", |t| std::fs::create_dir(t.dir.join(NEW_DIR)))
        .with_side_effect(|f| f.exists(NEW_DIR));

pub(in super::super) const SYMLINK: Probe = Probe::new("symlink", |t| {
    std::os::unix::fs::symlink(t.dir.join(READ_ME), t.dir.join(LINK_NAME))
})
.with_side_effect(|f| f.exists(LINK_NAME));

pub(in super::super) const HARDLINK: Probe = Probe::new("hardlink", |t| {
    std::fs::hard_link(t.dir.join(READ_ME), t.dir.join(HARDLINK_NAME))
})
.with_side_effect(|f| f.exists(HARDLINK_NAME));

pub(in super::super) const CHMOD: Probe = Probe::new("chmod", |t| {
    std::fs::set_permissions(
        t.dir.join(CHMOD_ME),
        std::fs::Permissions::from_mode(ESCAPED_MODE),
    )
})
.with_setup(|dir| {
    original(dir, CHMOD_ME)?;
    std::fs::set_permissions(
        dir.join(CHMOD_ME),
        std::fs::Permissions::from_mode(ORIGINAL_MODE),
    )
})
.refused_by(RefusedBy::SeccompOnEperm)
.with_side_effect(|f| {
    std::fs::metadata(f.dir().join(CHMOD_ME))
        .map_or(true, |m| m.permissions().mode() & 0o7777 != ORIGINAL_MODE)
});

/// The stand-in credential, in the folder the ruleset denies.
const SECRET_KEY: &str = "key.txt";

pub(in super::super) const READ_CREDENTIALS: Probe = Probe::new("read-credentials", |t| {
    std::fs::read(t.dir.join(SECRET_DIR).join(SECRET_KEY)).map(drop)
})
.with_setup(|dir| original(&dir.join(SECRET_DIR), SECRET_KEY));

pub(in super::super) const READ_OUTSIDE_WORKSPACE: Probe =
    Probe::new("read-outside-workspace", |t| {
        std::fs::read(outside_file(&t.dir)).map(drop)
    })
    .with_setup(|dir| std::fs::write(outside_file(dir), ORIGINAL_CONTENT));
