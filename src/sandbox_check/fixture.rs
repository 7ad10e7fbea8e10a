//! The parent's side of the probes: a private directory with what they aim
//! at and listeners they try to reach, as the probes look at it for their
//! effects. Making it with every probe's part, and the look for their
//! effects, are the table's ([`super::prepare`]).

use std::io;
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::escape::{escape_marker, kill_escaped};
use super::targets::{
    ORIGINAL_CONTENT, ProbeRole, ProbeTargets, denied_paths, outside_file, scratch_dir,
};
use super::worktree::WorktreeFixture;

/// The parent's side: files and listeners the probes aim at. Dropping it
/// removes the directory.
#[derive(Debug)]
pub struct ProbeFixture {
    pub(super) dir: PathBuf,
    pub(super) tcp: TcpListener,
    pub(super) unix: UnixListener,
    pub(super) abstract_name: String,
    pub(super) pathname: Option<UnixListener>,
    /// The main checkout and its worktree, for a write subagent.
    pub(super) worktree: Option<WorktreeFixture>,
}

impl ProbeFixture {
    /// The write subagent's sandbox roots, where this fixture has a
    /// worktree: its workspace, and its git environment
    /// ([`crate::changes::WriteRoots::git_env`]).
    pub fn write_roots(&self) -> Option<&crate::changes::WriteRoots> {
        self.worktree.as_ref().map(|worktree| &worktree.roots)
    }

    /// The fixture directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the child needs to know, with `parent` as the process it must
    /// not signal, in the sandbox of `role`.
    pub fn targets(&self, parent: Pid, role: ProbeRole) -> io::Result<ProbeTargets> {
        Ok(ProbeTargets {
            dir: self.dir.clone(),
            tcp_port: self.tcp.local_addr()?.port(),
            abstract_name: self.abstract_name.clone(),
            parent,
            deny: denied_paths(&self.dir),
            role,
            write_roots: self
                .write_roots()
                .map(|roots| roots.write.clone())
                .unwrap_or_default(),
            read_roots: self
                .write_roots()
                .map(|roots| roots.read.clone())
                .unwrap_or_default(),
            proxy_port: None,
        })
    }

    /// Whether the fixture file `name` no longer holds [`ORIGINAL_CONTENT`].
    pub(super) fn changed(&self, name: &str) -> bool {
        std::fs::read(self.dir.join(name)).ok().as_deref() != Some(ORIGINAL_CONTENT)
    }

    /// Whether anything (a link included) is at the fixture path `name`.
    pub(super) fn exists(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.dir.join(name)).is_ok()
    }
}

impl Drop for ProbeFixture {
    fn drop(&mut self) {
        // A probe child that died before its sweep leaves nothing either.
        kill_escaped(&escape_marker(&self.dir));
        let _ = std::fs::remove_dir_all(scratch_dir(&self.dir));
        let _ = std::fs::remove_file(outside_file(&self.dir));
        if let Err(err) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %err, "cannot remove the probe directory");
        }
    }
}
