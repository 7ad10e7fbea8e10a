//! Process isolation: the sandbox a command runs in and the one a
//! subagent child enters before it reads its fork. Starting, signalling
//! and reaping a child is `crate::process`'s.
//!
//! [`child`] confines the calling process: `no_new_privs`,
//! parent-death signal, rlimits and the read-only Landlock ruleset of
//! `ruleset`, failing closed in [`SandboxRequirement::Required`]. [`policy`] holds
//! the mode, the report and the error; [`check`] the forbidden operations
//! `fido sandbox check` tries in real sandboxed children, and its report.

pub mod caps;
pub mod check;
pub mod child;
pub mod command;
pub mod git_wall;
pub mod limits;
pub mod netns;
pub mod pidns;
pub mod policy;
pub mod protect;
mod ruleset;
pub mod seccomp;
mod slot;

pub use child::enter_child_sandbox;
pub use command::{CommandPolicy, CommandSandbox, PrivateDir, credential_paths};
pub use policy::{Enforcement, SandboxError, SandboxReport, SandboxRequirement};
pub use slot::SandboxSlot;
