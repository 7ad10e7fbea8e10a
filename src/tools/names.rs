//! The names of the tools that policy (the guard, the approvals) speaks
//! of. The tools take their names from here, so policy needs no tool's
//! module and no tool's module is above the policy it obeys.

pub const BASH_EXEC: &str = "bash_exec";
pub const BROWSE_URL: &str = "browse_url";
pub const DELEGATE: &str = "delegate";
// The file tools a write subagent may run on its worktree (the guard
// lists them).
pub const PATCH: &str = "patch";
pub const MKDIR: &str = "mkdir";
pub const RM: &str = "rm";
pub const RMDIR: &str = "rmdir";
