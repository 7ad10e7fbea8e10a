//! What a probe's run comes to: its outcome in the child, the frames the
//! child writes, and the parent's verdict and line.

use serde::{Deserialize, Serialize};

use super::table::{self, mechanism};
use crate::sandbox::policy::SandboxReport;

/// What the probe is meant to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// A forbidden operation: the sandbox must refuse it.
    Blocked,
    /// A control: the sandbox must let it through.
    Allowed,
}

/// What happened when the child tried the operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// The operation succeeded.
    Succeeded,
    /// The operation failed with this errno (its name, e.g. `EACCES`).
    Failed { errno: String },
    /// Not tried: this kernel cannot deny it.
    Skipped { reason: String },
}

/// One probe's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeResult {
    pub name: String,
    pub expect: Expect,
    pub outcome: Outcome,
    /// Set by [`super::ProbeFixture::verify`]: the parent saw the operation's
    /// effect (a changed file, an accepted connection).
    #[serde(default)]
    pub side_effect_seen: bool,
    /// What refused it, where the child could tell better than
    /// [`mechanism`] (the ptrace probe looks at its own seccomp state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
}

/// How the parent judges a [`ProbeResult`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A forbidden operation was refused with a sandbox errno.
    Blocked { errno: String },
    /// A forbidden operation got through.
    Allowed,
    /// A forbidden operation failed, but not with a sandbox errno.
    Inconclusive { errno: String },
    /// Not tried.
    Skipped { reason: String },
    /// A control worked.
    ControlAllowed,
    /// A control failed: the sandbox is too tight.
    ControlFailed { errno: String },
}

impl Verdict {
    /// Whether this verdict lets `fido sandbox check` exit 0.
    pub fn passed(&self) -> bool {
        match self {
            Verdict::Blocked { .. } | Verdict::ControlAllowed => true,
            Verdict::Allowed
            | Verdict::Inconclusive { .. }
            | Verdict::Skipped { .. }
            | Verdict::ControlFailed { .. } => false,
        }
    }
}

impl ProbeResult {
    /// The parent's judgement, side effects included.
    pub fn verdict(&self) -> Verdict {
        match (self.expect, &self.outcome) {
            (_, Outcome::Skipped { reason }) => Verdict::Skipped {
                reason: reason.clone(),
            },
            (Expect::Blocked, _) if self.side_effect_seen => Verdict::Allowed,
            (Expect::Blocked, Outcome::Succeeded) => Verdict::Allowed,
            (Expect::Blocked, Outcome::Failed { errno }) => {
                let own = table::find(&self.name).and_then(|probe| probe.refusal_errno);
                if own == Some(errno.as_str())
                    || ["EACCES", "EPERM", "EFBIG"].contains(&errno.as_str())
                {
                    Verdict::Blocked {
                        errno: errno.clone(),
                    }
                } else {
                    Verdict::Inconclusive {
                        errno: errno.clone(),
                    }
                }
            }
            (Expect::Allowed, Outcome::Succeeded) => Verdict::ControlAllowed,
            (Expect::Allowed, Outcome::Failed { errno }) => Verdict::ControlFailed {
                errno: errno.clone(),
            },
        }
    }

    /// The line `fido sandbox check` prints for this probe.
    pub fn line(&self) -> String {
        format!("probe {}: {}", self.name, self.cell())
    }

    /// The verdict as one cell of that line: `blocked (EACCES, landlock)`,
    /// `allowed (control)`, `ALLOWED`, …
    pub fn cell(&self) -> String {
        match self.verdict() {
            Verdict::Blocked { errno } => {
                let how = self
                    .mechanism
                    .as_deref()
                    .unwrap_or_else(|| mechanism(&self.name, &errno));
                format!("blocked ({errno}, {how})")
            }
            Verdict::Allowed if self.side_effect_seen => {
                "ALLOWED (the parent saw its effect)".to_owned()
            }
            Verdict::Allowed => "ALLOWED".to_owned(),
            Verdict::Inconclusive { errno } => {
                format!("inconclusive ({errno}, not a sandbox refusal)")
            }
            Verdict::Skipped { reason } => {
                format!("skipped (not supported by this kernel: {reason})")
            }
            Verdict::ControlAllowed => "allowed (control)".to_owned(),
            Verdict::ControlFailed { errno } => {
                format!("FAILED ({errno}, a control the sandbox must allow)")
            }
        }
    }
}

