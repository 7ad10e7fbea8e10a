//! How a turn, a subagent's run and `fido exec` end, and the one place each
//! ending is derived from the one before it: a [`TurnOutcome`] gives the
//! child's `Final` ([`ChildStatus`]) and the exit code of `fido exec`; a
//! [`ChildStatus`] gives the parent's [`DelegateStatus`] and failure code;
//! a [`DelegateStatus`] gives the run's last [`SubagentPhase`].

use serde::{Deserialize, Serialize};

use super::delegate::{DelegateErrorCode, DelegateStatus};
use super::ipc::{ChildFrame, ChildStatus};
use super::{SubagentPhase, TurnStatus, UsageTotals};

/// How a turn ended, with the usage of every request asked during it.
/// Crosses the engine's boundary whole (`OpReply::TurnEnded`), so every
/// front end tells the endings apart; the `--json` stream and the journal
/// keep the coarser [`TurnStatus`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ending", rename_all = "snake_case")]
pub enum TurnOutcome {
    /// The model gave a final answer (`None`: an empty one).
    Completed {
        final_text: Option<String>,
        usage: UsageTotals,
    },
    /// The user interrupted the turn (Ctrl+C, SIGINT, SIGTERM, a cancel).
    Interrupted { usage: UsageTotals },
    /// The max-steps guard ended a runaway loop.
    MaxSteps { message: String, usage: UsageTotals },
    /// The provider failed for good, or the turn could not run.
    Failed { message: String, usage: UsageTotals },
    /// The loop guard ended the turn: the model kept repeating itself.
    Looped { message: String, usage: UsageTotals },
    /// The model's answer stayed cut off at its output limit, also after
    /// it was asked to finish it.
    MaxTokens { message: String, usage: UsageTotals },
    /// The model (or the provider's filter) refused to go on.
    Refused { message: String, usage: UsageTotals },
}

/// `fido exec`'s exit code for a turn that was interrupted.
pub const EXIT_INTERRUPTED: u8 = 130;

impl TurnOutcome {
    /// A turn that failed with `message` before it used anything.
    pub fn failed(message: impl Into<String>) -> TurnOutcome {
        TurnOutcome::Failed {
            message: message.into(),
            usage: UsageTotals::default(),
        }
    }

    /// The status `turn_completed` events and the journal carry: a looped
    /// turn is a failed one there.
    pub fn status(&self) -> TurnStatus {
        match self {
            TurnOutcome::Completed { .. } => TurnStatus::Completed,
            TurnOutcome::Interrupted { .. } => TurnStatus::Interrupted,
            TurnOutcome::MaxSteps { .. } => TurnStatus::MaxSteps,
            // `--json` keeps its four statuses: these endings are failures
            // there, told apart by their `error` event.
            TurnOutcome::Failed { .. }
            | TurnOutcome::Looped { .. }
            | TurnOutcome::MaxTokens { .. }
            | TurnOutcome::Refused { .. } => TurnStatus::Failed,
        }
    }

    pub fn usage(&self) -> UsageTotals {
        match self {
            TurnOutcome::Completed { usage, .. }
            | TurnOutcome::Interrupted { usage }
            | TurnOutcome::MaxSteps { usage, .. }
            | TurnOutcome::Failed { usage, .. }
            | TurnOutcome::Looped { usage, .. }
            | TurnOutcome::MaxTokens { usage, .. }
            | TurnOutcome::Refused { usage, .. } => *usage,
        }
    }

    /// The same ending with `totals` as its usage.
    pub fn with_usage(mut self, totals: UsageTotals) -> TurnOutcome {
        match &mut self {
            TurnOutcome::Completed { usage, .. }
            | TurnOutcome::Interrupted { usage }
            | TurnOutcome::MaxSteps { usage, .. }
            | TurnOutcome::Failed { usage, .. }
            | TurnOutcome::Looped { usage, .. }
            | TurnOutcome::MaxTokens { usage, .. }
            | TurnOutcome::Refused { usage, .. } => *usage = totals,
        }
        self
    }

    /// The model's final answer, when the turn completed with one.
    pub fn final_text(&self) -> Option<&str> {
        match self {
            TurnOutcome::Completed { final_text, .. } => final_text.as_deref(),
            TurnOutcome::Interrupted { .. }
            | TurnOutcome::MaxSteps { .. }
            | TurnOutcome::Failed { .. }
            | TurnOutcome::Looped { .. }
            | TurnOutcome::MaxTokens { .. }
            | TurnOutcome::Refused { .. } => None,
        }
    }

