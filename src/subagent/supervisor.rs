//! Parent side of delegation: the `SupervisorActor` and the run of one
//! subagent process (see the module docs of `crate::subagent` for the theory
//! of operation).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::info;

use super::control::ControlTarget;
use super::fork::build_fork;
use crate::agent::EventSink;
use crate::plan::PlanFlavour;
use crate::protocol::control::RunningAgent;
use crate::protocol::delegate::DelegateArgs;
use crate::protocol::delegate::DelegateResult;
use crate::protocol::{Message, SubagentPhase};
use crate::provider::gateway::Gateway;
use crate::sandbox::SandboxRequirement;
use crate::subagent::profiles::{Profile, Profiles};
use crate::tools::ToolCatalog;
use crate::tools::delegate::{DelegationFuture, DelegationRequest, Delegator};

mod io;
mod progress;
mod run;
mod serve;
mod session;

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
    /// Subagents running at once; the rest wait in call order.
    pub concurrency: u32,
    /// Subagents started in one parent turn.
    pub max_per_turn: u32,
    /// Default token budget of one subagent.
    pub budget_tokens: Option<u64>,
    /// Token budget of all subagents of the session together.
    pub session_budget_tokens: Option<u64>,
    /// The session's subagent profiles (`delegate`'s `agent`).
    pub profiles: Arc<Profiles>,
}

impl DelegationSettings {
    /// The settings for `workspace` with the configuration's defaults.
    pub fn defaults(workspace: PathBuf, program: PathBuf) -> DelegationSettings {
        DelegationSettings {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            grace: Duration::from_secs(2),
            sandbox: SandboxRequirement::Required,
            max_steps: 40,
            plan_tool: PlanFlavour::UpdatePlan,
            deny_read: Vec::new(),
            workspace,
            program,
            concurrency: 4,
            max_per_turn: 16,
            budget_tokens: None,
            session_budget_tokens: None,
            profiles: Arc::default(),
        }
    }
}

/// What every run shares.
pub struct Shared {
    settings: DelegationSettings,
    provider: Arc<Gateway>,
    catalog: Arc<ToolCatalog>,
    events: EventSink,
    /// Tokens all subagents of the session used so far.
    session_tokens: AtomicU64,
    /// Cancelled once the session's subagent budget is spent: every
    /// running child stops with `budget_exceeded`.
    session_budget_spent: CancellationToken,
    /// The running subagents as their last lifecycle event described them
    /// (for the control socket's `fido agents`), in start order.
    live: std::sync::Mutex<Vec<LiveAgent>>,
    /// The last `RLIMIT_NPROC` counted for a child.
    process_limit: Arc<std::sync::Mutex<Option<CountedLimit>>>,
}

/// What the control socket reports of one running subagent.
struct LiveAgent {
    agent_id: String,
    child_pid: Option<u32>,
    phase: SubagentPhase,
    started: std::time::Instant,
    tokens: u64,
    plan_item: Option<String>,
}

/// An `RLIMIT_NPROC` (`None`: `/proc` could not be counted) and when it
/// was counted.
type CountedLimit = (std::time::Instant, Option<u64>);

/// How long a count of the user's processes serves later children: the
/// limit is that count plus a headroom of hundreds, so a second's drift
/// does not matter, and a burst of delegations reads `/proc` once.
const PROCESS_COUNT_AGE: std::time::Duration = std::time::Duration::from_secs(1);

