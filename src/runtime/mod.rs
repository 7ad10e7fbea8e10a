//! The composition root: a running Fido's provider (behind the gateway),
//! catalog, tool environment, MCP servers, subagent supervisor, journal and
//! agent actor, wired the same way for every front end. A front end starts
//! one [`Engine`] per session ([`engine`]) and talks to it only through
//! ops and events; the local commands are answered inside it ([`local`]).

pub mod engine;
pub mod local;
pub mod policy;
pub mod provider;
mod safety_switch;
pub mod session_start;
mod tool_env;

use crate::protocol::changes::DelegationPolicy;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::task::JoinHandle;

pub use engine::{CallError, Engine, EngineCaller, FrontEnd, SessionStart};
pub use session_start::ResumeFrom;
pub use tool_env::{ToolEnvError, tool_env};

use crate::agent::ProjectInstructions;
use crate::agent::{
    AgentArguments, AgentDeps, AgentMessage, Conversation, EventSink, spawn_watched,
    start_conversation,
};
use crate::config::Config;
use crate::hooks::SessionSource;
use crate::mcp::McpHub;
use crate::plan::PlanFlavour;
use crate::protocol::ApprovalPolicy;
use crate::protocol::EventKind;
use crate::provider::BuildError;
use crate::provider::gateway::Gateway;
use crate::store::journal::{Journal, Replayed, SessionInfo};
use crate::subagent::profiles::Profiles;
use crate::subagent::supervisor::{DelegationSettings, Supervisor};
use crate::tools::approval::Approver;
use crate::tools::ask_user::UserChannel;
use crate::tools::{InvocationContext, ToolCatalog, ToolEnv};

/// How long shutting down waits for subagents to be reaped.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(5);

/// Who can answer questions and approvals, and the approval policy when
/// the configuration names none.
pub struct Interaction {
    pub user: Option<Arc<dyn UserChannel>>,
    pub approver: Option<Arc<dyn Approver>>,
    pub default_approval: ApprovalPolicy,
    /// `delegate_write` and `delegate_merge` where the configuration is
    /// silent.
    pub default_delegation: DelegationPolicy,
    /// The editor whose buffers `read_file` reads (ACP's client `fs`).
    pub editor: Option<Arc<dyn crate::tools::editor::EditorFiles>>,
}

/// Everything a session runs on; only [`Engine`] holds one.
struct Runtime {
    actor: ActorRef<AgentMessage>,
    /// The journaled session's id (`None`: it could not be journaled).
    id: Option<String>,
    /// The messages a resumed session started from (empty for a new one).
    resumed: Vec<crate::protocol::Message>,
    /// The session's model, through the gateway (what its server lists).
    provider: Arc<dyn crate::provider::Provider>,
    journal: Option<Arc<Journal>>,
    /// The MCP servers; their start-up failures are `mcp.warnings()`.
    mcp: Arc<McpHub>,
    /// What each tool of the catalog may do.
    tools: crate::tools::Capabilities,
    /// The AGENTS.md files folded into the system prompt.
    instructions: ProjectInstructions,
    /// The tools' environment: its commands' sandbox (whose TMPDIR goes
    /// at shutdown) and approvals, which a mode switch changes.
    tool_env: Arc<ToolEnv>,
    actor_handle: JoinHandle<()>,
    supervisor: Arc<Supervisor>,
    /// Tells the front end when a change set moves outside its delegation.
    change_watch: JoinHandle<()>,
}