    /// What went wrong, for every ending but a completed or interrupted one.
    pub fn error(&self) -> Option<&str> {
        match self {
            TurnOutcome::MaxSteps { message, .. }
            | TurnOutcome::Failed { message, .. }
            | TurnOutcome::Looped { message, .. }
            | TurnOutcome::MaxTokens { message, .. }
            | TurnOutcome::Refused { message, .. } => Some(message),
            TurnOutcome::Completed { .. } | TurnOutcome::Interrupted { .. } => None,
        }
    }

    /// The child's `Final` frame for its turn's ending. `cancelled`: the
    /// parent stopped the child, so what it has is partial even when a
    /// request failed meanwhile; `last_text` is its last assistant text.
    pub fn child_final(self, cancelled: bool, last_text: impl FnOnce() -> String) -> ChildFrame {
        let (status, text) = match self {
            TurnOutcome::Completed { final_text, .. } => {
                (ChildStatus::Completed, final_text.unwrap_or_default())
            }
            // A cut-off answer is what the child has: partial.
            TurnOutcome::Interrupted { .. }
            | TurnOutcome::MaxSteps { .. }
            | TurnOutcome::MaxTokens { .. } => (ChildStatus::Partial, last_text()),
            TurnOutcome::Failed { .. }
            | TurnOutcome::Looped { .. }
            | TurnOutcome::Refused { .. }
                if cancelled =>
            {
                (ChildStatus::Partial, last_text())
            }
            TurnOutcome::Failed { message, .. } | TurnOutcome::Refused { message, .. } => {
                (ChildStatus::Failed, message)
            }
            TurnOutcome::Looped { message, .. } => (ChildStatus::Looped, message),
        };
        ChildFrame::Final { status, text }
    }

    /// `fido exec`'s exit code: 0 for an answer, 130 for an interrupted
    /// turn (`interrupted`: a signal arrived, whatever the turn made of
    /// it), 1 for a failure (already reported as an event).
    pub fn exit_code(&self, interrupted: bool) -> u8 {
        exit_code(self.status(), interrupted)
    }
}

/// `fido exec`'s exit code for a turn that ended with `status` (a looped
/// turn's is `Failed`): 0 for an answer, 130 for an interrupted turn
/// (`interrupted`: a signal arrived, whatever the turn made of it), 1 for
/// a failure (already reported as an event).
pub fn exit_code(status: TurnStatus, interrupted: bool) -> u8 {
    match status {
        TurnStatus::Completed => 0,
        TurnStatus::Interrupted => EXIT_INTERRUPTED,
        TurnStatus::MaxSteps | TurnStatus::Failed if interrupted => EXIT_INTERRUPTED,
        TurnStatus::MaxSteps | TurnStatus::Failed => 1,
    }
}

impl ChildStatus {
    /// The parent's status of a run that ended with this `Final`.
    /// `stopped`: the parent stopped it (timeout, cancel, budget), so even
    /// a complete answer is partial.
    pub fn delegate_status(self, stopped: bool) -> DelegateStatus {
        match (stopped, self) {
            (true, _) | (false, ChildStatus::Partial) => DelegateStatus::Partial,
            (false, ChildStatus::Failed | ChildStatus::Looped) => DelegateStatus::Failed,
            (false, ChildStatus::Completed) => DelegateStatus::Completed,
        }
    }

    /// The code of a run whose own turn failed: its loop guard, else (the
    /// gateway's errors reach the child as failed requests) the provider.
    pub fn failure_code(self) -> DelegateErrorCode {
        match self {
            ChildStatus::Looped => DelegateErrorCode::ModelLoop,
            ChildStatus::Completed | ChildStatus::Partial | ChildStatus::Failed => {
                DelegateErrorCode::ProviderError
            }
        }
    }
}

