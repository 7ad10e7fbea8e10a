//! Parent side of delegation: the `SupervisorActor` and the run of one
//! subagent process (see the module docs of `crate::subagent` for the theory
//! of operation).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::fork::{DelegateArgs, build_fork};
use crate::agent::EventSink;
use crate::plan::PlanFlavour;
use crate::protocol::Message;
use crate::protocol::delegate::DelegateResult;
use crate::provider::gateway::Gateway;
use crate::sandbox::SandboxRequirement;
use crate::tools::ToolCatalog;
use crate::tools::delegate::{DelegationFuture, DelegationRequest, Delegator};

mod io;
mod run;

use run::run;

/// Time between SIGTERM and SIGKILL once the grace for a partial result has
/// run out: short, the child already ignored `Cancel`.
const TERM_GRACE: Duration = Duration::from_millis(10);
/// Longest wait for the child to connect and say `Hello`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames a child may send in one run before it counts as flooding.
const MAX_FRAMES: u32 = 20_000;
/// Bytes of the child's stderr copied into the parent's log.
const MAX_STDERR_LOGGED: usize = 64 * 1024;
/// How often lifecycle events of one phase reach the UI.
const LIFECYCLE_INTERVAL: Duration = Duration::from_millis(50);

/// Delegation limits, from the configuration.
#[derive(Debug, Clone)]
pub struct DelegationSettings {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    /// Time a cancelled child has to send its partial result.
    pub grace: Duration,
    pub sandbox: SandboxRequirement,
    /// Model requests the subagent may make.
    pub max_steps: u32,
    pub plan_tool: PlanFlavour,
    /// Credential paths the child's sandbox keeps unreadable.
    pub deny_read: Vec<PathBuf>,
    pub workspace: PathBuf,
    /// The binary to run as `fido __subagent` (the current executable).
    pub program: PathBuf,
}

/// What every run shares.
pub struct Shared {
    settings: DelegationSettings,
    provider: Arc<Gateway>,
    catalog: Arc<ToolCatalog>,
    events: EventSink,
}

/// One delegation handed to the actor: the fork is already built, so the
/// parent's messages were copied at the instant of the call.
pub struct Job {
    agent_id: String,
    fork: Vec<Message>,
    instructions: String,
    timeout: Duration,
    turn_cancel: CancellationToken,
}

pub enum SupervisorMessage {
    /// Run a subagent; the reply is its normalised result. Refused with a
    /// `busy` result while another subagent runs (concurrency limit 1).
    Delegate {
        job: Box<Job>,
        reply: RpcReplyPort<DelegateResult>,
    },
    /// Cancel the running subagent (Esc): it may still send a partial result.
    CancelRunning,
    /// Kill every subagent now and reply once each one is reaped.
    Shutdown(RpcReplyPort<()>),
    /// Internal: a run ended and its process is reaped.
    RunFinished { agent_id: String },
}

pub struct SupervisorActor;

pub struct SupervisorState {
    shared: Arc<Shared>,
    running: Option<Running>,
    shutdown_waiters: Vec<RpcReplyPort<()>>,
}