/// Why a session could not start, by the stage that failed; each says
/// why in one sentence for the person.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configured provider cannot be built.
    #[error(transparent)]
    Provider(#[from] BuildError),
    /// The provider for the model a subagent profile names cannot be built.
    #[error("subagent profile {profile}: model {model}: {source}")]
    ProfileModel {
        profile: String,
        model: String,
        #[source]
        source: BuildError,
    },
    /// The workspace or the command sandbox cannot be set up.
    #[error(transparent)]
    Tools(#[from] ToolEnvError),
    /// The binary the subagents run as cannot be found.
    #[error("cannot find the fido binary to run subagents: {0}")]
    ChildProgram(#[source] std::io::Error),
    /// The subagent supervisor cannot start.
    #[error("cannot start the subagent supervisor: {0}")]
    Supervisor(#[source] ractor::SpawnErr),
    /// The journal cannot be opened, or the session it names resumed.
    #[error(transparent)]
    Journal(#[from] session_start::SessionJournalError),
    /// The agent actor cannot start.
    #[error("cannot start the agent: {0}")]
    Agent(#[source] ractor::SpawnErr),
}

impl Runtime {
    /// Builds everything and starts the agent actor.
    async fn start(
        config: &Config,
        interaction: Interaction,
        events: EventSink,
        resume: Option<ResumeFrom>,
    ) -> Result<Runtime, StartError> {
        let parts = Parts::build(config, interaction, &events).await?;
        let tools = parts.catalog.capabilities();
        let tool_env = parts.tool_env.clone();
        let (journal, replayed) = open_journal(config, &parts, resume, &events).await?;
        let id = journal.as_ref().map(|j| j.id().to_string());
        let transcript = journal.as_ref().map(|j| j.path().to_path_buf());
        parts.tool_env.hooks.set_session(id.clone(), transcript);
        let instructions = load_instructions(config).await;
        let (mut conversation, replayed) = first_conversation(
            replayed,
            parts.catalog.clone(),
            parts.tool_env.clone(),
            config.plan_tool,
            instructions.clone(),
            events.clone(),
        )
        .await?;
        let hooks = &parts.tool_env.hooks;
        let source = match replayed {
            Some(_) => SessionSource::Resume,
            None => SessionSource::Startup,
        };
        crate::agent::hook_points::session_started(hooks, &mut conversation, source).await;
        if let Some(journal) = &journal {
            journal
                .record(conversation.generation(), conversation.messages())
                .await;
        }
        let turns = replayed.as_ref().map_or(0, |r| r.turns);
        let resumed = replayed.map(|r| r.messages).unwrap_or_default();
        let supervisor = parts.supervisor.clone();
        let watch_events = events.clone();
        let provider = parts.provider.clone();
        let deps = Arc::new(AgentDeps {
            provider: parts.provider,
            catalog: parts.catalog,
            tool_env: parts.tool_env,
            ctx: InvocationContext::main(),
            settings: config.agent,
            events,
            journal: journal.clone(),
        });
        let (actor, actor_handle) = spawn_watched(AgentArguments {
            deps,
            conversation,
            turns,
        })
        .await
        .map_err(StartError::Agent)?;
        sweep_dead_sessions(config).await;
        let change_watch =
            crate::changes::watch::start(config.workspace.clone(), watch_events).await;
        Ok(Runtime {
            id,
            provider,
            resumed,
            journal,
            mcp: parts.mcp,
            tools,
            tool_env,
            instructions,
            actor,
            actor_handle,
            supervisor,
            change_watch,
        })
    }

    /// What the command sandbox warns of at start: protected paths kept
    /// by Landlock's per-entry fallback (new top-level entries then need
    /// an escalation). Where a namespace keeps them, a log line says so.
    fn sandbox_warnings(&self) -> Vec<String> {
        use crate::sandbox::protect::Mechanism;
        match self.tool_env.sandbox.current().protection() {
            Some(mechanism @ Mechanism::LandlockPerEntry { .. }) => vec![format!(
                ".git, .fido, .fido-state and fido.toml are kept read-only to commands by {mechanism}"
            )],
            Some(mechanism) => {
                tracing::info!(%mechanism, ".git, .fido, .fido-state and fido.toml are read-only to commands");
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// The session's journal (`None`: it could not be journaled), where
    /// `/suspend` puts its bookmarks.
    fn journal(&self) -> Option<Arc<Journal>> {
        self.journal.clone()
    }

    /// Kills every subagent (waiting until each is reaped), then stops the
    /// agent.
    async fn shutdown(self) {
        self.change_watch.abort();
        self.supervisor.shutdown(SHUTDOWN_LIMIT).await;
        self.mcp.shutdown().await;
        self.actor.stop(None);
        let _ = self.actor_handle.await;
        if let Some(journal) = &self.journal {
            journal.close().await;
        }
        // Tasks still holding the tool environment may never be dropped
        // before the process exits: remove the commands' TMPDIR now.
        let sandbox = self.tool_env.sandbox.current();
        let _ = tokio::task::spawn_blocking(move || sandbox.remove_tmpdir()).await;
    }
}

/// What the agent runs with: its provider (through the gateway), the
/// catalog, the tool environment and the subagent supervisor.
struct Parts {
    provider: Arc<dyn crate::provider::Provider>,
    catalog: Arc<ToolCatalog>,
    tool_env: Arc<ToolEnv>,
    mcp: Arc<McpHub>,
    supervisor: Arc<Supervisor>,
}

impl Parts {
    async fn build(
        config: &Config,
        interaction: Interaction,
        events: &EventSink,
    ) -> Result<Parts, StartError> {
        let provider = provider::build_provider(config)?;
        let profiles = Arc::new(load_profiles(config).await);
        // The one holder of the provider: the main agent and every
        // subagent ask through it (also for the models profiles name).
        let models = profile_models(config, &profiles)?;
        let gateway = Gateway::with_models(provider, models, config.provider_concurrency);
        let approval = config.approvals.policy_or(interaction.default_approval);
        let delegation = config
            .approvals
            .delegation_or(interaction.default_delegation);
        let mut env = tool_env(config, approval, interaction.approver)?;
        let hooks = Arc::new(crate::hooks::Hooks::new(
            config.hooks.clone(),
            config.workspace.clone(),
            config.env_policy.clone(),
            events.clone(),
        ));
        env.approvals = env
            .approvals
            .with_delegation(delegation)
            .with_hooks(hooks.clone());
        env.hooks = hooks;
        env.user = interaction.user;
        env.editor = interaction.editor;
        let mcp = start_mcp(config).await;
        let catalog = ToolCatalog::with_mcp(config.plan_tool, profiles.offers(), mcp.clone());
        let settings = delegation_settings(config, profiles)?;
        // The children's browse_url runs here, under the session's policy.
        let web = env.web.clone();
        let supervisor = Supervisor::start_with_web(
            settings,
            gateway.clone(),
            catalog.clone(),
            events.clone(),
            web,
        )
        .await
        .map_err(StartError::Supervisor)?;
        let supervisor = Arc::new(supervisor);
        env.delegator = Some(supervisor.clone());
        Ok(Parts {
            provider: gateway.for_identity(crate::protocol::Identity::Main),
            catalog,
            tool_env: Arc::new(env),
            mcp,
            supervisor,
        })
    }
}

/// The supervisor's settings, from the configuration.
fn delegation_settings(
    config: &Config,
    profiles: Arc<Profiles>,
) -> Result<DelegationSettings, StartError> {
    let program = std::env::current_exe()
        .map(|fido| crate::subagent::child_program(&fido))
        .map_err(StartError::ChildProgram)?;
    Ok(DelegationSettings {
        limits: config.delegation.clone(),
        plan_tool: config.plan_tool,
        deny_read: policy::credential_paths(config),
        workspace: config.workspace.clone(),
        program,
        max_processes: config.sandbox.limits.max_processes,
        tool_call_fallback: config.agent.limits.tool_call_fallback,
        profiles,
    })
}

/// Opens the session's journal (new, or the one `resume` names) and
/// announces the session.
async fn open_journal(
    config: &Config,
    parts: &Parts,
    resume: Option<ResumeFrom>,
    events: &EventSink,
) -> Result<(Option<Arc<Journal>>, Option<Replayed>), session_start::SessionJournalError> {
    let info = SessionInfo {
        workspace: config.workspace.display().to_string(),
        provider: parts.provider.name().to_string(),
        model: parts.provider.model().to_string(),
    };
    let (journal, replayed) = session_start::open(config, info, resume).await?;
    events.emit(EventKind::SessionStarted {
        workspace: config.workspace.display().to_string(),
        provider: parts.provider.name().to_string(),
        model: parts.provider.model().to_string(),
        tools: parts.catalog.names(),
        session_id: journal.as_ref().map(|j| j.id().to_string()),
    });
    Ok((journal, replayed))
}

/// Kills the children of dead Fido processes in this workspace, then
/// removes the folders they all left and keeps their write subagents'
/// change sets (off the runtime).
async fn sweep_dead_sessions(config: &Config) {
    let run_dir = crate::subagent::control::run_dir(&config.workspace);
    let workspace = config.workspace.clone();
    let _ = tokio::task::spawn_blocking(move || {
        crate::subagent::orphans::sweep(&run_dir);
        crate::sandbox::PrivateDir::remove_stale();
        // After the kill above: a dead Fido's write subagents are gone, so
        // their worktrees hold their last state.
        let kept =
            crate::changes::sweep_orphans(&workspace, &crate::sandbox::git_wall::for_change_set);
        if !kept.is_empty() {
            tracing::info!(
                ?kept,
                "kept the change sets of a dead session's write subagents"
            );
        }
    })
    .await;
}

/// The conversation a session starts from (new, or the one it resumes),
/// with the saved plan restored. Built on the blocking pool: restoring
/// waits for the plan's lock (up to its bound), which must hold no runtime
/// worker, so a signal during start-up is still seen at once.
async fn first_conversation(
    replayed: Option<Replayed>,
    catalog: Arc<ToolCatalog>,
    tool_env: Arc<ToolEnv>,
    flavour: PlanFlavour,
    instructions: ProjectInstructions,
    events: EventSink,
) -> Result<(Conversation, Option<Replayed>), session_start::SessionJournalError> {
    tokio::task::spawn_blocking(move || {
        let conversation = match &replayed {
            Some(replayed) => {
                session_start::resumed_conversation(replayed, &tool_env, flavour, &events)?
            }
            None => start_conversation(&catalog, &tool_env, flavour, &instructions, &events),
        };
        Ok((conversation, replayed))
    })
    .await
    .map_err(session_start::SessionJournalError::Conversation)?
}

/// Starts the configured MCP servers (all at once) and logs how long it took.
pub(super) async fn start_mcp(config: &Config) -> Arc<McpHub> {
    if config.mcp_servers.is_empty() {
        return McpHub::empty();
    }
    let started = std::time::Instant::now();
    let hub = McpHub::start(&config.mcp_servers, &config.workspace).await;
    tracing::info!(
        servers = config.mcp_servers.len(),
        tools = hub.tool_specs().len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "MCP servers started"
    );
    hub
}

/// The subagent profiles of the session (read off the runtime).
pub async fn load_profiles(config: &Config) -> Profiles {
    let workspace = config.workspace.clone();
    let trusted = config.workspace_trusted;
    let config_dir = config.config_dir.clone();
    tokio::task::spawn_blocking(move || Profiles::load(&workspace, trusted, config_dir.as_deref()))
        .await
        .unwrap_or_default()
}

/// A provider for every other model the profiles name: the same endpoint
/// and key, another model.
fn profile_models(
    config: &Config,
    profiles: &Profiles,
) -> Result<std::collections::BTreeMap<String, Arc<dyn crate::provider::Provider>>, StartError> {
    let mut models = std::collections::BTreeMap::new();
    for profile in profiles.profiles.values() {
        let Some(model) = profile.model.as_ref().filter(|m| **m != config.model) else {
            continue;
        };
        if models.contains_key(model) {
            continue;
        }
        let mut other = config.clone();
        other.model = model.clone();
        let provider =
            provider::build_provider(&other).map_err(|source| StartError::ProfileModel {
                profile: profile.name.clone(),
                model: model.clone(),
                source,
            })?;
        models.insert(model.clone(), provider);
    }
    Ok(models)
}

/// The session's AGENTS.md files (read off the runtime), named in the log.
async fn load_instructions(config: &Config) -> ProjectInstructions {
    let workspace = config.workspace.clone();
    let config_dir = config.config_dir.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        ProjectInstructions::load(&workspace, config_dir.as_deref())
    })
    .await
    .unwrap_or_default();
    for path in loaded.paths() {
        tracing::info!(path, "project instructions loaded");
    }
    loaded
}
