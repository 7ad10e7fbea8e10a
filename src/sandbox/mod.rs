//! Process isolation: process groups now, the subagent sandbox (Landlock,
//! no_new_privs, parent-death signal, rlimits) as it lands.
//!
//! [`process`] is the one module that spawns process groups and signals
//! them; nothing else in the crate calls `kill`/`killpg`.

pub mod process;

pub use process::ProcessGroup;
