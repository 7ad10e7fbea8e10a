//! The sandbox of the main agent's commands as the configuration sets it
//! (`sandbox_mode`, `network`, `writable_roots`, `command_max_processes`,
//! `command_tmpdir_mib`): the sandbox's own settings type, which `config`
//! fills and the composition root turns into a
//! [`CommandPolicy`](super::CommandPolicy) with the session's workspace and
//! credential paths (`src/runtime/policy.rs`). A subagent's sandbox is
//! `delegate`'s (`src/subagent/limits.rs`).

use std::path::PathBuf;

use super::limits::CommandLimits;
use crate::protocol::{NetworkAccess, SandboxMode};

/// What the main agent's commands may do; [`Default`] holds the
/// configuration's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// `sandbox_mode`.
    pub mode: SandboxMode,
    /// `network`: what the commands may reach.
    pub network: NetworkAccess,
    /// Canonical extra folders commands may write.
    pub writable_roots: Vec<PathBuf>,
    /// What one sandboxed command may use.
    pub limits: CommandLimits,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            mode: SandboxMode::DEFAULT,
            network: NetworkAccess::Off,
            writable_roots: Vec::new(),
            limits: CommandLimits::default(),
        }
    }
}
