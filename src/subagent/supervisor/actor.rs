//! The supervisor actor: it runs each delegation in a task of its own,
//! at most `concurrency` at once (the rest wait in call order), cancels
//! them, and on shutdown kills every one and waits for its reap.

use std::collections::VecDeque;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::*;

/// Which subagents a cancel is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelTarget {
    All,
    Agent(String),
}

pub enum SupervisorMessage {
    /// Run a subagent; the reply is its normalised result. Past the
    /// concurrency limit the job waits in call order.
    Delegate {
        job: Box<Job>,
        reply: RpcReplyPort<DelegateResult>,
    },
    /// Cancel running or waiting subagents (Esc, `/cancel`): a running one
    /// may still send a partial result.
    Cancel(CancelTarget),
    /// Kill every subagent now and reply once each one is reaped.
    Shutdown(RpcReplyPort<()>),
    /// Internal: a run ended and its process is reaped.
    RunFinished { agent_id: String },
}

pub struct SupervisorActor;

pub struct SupervisorState {
    shared: Arc<Shared>,
    /// Running subagents, in start order.
    running: Vec<Running>,
    /// Jobs waiting for a free slot, in call order.
    waiting: VecDeque<Waiting>,
    shutdown_waiters: Vec<RpcReplyPort<()>>,
}

struct Running {
    agent_id: String,
    cancel: CancellationToken,
    kill_now: CancellationToken,
}

struct Waiting {
    job: Box<Job>,
    reply: RpcReplyPort<DelegateResult>,
}

impl Actor for SupervisorActor {
    type Msg = SupervisorMessage;
    type State = SupervisorState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Arc<Shared>,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        Ok(SupervisorState {
            shared,
            running: Vec::new(),
            waiting: VecDeque::new(),
            shutdown_waiters: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SupervisorMessage,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // A panic here fails the actor; the restarter restarts it.
        crate::agent::recover::supervised(state.handle(&myself, message)).await;
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        // A stop on purpose leaves the runs to end on their own (as the
        // shutdown waits for them): only a failed actor kills them.
        state.running.clear();
        Ok(())
    }
}

impl SupervisorState {
    async fn handle(&mut self, myself: &ActorRef<SupervisorMessage>, message: SupervisorMessage) {
        let state = self;
        match message {
            SupervisorMessage::Delegate { job, reply } => {
                #[cfg(test)]
                crate::agent::recover::fault::hit(
                    &state.shared.settings.workspace,
                    "supervisor handler",
                );
                if !state.shutdown_waiters.is_empty() {
                    let _ = reply.send(cancelled_before_start(&job.agent_id));
                } else if state.running.len() < state.shared.settings.limits.concurrency as usize {
                    state.start(myself, job, reply);
                } else {
                    info!(agent_id = %job.agent_id, waiting = state.waiting.len() + 1, "subagent waits for a free slot");
                    state.waiting.push_back(Waiting { job, reply });
                }
            }
            SupervisorMessage::Cancel(target) => state.cancel(&target),
            SupervisorMessage::Shutdown(reply) => {
                for waiting in state.waiting.drain(..) {
                    let _ = waiting
                        .reply
                        .send(cancelled_before_start(&waiting.job.agent_id));
                }
                for running in &state.running {
                    running.kill_now.cancel();
                }
                if state.running.is_empty() {
                    let _ = reply.send(());
                } else {
                    state.shutdown_waiters.push(reply);
                }
            }
            SupervisorMessage::RunFinished { agent_id } => {
                state.running.retain(|r| r.agent_id != agent_id);
                state.start_waiting(myself);
                if state.running.is_empty() {
                    for waiter in state.shutdown_waiters.drain(..) {
                        let _ = waiter.send(());
                    }
                }
            }
        }
    }
}

impl Drop for SupervisorState {
    /// The actor failed (a stop on purpose emptied `running`): its runs
    /// are killed and reaped, and each call gets its result from its own
    /// task, instead of running on unaccounted for. Waiting calls get
    /// theirs when their reply ports drop with the queue.
    fn drop(&mut self) {
        for running in &self.running {
            tracing::warn!(agent_id = %running.agent_id, "the supervisor failed: stopping its subagent");
            running.kill_now.cancel();
        }
    }
}

impl SupervisorState {
    /// Starts waiting jobs while there are free slots; a job whose turn was
    /// interrupted meanwhile gets its cancelled result without a process.
    fn start_waiting(&mut self, myself: &ActorRef<SupervisorMessage>) {
        while self.running.len() < self.shared.settings.limits.concurrency as usize {
            let Some(Waiting { job, reply }) = self.waiting.pop_front() else {
                return;
            };
            if job.turn_cancel.is_cancelled() {
                let _ = reply.send(cancelled_before_start(&job.agent_id));
                continue;
            }
            self.start(myself, job, reply);
        }
    }

