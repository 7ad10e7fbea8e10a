//! The settings of one MCP server, owned here and built by the
//! configuration layer from the `[mcp_servers.NAME]` tables (`config::mcp`
//! parses them; this module only uses them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::process::EnvPolicy;

/// One configured MCP server (stdio transport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The table's name: `mcp__NAME__TOOL` in the catalog.
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    /// Added to the scrubbed environment the server starts with.
    pub env: BTreeMap<String, String>,
    /// Which of Fido's variables the server gets: the user config's
    /// `env_passthrough`, set for every server once the layers are read.
    pub env_policy: EnvPolicy,
    /// Working directory; relative to the workspace, which is the default.
    pub cwd: Option<PathBuf>,
    /// Its tools only read: subagents may call them, and the main agent
    /// calls them without approval.
    pub read_only: bool,
    /// Longest wait for the handshake and the tool list.
    pub startup_timeout: Duration,
    /// Longest wait for one tool call.
    pub tool_timeout: Duration,
    /// Restarts after a crash before its tools answer "unavailable".
    pub max_restarts: u32,
}

impl McpServerConfig {
    pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
    pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
    pub const DEFAULT_MAX_RESTARTS: u32 = 2;

    /// The working directory, resolved against the workspace.
    pub fn working_dir(&self, workspace: &Path) -> PathBuf {
        match &self.cwd {
            Some(dir) if dir.is_absolute() => dir.clone(),
            Some(dir) => workspace.join(dir),
            None => workspace.to_path_buf(),
        }
    }
}
