//! The one place `fido acp` touches Fido's engine: starting a session (new
//! or resumed from the journal), a turn, an interrupt, an approval's answer,
//! a mode switch,
//! the journal's list of sessions, and the shutdown that reaps every child.
//! The rest of `acp` sees [`Engine`], [`SessionStart`] and the protocol's
//! events, so the front door can change behind this file alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::models::ModelChoice;
use crate::config::{Config, ConfigError, Overrides};
use crate::mcp::McpServerConfig;
use crate::protocol::event_queue::EventReceiver;
use crate::protocol::op::{AskId, Op, OpReply};
use crate::protocol::outcome::TurnOutcome;
use crate::protocol::{ApprovalDecision, ApprovalPolicy, Message, SafetySettings, SandboxMode};
use crate::runtime::{CallError, EngineCaller, FrontEnd, ResumeFrom, StartError};
use crate::store::journal::SessionSummary;
use crate::tools::Capabilities;
use crate::tools::editor::EditorFiles;

/// How long a turn may take to wind down after an interrupt when the
/// client has gone: past it the session is shut down anyway.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// An MCP server the client passed with `session/new` (stdio only).
#[derive(Debug, Clone)]
pub struct ClientMcpServer {
    pub name: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// What a session starts from.
#[derive(Debug, Clone)]
pub struct SessionStart {
    /// The workspace: the client's `cwd`.
    pub cwd: PathBuf,
    pub mcp_servers: Vec<ClientMcpServer>,
    /// A journaled session to continue (`session/load`).
    pub resume: Option<String>,
}

/// One running Fido session, reached through the engine's front door
/// (`runtime::Engine`): ops in, events out.
pub struct Engine {
    caller: EngineCaller,
    engine: Mutex<Option<crate::runtime::Engine>>,
    /// The journal's id (`None`: the session could not be journaled).
    pub journal_id: Option<String>,
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// The messages a resumed session starts from.
    pub history: Vec<Message>,
    /// What the configuration, the instructions and the MCP servers
    /// warned of at start.
    pub warnings: Vec<String>,
    /// What each tool of the session may do (the kind an editor shows).
    pub tools: Capabilities,
    /// The sandbox mode and approval policy it started with.
    pub safety: SafetySettings,
    /// Calls the model writes into its text are run (`tool_call_fallback`).
    pub text_calls: bool,
    /// The model the session starts with, and what its server lists.
    pub models: ModelChoice,
}

/// Why an editor's session did not start, or its sessions could not be
/// listed; the client gets the sentence.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot load the configuration: {0}")]
    ConfigTask(#[source] tokio::task::JoinError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("cannot list the sessions: {0}")]
    List(#[source] std::io::Error),
    /// The listing's task on the blocking pool panicked.
    #[error(transparent)]
    ListTask(tokio::task::JoinError),
}

/// Why the engine did not switch to a session mode.
#[derive(Debug, thiserror::Error)]
pub enum ModeRefused {
    /// The engine said why (an untrusted folder, a sandbox it cannot have).
    #[error("{0}")]
    Engine(String),
    #[error("unexpected answer: {0:?}")]
    Unexpected(Box<OpReply>),
    #[error(transparent)]
    Call(#[from] CallError),
}

impl Engine {
    /// Loads the configuration for `start.cwd` and starts a session whose
    /// events come out of the returned receiver. Approvals are asked as
    /// `approval_requested` events (the policy defaults to on-request, as
    /// in the terminal UI), answered by [`Engine::answer`]; `read_file` reads
    /// through `editor`, the client's files, when it offers them.
    pub async fn start(
        overrides: &Overrides,
        start: SessionStart,
        editor: Option<Arc<dyn EditorFiles>>,
    ) -> Result<(Engine, EventReceiver), SessionError> {
        let config = load_config(overrides, &start).await?;
        let resume = start.resume.map(ResumeFrom::Id);
        let (engine, receiver) =
            crate::runtime::Engine::start_in(&config, FrontEnd::Interactive, resume, editor)
                .await?;
        let mut warnings = config.warnings.clone();
        warnings.extend(engine.session.warnings.iter().cloned());
        let models = ModelChoice::new(config.model.clone(), engine.listed_models().await);
        let acp = Engine {
            caller: engine.caller(),
            journal_id: engine.session.id.clone(),
            workspace: config.workspace.clone(),
            history: engine.session.resumed.clone(),
            warnings,
            tools: engine.session.tools.clone(),
            safety: engine.session.safety.clone(),
            text_calls: config.agent.limits.tool_call_fallback,
            models,
            engine: Mutex::new(Some(engine)),
        };
        Ok((acp, receiver))
    }

    /// Runs one turn with `prompt` to its outcome (`None`: the agent
    /// stopped before it replied).
    pub async fn prompt(&self, prompt: String) -> Option<TurnOutcome> {
        match self.caller.call(Op::SubmitPrompt { prompt }).await.ok()? {
            OpReply::TurnEnded { outcome } => Some(outcome),
            OpReply::Failed { message } => Some(TurnOutcome::failed(message)),
            _ => None,
        }
    }

    /// Runs one of the engine's commands (a slash command) to its answer
    /// (`None`: the agent stopped first).
    pub async fn command(&self, op: Op) -> Option<OpReply> {
        self.caller.call(op).await.ok()
    }

    /// Switches the sandbox mode and approval policy (a session mode), from
    /// the next tool call on; `Err` is why the engine refused.
    pub async fn switch_safety(
        &self,
        sandbox_mode: SandboxMode,
        approval_policy: ApprovalPolicy,
    ) -> Result<(), ModeRefused> {
        let op = Op::SwitchSafety {
            sandbox_mode,
            approval_policy,
        };
        match self.caller.call(op).await? {
            OpReply::SafetySwitched { .. } => Ok(()),
            OpReply::Failed { message } => Err(ModeRefused::Engine(message)),
            other => Err(ModeRefused::Unexpected(Box::new(other))),
        }
    }

    /// Cancels the running turn (its outcome says `Interrupted`).
    pub fn interrupt(&self) {
        let _ = self.caller.send(Op::Interrupt);
    }

    /// Cancels subagent `agent_id` alone: the turn goes on, and gets what
    /// the subagent had as a partial result.
    pub fn cancel_subagent(&self, agent_id: &str) {
        let _ = self.caller.send(Op::CancelSubagent {
            agent_id: Some(agent_id.to_string()),
        });
    }

    /// The person's answer to the approval `id` asked for.
    pub fn answer(&self, id: AskId, decision: ApprovalDecision) {
        let _ = self.caller.send(Op::Approve { id, decision });
    }

    /// Dismisses the question `id` (`ask_user`): an editor has no place to
    /// answer it, and the turn must not wait for one.
    pub fn dismiss_question(&self, id: AskId) {
        let _ = self.caller.send(Op::Answer { id, answer: None });
    }

    /// Interrupts a running turn, kills every subagent (waiting until each
    /// is reaped), stops the agent and closes the journal. Once only.
    pub async fn shutdown(&self) {
        let engine = self
            .engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(engine) = engine {
            self.interrupt();
            if tokio::time::timeout(WIND_DOWN, engine.shutdown())
                .await
                .is_err()
            {
                tracing::warn!("the session did not shut down in time");
            }
        }
    }
}

/// The configuration of a session in `cwd`, with the client's MCP servers
/// added (read off the runtime: it reads files).
async fn load_config(overrides: &Overrides, start: &SessionStart) -> Result<Config, SessionError> {
    let mut overrides = overrides.clone();
    overrides.workspace = Some(start.cwd.clone());
    let servers = start.mcp_servers.clone();
    let loaded = tokio::task::spawn_blocking(move || Config::load(&overrides))
        .await
        .map_err(SessionError::ConfigTask)?;
    let mut config = loaded?;
    for server in servers {
        let server = mcp_config(&config, server);
        config.mcp_servers.retain(|s| s.name != server.name);
        config.mcp_servers.push(server);
    }
    Ok(config)
}

/// A client's stdio server as Fido's MCP configuration holds one: its
/// tools ask before they run, as a configured server's do.
fn mcp_config(config: &Config, server: ClientMcpServer) -> McpServerConfig {
    McpServerConfig {
        name: server.name,
        command: server.command.display().to_string(),
        args: server.args,
        env: server.env.into_iter().collect(),
        env_policy: config.env_policy.clone(),
        cwd: None,
        read_only: false,
        startup_timeout: McpServerConfig::DEFAULT_STARTUP_TIMEOUT,
        tool_timeout: McpServerConfig::DEFAULT_TOOL_TIMEOUT,
        max_restarts: McpServerConfig::DEFAULT_MAX_RESTARTS,
    }
}

/// The canonical `workspace` and its journaled sessions, newest first
/// (read off the runtime).
pub async fn list_sessions(
    workspace: &Path,
) -> Result<(PathBuf, Vec<SessionSummary>), SessionError> {
    let workspace = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let cwd = std::fs::canonicalize(&workspace).unwrap_or(workspace);
        crate::store::journal::list(&cwd)
            .map(|sessions| (cwd, sessions))
            .map_err(SessionError::List)
    })
    .await
    .map_err(SessionError::ListTask)?
}