    fn cancel(&mut self, target: &CancelTarget) {
        let wanted = |agent_id: &str| match target {
            CancelTarget::All => true,
            CancelTarget::Agent(id) => id == agent_id,
        };
        for running in self.running.iter().filter(|r| wanted(&r.agent_id)) {
            info!(agent_id = %running.agent_id, "cancelling the subagent");
            running.cancel.cancel();
        }
        let (cancelled, kept) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|w| wanted(&w.job.agent_id));
        self.waiting = kept;
        for waiting in cancelled {
            info!(agent_id = %waiting.job.agent_id, "cancelling a waiting subagent");
            let _ = waiting
                .reply
                .send(cancelled_before_start(&waiting.job.agent_id));
        }
    }

    /// Runs `job` in a task of its own; the reply is its result.
    fn start(
        &mut self,
        myself: &ActorRef<SupervisorMessage>,
        job: Box<Job>,
        reply: RpcReplyPort<DelegateResult>,
    ) {
        let cancel = CancellationToken::new();
        let kill_now = CancellationToken::new();
        self.running.push(Running {
            agent_id: job.agent_id.clone(),
            cancel: cancel.clone(),
            kill_now: kill_now.clone(),
        });
        let shared = self.shared.clone();
        let myself = myself.clone();
        tokio::spawn(async move {
            let agent_id = job.agent_id.clone();
            let plan_item = job.plan_item.clone();
            let started = std::time::Instant::now();
            // A panic in the run must not keep its slot forever: the
            // child's group dies with the dropped run, and the call gets a
            // failed result.
            let result = match crate::agent::recover::catch(run(*job, &shared, cancel, kill_now))
                .await
            {
                Ok(result) => result,
                Err(panicked) => crashed(&shared, &agent_id, plan_item, started, &panicked.message),
            };
            shared.record.ended(&agent_id);
            // Free the slot before the caller sees the result, so the
            // next waiting job starts at once.
            let _ = myself.cast(SupervisorMessage::RunFinished { agent_id });
            let _ = reply.send(result);
        });
    }
}

/// After the run of `agent_id` panicked with `what`: one `error` event, the
/// subagent's last lifecycle event (`failed`), and the failed result.
fn crashed(
    shared: &Shared,
    agent_id: &str,
    plan_item: Option<String>,
    started: std::time::Instant,
    what: &str,
) -> DelegateResult {
    tracing::error!(%agent_id, panic = %what, "the subagent run panicked");
    let message = format!(
        "internal error in the parent's supervisor ({})",
        crate::text::summary(what, 200)
    );
    shared.events.emit(EventKind::Error {
        message: format!("subagent {agent_id}: {message}"),
    });
    shared.announce(super::record::Lifecycle {
        agent_id,
        child_pid: None,
        phase: SubagentPhase::Failed,
        started,
        tokens: 0,
        plan_item: plan_item.as_ref(),
        detail: DelegateErrorCode::SubagentCrashed.as_str().into(),
    });
    DelegateResult::failed(agent_id, DelegateErrorCode::SubagentCrashed, &message)
}

/// The result of a job cancelled before its process was started.
fn cancelled_before_start(agent_id: &str) -> DelegateResult {
    let mut result = DelegateResult::failed(
        agent_id,
        DelegateErrorCode::Cancelled,
        "the subagent was cancelled while it waited for a free slot; it never started",
    );
    result.recommended_next_steps = vec![
        "Continue without this subagent, or delegate again if the work is still needed.".into(),
    ];
    result
}
