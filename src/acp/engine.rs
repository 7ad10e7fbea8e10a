//! The one place `fido acp` touches Fido's engine: starting a session (new
//! or resumed from the journal), a turn, an interrupt, an approval's answer,
//! the journal's list of sessions, and the shutdown that reaps every child.
//! The rest of `acp` sees [`Engine`], [`SessionStart`] and the protocol's
//! events, so the front door can change behind this file alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::oneshot;

use crate::agent::AgentMessage;
use crate::agent::asks::PendingAsks;
use crate::config::mcp::McpServerConfig;
use crate::config::{Config, Overrides};
use crate::protocol::changes::DelegationPolicy;
use crate::protocol::event_queue::{EventReceiver, channel};
use crate::protocol::op::AskId;
use crate::protocol::outcome::TurnOutcome;
use crate::protocol::{ApprovalDecision, ApprovalPolicy, Message};
use crate::runtime::{Interaction, ResumeFrom, Runtime};
use crate::store::journal::SessionSummary;

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

/// One running Fido session: its agent, its pending approvals and the
/// runtime that owns its children.
pub struct Engine {
    actor: ActorRef<AgentMessage>,
    asks: Arc<PendingAsks>,
    runtime: Mutex<Option<Runtime>>,
    /// The journal's id (`None`: the session could not be journaled).
    pub journal_id: Option<String>,
    /// The canonical workspace.
    pub workspace: PathBuf,
    /// The messages a resumed session starts from.
    pub history: Vec<Message>,
    /// What the configuration, the instructions and the MCP servers
    /// warned of at start.
    pub warnings: Vec<String>,
}

impl Engine {
    /// Loads the configuration for `start.cwd` and starts a session whose
    /// events come out of the returned receiver. Approvals are asked as
    /// `approval_requested` events (the policy defaults to on-request, as
    /// in the terminal UI), answered by [`Engine::answer`].
    pub async fn start(
        overrides: &Overrides,
        start: SessionStart,
    ) -> Result<(Engine, EventReceiver), String> {
        let config = load_config(overrides, &start).await?;
        let (sink, receiver) = channel();
        let asks = PendingAsks::new(sink.clone());
        let interaction = Interaction {
            user: None,
            approver: Some(asks.clone()),
            default_approval: ApprovalPolicy::OnRequest,
            default_delegation: DelegationPolicy::INTERACTIVE,
        };
        let resume = start.resume.map(ResumeFrom::Id);
        let runtime = Runtime::start(&config, interaction, sink, resume)
            .await
            .map_err(|err| err.to_string())?;
        let mut warnings = config.warnings.clone();
        warnings.extend(runtime.instructions.warnings.iter().cloned());
        warnings.extend(runtime.mcp.warnings().iter().cloned());
        warnings.extend(runtime.sandbox_warnings());
        let engine = Engine {
            actor: runtime.actor.clone(),
            asks,
            journal_id: runtime.id.clone(),
            workspace: config.workspace.clone(),
            history: runtime.resumed.clone(),
            warnings,
            runtime: Mutex::new(Some(runtime)),
        };
        Ok((engine, receiver))
    }

    /// Runs one turn with `prompt` to its outcome (`None`: the agent
    /// stopped before it replied).
    pub async fn prompt(&self, prompt: String) -> Option<TurnOutcome> {
        let (reply, outcome) = oneshot::channel();
        self.actor
            .cast(AgentMessage::SubmitPrompt {
                prompt,
                reply: reply.into(),
            })
            .ok()?;
        outcome.await.ok()
    }

    /// Cancels the running turn (its outcome says `Interrupted`).
    pub fn interrupt(&self) {
        let _ = self.actor.cast(AgentMessage::Interrupt);
    }

    /// The person's answer to the approval `id` asked for.
    pub fn answer(&self, id: AskId, decision: ApprovalDecision) {
        self.asks.approve(id, decision);
    }

    /// Interrupts a running turn, kills every subagent (waiting until each
    /// is reaped), stops the agent and closes the journal. Once only.
    pub async fn shutdown(&self) {
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(runtime) = runtime {
            self.interrupt();
            if tokio::time::timeout(WIND_DOWN, runtime.shutdown())
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
async fn load_config(overrides: &Overrides, start: &SessionStart) -> Result<Config, String> {
    let mut overrides = overrides.clone();
    overrides.workspace = Some(start.cwd.clone());
    let servers = start.mcp_servers.clone();
    let loaded = tokio::task::spawn_blocking(move || Config::load(&overrides))
        .await
        .map_err(|err| format!("cannot load the configuration: {err}"))?;
    let mut config = loaded.map_err(|err| err.to_string())?;
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
pub async fn list_sessions(workspace: &Path) -> Result<(PathBuf, Vec<SessionSummary>), String> {
    let workspace = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let cwd = std::fs::canonicalize(&workspace).unwrap_or(workspace);
        crate::store::journal::list(&cwd)
            .map(|sessions| (cwd, sessions))
            .map_err(|err| format!("cannot list the sessions: {err}"))
    })
    .await
    .map_err(|err| err.to_string())?
}
