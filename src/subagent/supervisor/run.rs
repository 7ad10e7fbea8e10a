//! One subagent run, from spawn to reap, as an explicit sequence of stages
//! ([`Stage`]): spawning and handshaking ([`super::session`]), running and
//! cancelling ([`super::serve`]), terminating and reaped
//! ([`Session::close`]). This file drives the stages and turns how the run
//! ended into the `delegate_result`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::protocol::EventKind;
use crate::protocol::delegate::{DelegateError, DelegateResult, DelegateStatus, DelegateUsage};
use crate::protocol::ipc::ChildStatus;
use crate::subagent::result::normalise;
use crate::text;

use super::session::Session;
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
    pub(super) fn code(self) -> &'static str {
        match self {
            StopReason::Timeout => "timeout",
            StopReason::Cancelled => "cancelled",
            StopReason::Budget => "budget_exceeded",
        }
    }

    /// Why the run was stopped, when the child returned what it had.
    fn partial_message(self, job: &Job, usage: &DelegateUsage) -> String {
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
    fn failed_message(self, job: &Job, usage: &DelegateUsage) -> String {
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
    Final { status: ChildStatus, text: String },
    Failed { code: &'static str, message: String },
}

impl Ending {
    pub(super) fn failed(code: &'static str, message: impl Into<String>) -> Ending {
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
    started: Instant,
    pub(super) stage: Stage,
    pub(super) stop: Option<StopReason>,
    pub(super) usage: DelegateUsage,
    /// The child's pid once it is spawned.
    pub(super) pid: Option<u32>,
    /// Tokens used, for the live events (prompt + completion).
    tokens: AtomicU64,
}

impl<'a> Progress<'a> {
    fn new(job: &'a Job, shared: &'a Shared) -> Progress<'a> {
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

    /// A `subagent` event, also recorded for the control socket.
    pub(super) fn emit(&self, phase: &str, detail: &str) {
        let job = self.job;
        let tokens = self.tokens.load(Ordering::Relaxed);
        let plan_item = job.plan_item.as_ref();
        self.shared.record_live(
            &job.agent_id,
            self.pid,
            phase,
            self.started,
            tokens,
            plan_item,
        );
        self.shared.events.emit(EventKind::Subagent {
            agent_id: job.agent_id.clone(),
            pid: self.pid,
            phase: crate::protocol::SubagentPhase::parse(phase),
            elapsed_ms: self.started.elapsed().as_millis() as u64,
            detail: text::summary(detail, 100),
            tokens,
            plan_item: job.plan_item.clone(),
        });
    }

    /// Adds one answered request's usage; `true` once the child's own
    /// budget or the session's is spent.
    pub(super) fn charge(&mut self, request: &crate::protocol::Usage) -> bool {
        let usage = &mut self.usage;
        // The server's counts: sums saturate, so a huge one spends the
        // budget instead of wrapping past it.
        usage.requests = usage.requests.saturating_add(1);
        usage.prompt_tokens = usage.prompt_tokens.saturating_add(request.prompt_tokens);
        usage.cached_tokens = usage.cached_tokens.saturating_add(request.cached_tokens);
        usage.completion_tokens = usage
            .completion_tokens
            .saturating_add(request.completion_tokens);
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

/// Runs one subagent to its end and always reaps it.
pub(super) async fn run(
    mut job: Job,
    shared: &Shared,
    cancel: CancellationToken,
    kill_now: CancellationToken,
) -> DelegateResult {
    // From here on the fork is the child's history, never the job's.
    let history = std::mem::take(&mut job.fork);
    let mut progress = Progress::new(&job, shared);
    if shared.session_budget_spent.is_cancelled() {
        return refused_for_budget(&progress);
    }
    progress.emit("starting", "spawning a sandboxed process");
    let stops = Stops {
        cancel: &cancel,
        kill_now: &kill_now,
        turn_cancel: &job.turn_cancel,
        deadline: tokio::time::Instant::now() + job.timeout,
    };
    let ending = match Session::open(&mut progress, &stops, &history).await {
        Ok(mut session) => {
            progress.pid = Some(session.pid());
            let sandbox = format!("pid {}, sandbox {}", session.pid(), shared.settings.sandbox);
            progress.emit("starting", &sandbox);
            let ending = session.serve(history, &mut progress, &stops).await;
            session
                .close(&mut progress, matches!(ending, Ending::Final { .. }))
                .await;
            ending
        }
        Err(failure) => failure,
    };
    progress.enter(Stage::Reaped);
    forget_record(shared, &job.agent_id).await;
    progress.usage.wall_ms = progress.started.elapsed().as_millis() as u64;
    let result = conclude(&progress, ending);
    announce(&progress, &result);
    result
}

/// The result of a run the session's spent budget never let start.
fn refused_for_budget(progress: &Progress<'_>) -> DelegateResult {
    let mut result = DelegateResult::failed(
        &progress.job.agent_id,
        "budget_exceeded",
        "the subagents of this session already used their token budget (delegate_session_budget_tokens); no subagent was started",
    );
    result.usage = Some(DelegateUsage::default());
    progress.emit("failed", "budget_exceeded");
    result
}

/// Reaped (or never started): the record for the orphan sweep goes.
async fn forget_record(shared: &Shared, agent_id: &str) {
    let dir = crate::subagent::control::run_dir(&shared.settings.workspace);
    let id = agent_id.to_string();
    let _ = tokio::task::spawn_blocking(move || crate::subagent::orphans::forget(&dir, &id)).await;
}

/// The `delegate_result` of how the run ended and why it was stopped.
fn conclude(progress: &Progress<'_>, ending: Ending) -> DelegateResult {
    let (job, stop, usage) = (progress.job, progress.stop, progress.usage);
    let mut result = match ending {
        Ending::Final { status, text } => {
            let run_status = match (stop, status) {
                (Some(_), _) | (None, ChildStatus::Partial) => DelegateStatus::Partial,
                (None, ChildStatus::Failed) => DelegateStatus::Failed,
                (None, ChildStatus::Completed) => DelegateStatus::Completed,
            };
            let mut result = normalise(&job.agent_id, run_status, &text, usage);
            if let Some(reason) = stop {
                result.error = Some(DelegateError {
                    code: reason.code().into(),
                    message: reason.partial_message(job, &usage),
                });
            } else if result.status == DelegateStatus::Failed && result.error.is_none() {
                result.error = Some(DelegateError {
                    code: "provider_error".into(),
                    message: text::summary(&text, 300),
                });
            }
            result
        }
        Ending::Failed { code, message } => {
            let (code, message) = match stop {
                Some(reason) => (reason.code(), reason.failed_message(job, &usage)),
                None => (code, message),
            };
            let mut result = DelegateResult::failed(&job.agent_id, code, &message);
            result.usage = Some(usage);
            result
        }
    };
    if result.status == DelegateStatus::Failed && result.recommended_next_steps.is_empty() {
        result.recommended_next_steps = vec![
            "Continue without the subagent: investigate directly with read_file and ripgrep."
                .into(),
        ];
    }
    result
}

/// The run's last `subagent` event and log line.
fn announce(progress: &Progress<'_>, result: &DelegateResult) {
    let phase = match (progress.stop, result.status) {
        (Some(StopReason::Cancelled), _) => "cancelled",
        (_, DelegateStatus::Completed) => "completed",
        (_, DelegateStatus::Partial) => "partial",
        (_, DelegateStatus::Failed) => "failed",
    };
    let detail = match &result.error {
        Some(error) => format!("{}: {}", error.code, error.message),
        None => format!("{} findings", result.findings.len()),
    };
    progress.emit(phase, &detail);
    let elapsed_ms = progress.started.elapsed().as_millis() as u64;
    info!(agent_id = %progress.job.agent_id, phase, elapsed_ms, "subagent finished");
}
