//! Process isolation: process groups, and the sandbox a subagent child
//! enters before it reads its fork.
//!
//! [`process`] is the one module that spawns process groups and signals
//! them; nothing else in the crate calls `kill`/`killpg` (the probe of
//! `fido sandbox check` sends one signal on purpose, to prove it is
//! refused). [`child`] confines the calling process: `no_new_privs`,
//! parent-death signal, rlimits and the read-only Landlock ruleset of
//! `ruleset`, failing closed in [`SandboxRequirement::Required`]. [`policy`] holds
//! the mode, the report and the error; [`check`] the forbidden operations
//! `fido sandbox check` tries in real sandboxed children, and its report.

pub mod caps;
pub mod check;
pub mod child;
pub mod command;
pub mod env;
pub mod git_wall;
pub mod limits;
pub mod netns;
pub mod pidns;
pub mod policy;
pub mod process;
pub mod protect;
mod ruleset;
pub mod seccomp;
pub mod sweep;

pub use child::enter_child_sandbox;
pub use command::{CommandPolicy, CommandSandbox, PrivateDir, credential_paths};
pub use env::EnvPolicy;
pub use policy::{Enforcement, SandboxError, SandboxReport, SandboxRequirement};
pub use process::ProcessGroup;
