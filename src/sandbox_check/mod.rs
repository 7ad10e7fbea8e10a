//! `fido sandbox check`: proves, in real sandboxed children, what this
//! kernel enforces for subagents and for the main agent's commands.
//!
//! Theory of operation: for each role (the subagent; commands in
//! `read-only` and in `workspace-write`) the parent builds a
//! [`ProbeFixture`] first (a private temporary directory with the files the
//! probes aim at, a loopback TCP listener and UNIX listeners), so that a
//! refusal can only come from the sandbox, never from a missing file or a
//! closed port. It then starts the child ([`spawn`]). A subagent child
//! enters its sandbox itself, in `Required` mode; a command child is
//! confined between fork and exec by the session code of `bash_exec`
//! ([`crate::sandbox::CommandSandbox`]). The child runs its role's probes
//! ([`runner`]) and writes one [`ProbeFrame`] per line. Back in the
//! parent, [`ProbeFixture::verify`] looks for each probe's side effect
//! itself, so a probe that claims "blocked" while the file did change
//! still counts as allowed, and [`report`] judges each role and prints one
//! line per probe, one column per role, and a `containment:` line.
//!
//! A forbidden probe passes only when it failed with EACCES or EPERM (what
//! Landlock and the seccomp filter return) or EFBIG (the `RLIMIT_FSIZE`
//! guard), or with the errno its own refusal gives (the fork bomb EAGAIN,
//! `RLIMIT_NPROC`; the setsid escape ESRCH, the escaped process gone, see
//! [`escape`]); any other error is inconclusive and fails the check, as
//! does a skipped probe.
//!
//! A write subagent has a role of its own: its fixture adds a real git
//! repository standing for the main checkout and a worktree of it made by
//! [`crate::changes::start`] ([`worktree`]); its child enters the sandbox
//! with that worktree's roots, in it, with its git environment, and tries
//! every way out of the worktree. It prints in a section of its own.
//!
//! A command behind the allowlist proxy (`network = "allowlist"`) has a
//! role of its own too: the parent starts a stand-in for the proxy
//! ([`crate::sandbox::netns::stand_in`]) and confines the child with its route, as `bash_exec`
//! would; the child must reach the stand-in through it and nothing else
//! on the network. Its section says which confinement this kernel gives
//! (`sandbox::netns`).
//!
//! The probes are a table ([`table`]): each is one `const` [`probe`] in a
//! file of [`probes`], with its operation, what it prepares in the fixture,
//! the kernels that cannot deny it, what refuses it and the effect the
//! parent looks for; listing its name in the table makes it run.
//!
//! Each concept has one home, and the files import one another without a
//! circle (`tests/suite/layers.rs` checks it): [`targets`] (whose sandbox,
//! where the probes aim, the fixture's layout) imports none of them;
//! [`fixture`] is the parent's state the probes look at; [`probe`] and the
//! [`probes`] read it; the [`table`] lists the probes; [`prepare`] is where
//! the table makes the fixture and looks for the probes' effects.

mod escape;
mod fixture;
mod kernel;
mod prepare;
mod probe;
mod probes;
mod report;
mod runner;
mod spawn;
mod table;
mod targets;
mod verdict;
mod worktree;

pub use escape::escape_marker;
pub use fixture::ProbeFixture;
pub use kernel::{fork_bomb_note, subagent_pid_max};
pub use report::{Summary, report_text};
pub use runner::{run_child, run_probes};
pub use spawn::{ProbeError, probe_role};
pub use table::{
    ALLOWLIST_CONTROLS, ALLOWLIST_PROBES, CHMOD_NOTE, CONTROL_PROBES, FORBIDDEN_PROBES,
    SUBAGENT_CONTROLS, SUBAGENT_PROBES, WORKSPACE_PROBES, WRITE_SUBAGENT_CONTROLS,
    WRITE_SUBAGENT_PROBES, mechanism,
};
pub use targets::{ORIGINAL_CONTENT, ProbeRole, ProbeTargets, denied_paths};
pub use verdict::{Expect, Outcome, ProbeFrame, ProbeResult, Verdict};

#[cfg(test)]
mod tests;
