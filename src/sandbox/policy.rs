//! What the subagent sandbox must achieve ([`SandboxRequirement`]), what it did
//! achieve ([`SandboxReport`]) and how it fails ([`SandboxError`]).
//!
//! Invariant: in [`SandboxRequirement::Required`] a ruleset the kernel did not
//! fully enforce is an error, never a warning; only
//! [`SandboxRequirement::BestEffort`] turns shortfalls into
//! [`SandboxReport::warnings`].

use std::fmt;

use nix::errno::Errno;
use serde::{Deserialize, Serialize};

/// How strictly the child's sandbox is required (config `sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxRequirement {
    /// Refuse to run unless the kernel fully enforces the read-only
    /// Landlock ruleset. The default on Linux.
    #[default]
    Required,
    /// Run with whatever the kernel enforces; shortfalls become warnings
    /// that the caller must show.
    BestEffort,
}

impl SandboxRequirement {
    /// Parses a config value: `required` or `best_effort`.
    pub fn parse(value: &str) -> Result<SandboxRequirement, SandboxError> {
        match value {
            "required" => Ok(SandboxRequirement::Required),
            "best_effort" => Ok(SandboxRequirement::BestEffort),
            other => Err(SandboxError::UnknownMode {
                value: other.to_owned(),
            }),
        }
    }

    /// The config spelling, as [`SandboxRequirement::parse`] accepts it.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxRequirement::Required => "required",
            SandboxRequirement::BestEffort => "best_effort",
        }
    }
}

impl fmt::Display for SandboxRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`crate::sandbox::enter_child_sandbox`] put in place, for the log,
/// the `subagent` events and `fido sandbox check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// The Landlock ABI the ruleset was built for (the kernel's, capped by
    /// what the `landlock` crate knows); `None` without Landlock.
    pub landlock_abi: Option<i32>,
    /// The kernel enforced every access right the ruleset asked for.
    pub fully_enforced: bool,
    /// TCP bind and connect are denied (Landlock ABI 4 and later).
    pub network_restricted: bool,
    /// Signals and abstract UNIX sockets are scoped to the sandbox
    /// (Landlock ABI 6 and later).
    pub scoped: bool,
    /// `PR_SET_NO_NEW_PRIVS` is set (read back from the kernel).
    pub no_new_privs: bool,
    /// Why this sandbox is weaker than `Required` demands, one sentence
    /// each; always empty after a `Required` success. Show these.
    pub warnings: Vec<String>,
    /// What Landlock cannot deny on this kernel even when fully enforced
    /// (e.g. UDP below ABI 10), one sentence each. Informational: worth a
    /// log line, not a warning on every delegation.
    pub not_covered: Vec<String>,
}

/// Landlock's own verdict on a ruleset, mirrored so errors can carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforcement {
    /// Every requested access right is enforced.
    Full,
    /// Some requested rights are not supported by this kernel.
    Partial,
    /// Nothing is enforced (Landlock missing or disabled).
    None,
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Enforcement::Full => "fully enforced",
            Enforcement::Partial => "only partially enforced",
            Enforcement::None => "not enforced",
        })
    }
}

