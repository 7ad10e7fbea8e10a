//! The one front door to the engine. Every front end — `fido exec`, the
//! terminal UI, the control socket, an ACP server — starts an [`Engine`]
//! for a configuration and then only sends it ops
//! ([`crate::protocol::op::Op`]) and reads its events
//! ([`crate::protocol::EventKind`]); none of them reaches the agent actor
//! or the supervisor itself.
//!
//! An op's answer is data ([`OpReply`]): an `op_replied` event with the
//! submission's id for [`Engine::send`] (how the TUI reads them, in order
//! with the other events), or the return value of [`EngineCaller::call`],
//! which never shows on the event stream.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::local::EngineCommands;
use super::safety_switch::SafetySwitch;
use super::{Interaction, ResumeFrom, Runtime, StartError};
use crate::agent::asks::PendingAsks;
use crate::agent::ops::{self, Awaited, FrontDesk};
use crate::config::Config;
use crate::protocol::changes::DelegationPolicy;
use crate::protocol::control::RunningSubagent;
use crate::protocol::event_queue::EventReceiver;
use crate::protocol::op::{Op, OpRefused, OpReply, OpSender, Submission, SubmissionId};
use crate::protocol::{ApprovalPolicy, Message, SafetySettings};
use crate::subagent::control::{ControlServer, ControlTarget};
use crate::tools::editor::EditorFiles;

/// Who answers the engine's approvals and `ask_user` questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontEnd {
    /// Nobody (`fido exec`): an approval that would ask is refused, a
    /// question is told nobody is there. Approval policy `never` and
    /// headless delegation where the configuration is silent.
    Headless,
    /// A person, through ops: `approval_requested` and `question_asked`
    /// events with an id, answered by `Op::Approve` and `Op::Answer`.
    /// Approval policy `on-request` where the configuration is silent.
    Interactive,
}

impl FrontEnd {
    fn default_approval(self) -> ApprovalPolicy {
        match self {
            FrontEnd::Headless => ApprovalPolicy::Never,
            FrontEnd::Interactive => ApprovalPolicy::OnRequest,
        }
    }

    fn default_delegation(self) -> DelegationPolicy {
        match self {
            FrontEnd::Headless => DelegationPolicy::HEADLESS,
            FrontEnd::Interactive => DelegationPolicy::INTERACTIVE,
        }
    }
}

/// What the session started from, for the front end to show.
#[derive(Debug, Clone)]
pub struct SessionStart {
    /// The journaled session's id (`None`: it could not be journaled).
    pub id: Option<String>,
    /// The messages a resumed session started from (empty for a new one).
    pub resumed: Vec<Message>,
    /// What the project instructions, the MCP servers and the command
    /// sandbox warned of at start, one sentence each.
    pub warnings: Vec<String>,
    /// What each tool of the session's catalog may do, for a front end
    /// that sees a call by its name (ACP's tool kinds).
    pub tools: crate::tools::Capabilities,
    /// The sandbox mode and approval policy it started with.
    pub safety: SafetySettings,
}

/// A running engine: its op queue, its session, and what it must reap.
pub struct Engine {
    caller: EngineCaller,
    pub session: SessionStart,
    runtime: Runtime,
    /// `fido agents` / `fido cancel` drive the engine through it (`None`:
    /// it could not be opened; the session runs without).
    control: Option<ControlServer>,
}

/// How long shutdown waits for the ops queued before it.
const QUEUE_DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Sends ops to the engine and, for [`EngineCaller::call`], waits for
/// their reply. Cheap to clone; every clone numbers its ops apart.
#[derive(Clone)]
pub struct EngineCaller {
    ops: OpSender,
    awaited: Arc<Awaited>,
}

/// Why [`EngineCaller::call`] has no reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Refused(#[from] OpRefused),
    /// `Interrupt`, `Approve` and `Answer` have none: send them.
    #[error("this op has no reply")]
    NoReply,
    #[error("the agent stopped before it answered")]
    Stopped,
}

impl Engine {
    /// Builds the session (provider, tools, sandbox, MCP servers,
    /// supervisor, journal, agent) for `config` and starts serving ops.
    /// The receiver gets every event from the session's start on.
    pub async fn start(
        config: &Config,
        front_end: FrontEnd,
        resume: Option<ResumeFrom>,
    ) -> Result<(Engine, EventReceiver), StartError> {
        Engine::start_in(config, front_end, resume, None).await
    }

    /// [`Engine::start`] for a session in an editor whose buffers
    /// `read_file` reads (`editor`; `None`: the disk).
    pub async fn start_in(
        config: &Config,
        front_end: FrontEnd,
        resume: Option<ResumeFrom>,
        editor: Option<Arc<dyn EditorFiles>>,
    ) -> Result<(Engine, EventReceiver), StartError> {
        let (sink, receiver) = crate::protocol::event_queue::channel();
        let asks = (front_end == FrontEnd::Interactive).then(|| PendingAsks::new(sink.clone()));
        let interaction = Interaction {
            user: asks.clone().map(|a| a as _),
            approver: asks.clone().map(|a| a as _),
            default_approval: front_end.default_approval(),
            default_delegation: front_end.default_delegation(),
            editor,
        };
        let runtime = Runtime::start(config, interaction, sink.clone(), resume).await?;
        let mut commands = EngineCommands::new(config, front_end.default_approval());
        commands.instruction_files = runtime.instructions.paths();
        commands.journal = runtime.journal();
        commands.safety = Some(runtime.tool_env.approvals.settings_cell());
        let commands = Arc::new(commands);
        let switcher = commands.clone();
        let safety = SafetySwitch::new(config, runtime.tool_env.clone());
        let awaited = Arc::new(Awaited::default());
        let desk = FrontDesk {
            events: sink,
            commands,
            asks,
            switch_model: Some(Arc::new(move |model: &str| switcher.provider_for(model))),
            switch_safety: Some(Arc::new(move |mode, policy| {
                Ok(safety.switch(mode, policy)?)
            })),
            awaited: awaited.clone(),
        };
        let ops = ops::serve(runtime.actor.clone(), desk);
        let caller = EngineCaller { ops, awaited };
        let control = open_control(config, &caller).await;
        let session = session_start(&runtime);
        let engine = Engine {
            caller,
            session,
            runtime,
            control,
        };
        Ok((engine, receiver))
    }

