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
use crate::protocol::delegate::{DelegateArgs, DelegateErrorCode, DelegateResult};
use crate::protocol::{EventKind, Message, SubagentPhase};
use crate::provider::gateway::Gateway;
use crate::sandbox::SandboxRequirement;
use crate::subagent::profiles::{Profile, Profiles};
use crate::tools::ToolCatalog;
use crate::tools::delegate::{DelegationFuture, DelegationRequest, Delegator};

mod io;
mod keeper;
mod progress;
mod run;
mod serve;
mod session;

use run::run;

/// Time between SIGTERM and SIGKILL once the grace for a partial result has
/// run out: short, the child already ignored `Cancel`. None for a child
/// that ignores SIGTERM and has nothing below it (`Session::close`).
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
        // A panic here fails the actor; the keeper restarts it.
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
                } else if state.running.len() < state.shared.settings.concurrency as usize {
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
            let plan_item = job.plan_item.clone();
            let started = std::time::Instant::now();
            // A panic in the run must not keep its slot forever: the
            // child's group dies with the dropped run, and the call gets a
            // failed result.
            let result =
                match crate::agent::recover::catch(run(*job, &shared, cancel, kill_now)).await {
                    Ok(result) => result,
                    Err(what) => crashed(&shared, &agent_id, plan_item, started, &what),
                };
            shared.forget_live(&agent_id);
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
    shared.events.emit(EventKind::Subagent {
        agent_id: agent_id.to_string(),
        pid: None,
        phase: SubagentPhase::Failed,
        elapsed_ms: started.elapsed().as_millis() as u64,
        detail: "subagent_crashed".into(),
        tokens: 0,
        plan_item,
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

/// The handle the `delegate` tool and the UI use.
pub struct Supervisor {
    /// Watches the supervisor actor and restarts it when it fails.
    keeper: ActorRef<keeper::KeeperMessage>,
    /// The supervisor actor now running.
    worker: keeper::WorkerSlot,
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
        let worker = keeper::WorkerSlot::default();
        let arguments = keeper::KeeperArguments {
            shared: shared.clone(),
            worker: worker.clone(),
        };
        // The keeper has spawned the first supervisor actor once it runs.
        let (keeper, _handle) = Actor::spawn(None, keeper::Keeper, arguments).await?;
        Ok(Supervisor {
            keeper,
            worker,
            shared,
            settings,
            asked_this_turn: AtomicU32::new(0),
        })
    }

    /// Kills every running subagent and returns once each is reaped (or
    /// after `limit`).
    pub async fn shutdown(&self, limit: Duration) {
        let (sender, receiver) = oneshot::channel();
        if self.send(SupervisorMessage::Shutdown(sender.into())) {
            let _ = tokio::time::timeout(limit, receiver).await;
        }
        self.stop();
    }

    /// Hands `message` to the supervisor actor; `false` when there is none.
    fn send(&self, message: SupervisorMessage) -> bool {
        self.worker
            .get()
            .is_some_and(|worker| worker.cast(message).is_ok())
    }

    /// Stops the supervisor actor, and so its keeper.
    fn stop(&self) {
        if let Some(worker) = self.worker.get() {
            worker.stop(None);
        }
        self.keeper.stop(None);
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
                DelegateErrorCode::DelegationLimit,
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
        self.stop();
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
                            DelegateErrorCode::InvalidArguments,
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
            if !self.send(SupervisorMessage::Delegate {
                job: Box::new(job),
                reply: sender.into(),
            }) {
                return DelegateResult::failed(
                    &agent_id,
                    DelegateErrorCode::Unavailable,
                    "the subagent supervisor is not running",
                );
            }
            receiver.await.unwrap_or_else(|_| {
                DelegateResult::failed(
                    &agent_id,
                    DelegateErrorCode::Unavailable,
                    "the subagent supervisor stopped",
                )
            })
        })
    }

    fn cancel_running(&self) {
        self.send(SupervisorMessage::Cancel(CancelTarget::All));
    }

    fn cancel_agent(&self, agent_id: &str) {
        self.send(SupervisorMessage::Cancel(CancelTarget::Agent(
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

    use crate::agent::recover::fault;
    use crate::protocol::EventKind;
    use crate::provider::script::ScriptProvider;

    /// A supervisor of one slot for `workspace` whose child program does
    /// not exist (so a run that gets that far fails at once), and its events.
    async fn supervisor(workspace: &std::path::Path) -> (Supervisor, crate::agent::EventReceiver) {
        let settings = DelegationSettings {
            concurrency: 1,
            ..DelegationSettings::defaults(workspace.to_path_buf(), "/nonexistent/fido".into())
        };
        let provider =
            ScriptProvider::from_json("s", "m", r#"{"turns": [{"text": "x"}]}"#).unwrap();
        let (sink, events) = crate::protocol::event_queue::channel();
        let supervisor = Supervisor::start(
            settings,
            Gateway::new(Arc::new(provider), 1),
            ToolCatalog::standard(PlanFlavour::UpdatePlan),
            sink,
        )
        .await
        .unwrap();
        (supervisor, events)
    }

    async fn delegate(supervisor: &Supervisor) -> DelegateResult {
        let cancel = CancellationToken::new();
        let request = DelegationRequest {
            call_id: "call-1",
            args: DelegateArgs::for_task("look around"),
            parent_messages: &[Message::System {
                content: "s".into(),
            }],
            cancel: &cancel,
        };
        tokio::time::timeout(Duration::from_secs(60), supervisor.delegate(request))
            .await
            .expect("the delegation never returned")
    }

    /// Waits for an `error` event that contains `wanted`.
    async fn error_event(events: &mut crate::agent::EventReceiver, wanted: &str) -> String {
        let found = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(event) = events.recv().await {
                if let EventKind::Error { message } = event.kind
                    && message.contains(wanted)
                {
                    return message;
                }
            }
            panic!("the events ended without an error naming {wanted:?}")
        });
        found.await.expect("no such error event")
    }

    /// A panic inside a run (its task is watched): that call alone fails
    /// with `subagent_crashed`, an `error` event says so, and the slot is
    /// free again: with one slot, the next delegation still runs.
    #[tokio::test]
    async fn a_panic_in_a_run_fails_that_call_and_frees_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let (supervisor, mut events) = supervisor(dir.path()).await;
        fault::arm(dir.path(), "subagent run");
        let crashed = delegate(&supervisor).await;
        assert_eq!(
            crashed.error.unwrap().code,
            DelegateErrorCode::SubagentCrashed
        );
        let message = error_event(&mut events, "injected panic at subagent run").await;
        assert!(
            message.contains("internal error in the parent's supervisor"),
            "{message}"
        );
        assert!(supervisor.running_agents().is_empty());
        let next = delegate(&supervisor).await;
        let code = next.error.map(|e| e.code);
        assert_ne!(code, Some(DelegateErrorCode::SubagentCrashed));
        assert_ne!(code, Some(DelegateErrorCode::Unavailable));
    }

    /// A panic in the supervisor actor's handler fails the actor: the
    /// call it was handling gets a failed result, the keeper restarts the
    /// actor and says so, and delegation works again.
    #[tokio::test]
    async fn a_failed_supervisor_actor_is_restarted() {
        let dir = tempfile::tempdir().unwrap();
        let (supervisor, mut events) = supervisor(dir.path()).await;
        fault::arm(dir.path(), "supervisor handler");
        let lost = delegate(&supervisor).await;
        assert_eq!(lost.error.unwrap().code, DelegateErrorCode::Unavailable);
        let message = error_event(&mut events, "injected panic at supervisor handler").await;
        assert!(message.contains("it was restarted"), "{message}");
        let next = delegate(&supervisor).await;
        let code = next.error.map(|e| e.code);
        assert_ne!(code, Some(DelegateErrorCode::Unavailable));
        supervisor.shutdown(Duration::from_secs(5)).await;
    }

    /// The same panic seen from the parent's turn: the `delegate` call
    /// gets its failed result, the turn goes on to its answer, and the
    /// next prompt works.
    #[tokio::test]
    async fn a_turn_whose_run_panics_gets_its_result_and_the_next_prompt_works() {
        use crate::agent::{AgentActor, AgentArguments, AgentDeps, AgentMessage, Conversation};
        let dir = tempfile::tempdir().unwrap();
        let (supervisor, mut supervisor_events) = supervisor(dir.path()).await;
        let mut env = crate::tools::testing::env(dir.path());
        env.delegator = Some(Arc::new(supervisor));
        let script = r#"{"turns": [
            {"tool_calls": [{"name": "delegate", "arguments": {"task": "look around"}}]},
            {"text": "went on without it"},
            {"text": "second answer"}
        ]}"#;
        let (sink, mut events) = crate::protocol::event_queue::channel();
        let deps = Arc::new(AgentDeps {
            provider: Arc::new(ScriptProvider::from_json("a", "m", script).unwrap()),
            catalog: ToolCatalog::standard(PlanFlavour::UpdatePlan),
            tool_env: Arc::new(env),
            ctx: crate::tools::InvocationContext::main(),
            settings: crate::agent::AgentSettings::for_tests(),
            events: sink,
            journal: None,
        });
        let arguments = AgentArguments {
            deps,
            conversation: Conversation::new("system".into()),
            turns: 0,
        };
        let (agent, _) = Actor::spawn(None, AgentActor, arguments).await.unwrap();
        fault::arm(dir.path(), "subagent run");
        let ask = |prompt: &'static str| {
            let agent = agent.clone();
            async move {
                ractor::call_t!(
                    agent,
                    |reply| AgentMessage::SubmitPrompt {
                        prompt: prompt.into(),
                        reply
                    },
                    60_000
                )
                .unwrap()
            }
        };
        let first = ask("first").await;
        assert_eq!(first.final_text(), Some("went on without it"));
        let mut delegate_result = None;
        while let Some(event) = events.try_recv() {
            if let EventKind::ToolResult { name, ok, .. } = event.kind
                && name == "delegate"
            {
                delegate_result = Some(ok);
            }
        }
        assert_eq!(
            delegate_result,
            Some(false),
            "the call got its failed result"
        );
        error_event(&mut supervisor_events, "injected panic at subagent run").await;
        let conversation = ractor::call_t!(agent, AgentMessage::Snapshot, 60_000)
            .unwrap()
            .unwrap();
        assert!(conversation.unanswered_tool_calls().is_empty());
        assert!(conversation.messages().iter().any(|m| matches!(m,
                Message::Tool { content, .. } if content.contains("subagent_crashed"))),);
        let second = ask("second").await;
        assert_eq!(second.final_text(), Some("second answer"));
    }

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