impl Shared {
    /// The `RLIMIT_NPROC` of the next child: counted anew (a read of all of
    /// `/proc`, off the runtime) at most once per [`PROCESS_COUNT_AGE`].
    fn process_limit(&self) -> tokio::task::JoinHandle<Option<u64>> {
        let cache = Arc::clone(&self.process_limit);
        tokio::task::spawn_blocking(move || {
            let mut cached = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match *cached {
                Some((at, limit)) if at.elapsed() < PROCESS_COUNT_AGE => limit,
                _ => {
                    let limit = crate::sandbox::child::process_limit();
                    *cached = Some((std::time::Instant::now(), limit));
                    limit
                }
            }
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, Vec<LiveAgent>> {
        // A panic while holding the lock left plain data; keep using it.
        self.live
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a lifecycle event of `agent_id` (a final phase forgets it).
    fn record_live(
        &self,
        agent_id: &str,
        child_pid: Option<u32>,
        phase: &SubagentPhase,
        started: std::time::Instant,
        tokens: u64,
        plan_item: Option<&String>,
    ) {
        let mut live = self.live();
        if phase.is_final() {
            live.retain(|agent| agent.agent_id != agent_id);
            return;
        }
        match live.iter_mut().find(|agent| agent.agent_id == agent_id) {
            Some(agent) => {
                agent.child_pid = child_pid.or(agent.child_pid);
                agent.phase.clone_from(phase);
                agent.tokens = tokens;
            }
            None => live.push(LiveAgent {
                agent_id: agent_id.to_string(),
                child_pid,
                phase: phase.clone(),
                started,
                tokens,
                plan_item: plan_item.cloned(),
            }),
        }
    }

    fn forget_live(&self, agent_id: &str) {
        self.live().retain(|agent| agent.agent_id != agent_id);
    }

    /// Counts `tokens` against the session budget; `true` once it is spent.
    fn charge_session(&self, tokens: u64) -> bool {
        // Saturating: a huge count from a server spends the budget.
        let previous = self
            .session_tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(old.saturating_add(tokens))
            })
            .unwrap_or_else(|old| old);
        let used = previous.saturating_add(tokens);
        let spent = self
            .settings
            .session_budget_tokens
            .is_some_and(|budget| used >= budget);
        if spent {
            self.session_budget_spent.cancel();
        }
        spent
    }
}

/// One delegation handed to the actor: the fork is already built, so the
/// parent's messages were copied at the instant of the call.
pub struct Job {
    agent_id: String,
    fork: Vec<Message>,
    instructions: String,
    timeout: Duration,
    /// Tokens the child may use (`None`: no limit).
    budget: Option<u64>,
    plan_item: Option<String>,
    /// Model requests the child may make (the profile's, else the setting).
    max_steps: u32,
    /// The model its requests ask for (a profile's), else the session's.
    model: Option<String>,
    turn_cancel: CancellationToken,
}

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
        match message {
            SupervisorMessage::Delegate { job, reply } => {
                if !state.shutdown_waiters.is_empty() {
                    let _ = reply.send(cancelled_before_start(&job.agent_id));
                } else if state.running.len() < state.shared.settings.concurrency as usize {
                    state.start(&myself, job, reply);
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
                state.start_waiting(&myself);
                if state.running.is_empty() {
                    for waiter in state.shutdown_waiters.drain(..) {
                        let _ = waiter.send(());
                    }
                }
            }
        }
        Ok(())
    }
}

impl SupervisorState {
    /// Starts waiting jobs while there are free slots; a job whose turn was
    /// interrupted meanwhile gets its cancelled result without a process.
    fn start_waiting(&mut self, myself: &ActorRef<SupervisorMessage>) {
        while self.running.len() < self.shared.settings.concurrency as usize {
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
            // A panic in the run must not keep its slot forever: the
            // child's group dies with the dropped run, and the call gets a
            // failed result.
            let result =
                match crate::agent::recover::catch(run(*job, &shared, cancel, kill_now)).await {
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
            shared.forget_live(&agent_id);
            // Free the slot before the caller sees the result, so the
            // next waiting job starts at once.
            let _ = myself.cast(SupervisorMessage::RunFinished { agent_id });
            let _ = reply.send(result);
        });
    }
}

/// The result of a job cancelled before its process was started.
fn cancelled_before_start(agent_id: &str) -> DelegateResult {
    let mut result = DelegateResult::failed(
        agent_id,
        "cancelled",
        "the subagent was cancelled while it waited for a free slot; it never started",
    );
    result.recommended_next_steps = vec![
        "Continue without this subagent, or delegate again if the work is still needed.".into(),
    ];
    result
}

/// The handle the `delegate` tool and the UI use.
pub struct Supervisor {
    actor: ActorRef<SupervisorMessage>,
    shared: Arc<Shared>,
    settings: DelegationSettings,
    /// Subagents asked for in the current parent turn.
    asked_this_turn: AtomicU32,
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
            session_tokens: AtomicU64::new(0),
            session_budget_spent: CancellationToken::new(),
            live: Default::default(),
            process_limit: Default::default(),
        });
        let (actor, _handle) = Actor::spawn(None, SupervisorActor, shared.clone()).await?;
        Ok(Supervisor {
            actor,
            shared,
            settings,
            asked_this_turn: AtomicU32::new(0),
        })
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

    /// The subagents running now (spawned, not yet finished), in start
    /// order, as the control socket reports them.
    pub fn running_agents(&self) -> Vec<RunningAgent> {
        let parent_pid = std::process::id();
        self.shared
            .live()
            .iter()
            .map(|agent| RunningAgent {
                agent_id: agent.agent_id.clone(),
                parent_pid,
                child_pid: agent.child_pid,
                phase: agent.phase.clone(),
                elapsed_ms: agent.started.elapsed().as_millis() as u64,
                tokens: agent.tokens,
                plan_item: agent.plan_item.clone(),
            })
            .collect()
    }

    /// Cancels the running subagent `agent_id` (or every one, `None`)
    /// cooperatively; returns the ids that were asked to stop.
    pub fn cancel_running_agents(&self, agent_id: Option<&str>) -> Vec<String> {
        let ids: Vec<String> = self
            .shared
            .live()
            .iter()
            .map(|agent| agent.agent_id.clone())
            .filter(|id| agent_id.is_none_or(|wanted| wanted == id))
            .collect();
        for id in &ids {
            self.cancel_agent(id);
        }
        ids
    }

    /// The refusal of a call past `delegate_max_per_turn`, if this is one.
    fn over_turn_limit(&self, agent_id: &str) -> Option<DelegateResult> {
        let asked = self.asked_this_turn.fetch_add(1, Ordering::Relaxed) + 1;
        let limit = self.settings.max_per_turn;
        (asked > limit).then(|| {
            let mut result = DelegateResult::failed(
                agent_id,
                "delegation_limit",
                &format!(
                    "this turn already started {limit} subagents (delegate_max_per_turn); no subagent was started for this call"
                ),
            );
            result.recommended_next_steps = vec![
                "Use the results you have, or investigate directly with read_file, ripgrep and bash_exec.".into(),
            ];
            result
        })
    }
}