struct Running {
    agent_id: String,
    cancel: CancellationToken,
    kill_now: CancellationToken,
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
            running: None,
            shutdown_waiters: Vec::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: SupervisorMessage,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMessage::Delegate { job, reply } => {
                if let Some(running) = &state.running {
                    let _ = reply.send(DelegateResult::failed(
                        &job.agent_id,
                        "busy",
                        &format!(
                            "{} is still running and only one subagent may run at a time; wait for its result",
                            running.agent_id
                        ),
                    ));
                    return Ok(());
                }
                let cancel = CancellationToken::new();
                let kill_now = CancellationToken::new();
                state.running = Some(Running {
                    agent_id: job.agent_id.clone(),
                    cancel: cancel.clone(),
                    kill_now: kill_now.clone(),
                });
                let shared = state.shared.clone();
                tokio::spawn(async move {
                    let agent_id = job.agent_id.clone();
                    // A panic in the run must not leave the supervisor busy
                    // forever: the child's group dies with the dropped run,
                    // and the call gets a failed result.
                    let result = match crate::agent::recover::catch(run(
                        *job, &shared, cancel, kill_now,
                    ))
                    .await
                    {
                        Ok(result) => result,
                        Err(what) => {
                            tracing::error!(%agent_id, panic = %what, "the subagent run panicked");
                            DelegateResult::failed(
                                &agent_id,
                                "subagent_crashed",
                                &format!(
                                    "internal error in the parent's supervisor ({})",
                                    crate::text::summary(&what, 200)
                                ),
                            )
                        }
                    };
                    // Free the slot before the caller sees the result: a
                    // `Delegate` it sends next is queued behind this message,
                    // so it is never refused as `busy` by a finished run.
                    let _ = myself.cast(SupervisorMessage::RunFinished { agent_id });
                    let _ = reply.send(result);
                });
            }
            SupervisorMessage::CancelRunning => {
                if let Some(running) = &state.running {
                    info!(agent_id = %running.agent_id, "cancelling the subagent");
                    running.cancel.cancel();
                }
            }
            SupervisorMessage::Shutdown(reply) => match &state.running {
                Some(running) => {
                    running.kill_now.cancel();
                    state.shutdown_waiters.push(reply);
                }
                None => {
                    let _ = reply.send(());
                }
            },
            SupervisorMessage::RunFinished { agent_id } => {
                if state
                    .running
                    .as_ref()
                    .is_some_and(|r| r.agent_id == agent_id)
                {
                    state.running = None;
                }
                if state.running.is_none() {
                    for waiter in state.shutdown_waiters.drain(..) {
                        let _ = waiter.send(());
                    }
                }
            }
        }
        Ok(())
    }
}

/// The handle the `delegate` tool and the UI use.
pub struct Supervisor {
    actor: ActorRef<SupervisorMessage>,
    settings: DelegationSettings,
}

impl Supervisor {
    pub async fn start(
        settings: DelegationSettings,
        provider: Arc<Gateway>,
        catalog: Arc<ToolCatalog>,
        events: EventSink,
    ) -> Result<Supervisor, ractor::SpawnErr> {
        let shared = Arc::new(Shared {
            settings: settings.clone(),
            provider,
            catalog,
            events,
        });
        let (actor, _handle) = Actor::spawn(None, SupervisorActor, shared).await?;
        Ok(Supervisor { actor, settings })
    }

    /// Kills every running subagent and returns once each is reaped (or
    /// after `limit`).
    pub async fn shutdown(&self, limit: Duration) {
        let (sender, receiver) = oneshot::channel();
        if self
            .actor
            .cast(SupervisorMessage::Shutdown(sender.into()))
            .is_ok()
        {
            let _ = tokio::time::timeout(limit, receiver).await;
        }
        self.actor.stop(None);
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.actor.stop(None);
    }
}

impl Delegator for Supervisor {
    fn delegate<'a>(&'a self, request: DelegationRequest<'a>) -> DelegationFuture<'a> {
        Box::pin(async move {
            let agent_id = format!("subagent-{:08x}", fastrand::u32(..));
            let fork = build_fork(
                request.parent_messages,
                request.call_id,
                &agent_id,
                &request.args,
                self.settings.max_steps,
            );
            let timeout = timeout_for(&request.args, &self.settings);
            let job = Job {
                agent_id: agent_id.clone(),
                fork: fork.messages,
                instructions: fork.instructions,
                timeout,
                turn_cancel: request.cancel.clone(),
            };
            let (sender, receiver) = oneshot::channel();
            if self
                .actor
                .cast(SupervisorMessage::Delegate {
                    job: Box::new(job),
                    reply: sender.into(),
                })
                .is_err()
            {
                return DelegateResult::failed(
                    &agent_id,
                    "unavailable",
                    "the subagent supervisor is not running",
                );
            }
            receiver.await.unwrap_or_else(|_| {
                DelegateResult::failed(&agent_id, "unavailable", "the subagent supervisor stopped")
            })
        })
    }

    fn cancel_running(&self) {
        let _ = self.actor.cast(SupervisorMessage::CancelRunning);
    }
}

fn timeout_for(args: &DelegateArgs, settings: &DelegationSettings) -> Duration {
    args.timeout_ms
        .map_or(settings.default_timeout, Duration::from_millis)
        .clamp(Duration::from_millis(1), settings.max_timeout)
}