    /// The models the provider's server lists (empty where it lists none),
    /// for a front end that offers them; one request.
    pub async fn listed_models(&self) -> Vec<String> {
        self.runtime.provider.models().await
    }

    /// The op queue's sending end, for a front end that reads every reply
    /// from the events (the TUI).
    pub fn sender(&self) -> OpSender {
        self.caller.ops.clone()
    }

    /// A sender that can also wait for replies (`fido exec`, ACP).
    pub fn caller(&self) -> EngineCaller {
        self.caller.clone()
    }

    /// Queues `op` without waiting; its reply is an `op_replied` event.
    pub fn send(&self, op: Op) -> Result<SubmissionId, OpRefused> {
        self.caller.send(op)
    }

    /// Queues `op` and waits for its reply (never on the event stream).
    pub async fn call(&self, op: Op) -> Result<OpReply, CallError> {
        self.caller.call(op).await
    }

    /// Stops listening on the control socket, kills every subagent
    /// (waiting until each is reaped), cancels a running turn and stops
    /// the agent.
    pub async fn shutdown(self) {
        if let Some(control) = self.control {
            control.stop().await;
        }
        // The ops queued before now are served first, so that the line the
        // person entered last (`/quit`) is in the prompt history: the queue
        // is first in, first out, and the forwarder writes each line before
        // it passes the next op on, so one reply is the barrier.
        let barrier = self.caller.call(Op::Status);
        if tokio::time::timeout(QUEUE_DRAIN_LIMIT, barrier)
            .await
            .is_err()
        {
            tracing::warn!("the ops queued before shutdown were not all served");
        }
        self.runtime.shutdown().await;
    }
}

impl EngineCaller {
    /// Queues `op` without waiting; its reply is an `op_replied` event.
    pub fn send(&self, op: Op) -> Result<SubmissionId, OpRefused> {
        self.ops.send(op)
    }

    /// Queues `op` and waits for its reply, which goes to this caller
    /// alone. An engine that stops first ends the wait
    /// ([`CallError::Stopped`]).
    pub async fn call(&self, op: Op) -> Result<OpReply, CallError> {
        if !op.expects_reply() {
            return Err(CallError::NoReply);
        }
        let id = self.ops.next_id();
        let reply = self.awaited.expect(id);
        if let Err(refused) = self.ops.submit(Submission { id, op }) {
            self.awaited.forget(id);
            return Err(refused.into());
        }
        reply.await.map_err(|_| CallError::Stopped)
    }
}

/// The control socket's requests, as ops: `fido agents` lists the running
/// subagents of the engine's record, `fido cancel` cancels through it.
impl ControlTarget for EngineCaller {
    fn running(&self) -> BoxFuture<'_, Vec<RunningSubagent>> {
        Box::pin(async move {
            let parent_pid = std::process::id();
            match self.call(Op::ListSubagents).await {
                Ok(OpReply::Subagents { subagents }) => subagents
                    .iter()
                    .filter(|subagent| subagent.running)
                    .map(|subagent| subagent.running_under(parent_pid))
                    .collect(),
                other => {
                    tracing::warn!(?other, "the engine did not list its subagents");
                    Vec::new()
                }
            }
        })
    }

    fn cancel<'a>(&'a self, agent_id: Option<&'a str>) -> BoxFuture<'a, Vec<String>> {
        let agent_id = agent_id.map(str::to_string);
        Box::pin(async move {
            match self.call(Op::CancelSubagent { agent_id }).await {
                Ok(OpReply::Cancelled { subagent_ids }) => subagent_ids,
                other => {
                    tracing::warn!(?other, "the engine did not cancel");
                    Vec::new()
                }
            }
        })
    }
}

/// The socket `fido agents` and `fido cancel` reach the engine through;
/// `None` (logged) when it cannot be opened.
async fn open_control(config: &Config, caller: &EngineCaller) -> Option<ControlServer> {
    match ControlServer::start(&config.workspace, Arc::new(caller.clone())).await {
        Ok(server) => Some(server),
        Err(message) => {
            tracing::warn!(%message, "fido agents and fido cancel cannot reach this session");
            None
        }
    }
}

fn session_start(runtime: &Runtime) -> SessionStart {
    let mut warnings = runtime.instructions.warnings.clone();
    warnings.extend(runtime.mcp.warnings().iter().cloned());
    warnings.extend(runtime.sandbox_warnings());
    SessionStart {
        id: runtime.id.clone(),
        resumed: runtime.resumed.clone(),
        warnings,
        tools: runtime.tools.clone(),
        safety: runtime.tool_env.approvals.settings(),
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