impl ControlTarget for Supervisor {
    fn running(&self) -> Vec<RunningAgent> {
        self.running_agents()
    }

    fn cancel(&self, agent_id: Option<&str>) -> Vec<String> {
        self.cancel_running_agents(agent_id)
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
            if let Some(refused) = self.over_turn_limit(&agent_id) {
                return refused;
            }
            let profile = match request.args.agent.as_deref() {
                None => None,
                Some(name) => match self.settings.profiles.get(name) {
                    Some(profile) => Some(profile),
                    None => {
                        return DelegateResult::failed(
                            &agent_id,
                            "invalid_arguments",
                            &format!("there is no subagent profile {name:?}"),
                        );
                    }
                },
            };
            let max_steps = profile
                .and_then(|p| p.max_steps)
                .unwrap_or(self.settings.max_steps);
            let mut fork = build_fork(
                request.parent_messages,
                request.call_id,
                &agent_id,
                &request.args,
                max_steps,
            );
            if let Some(profile) = profile {
                fork.instructions = with_profile(fork.instructions, profile);
            }
            let timeout = timeout_for(&request.args, profile, &self.settings);
            let job = Job {
                agent_id: agent_id.clone(),
                fork: fork.messages,
                instructions: fork.instructions,
                timeout,
                budget: request
                    .args
                    .budget_tokens
                    .or(profile.and_then(|p| p.budget_tokens))
                    .or(self.settings.budget_tokens),
                max_steps,
                model: profile.and_then(|p| p.model.clone()),
                plan_item: request
                    .args
                    .plan_item
                    .as_deref()
                    .map(|item| crate::text::summary(item, 40))
                    .filter(|item| !item.is_empty()),
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
        let _ = self
            .actor
            .cast(SupervisorMessage::Cancel(CancelTarget::All));
    }

    fn cancel_agent(&self, agent_id: &str) {
        let _ = self
            .actor
            .cast(SupervisorMessage::Cancel(CancelTarget::Agent(
                agent_id.to_string(),
            )));
    }

    fn begin_turn(&self) {
        self.asked_this_turn.store(0, Ordering::Relaxed);
    }
}

/// The shortest time limit a delegation gets: a subagent needs about that
/// to start, so a shorter one (a weak model sent `timeout_ms: 120`) could
/// only ever time out.
const MIN_TIMEOUT: Duration = Duration::from_secs(1);

/// The call's time limit, else the profile's, else the default; never
/// under [`MIN_TIMEOUT`] nor past the configured maximum.
fn timeout_for(
    args: &DelegateArgs,
    profile: Option<&Profile>,
    settings: &DelegationSettings,
) -> Duration {
    args.timeout_ms
        .or(profile.and_then(|p| p.timeout_ms))
        .map_or(settings.default_timeout, Duration::from_millis)
        .clamp(MIN_TIMEOUT.min(settings.max_timeout), settings.max_timeout)
}

/// The subagent instructions with a profile's own after them: never in the
/// system message, so the fork's prefix stays the parent's.
fn with_profile(instructions: String, profile: &Profile) -> String {
    if profile.instructions.is_empty() {
        return instructions;
    }
    format!(
        "{instructions}\n\n[Fido: instructions of the subagent profile {}]\n{}",
        profile.name, profile.instructions
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_limit_is_kept_between_a_second_and_the_maximum() {
        let settings = DelegationSettings {
            max_timeout: Duration::from_secs(60),
            default_timeout: Duration::from_secs(30),
            ..DelegationSettings::defaults(std::env::temp_dir(), "fido".into())
        };
        let args = |timeout_ms: Option<u64>| DelegateArgs {
            timeout_ms,
            ..serde_json::from_value(serde_json::json!({"task": "t"})).unwrap()
        };
        assert_eq!(timeout_for(&args(Some(120)), None, &settings), MIN_TIMEOUT);
        assert_eq!(
            timeout_for(&args(Some(5_000)), None, &settings),
            Duration::from_secs(5)
        );
        assert_eq!(
            timeout_for(&args(Some(600_000)), None, &settings),
            Duration::from_secs(60)
        );
        assert_eq!(
            timeout_for(&args(None), None, &settings),
            Duration::from_secs(30)
        );
    }
}
