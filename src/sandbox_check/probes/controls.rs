//! Controls: what a sandbox must still allow, so that a too tight sandbox
//! fails the check as a leaky one does.

use std::io::{self, ErrorKind, Read, Write};
use std::path::Path;

use super::super::probe::Probe;
use super::super::targets::{CREATED, ESCAPED_CONTENT, ORIGINAL_CONTENT, READ_ME};

/// The file the `scratch-write` control writes in the scratch folder.
pub(in super::super) const SCRATCH_FILE: &str = "fido-probe-scratch";

pub(in super::super) const READ_FILE: Probe = Probe::new("read-file", |t| {
    let mut content = Vec::new();
    std::fs::File::open(t.dir.join(READ_ME))?.read_to_end(&mut content)?;
    if content == ORIGINAL_CONTENT {
        Ok(())
    } else {
        Err(io::Error::from(ErrorKind::InvalidData))
    }
});

// `File::create` opens with O_TRUNC, as a shell's `> /dev/null` does.
pub(in super::super) const WRITE_DEV_NULL: Probe = Probe::new("write-dev-null", |_| {
    std::fs::File::create("/dev/null")?.write_all(b"discarded\n")
});

pub(in super::super) const WRITE_WORKSPACE: Probe = Probe::new("write-workspace", |t| {
    std::fs::write(t.workspace().join(CREATED), ESCAPED_CONTENT)
});

pub(in super::super) const SCRATCH_WRITE: Probe =
    Probe::new("scratch-write", |t| scratch_write(&t.scratch()));

pub(in super::super) const WRITE_TMPDIR: Probe = Probe::new("write-tmpdir", |_| {
    let dir = std::env::var_os("TMPDIR")
        .ok_or_else(|| io::Error::new(ErrorKind::NotFound, "no TMPDIR"))?;
    std::fs::write(Path::new(&dir).join("fido-probe"), ESCAPED_CONTENT)
});

/// The `scratch-write` control: a command started as a subagent's shell
/// starts its commands (`CommandSandbox::subagent_shell`) writes a file in
/// its `TMPDIR`; the file is read back.
fn scratch_write(scratch: &Path) -> io::Result<()> {
    let shell = std::sync::Arc::new(crate::sandbox::CommandSandbox::subagent_shell(
        scratch.to_path_buf(),
    ));
    let mut command = tokio::process::Command::new("sh");
    command
        .args(["-c", r#"printf '%s' "$1" > "$TMPDIR/$2""#, "sh"])
        .arg(String::from_utf8_lossy(ESCAPED_CONTENT).as_ref())
        .arg(SCRATCH_FILE)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    shell.apply(&mut command);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The child's reaping needs the runtime's context, not only its poll.
    let _context = runtime.enter();
    let output = runtime.block_on(command.output())?;
    if !output.status.success() {
        return Err(shell_error(&String::from_utf8_lossy(&output.stderr)));
    }
    if std::fs::read(scratch.join(SCRATCH_FILE))? == ESCAPED_CONTENT {
        Ok(())
    } else {
        Err(io::Error::from(ErrorKind::InvalidData))
    }
}

/// The errno behind a shell's message about a failed redirection.
pub(in super::super) fn shell_error(stderr: &str) -> io::Error {
    let known = [
        ("Permission denied", libc::EACCES),
        ("Operation not permitted", libc::EPERM),
        ("File too large", libc::EFBIG),
        ("Read-only file system", libc::EROFS),
    ];
    match known.iter().find(|(text, _)| stderr.contains(text)) {
        Some((_, code)) => io::Error::from_raw_os_error(*code),
        None => io::Error::other(format!("the shell failed: {}", stderr.trim())),
    }
}