/// Why the sandbox could not be entered. Every variant means the child must
/// not go on to read the fork.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A config value that is not a mode.
    #[error("unknown sandbox mode {value:?}: expected \"required\" or \"best_effort\"")]
    UnknownMode { value: String },
    /// Landlock and `no_new_privs` apply to the calling thread only (the
    /// kernel here has no ABI 8 `all_threads`), so other threads would stay
    /// unconfined.
    #[error("the sandbox must be entered while the process has a single thread, it has {threads}")]
    MultiThreaded { threads: usize },
    /// `/proc/self/task` could not be read to count threads.
    #[error("cannot count this process's threads")]
    ThreadCount(#[source] std::io::Error),
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    #[error("cannot set no_new_privs")]
    NoNewPrivs(#[source] Errno),
    /// `prctl(PR_SET_PDEATHSIG)` failed.
    #[error("cannot set the parent-death signal")]
    ParentDeathSignal(#[source] Errno),
    /// `prctl(PR_SET_CHILD_SUBREAPER)` failed.
    #[error("cannot make the subagent the reaper of its commands' orphans")]
    Subreaper(#[source] Errno),
    /// The parent died before the parent-death signal was armed.
    #[error("the parent process {expected} is gone (the parent is now {actual})")]
    ParentGone { expected: i32, actual: i32 },
    /// `setrlimit` failed.
    #[error("cannot set {resource}")]
    Rlimit {
        resource: &'static str,
        #[source]
        source: Errno,
    },
    /// The SIGXFSZ disposition could not be changed.
    #[error("cannot ignore SIGXFSZ")]
    SignalDisposition(#[source] Errno),
    /// The kernel has no usable Landlock (not built in or disabled at boot).
    #[error("landlock is not available in this kernel, so the subagent cannot be made read-only")]
    LandlockUnavailable,
    /// Landlock is there but too old to deny every kind of write.
    #[error(
        "landlock ABI {abi} cannot deny truncation; a read-only sandbox needs ABI {required} or later"
    )]
    LandlockTooOld { abi: i32, required: i32 },
    /// A path the ruleset names could not be opened.
    #[error("cannot open {path} for a landlock rule")]
    RulePath {
        path: &'static str,
        #[source]
        source: landlock::PathFdError,
    },
    /// Building or applying the ruleset failed.
    #[error("cannot apply the landlock ruleset")]
    Landlock(#[source] landlock::RulesetError),
    /// The capability sets could not be reduced.
    #[error("cannot drop capabilities")]
    Capabilities(#[source] std::io::Error),
    /// The seccomp filter could not be compiled or installed.
    #[error("cannot set up the seccomp filter: {0}")]
    Seccomp(String),
    /// The session's private temporary directory could not be made.
    #[error("cannot create the commands' temporary directory {path}")]
    TempDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `network = "allowlist"` where nothing can keep the commands to
    /// the proxy: no network namespace and a Landlock without TCP rules.
    #[error(
        "the network allowlist cannot be enforced on this kernel ({reason}; landlock ABI {abi}, TCP rules need {required}): use network = false or network = true"
    )]
    AllowlistUnenforceable {
        reason: String,
        abi: i32,
        required: i32,
    },
    /// `network = "allowlist"` for a sandbox whose commands it cannot
    /// apply to.
    #[error("the network allowlist does not apply to {what}")]
    AllowlistNotApplicable { what: &'static str },
    /// The kernel accepted the ruleset but did not enforce all of it.
    #[error("the landlock ruleset was {enforcement} (ABI {abi:?})")]
    NotEnforced {
        enforcement: Enforcement,
        abi: Option<i32>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_the_two_config_spellings() {
        assert_eq!(
            SandboxRequirement::parse("required").unwrap(),
            SandboxRequirement::Required
        );
        assert_eq!(
            SandboxRequirement::parse("best_effort").unwrap(),
            SandboxRequirement::BestEffort
        );
        for mode in [SandboxRequirement::Required, SandboxRequirement::BestEffort] {
            assert_eq!(SandboxRequirement::parse(mode.as_str()).unwrap(), mode);
            assert_eq!(mode.to_string(), mode.as_str());
        }
        assert_eq!(SandboxRequirement::default(), SandboxRequirement::Required);
    }

    #[test]
    fn parse_rejects_anything_else() {
        for bad in ["", "Required", "best-effort", "off", " required"] {
            let err = SandboxRequirement::parse(bad).unwrap_err();
            assert!(matches!(err, SandboxError::UnknownMode { .. }), "{bad:?}");
            assert!(err.to_string().contains("best_effort"));
        }
    }

    #[test]
    fn mode_serde_matches_parse() {
        let json = serde_json::to_string(&SandboxRequirement::BestEffort).unwrap();
        assert_eq!(json, "\"best_effort\"");
        let back: SandboxRequirement = serde_json::from_str("\"required\"").unwrap();
        assert_eq!(back, SandboxRequirement::Required);
    }

    #[test]
    fn errors_are_lowercase_sentences() {
        let errors = [
            SandboxError::MultiThreaded { threads: 3 },
            SandboxError::ParentGone {
                expected: 10,
                actual: 1,
            },
            SandboxError::LandlockUnavailable,
            SandboxError::AllowlistUnenforceable {
                reason: "no unprivileged user namespace".to_owned(),
                abi: 3,
                required: 4,
            },
            SandboxError::AllowlistNotApplicable {
                what: "a subagent's commands",
            },
            SandboxError::LandlockTooOld {
                abi: 2,
                required: 3,
            },
            SandboxError::NotEnforced {
                enforcement: Enforcement::Partial,
                abi: Some(7),
            },
        ];
        for err in errors {
            let text = err.to_string();
            assert!(text.starts_with(|c: char| c.is_lowercase()), "{text}");
            assert!(!text.ends_with('.'), "{text}");
        }
    }
}
