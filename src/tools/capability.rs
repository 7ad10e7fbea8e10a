//! What a call of a tool may do to the world, declared by the tool next to
//! its name: what it reads, which files it writes, whether it runs
//! commands, reaches the network, needs the person, changes the plan or
//! starts a subagent, and whether Fido confines it at all. The invocation
//! guard ([`super::guard::check`]), the agent loop and the ACP front end
//! decide from this, never from a tool's name.

use std::collections::HashMap;
use std::sync::Arc;

/// What a tool reads of the workspace (ACP shows a read and a search
/// apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// The file the call names.
    File,
    /// A tree of files: a listing or a search.
    Tree,
}

/// Which files a tool changes; always inside the workspace it runs in
/// (for a write subagent, its worktree), whose paths are confined
/// ([`crate::workspace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Creates or edits files and folders.
    Files,
    /// Removes files or folders.
    Removes,
}

/// A tool's declared effects. Built as `Capability { ..Capability::NONE }`
/// naming only what the tool does, so a new effect is off for every tool
/// until it says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub reads: Option<Reads>,
    pub writes: Option<Writes>,
    /// Runs commands the model wrote, in the session's command sandbox
    /// (what the commands may touch is the sandbox's to confine).
    pub executes: bool,
    /// Reaches the network through the session's host rules.
    pub network: bool,
    /// Needs the person at the keyboard.
    pub needs_person: bool,
    /// Changes the workspace plan (the parent's responsibility).
    pub changes_plan: bool,
    /// Starts a subagent.
    pub starts_subagent: bool,
    /// Fido confines it: its paths to the workspace, its commands to the
    /// sandbox. `false` for an MCP server's tool, which runs in the
    /// server's process, outside every sandbox.
    pub confined: bool,
}

impl Capability {
    /// Does nothing; every declaration starts from here.
    pub const NONE: Capability = Capability {
        reads: None,
        writes: None,
        executes: false,
        network: false,
        needs_person: false,
        changes_plan: false,
        starts_subagent: false,
        confined: true,
    };

    /// An MCP server's tool its trusted configuration declares read-only:
    /// it changes nothing, as far as Fido is told, but Fido confines
    /// nothing of it either.
    pub const OUTSIDE_READ_ONLY: Capability = Capability {
        confined: false,
        ..Capability::NONE
    };

    /// An MCP server's tool that may change anything its server reaches,
    /// outside every sandbox.
    pub const OUTSIDE: Capability = Capability {
        writes: Some(Writes::Files),
        executes: true,
        network: true,
        confined: false,
        ..Capability::NONE
    };

    /// Reads and fetches at most: no file, command, person, plan or
    /// subagent is touched.
    pub fn only_reads(&self) -> bool {
        self.writes.is_none()
            && !self.executes
            && !self.needs_person
            && !self.changes_plan
            && !self.starts_subagent
    }
}

/// Each tool's capability by name, as a session's catalog declares them:
/// what a front end that sees a call only by its name (ACP) reads of it.
#[derive(Debug, Clone, Default)]
pub struct Capabilities(Arc<HashMap<String, Capability>>);

impl Capabilities {
    pub fn new(tools: impl IntoIterator<Item = (String, Capability)>) -> Capabilities {
        Capabilities(Arc::new(tools.into_iter().collect()))
    }

    /// The capability of the tool `name`; `None` for a name the catalog
    /// does not hold.
    pub fn of(&self, name: &str) -> Option<Capability> {
        self.0.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_servers_tool_is_never_confined_and_only_a_read_only_one_only_reads() {
        for capability in [Capability::OUTSIDE_READ_ONLY, Capability::OUTSIDE] {
            assert!(!capability.confined, "{capability:?}");
        }
        assert!(Capability::OUTSIDE_READ_ONLY.only_reads());
        assert!(!Capability::OUTSIDE.only_reads());
        assert!(Capability::NONE.confined && Capability::NONE.only_reads());
    }
}
