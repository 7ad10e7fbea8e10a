//! Parent side of delegation (see the module docs of `crate::subagent` for
//! the theory of operation). This file holds the settings, what every run
//! shares and the [`Supervisor`] handle the `delegate` tool calls; the
//! actor is in [`actor`], one run's stages in [`run`], [`session`] and
//! [`serve`], the session's record of its subagents in [`record`].

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use ractor::{Actor, ActorRef};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::DelegationLimits;
use super::fork::build_fork;
use crate::agent::EventSink;
use crate::plan::PlanFlavour;
use crate::protocol::control::RunningSubagent;
use crate::protocol::delegate::{DelegateArgs, DelegateErrorCode, DelegateResult};
use crate::protocol::{EventKind, Message, SubagentPhase};
use crate::provider::gateway::Gateway;
use crate::subagent::profiles::{Profile, Profiles};
use crate::tools::ToolCatalog;
use crate::tools::delegate::{DelegationFuture, DelegationRequest, Delegator};

mod actor;
mod child;
mod io;
mod progress;
mod record;
mod restarter;
mod run;
mod serve;
mod write;

pub use actor::{CancelTarget, SupervisorActor, SupervisorMessage, SupervisorState};
use run::run;

/// Time between SIGTERM and SIGKILL once the grace for a partial result has
/// run out: short, the child already ignored `Cancel`. None for a child
/// that ignores SIGTERM and has nothing below it (`ChildLink::close`).
const TERM_GRACE: Duration = Duration::from_millis(10);
/// Longest wait, after a subagent's keeper is reaped, for the kernel to
/// end the PID namespace it kept (`child::ChildLink::close`).
const NAMESPACE_END: Duration = Duration::from_secs(2);
/// Longest wait, once the child has exited, for the frames it sent
/// before (`serve::after_exit`).
const FINAL_AFTER_EXIT: Duration = Duration::from_millis(500);
/// Longest wait for the child to connect and say `Hello`.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames a child may send in one run before it counts as flooding.
const MAX_FRAMES: u32 = 20_000;
/// Bytes of the child's stderr copied into the parent's log.
const MAX_STDERR_LOGGED: usize = 64 * 1024;
/// How often lifecycle events of one phase reach the UI.
const LIFECYCLE_INTERVAL: Duration = Duration::from_millis(50);

/// What the supervisor runs with: the configured limits and what the
/// session adds to them (its workspace, profiles, the child program).
#[derive(Debug, Clone)]
pub struct DelegationSettings {
    /// The `sandbox` and `delegate_*` keys.
    pub limits: DelegationLimits,
    pub plan_tool: PlanFlavour,
    /// Credential paths the child's sandbox keeps unreadable.
    pub deny_read: Vec<PathBuf>,
    pub workspace: PathBuf,
    /// The binary to run as `fido __subagent` (the current executable).
    pub program: PathBuf,
    /// The session's subagent profiles (`delegate`'s `agent`).
    pub profiles: Arc<Profiles>,
    /// Processes and threads one subagent and all its commands may have
    /// at once (`command_max_processes`; `sandbox::subagent_ns::contain_subagent`).
    pub max_processes: u32,
    /// Calls the model writes into its text are run (`tool_call_fallback`):
    /// the child's loop runs them too, and its streamed words hold them back.
    pub tool_call_fallback: bool,
}

