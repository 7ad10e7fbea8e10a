//! The names of the tools that policy (the guard, the approvals) speaks
//! of. The tools take their names from here, so policy needs no tool's
//! module and no tool's module is above the policy it obeys.

pub const BASH_EXEC: &str = "bash_exec";
pub const BROWSE_URL: &str = "browse_url";
pub const DELEGATE: &str = "delegate";