/// One line of the probe child's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ProbeFrame {
    /// The sandbox is in place; probes follow.
    Sandboxed { report: SandboxReport },
    /// The sandbox could not be entered; nothing follows.
    Refused { error: String },
    /// One probe.
    Probe(ProbeResult),
    /// How the subagent's process tree is contained: whether the child is
    /// a child subreaper (read back with `PR_GET_CHILD_SUBREAPER`), and
    /// the PID namespace its commands get, tried from inside its sandbox
    /// (`None`: none is allowed there).
    Containment {
        subreaper: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid_namespace: Option<String>,
    },
    /// Hold mode: the child stays sandboxed until its stdin closes.
    Holding { pid: u32 },
    /// Every probe ran.
    Done,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(expect: Expect, outcome: Outcome) -> ProbeResult {
        ProbeResult {
            name: "p".to_owned(),
            expect,
            outcome,
            side_effect_seen: false,
            mechanism: None,
        }
    }

    fn failed(errno: &str) -> Outcome {
        Outcome::Failed {
            errno: errno.to_owned(),
        }
    }

    #[test]
    fn verdicts_and_lines() {
        let blocked = result(Expect::Blocked, failed("EACCES"));
        assert!(blocked.verdict().passed());
        assert_eq!(blocked.line(), "probe p: blocked (EACCES, landlock)");

        let allowed = result(Expect::Blocked, Outcome::Succeeded);
        assert_eq!(allowed.verdict(), Verdict::Allowed);
        assert!(!allowed.verdict().passed());
        assert_eq!(allowed.line(), "probe p: ALLOWED");

        let mut sneaky = result(Expect::Blocked, failed("EPERM"));
        sneaky.side_effect_seen = true;
        assert_eq!(sneaky.verdict(), Verdict::Allowed);
        assert!(sneaky.line().contains("ALLOWED"));

        let odd = result(Expect::Blocked, failed("ENOENT"));
        assert!(!odd.verdict().passed());
        assert!(odd.line().starts_with("probe p: inconclusive (ENOENT"));

        let skipped = result(
            Expect::Blocked,
            Outcome::Skipped {
                reason: "scopes need landlock ABI 6, this kernel has 5".to_owned(),
            },
        );
        assert!(!skipped.verdict().passed());
        assert_eq!(
            skipped.line(),
            "probe p: skipped (not supported by this kernel: scopes need landlock ABI 6, this kernel has 5)"
        );

        let control = result(Expect::Allowed, Outcome::Succeeded);
        assert!(control.verdict().passed());
        assert_eq!(control.line(), "probe p: allowed (control)");
        let broken = result(Expect::Allowed, failed("EACCES"));
        assert!(!broken.verdict().passed());
        assert!(broken.line().contains("FAILED (EACCES"));
    }

    #[test]
    fn frames_round_trip_as_json_lines() {
        let frame = ProbeFrame::Probe(result(Expect::Blocked, failed("EACCES")));
        let line = serde_json::to_string(&frame).unwrap();
        assert!(!line.contains('\n'));
        assert!(line.contains("\"type\":\"probe\""), "{line}");
        let back: ProbeFrame = serde_json::from_str(&line).unwrap();
        assert_eq!(back, frame);
    }

    #[test]
    fn new_probes_name_their_mechanism() {
        let swept = ProbeResult {
            name: "setsid-escape".to_owned(),
            ..result(Expect::Blocked, failed("ESRCH"))
        };
        assert_eq!(
            swept.line(),
            "probe setsid-escape: blocked (ESRCH, subreaper sweep)"
        );
        // ESRCH proves nothing for any other probe.
        assert!(!result(Expect::Blocked, failed("ESRCH")).verdict().passed());
        let traced = ProbeResult {
            name: "ptrace-parent".to_owned(),
            ..result(Expect::Blocked, failed("EPERM"))
        };
        assert_eq!(
            traced.line(),
            "probe ptrace-parent: blocked (EPERM, seccomp)"
        );
        // What the child saw wins over the default.
        let by_landlock = ProbeResult {
            mechanism: Some("landlock".to_owned()),
            ..traced
        };
        assert_eq!(
            by_landlock.line(),
            "probe ptrace-parent: blocked (EPERM, landlock)"
        );
        let refused = ProbeResult {
            name: "scratch-write".to_owned(),
            ..result(Expect::Allowed, failed("EACCES"))
        };
        assert!(!refused.verdict().passed());
        assert!(refused.line().contains("FAILED (EACCES"));
    }
}