impl DelegationSettings {
    /// The settings for `workspace` with the configuration's defaults.
    pub fn defaults(workspace: PathBuf, program: PathBuf) -> DelegationSettings {
        DelegationSettings {
            limits: DelegationLimits::default(),
            plan_tool: PlanFlavour::UpdatePlan,
            deny_read: Vec::new(),
            workspace,
            program,
            profiles: Arc::default(),
            max_processes: crate::sandbox::limits::DEFAULT_MAX_PROCESSES,
            tool_call_fallback: false,
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
    /// Every subagent of the session as its last lifecycle event described
    /// it, in start order: the running ones for the control socket's `fido
    /// agents`, all of them for `/agents`.
    record: record::SessionRecord,
    /// The last `RLIMIT_NPROC` counted for a child.
    process_limit: Arc<std::sync::Mutex<Option<CountedLimit>>>,
    /// The claims of the live write subagents.
    claims: crate::changes::Claims,
    /// The parent's web access, which runs the children's `browse_url`
    /// calls (`None`: refused).
    web: Option<Arc<dyn crate::tools::web::Web>>,
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

    /// Records a lifecycle event of a subagent and emits it as a
    /// `subagent` event: the record and the events say the same.
    fn announce(&self, lifecycle: record::Lifecycle<'_>) {
        self.record.note(&lifecycle);
        self.events.emit(EventKind::Subagent {
            agent_id: lifecycle.agent_id.to_string(),
            pid: lifecycle.child_pid,
            elapsed_ms: lifecycle.started.elapsed().as_millis() as u64,
            phase: lifecycle.phase,
            detail: lifecycle.detail,
            tokens: lifecycle.tokens,
            plan_item: lifecycle.plan_item.cloned(),
        });
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
            .limits
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
    /// A write subagent's worktree and sandbox roots.
    write: Option<crate::changes::WriteRoots>,
}

/// The handle the `delegate` tool and the UI use.
pub struct Supervisor {
    /// Watches the supervisor actor and restarts it when it fails.
    restarter: ActorRef<restarter::RestarterMessage>,
    /// The supervisor actor now running.
    worker: restarter::WorkerSlot,
    shared: Arc<Shared>,
    settings: DelegationSettings,
    /// Subagents asked for in the current parent turn.
    asked_this_turn: AtomicU32,
}

impl Supervisor {
    /// A supervisor whose children cannot browse.
    pub async fn start(
        settings: DelegationSettings,
        provider: Arc<Gateway>,
        catalog: Arc<ToolCatalog>,
        events: EventSink,
    ) -> Result<Supervisor, ractor::SpawnErr> {
        Supervisor::start_with_web(settings, provider, catalog, events, None).await
    }

    /// A supervisor whose children's `browse_url` calls `web` runs.
    pub async fn start_with_web(
        settings: DelegationSettings,
        provider: Arc<Gateway>,
        catalog: Arc<ToolCatalog>,
        events: EventSink,
        web: Option<Arc<dyn crate::tools::web::Web>>,
    ) -> Result<Supervisor, ractor::SpawnErr> {
        let shared = Arc::new(Shared {
            settings: settings.clone(),
            provider,
            catalog,
            events,
            session_tokens: AtomicU64::new(0),
            session_budget_spent: CancellationToken::new(),
            record: Default::default(),
            process_limit: Default::default(),
            claims: Default::default(),
            web,
        });
        let worker = restarter::WorkerSlot::default();
        let arguments = restarter::RestarterArguments {
            shared: shared.clone(),
            worker: worker.clone(),
        };
        // The restarter has spawned the first supervisor actor once it runs.
        let (restarter, _handle) = Actor::spawn(None, restarter::Restarter, arguments).await?;
        Ok(Supervisor {
            restarter,
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

    /// Stops the supervisor actor, and so its restarter.
    fn stop(&self) {
        if let Some(worker) = self.worker.get() {
            worker.stop(None);
        }
        self.restarter.stop(None);
    }

    /// The subagents running now (spawned, not yet finished), in start
    /// order, as the control socket reports them.
    pub fn running_agents(&self) -> Vec<RunningSubagent> {
        self.shared.record.running(std::process::id())
    }

    /// Cancels the running subagent `agent_id` (or every one, `None`)
    /// cooperatively; returns the ids that were asked to stop.
    pub fn cancel_running_agents(&self, agent_id: Option<&str>) -> Vec<String> {
        let ids: Vec<String> = self
            .shared
            .record
            .running(std::process::id())
            .into_iter()
            .map(|agent| agent.agent_id)
            .filter(|id| agent_id.is_none_or(|wanted| wanted == id))
            .collect();
        for id in &ids {
            self.cancel_subagent(id);
        }
        ids
    }

    /// Hands `job` to the supervisor actor and waits for its result.
    async fn run_job(&self, job: Job) -> DelegateResult {
        let agent_id = job.agent_id.clone();
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
    }

    /// A write delegation's worktree and claim (`None` for a read-only
    /// one); `Err` is the call's refusal.
    async fn prepare_write(
        &self,
        agent_id: &str,
        request: &DelegationRequest<'_>,
    ) -> Result<Option<write::WriteRun>, DelegateResult> {
        match request.args.mode {
            Some(crate::protocol::delegate::DelegateMode::Write) => {
                write::prepare(&self.shared, agent_id, &request.args, request.tools)
                    .await
                    .map(Some)
            }
            Some(crate::protocol::delegate::DelegateMode::ReadOnly) | None => Ok(None),
        }
    }

    /// The refusal of a call past `delegate_max_per_turn`, if this is one.
    fn over_turn_limit(&self, agent_id: &str) -> Option<DelegateResult> {
        let asked = self.asked_this_turn.fetch_add(1, Ordering::Relaxed) + 1;
        let limit = self.settings.limits.max_per_turn;
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

    /// The profile `delegate`'s `agent` names, if it names one; a name
    /// the session has no profile of is refused.
    fn profile_named(
        &self,
        agent_id: &str,
        name: Option<&str>,
    ) -> Result<Option<&Profile>, Box<DelegateResult>> {
        let Some(name) = name else {
            return Ok(None);
        };
        self.settings.profiles.get(name).map(Some).ok_or_else(|| {
            Box::new(DelegateResult::failed(
                agent_id,
                DelegateErrorCode::InvalidArguments,
                &format!("there is no subagent profile {name:?}"),
            ))
        })
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
            let profile = match self.profile_named(&agent_id, request.args.profile.as_deref()) {
                Ok(profile) => profile,
                Err(refused) => return *refused,
            };
            let max_steps = profile
                .and_then(|p| p.max_steps)
                .unwrap_or(self.settings.limits.max_steps);
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
            if let Some(refused) = budget_below_fork(&agent_id, &request.args, &fork, &self.shared)
            {
                return refused;
            }
            let write = match self.prepare_write(&agent_id, &request).await {
                Ok(write) => write,
                Err(refused) => return refused,
            };
            // Only a call that will run is linked to its subagent (front
            // ends show the subagent under the call from here on).
            self.shared.events.emit(EventKind::SubagentCall {
                call_id: request.call_id.to_string(),
                agent_id: agent_id.clone(),
            });
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
                    .or(self.settings.limits.budget_tokens),
                max_steps,
                model: profile.and_then(|p| p.model.clone()),
                plan_item: request
                    .args
                    .plan_item
                    .as_deref()
                    .map(|item| crate::text::summary(item, 40))
                    .filter(|item| !item.is_empty()),
                turn_cancel: request.cancel.clone(),
                write: write.as_ref().map(write::WriteRun::roots),
            };
            // Without the session's tools (a lone `fido tool call`), no hooks.
            let none = crate::hooks::Hooks::none();
            let hooks = request.tools.map_or(&none, |tools| tools.hooks.as_ref());
            let task = crate::text::summary(&request.args.task, 500);
            hooks.subagent_started(&agent_id, &task).await;
            let mut result = self.run_job(job).await;
            // Also when the run never started: its worktree is cleared up.
            if let Some(run) = write {
                write::conclude(&self.shared, run, &mut result, request.tools).await;
            }
            let (status, summary) = (result.status, &result.summary);
            hooks
                .subagent_stopped(&agent_id, task, status, summary)
                .await;
            result
        })
    }

    fn cancel_running(&self) {
        self.send(SupervisorMessage::Cancel(CancelTarget::All));
    }

    fn cancel_subagent(&self, agent_id: &str) {
        self.send(SupervisorMessage::Cancel(CancelTarget::Agent(
            agent_id.to_string(),
        )));
    }

    fn begin_turn(&self) {
        self.asked_this_turn.store(0, Ordering::Relaxed);
    }

    fn session_subagents(&self) -> Vec<crate::protocol::control::SessionSubagent> {
        self.shared.record.session()
    }
}

/// The refusal of a call whose own `budget_tokens` is below what the fork
/// alone costs: such a child could only spend its budget on its first
/// request and end `budget_exceeded` with nothing done, so none is spawned.
fn budget_below_fork(
    agent_id: &str,
    args: &DelegateArgs,
    fork: &super::fork::Fork,
    shared: &Shared,
) -> Option<DelegateResult> {
    let budget = args.budget_tokens?;
    let needed = fork.min_budget_tokens(shared.catalog.specs());
    (budget < needed).then(|| {
        DelegateResult::failed(
            agent_id,
            DelegateErrorCode::InvalidArguments,
            &format!(
                "budget_tokens {budget} is below what this subagent needs before it can answer: its forked conversation, bootstrap and tools are about {} prompt tokens, plus {} for an answer; give budget_tokens of at least {needed}, or leave it out. No subagent was started",
                needed - super::fork::MIN_ANSWER_TOKENS,
                super::fork::MIN_ANSWER_TOKENS,
            ),
        )
    })
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
        .map_or(settings.limits.default_timeout, Duration::from_millis)
        .clamp(
            MIN_TIMEOUT.min(settings.limits.max_timeout),
            settings.limits.max_timeout,
        )
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
mod tests;
