//! What the probe child is told and what it finds: whose sandbox it is in,
//! where the probes aim (on its command line), and the fixture's layout,
//! the names and contents the parent prepares and the probes aim at.
//! Every other part of the check imports it; it imports none of them.

use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use crate::protocol::SandboxMode;

/// What every fixture file holds before the probes.
pub const ORIGINAL_CONTENT: &[u8] = b"# fido sandbox probe: original content\n";
/// What a probe that got through writes.
pub(super) const ESCAPED_CONTENT: &[u8] = b"escaped\n";
/// The file every sandbox must still let a process read.
pub(super) const READ_ME: &str = "read-me.txt";
/// What `create` (in the fixture) and `write-workspace` (in the workspace)
/// write.
pub(super) const CREATED: &str = "created.txt";
/// The stand-in credential folder, denied as `~/.ssh` is.
pub(super) const SECRET_DIR: &str = "secret";
pub(super) const WORKSPACE_DIR: &str = "workspace";
pub(super) const UNIX_SOCKET: &str = "listener.sock";
/// Whose sandbox the probe child is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    /// A subagent's: the child enters it itself.
    Subagent,
    /// The main agent's commands in this mode: the parent confined the
    /// child between fork and exec, as `bash_exec` does.
    Command(SandboxMode),
    /// A write subagent's: the child enters it itself, with the roots of
    /// a real worktree, in it, with its git environment.
    WriteSubagent,
    /// A `workspace-write` command behind the allowlist proxy
    /// (`network = "allowlist"`): the parent confined the child with a
    /// stand-in proxy's route.
    Allowlist,
}

impl ProbeRole {
    /// The `--probe-as` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeRole::Subagent => "subagent",
            ProbeRole::WriteSubagent => "write-subagent",
            ProbeRole::Allowlist => "allowlist",
            ProbeRole::Command(mode) => mode.as_str(),
        }
    }

    pub fn parse(value: &str) -> Option<ProbeRole> {
        match value {
            "subagent" => Some(ProbeRole::Subagent),
            "write-subagent" => Some(ProbeRole::WriteSubagent),
            "allowlist" => Some(ProbeRole::Allowlist),
            other => SandboxMode::parse(other).map(ProbeRole::Command),
        }
    }
}

/// Where the probes aim, as the child gets it on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTargets {
    /// The fixture directory.
    pub dir: PathBuf,
    /// A loopback port with a listener.
    pub tcp_port: u16,
    /// The name of an abstract UNIX socket with a listener.
    pub abstract_name: String,
    /// The parent, whom the child must not be able to signal.
    pub parent: Pid,
    /// Paths the child's ruleset denies (the fixture's stand-in credential).
    pub deny: Vec<PathBuf>,
    /// Whose sandbox the child is in.
    pub role: ProbeRole,
    /// A write subagent's worktree, which its sandbox lets it write
    /// (empty for the other roles).
    pub write_roots: Vec<PathBuf>,
    /// What a write subagent reads besides its workspace.
    pub read_roots: Vec<PathBuf>,
    /// The allowlist proxy's port (its stand-in's), for a command behind
    /// it.
    pub proxy_port: Option<u16>,
}

impl ProbeTargets {
    /// The workspace of a command probe child (writable in
    /// `workspace-write`).
    pub fn workspace(&self) -> PathBuf {
        self.dir.join(WORKSPACE_DIR)
    }

    pub(super) fn unix_socket(&self) -> PathBuf {
        self.dir.join(UNIX_SOCKET)
    }

    /// The scratch folder of a subagent probe child (its commands' `TMPDIR`).
    pub fn scratch(&self) -> PathBuf {
        scratch_dir(&self.dir)
    }
}

/// A file beside the fixture directory, outside the subagent probe's
/// workspace (which is the fixture directory).
pub(super) fn outside_file(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-outside.txt");
    PathBuf::from(name)
}

/// The scratch folder beside the fixture directory (outside the
/// workspace, as a subagent's is).
pub(super) fn scratch_dir(dir: &Path) -> PathBuf {
    let mut name = dir.as_os_str().to_owned();
    name.push("-scratch");
    PathBuf::from(name)
}

/// The fixture's stand-in for a credential folder, which the probe
/// child's ruleset denies as it denies `~/.ssh`.
pub fn denied_paths(dir: &Path) -> Vec<PathBuf> {
    let secret = dir.join(SECRET_DIR);
    vec![std::fs::canonicalize(&secret).unwrap_or(secret)]
}
