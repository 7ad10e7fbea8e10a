//! A run's vocabulary, shared by the stages in [`super::run`],
//! [`super::child`] and [`super::serve`]: the [`Stage`] it is in, why it
//! was stopped ([`StopReason`]), how a stage ended it ([`Ending`]), what
//! stops it early ([`Stops`]) and its [`Progress`] (usage, live events).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::protocol::delegate::{DelegateErrorCode, DelegateUsage};
use crate::protocol::ipc::ChildStatus;
use crate::text;

use super::*;

/// The stages of a run, in order; a run may skip to `Terminating` from any
/// of them. Logged at each change, so a run's log reads as its history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Spawning,
    Handshaking,
    Running,
    /// `Cancel` was sent; the child has the grace to answer with a partial.
    Cancelling(StopReason),
    Terminating,
    Reaped,
}

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StopReason {
    Timeout,
    Cancelled,
    /// The child's or the session's token budget was spent.
    Budget,
}

impl StopReason {
    pub(super) fn code(self) -> DelegateErrorCode {
        match self {
            StopReason::Timeout => DelegateErrorCode::Timeout,
            StopReason::Cancelled => DelegateErrorCode::Cancelled,
            StopReason::Budget => DelegateErrorCode::BudgetExceeded,
        }
    }

    /// Why the run was stopped, when the child returned what it had.
    pub(super) fn partial_message(self, job: &Job, usage: &DelegateUsage) -> String {
        match self {
            StopReason::Timeout => format!(
                "the subagent ran out of time after {} ms and returned what it had",
                job.timeout.as_millis()
            ),
            StopReason::Cancelled => "the subagent was cancelled and returned what it had".into(),
            StopReason::Budget => budget_message(job, usage, "returned what it had"),
        }
    }

    /// Why the run was stopped, when the child returned nothing in time.
    pub(super) fn failed_message(self, job: &Job, usage: &DelegateUsage) -> String {
        match self {
            StopReason::Timeout => format!(
                "the subagent did not finish within {} ms and returned nothing in time; it was stopped",
                job.timeout.as_millis()
            ),
            StopReason::Cancelled => {
                "the subagent was cancelled before it returned a result; it was stopped".into()
            }
            StopReason::Budget => budget_message(job, usage, "returned nothing in time"),
        }
    }
}

fn budget_message(job: &Job, usage: &DelegateUsage, what: &str) -> String {
    match job.budget {
        Some(budget) if usage.budget_tokens() >= budget => format!(
            "the subagent used {} tokens, crossing its budget of {budget} (budget_tokens), and {what}",
            usage.budget_tokens()
        ),
        _ => format!(
            "the subagents of this session crossed their token budget (delegate_session_budget_tokens), and this one {what}"
        ),
    }
}

/// What a stage ended the run with.
pub(super) enum Ending {
    Final {
        status: ChildStatus,
        text: String,
    },
    Failed {
        code: DelegateErrorCode,
        message: String,
    },
}

impl Ending {
    pub(super) fn failed(code: DelegateErrorCode, message: impl Into<String>) -> Ending {
        Ending::Failed {
            code,
            message: message.into(),
        }
    }
}

/// The run's state that outlives its stages: the stage, why it was stopped,
/// its usage, and the live figures the `subagent` events carry.
pub(super) struct Progress<'a> {
    pub(super) job: &'a Job,
    shared: &'a Shared,
    pub(super) started: Instant,
    pub(super) stage: Stage,
    pub(super) stop: Option<StopReason>,
    pub(super) usage: DelegateUsage,
    /// The child's pid once it is spawned.
    pub(super) pid: Option<u32>,
    /// Tokens used, for the live events (prompt + completion).
    tokens: AtomicU64,
}

impl<'a> Progress<'a> {
    pub(super) fn new(job: &'a Job, shared: &'a Shared) -> Progress<'a> {
        Progress {
            job,
            shared,
            started: Instant::now(),
            stage: Stage::Spawning,
            stop: None,
            usage: DelegateUsage::default(),
            pid: None,
            tokens: AtomicU64::new(0),
        }
    }

    /// What every run shares (a reference of the run's lifetime, so it can
    /// be held while the progress changes).
    pub(super) fn shared(&self) -> &'a Shared {
        self.shared
    }

    pub(super) fn enter(&mut self, stage: Stage) {
        debug!(agent_id = %self.job.agent_id, from = ?self.stage, to = ?stage, "subagent run stage");
        self.stage = stage;
    }

    /// Marks the run stopped for `reason` (a later reason replaces an
    /// earlier one: an interrupted turn after a timeout is a cancel).
    pub(super) fn stopped(&mut self, reason: StopReason) {
        self.stop = Some(reason);
    }

    /// A `subagent` event, also in the session's record of its subagents.
    pub(super) fn emit(&self, phase: SubagentPhase, detail: &str) {
        let job = self.job;
        self.shared.announce(record::Lifecycle {
            agent_id: &job.agent_id,
            child_pid: self.pid,
            phase,
            started: self.started,
            tokens: self.tokens.load(Ordering::Relaxed),
            plan_item: job.plan_item.as_ref(),
            detail: text::summary(detail, 100),
        });
    }

    /// Adds one answered request's usage; `true` once the child's own
    /// budget or the session's is spent.
    pub(super) fn charge(&mut self, request: &crate::protocol::Usage) -> bool {
        let usage = &mut self.usage;
        // The server's counts: sums saturate, so a huge one spends the
        // budget instead of wrapping past it.
        usage.totals.record(*request);
        self.tokens.store(usage.budget_tokens(), Ordering::Relaxed);
        let session_spent = self.shared.charge_session(
            request
                .prompt_tokens
                .saturating_add(request.completion_tokens),
        );
        let own_spent = self.job.budget.is_some_and(|b| usage.budget_tokens() >= b);
        own_spent || session_spent
    }
}

/// What stops a run early: Esc, the shutdown, Ctrl+C on the parent's turn,
/// the time limit (counted from the spawn).
pub(super) struct Stops<'a> {
    pub(super) cancel: &'a CancellationToken,
    pub(super) kill_now: &'a CancellationToken,
    pub(super) turn_cancel: &'a CancellationToken,
    pub(super) deadline: tokio::time::Instant,
}

impl Stops<'_> {
    /// Resolves when the run must stop before the child is ready to serve
    /// (during the spawn and the handshake nobody waits for a partial).
    pub(super) async fn before_handshake(&self) -> StopReason {
        tokio::select! {
            _ = tokio::time::sleep_until(self.deadline) => StopReason::Timeout,
            _ = self.cancel.cancelled() => StopReason::Cancelled,
            _ = self.kill_now.cancelled() => StopReason::Cancelled,
            _ = self.turn_cancel.cancelled() => StopReason::Cancelled,
        }
    }
}
