//! The names of the tools that approvals (a request's tool when no call
//! is in scope) and front ends speak of. Policy decides from a tool's
//! [`super::Capability`], never from these. The tools take their names
//! from here, so no tool's module is above the approvals it asks.

pub const BASH_EXEC: &str = "bash_exec";
pub const BROWSE_URL: &str = "browse_url";
pub const DELEGATE: &str = "delegate";
