//! One subagent run, from spawn to reap, as an explicit sequence of stages
//! ([`Stage`]): spawning and handshaking ([`super::child`]), running and
//! cancelling ([`super::serve`]), terminating and reaped
//! ([`ChildLink::close`]). This file drives the stages and turns how the run
//! ended into the `delegate_result`.

use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::protocol::delegate::{DelegateError, DelegateResult, DelegateStatus, DelegateUsage};
use crate::subagent::result::normalise;
use crate::text;

use super::child::{ChildLink, ForkEncoding};
use super::progress::{Ending, Progress, Stage, StopReason, Stops};
use super::*;

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
    progress.emit(SubagentPhase::Starting, "spawning a sandboxed process");
    #[cfg(test)]
    crate::agent::recover::fault::hit(&shared.settings.workspace, "subagent run");
    let stops = Stops {
        cancel: &cancel,
        kill_now: &kill_now,
        turn_cancel: &job.turn_cancel,
        deadline: tokio::time::Instant::now() + job.timeout,
    };
    let fork = ForkEncoding::start(history);
    let ending = match ChildLink::open(&mut progress, &stops, fork).await {
        Ok((mut link, history)) => {
            progress.pid = Some(link.pid());
            let sandbox = format!(
                "pid {}, sandbox {}",
                link.pid(),
                shared.settings.limits.sandbox
            );
            progress.emit(SubagentPhase::Starting, &sandbox);
            let ending = link.serve(history, &mut progress, &stops).await;
            link.close(&mut progress, matches!(ending, Ending::Final { .. }))
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
        DelegateErrorCode::BudgetExceeded,
        "the subagents of this session already used their token budget (delegate_session_budget_tokens); no subagent was started",
    );
    result.usage = Some(DelegateUsage::default());
    progress.emit(
        SubagentPhase::Failed,
        DelegateErrorCode::BudgetExceeded.as_str(),
    );
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
            let run_status = status.delegate_status(stop.is_some());
            let mut result = normalise(&job.agent_id, run_status, &text, usage);
            if let Some(reason) = stop {
                result.error = Some(DelegateError {
                    code: reason.code(),
                    message: reason.partial_message(job, &usage),
                });
            } else if result.status == DelegateStatus::Failed && result.error.is_none() {
                result.error = Some(DelegateError {
                    code: status.failure_code(),
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
    let phase = result
        .status
        .final_phase(progress.stop == Some(StopReason::Cancelled));
    let detail = match &result.error {
        Some(error) => format!("{}: {}", error.code, error.message),
        None => crate::text::counted(result.findings.len() as u64, "finding"),
    };
    progress.emit(phase.clone(), &detail);
    let elapsed_ms = progress.started.elapsed().as_millis() as u64;
    info!(agent_id = %progress.job.agent_id, %phase, elapsed_ms, "subagent finished");
}
