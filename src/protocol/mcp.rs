//! MCP tools as they cross the subagent boundary: the fork names each one
//! (so the child builds the same catalog byte for byte), and the child's
//! calls of them go to the parent, which holds the server connections.

use serde::{Deserialize, Serialize};

use super::ToolSpec;

/// An MCP tool of the session's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpToolSpec {
    /// Exactly as advertised (`mcp__SERVER__TOOL`).
    pub spec: ToolSpec,
    /// The configured server's name.
    pub server: String,
    /// The server is `read_only = true`: subagents may call its tools.
    pub read_only: bool,
}
