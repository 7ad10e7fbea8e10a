//! What a probe is: its operation, what it prepares in the fixture, the
//! kernels that cannot deny it, what refuses it and the effect the parent
//! looks for. Each probe is one `const` of [`super::probes`]; the table
//! ([`super::table`]) lists them.

use std::io;
use std::path::Path;

use super::fixture::ProbeFixture;
use super::targets::ProbeTargets;
use crate::sandbox::policy::SandboxReport;

/// One probe: everything about it but its place in a role's plan.
#[derive(Clone, Copy)]
pub struct Probe {
    pub name: &'static str,
    /// The operation, tried inside the sandbox; `Ok` means it got through.
    pub attempt: fn(&ProbeTargets) -> io::Result<()>,
    /// Prepares what the probe aims at in the fixture directory (before
    /// any child starts).
    pub setup: fn(&Path) -> io::Result<()>,
    /// Why this kernel cannot deny it, from the sandbox's report (`None`:
    /// try it). Only forbidden probes are skipped.
    pub unsupported: fn(&SandboxReport) -> Option<String>,
    /// What refused it, for the line, where the child did not say.
    pub refused_by: RefusedBy,
    /// What refused it as the child itself can tell (`None`: `refused_by`
    /// decides); asked only when the operation failed.
    pub seen_by_child: fn(&SandboxReport) -> Option<String>,
    /// An errno besides EACCES, EPERM and EFBIG that proves the refusal.
    pub refusal_errno: Option<&'static str>,
    /// Whether the parent sees the operation's effect (a changed file, an
    /// accepted connection) after the child exited.
    pub side_effect: fn(&ProbeFixture) -> bool,
}

/// What refuses a probe's operation, named on its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedBy {
    /// A Landlock file-system rule.
    Landlock,
    /// The seccomp filter when the errno is EPERM, else Landlock (for
    /// operations both can refuse).
    SeccompOnEperm,
    /// Always the same mechanism, whatever the errno.
    Always(&'static str),
    /// A protected path: the read-only bind mount when the errno is
    /// EROFS or EBUSY (a mount point), else Landlock (its per-entry
    /// fallback, or a sandbox that writes nowhere).
    ProtectedPath,
}

impl RefusedBy {
    pub(super) fn name(self, errno: &str) -> &'static str {
        match self {
            RefusedBy::Landlock => "landlock",
            RefusedBy::SeccompOnEperm if errno == "EPERM" => "seccomp",
            RefusedBy::SeccompOnEperm => "landlock",
            RefusedBy::Always(name) => name,
            RefusedBy::ProtectedPath if errno == "EROFS" || errno == "EBUSY" => {
                "read-only bind mount"
            }
            RefusedBy::ProtectedPath => "landlock",
        }
    }
}

impl Probe {
    /// A probe refused by Landlock, always tried, with nothing to prepare
    /// and no effect the parent can see; the `with_*` methods change that.
    pub const fn new(name: &'static str, attempt: fn(&ProbeTargets) -> io::Result<()>) -> Probe {
        Probe {
            name,
            attempt,
            setup: |_| Ok(()),
            unsupported: |_| None,
            refused_by: RefusedBy::Landlock,
            seen_by_child: |_| None,
            refusal_errno: None,
            side_effect: |_| false,
        }
    }

    pub const fn with_setup(self, setup: fn(&Path) -> io::Result<()>) -> Probe {
        Probe { setup, ..self }
    }

    pub const fn with_unsupported(
        self,
        unsupported: fn(&SandboxReport) -> Option<String>,
    ) -> Probe {
        Probe {
            unsupported,
            ..self
        }
    }

    pub const fn refused_by(self, refused_by: RefusedBy) -> Probe {
        Probe { refused_by, ..self }
    }

    pub const fn with_seen_by_child(self, seen: fn(&SandboxReport) -> Option<String>) -> Probe {
        Probe {
            seen_by_child: seen,
            ..self
        }
    }

    pub const fn with_refusal_errno(self, errno: &'static str) -> Probe {
        Probe {
            refusal_errno: Some(errno),
            ..self
        }
    }

    pub const fn with_side_effect(self, seen: fn(&ProbeFixture) -> bool) -> Probe {
        Probe {
            side_effect: seen,
            ..self
        }
    }
}
