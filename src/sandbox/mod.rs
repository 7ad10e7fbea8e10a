//! Process isolation: the sandbox a command runs in and the one a
//! subagent child enters before it reads its fork. Starting, signalling
//! and reaping a child is `crate::process`'s.
//!
//! [`child`] confines the calling process: `no_new_privs`,
//! parent-death signal, rlimits and the read-only Landlock ruleset of
//! `ruleset`, failing closed in [`SandboxRequirement::Required`]. [`policy`] holds
//! the mode, the report and the error. `fido sandbox check`'s diagnostic,
//! which tries the forbidden operations in real sandboxed children, is a
//! module of its own above this one (`crate::sandbox_check`): the core
//! imports no diagnostic.

pub mod caps;
pub mod child;
pub mod command;
pub mod git_wall;
pub mod gitlinks;
pub mod limits;
pub mod nested_clones;
pub mod netns;
pub mod new_repository;
pub mod pidns;
pub mod policy;
pub mod protect;
// The Landlock ABIs and the kernel's own are read by `fido sandbox check`
// (`crate::sandbox_check`) too, to say what this kernel enforces.
pub(crate) mod ruleset;
pub mod seccomp;
mod settings;
mod slot;
pub mod subagent_ns;

pub use child::enter_child_sandbox;
pub use command::{
    CommandConfinement, CommandPolicy, CommandSandbox, PrivateDir, credential_paths,
};
pub use policy::{Enforcement, SandboxError, SandboxReport, SandboxRequirement};
pub use settings::SandboxSettings;
pub use slot::SandboxSlot;