impl DelegateStatus {
    /// The run's last `subagent` phase; `cancelled`: the run was cancelled,
    /// which the phase says whatever the child returned.
    pub fn final_phase(self, cancelled: bool) -> SubagentPhase {
        match (cancelled, self) {
            (true, _) => SubagentPhase::Cancelled,
            (false, DelegateStatus::Completed) => SubagentPhase::Completed,
            (false, DelegateStatus::Partial) => SubagentPhase::Partial,
            (false, DelegateStatus::Failed) => SubagentPhase::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_ending() -> [TurnOutcome; 7] {
        let usage = UsageTotals::default();
        [
            TurnOutcome::Completed {
                final_text: Some("answer".into()),
                usage,
            },
            TurnOutcome::Interrupted { usage },
            TurnOutcome::MaxSteps {
                message: "steps".into(),
                usage,
            },
            TurnOutcome::failed("provider"),
            TurnOutcome::Looped {
                message: "loop".into(),
                usage,
            },
            TurnOutcome::MaxTokens {
                message: "cut off".into(),
                usage,
            },
            TurnOutcome::Refused {
                message: "refused".into(),
                usage,
            },
        ]
    }

    fn final_of(outcome: TurnOutcome, cancelled: bool) -> (ChildStatus, String) {
        match outcome.child_final(cancelled, || "last".into()) {
            ChildFrame::Final { status, text } => (status, text),
            other => panic!("not a final frame: {other:?}"),
        }
    }

    #[test]
    fn a_turn_ending_gives_the_child_final_and_the_exit_code() {
        let expected = [
            (
                TurnStatus::Completed,
                ChildStatus::Completed,
                "answer",
                0,
                0,
            ),
            (
                TurnStatus::Interrupted,
                ChildStatus::Partial,
                "last",
                130,
                130,
            ),
            (TurnStatus::MaxSteps, ChildStatus::Partial, "last", 1, 130),
            (TurnStatus::Failed, ChildStatus::Failed, "provider", 1, 130),
            (TurnStatus::Failed, ChildStatus::Looped, "loop", 1, 130),
            (TurnStatus::Failed, ChildStatus::Partial, "last", 1, 130),
            (TurnStatus::Failed, ChildStatus::Failed, "refused", 1, 130),
        ];
        for (outcome, (status, child, text, code, interrupted_code)) in
            every_ending().into_iter().zip(expected)
        {
            assert_eq!(outcome.status(), status, "{outcome:?}");
            assert_eq!(outcome.exit_code(false), code, "{outcome:?}");
            assert_eq!(outcome.exit_code(true), interrupted_code, "{outcome:?}");
            assert_eq!(final_of(outcome, false), (child, text.to_string()));
        }
    }

    #[test]
    fn a_cancelled_child_returns_what_it_has_as_partial() {
        for outcome in every_ending().into_iter().skip(1) {
            assert_eq!(
                final_of(outcome, true),
                (ChildStatus::Partial, "last".to_string())
            );
        }
    }

    #[test]
    fn a_child_status_gives_the_delegate_status_code_and_phase() {
        use ChildStatus::*;
        let cases = [
            (
                Completed,
                DelegateStatus::Completed,
                SubagentPhase::Completed,
            ),
            (Partial, DelegateStatus::Partial, SubagentPhase::Partial),
            (Failed, DelegateStatus::Failed, SubagentPhase::Failed),
            (Looped, DelegateStatus::Failed, SubagentPhase::Failed),
        ];
        for (child, status, phase) in cases {
            assert_eq!(child.delegate_status(false), status);
            assert_eq!(child.delegate_status(true), DelegateStatus::Partial);
            assert_eq!(status.final_phase(false), phase);
            assert_eq!(status.final_phase(true), SubagentPhase::Cancelled);
        }
        assert_eq!(Looped.failure_code(), DelegateErrorCode::ModelLoop);
        assert_eq!(Failed.failure_code(), DelegateErrorCode::ProviderError);
    }

    #[test]
    fn usage_and_texts_follow_the_ending() {
        let totals = UsageTotals {
            requests: 2,
            ..UsageTotals::default()
        };
        for outcome in every_ending() {
            assert_eq!(outcome.clone().with_usage(totals).usage(), totals);
        }
        let [
            completed,
            interrupted,
            max_steps,
            failed,
            looped,
            cut_off,
            refused,
        ] = every_ending();
        assert_eq!(cut_off.error(), Some("cut off"));
        assert_eq!(refused.error(), Some("refused"));
        assert_eq!(refused.final_text(), None);
        assert_eq!(completed.final_text(), Some("answer"));
        assert_eq!(completed.error(), None);
        assert_eq!(interrupted.error(), None);
        assert_eq!(max_steps.error(), Some("steps"));
        assert_eq!(failed.error(), Some("provider"));
        assert_eq!(looped.error(), Some("loop"));
        assert_eq!(looped.final_text(), None);
    }
}
