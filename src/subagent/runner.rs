//! Child side of delegation: `fido __subagent`.
//!
//! Order matters (see `crate::sandbox::child`): connect the socket with a
//! blocking connect while the process has one thread, enter the sandbox,
//! only then build the async runtime, say `Hello`, read the fork and run the
//! same turn loop as the parent, as identity `subagent`, depth 1. Model
//! requests go to the parent over the socket ([`GatewayProvider`]): this
//! process holds no credentials and has no network.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use interprocess::local_socket::traits::Stream as _;
use interprocess::local_socket::{GenericNamespaced, ToNsName};
use nix::unistd::Pid;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::ipc::{MAX_PARENT_FRAME, read_frame, write_frame};
use crate::agent::{
    AgentDeps, AgentSettings, CompactionSettings, CompactionStrategy, Conversation, ModelLimits,
    run_turn,
};
use crate::mcp::proxy::{LinkFuture, McpLink};
use crate::plan::PlanStore;
use crate::protocol::delegate::DelegateMode;
use crate::protocol::ipc::{
    ChildFrame, ChildStatus, ForkFrame, PROTOCOL_VERSION, ParentFrame, catalog_fingerprint,
};
use crate::protocol::{EventKind, Message, SubagentPhase};
use crate::provider::{
    ChatRequest, Completion, CompletionFuture, NoticeSink, Provider, ProviderError,
};
use crate::sandbox::child::{ChildRoots, error_chain};
use crate::sandbox::{
    CommandSandbox, SandboxError, SandboxReport, SandboxRequirement, enter_child_sandbox,
};
use crate::store::undo::UndoLog;
use crate::tools::web::{BrowseRequest, Web};
use crate::tools::{
    Identity, InvocationContext, ToolCatalog, ToolEnv, ToolFuture, ToolLimits, ToolOutput,
};
use crate::workspace::Workspace;

/// Longest wait for the fork after `Hello`.
const FORK_TIMEOUT: Duration = Duration::from_secs(30);
/// Frames the child's writer may hold for the parent.
const CHILD_WRITER_QUEUE: usize = 64;

/// The hidden command line of `fido __subagent`.
#[derive(Debug, Clone)]
pub struct SubagentArgs {
    pub socket: String,
    pub agent_id: String,
    pub parent_pid: i32,
    pub sandbox: String,
    /// Credential paths the sandbox keeps unreadable (named by the parent,
    /// whose environment the child does not have).
    pub deny_read: Vec<std::path::PathBuf>,
    /// The private folder the parent made for this child's commands: the
    /// one place the sandbox lets them write (`TMPDIR`).
    pub scratch: Option<std::path::PathBuf>,
    /// A write subagent's worktree, which it may write too; empty for a
    /// read-only subagent.
    pub write_roots: Vec<std::path::PathBuf>,
    /// What a write subagent reads besides its workspace (its private
    /// repository and the objects that borrows).
    pub read_roots: Vec<std::path::PathBuf>,
}

impl SubagentArgs {
    /// What it was delegated to do: a write subagent is given its
    /// worktree to write.
    fn mode(&self) -> DelegateMode {
        if self.write_roots.is_empty() {
            DelegateMode::ReadOnly
        } else {
            DelegateMode::Write
        }
    }
}

/// Entry point of the child process.
pub fn main(args: SubagentArgs) -> ExitCode {
    let fail = |message: String| {
        eprintln!("fido __subagent: {message}");
        ExitCode::from(1)
    };
    let name = match args.socket.as_str().to_ns_name::<GenericNamespaced>() {
        Ok(name) => name,
        Err(err) => return fail(format!("bad socket name: {err}")),
    };
    let stream = match interprocess::local_socket::Stream::connect(name) {
        Ok(stream) => stream,
        Err(err) => return fail(format!("cannot connect to the parent: {err}")),
    };
    let std_stream: std::os::unix::net::UnixStream = match stream {
        interprocess::local_socket::Stream::UdSocket(stream) => {
            std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(stream))
        }
    };
    let sandbox = SandboxRequirement::parse(&args.sandbox).and_then(|mode| {
        enter_child_sandbox(
            Pid::from_raw(args.parent_pid),
            mode,
            &args.deny_read,
            &ChildRoots {
                scratch: args.scratch.as_deref(),
                workspace: std::env::current_dir().ok().as_deref(),
                write: &args.write_roots,
                read: &args.read_roots,
            },
        )
    });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(format!("cannot start the runtime: {err}")),
    };
    let code = runtime.block_on(async move {
        if let Err(err) = std_stream.set_nonblocking(true) {
            return fail(format!("socket: {err}"));
        }
        let stream = match tokio::net::UnixStream::from_std(std_stream) {
            Ok(stream) => stream,
            Err(err) => return fail(format!("socket: {err}")),
        };
        let mode = args.mode();
        serve(stream, args.agent_id, sandbox, args.scratch, mode).await
    });
    // Off the runtime, which has nothing left to run: no thread is started
    // for it while the parent waits for this process to exit.
    drop(runtime);
    crate::sandbox::subagent_ns::sweep_left_behind();
    code
}

async fn serve(
    stream: tokio::net::UnixStream,
    agent_id: String,
    sandbox: Result<SandboxReport, SandboxError>,
    scratch: Option<std::path::PathBuf>,
    mode: DelegateMode,
) -> ExitCode {
    let (mut read, write) = stream.into_split();
    let (writer, writer_task) = spawn_writer(write);
    let _ = writer.send(hello(&sandbox)).await;
    if let Err(error) = &sandbox {
        warn!(%agent_id, "sandbox not in force: {}", error_chain(error));
        drop(writer);
        let _ = tokio::time::timeout(Duration::from_secs(2), writer_task).await;
        return ExitCode::from(1);
    }
    let fork = match read_fork(&mut read, &agent_id).await {
        Ok(fork) => fork,
        Err(err) => return protocol_failure(&err.to_string()),
    };

    let cancel = CancellationToken::new();
    let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
    let mcp = Arc::new(ParentMcp {
        writer: writer.clone(),
        pending: Arc::new(Mutex::new(HashMap::new())),
        next_id: AtomicU64::new(1),
    });
    tokio::spawn(dispatch(
        read,
        pending.clone(),
        mcp.pending.clone(),
        cancel.clone(),
    ));
    watch_sigterm(cancel.clone());

    // The shell is offered only inside a fully enforced sandbox; else the
    // guard refuses bash_exec, as it refuses every other mutating tool.
    let (shell, mode) = match (&sandbox, scratch) {
        (Ok(report), Some(scratch)) if report.fully_enforced => {
            (CommandSandbox::subagent_shell(scratch), mode)
        }
        // A write subagent writes only inside a fully enforced sandbox.
        _ => (CommandSandbox::unconfined(), DelegateMode::ReadOnly),
    };
    let outcome_frame = run(
        fork,
        &agent_id,
        writer.clone(),
        pending,
        mcp,
        &cancel,
        (shell, mode),
    )
    .await;
    let _ = writer.send(outcome_frame).await;
    drop(writer);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
    ExitCode::SUCCESS
}

/// The child's catalog, once its fingerprint is in this process's own log:
/// the parent checks the fingerprint of every request, and tests compare
/// this line with the tools the parent advertised.
fn logged_catalog(
    agent_id: &str,
    flavour: crate::protocol::ipc::PlanFlavour,
    profiles: Vec<crate::protocol::delegate::ProfileOffer>,
    mcp_tools: Vec<Box<dyn crate::tools::Tool>>,
) -> Arc<ToolCatalog> {
    let catalog = ToolCatalog::with_extra(flavour, profiles, mcp_tools);
    info!(%agent_id, catalog = %catalog_fingerprint(catalog.specs()), "tool catalog built");
    catalog
}

/// The first frame: the protocol version, this pid and the sandbox's state.
fn hello(sandbox: &Result<SandboxReport, SandboxError>) -> ChildFrame {
    let sandbox_warnings = sandbox
        .as_ref()
        .map(|report| report.warnings.clone())
        .unwrap_or_default();
    let (sandbox_error, sandbox_summary) = match sandbox {
        Ok(report) => (
            None,
            format!(
                "landlock abi {:?}, fully enforced {}, network restricted {}, scoped {}, no_new_privs {}",
                report.landlock_abi,
                report.fully_enforced,
                report.network_restricted,
                report.scoped,
                report.no_new_privs
            ),
        ),
        // With its sources: the parent shows this one line.
        Err(error) => (Some(error_chain(error)), String::new()),
    };
    ChildFrame::Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
        sandbox_error,
        sandbox_summary,
        sandbox_warnings,
    }
}

/// Why the child got no fork it can run.
#[derive(Debug, thiserror::Error)]
enum ForkError {
    #[error("the first frame from the parent was not the fork")]
    NotFirst,
    #[error("the parent closed the socket before the fork")]
    Closed,
    #[error("bad fork frame: {0}")]
    Malformed(#[from] super::ipc::IpcError),
    #[error("no fork arrived in time")]
    Late,
    #[error("the fork is for another protocol version or agent")]
    NotOurs,
}

/// The parent's fork, the first frame it sends, for this protocol and
/// agent.
async fn read_fork(read: &mut OwnedReadHalf, agent_id: &str) -> Result<ForkFrame, ForkError> {
    let frame = tokio::time::timeout(
        FORK_TIMEOUT,
        read_frame::<_, ParentFrame>(read, MAX_PARENT_FRAME),
    )
    .await
    .map_err(|_| ForkError::Late)??;
    let fork = match frame {
        Some(ParentFrame::Fork(fork)) => *fork,
        Some(
            ParentFrame::ModelDone { .. }
            | ParentFrame::ModelError { .. }
            | ParentFrame::Cancel { .. }
            | ParentFrame::McpResult { .. }
            | ParentFrame::BrowseResult { .. },
        ) => return Err(ForkError::NotFirst),
        None => return Err(ForkError::Closed),
    };
    if fork.version != PROTOCOL_VERSION || fork.agent_id != agent_id {
        return Err(ForkError::NotOurs);
    }
    Ok(fork)
}

/// Runs the delegated turn and returns the `Final` frame.
async fn run(
    mut fork: ForkFrame,
    agent_id: &str,
    writer: mpsc::Sender<ChildFrame>,
    pending: Pending,
    mcp: Arc<ParentMcp>,
    cancel: &CancellationToken,
    (shell, mode): (CommandSandbox, DelegateMode),
) -> ChildFrame {
    // Before anything runs a command: a fork bomb stops at the limit.
    if let Some(limit) = fork.process_limit
        && let Err(err) = crate::sandbox::child::limit_processes(limit)
    {
        return failed_final(crate::sandbox::child::error_chain(&err));
    }
    // Typed on the wire: a fork naming another plan tool does not parse.
    let flavour = fork.plan_tool;
    let workspace = match std::env::current_dir().and_then(|dir| Workspace::new(&dir)) {
        Ok(workspace) => workspace,
        Err(err) => return failed_final(format!("cannot open the workspace: {err}")),
    };
    // The parent's MCP tools, byte for byte, called through the parent;
    // browse_url too is run by the parent.
    let web: Arc<dyn Web> = mcp.clone();
    let mcp_tools = crate::mcp::proxy::proxy_tools(std::mem::take(&mut fork.mcp_tools), mcp);
    let profiles = std::mem::take(&mut fork.profiles);
    let catalog = logged_catalog(agent_id, flavour, profiles, mcp_tools);
    let (event_sink, events) = crate::protocol::event_queue::channel();
    tokio::spawn(forward_lifecycle(events, catalog.clone(), writer.clone()));
    let provider = Arc::new(GatewayProvider {
        writer,
        pending,
        fork: fork.messages.clone(),
        next_id: AtomicU64::new(1),
    });
    let deps = AgentDeps {
        provider,
        tool_env: Arc::new(tool_env(workspace, (shell, mode), web)),
        catalog,
        ctx: InvocationContext {
            identity: Identity::subagent(agent_id),
            delegation_depth: 1,
            mode,
        },
        settings: agent_settings(&fork),
        events: event_sink,
        // The parent journals the session; a fork is private and short.
        journal: None,
    };
    let Some(mut conversation) = Conversation::from_messages(fork.messages) else {
        return failed_final("the fork does not start with a system message".into());
    };
    info!(%agent_id, "subagent starts its turn");
    let outcome = run_turn(&mut conversation, &deps, fork.instructions, 1, cancel).await;
    outcome.child_final(cancel.is_cancelled(), || last_text(&conversation))
}

/// The `Final` of a run that failed before its turn could start.
fn failed_final(text: String) -> ChildFrame {
    ChildFrame::Final {
        status: ChildStatus::Failed,
        text,
    }
}

/// The subagent's tools' environment: read-only (or, in `write` mode, its
/// worktree writable), no person to ask, no delegation, its commands in
/// `shell`, its web pages fetched by the parent through `web`.
fn tool_env(
    workspace: Workspace,
    (shell, mode): (CommandSandbox, DelegateMode),
    web: Arc<dyn Web>,
) -> ToolEnv {
    let sandbox_mode = match mode {
        DelegateMode::Write => crate::protocol::SandboxMode::WorkspaceWrite,
        DelegateMode::ReadOnly => crate::protocol::SandboxMode::ReadOnly,
    };
    ToolEnv {
        // Its plan is its own, in memory: it lives as long as the subagent,
        // and the workspace's plan stays the parent's.
        plan: PlanStore::in_memory(),
        todos: crate::plan::todo::TodoStore::in_memory(),
        workspace,
        undo: UndoLog::disabled(),
        limits: ToolLimits::default(),
        user: None,
        delegator: None,
        // The whole process is sandboxed already: commands inherit it.
        sandbox: crate::sandbox::SandboxSlot::new(shell),
        // Its process started with the few variables of a subagent and no
        // `env_passthrough`; its commands get no more.
        env_policy: crate::process::EnvPolicy::default(),
        approvals: crate::tools::approval::Approvals::new(
            crate::protocol::SafetySettings {
                sandbox_mode,
                approval_policy: crate::protocol::ApprovalPolicy::Never,
                network: crate::protocol::NetworkAccess::Off,
            },
            None,
        ),
        // The parent's hooks run for the parent's calls only (README).
        hooks: Arc::new(crate::hooks::Hooks::none()),
        web: Some(web),
        // A subagent has no network at all, not even through the proxy.
        proxy: None,
        editor: None,
    }
}

/// The loop's settings from the fork's limits.
fn agent_settings(fork: &ForkFrame) -> AgentSettings {
    AgentSettings {
        max_steps: fork.max_steps,
        // Elide, not summarise: a summary would cost the parent one more
        // gateway request inside the subagent's step budget.
        compaction: CompactionSettings {
            threshold_tokens: CompactionSettings::DEFAULT_THRESHOLD_TOKENS,
            keep_recent_tokens: CompactionSettings::DEFAULT_KEEP_RECENT_TOKENS,
            strategy: CompactionStrategy::Elide,
        },
        limits: ModelLimits {
            context_window: fork.context_window,
            tool_call_fallback: fork.tool_call_fallback,
            ..ModelLimits::default()
        },
    }
}

/// The subagent's last non-blank assistant text: what a partial result
/// carries.
fn last_text(conversation: &Conversation) -> String {
    conversation
        .messages()
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant {
                content: Some(text),
                ..
            } if !text.trim().is_empty() => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Completion, ProviderError>>>>>;

/// The child's provider: every completion is asked of the parent.
struct GatewayProvider {
    writer: mpsc::Sender<ChildFrame>,
    pending: Pending,
    fork: Vec<Message>,
    next_id: AtomicU64,
}

impl Provider for GatewayProvider {
    fn name(&self) -> &str {
        "gateway"
    }

    fn model(&self) -> &str {
        "parent"
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
        _notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        Box::pin(async move {
            let fork_prefix = request
                .messages
                .iter()
                .zip(&self.fork)
                .take_while(|(a, b)| a == b)
                .count();
            let request_id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (sender, receiver) = oneshot::channel();
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(request_id, sender);
            }
            let frame = ChildFrame::ModelRequest {
                request_id,
                fork_prefix,
                tail: request.messages[fork_prefix..].to_vec(),
                catalog: catalog_fingerprint(request.tools),
                max_output_tokens: request.max_output_tokens,
                tool_choice: request.tool_choice,
            };
            if self.writer.send(frame).await.is_err() {
                return Err(ProviderError::Api {
                    message: "the parent is gone".into(),
                });
            }
            receiver.await.unwrap_or_else(|_| {
                Err(ProviderError::Api {
                    message: "the parent closed the connection".into(),
                })
            })
        })
    }
}

type McpPending = Arc<Mutex<HashMap<u64, oneshot::Sender<ToolOutput>>>>;

/// The child's way to the MCP servers and the web: every call is run by
/// the parent.
struct ParentMcp {
    writer: mpsc::Sender<ChildFrame>,
    pending: McpPending,
    next_id: AtomicU64,
}

impl McpLink for ParentMcp {
    fn call<'a>(&'a self, tool: &'a str, arguments: String) -> LinkFuture<'a> {
        Box::pin(async move {
            let call_id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (sender, receiver) = oneshot::channel();
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(call_id, sender);
            }
            let frame = ChildFrame::McpCall {
                call_id,
                tool: tool.to_string(),
                arguments,
            };
            if self.writer.send(frame).await.is_err() {
                return ToolOutput::error("the parent is gone");
            }
            receiver
                .await
                .unwrap_or_else(|_| ToolOutput::error("the parent closed the connection"))
        })
    }
}

impl Web for ParentMcp {
    fn browse<'a>(
        &'a self,
        request: BrowseRequest,
        cancel: &'a CancellationToken,
    ) -> ToolFuture<'a> {
        Box::pin(async move {
            let call_id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (sender, receiver) = oneshot::channel();
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(call_id, sender);
            }
            let frame = ChildFrame::Browse {
                call_id,
                url: request.url,
                max_bytes: request.max_bytes,
            };
            if self.writer.send(frame).await.is_err() {
                return ToolOutput::error("the parent is gone");
            }
            // A cancelled turn stops waiting; the parent's fetch ends with
            // the run.
            tokio::select! {
                result = receiver => result
                    .unwrap_or_else(|_| ToolOutput::error("the parent closed the connection")),
                _ = cancel.cancelled() => ToolOutput::error("cancelled"),
            }
        })
    }
}

/// Reads the parent's frames: model answers go to their waiting request,
/// MCP results to their call, `Cancel` (or a closed socket) cancels the turn.
async fn dispatch(
    mut read: OwnedReadHalf,
    pending: Pending,
    mcp: McpPending,
    cancel: CancellationToken,
) {
    loop {
        match read_frame::<_, ParentFrame>(&mut read, MAX_PARENT_FRAME).await {
            Ok(Some(ParentFrame::ModelDone {
                request_id,
                message,
                finish_reason,
                usage,
            })) => {
                answer(
                    &pending,
                    request_id,
                    Ok(Completion {
                        message,
                        finish_reason,
                        usage,
                    }),
                );
            }
            Ok(Some(ParentFrame::ModelError {
                request_id,
                message,
            })) => answer(&pending, request_id, Err(ProviderError::Api { message })),
            Ok(Some(
                ParentFrame::McpResult {
                    call_id,
                    ok,
                    content,
                }
                | ParentFrame::BrowseResult {
                    call_id,
                    ok,
                    content,
                },
            )) => {
                let waiter = mcp.lock().ok().and_then(|mut p| p.remove(&call_id));
                if let Some(waiter) = waiter {
                    let _ = waiter.send(ToolOutput {
                        ok,
                        content,
                        details: None,
                        plan: None,
                        facts: None,
                    });
                }
            }
            Ok(Some(ParentFrame::Cancel { reason })) => {
                info!(%reason, "the parent cancelled the subagent");
                cancel.cancel();
            }
            Ok(Some(ParentFrame::Fork(_))) => {
                warn!("a second fork frame; ignored");
            }
            Ok(None) | Err(_) => {
                cancel.cancel();
                return;
            }
        }
    }
}

fn answer(pending: &Pending, request_id: u64, result: Result<Completion, ProviderError>) {
    let waiter = pending.lock().ok().and_then(|mut p| p.remove(&request_id));
    if let Some(waiter) = waiter {
        let _ = waiter.send(result);
    }
}

/// Turns the loop's events into sanitised lifecycle frames (tool names and
/// short details only, never message contents) and its own plan's frames.
async fn forward_lifecycle(
    mut events: crate::agent::EventReceiver,
    catalog: Arc<ToolCatalog>,
    writer: mpsc::Sender<ChildFrame>,
) {
    while let Some(event) = events.recv().await {
        let frame = match event.kind {
            EventKind::ToolCall { name, summary, .. } => ChildFrame::Lifecycle {
                phase: if catalog.starts_subagent(&name) {
                    SubagentPhase::NestedDelegationRejected
                } else {
                    SubagentPhase::Tool(name)
                },
                detail: summary,
            },
            // Its own plan: the latest state, never dropped.
            EventKind::PlanUpdated { plan } => {
                if writer.send(ChildFrame::Plan { plan }).await.is_err() {
                    return;
                }
                continue;
            }
            _ => continue,
        };
        // Progress only, and the parent shows at most one per interval:
        // when the socket is backed up, one is dropped, never waited for.
        if let Err(mpsc::error::TrySendError::Closed(_)) = writer.try_send(frame) {
            return;
        }
    }
}

/// SIGTERM asks the child to stop and send what it has.
fn watch_sigterm(cancel: CancellationToken) {
    tokio::spawn(async move {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            term.recv().await;
            cancel.cancel();
        }
    });
}

fn spawn_writer(
    mut write: OwnedWriteHalf,
) -> (mpsc::Sender<ChildFrame>, tokio::task::JoinHandle<()>) {
    // Bounded: the loop sends one request at a time and lifecycle frames
    // are dropped when the queue is full.
    let (sender, mut receiver) = mpsc::channel::<ChildFrame>(CHILD_WRITER_QUEUE);
    let task = tokio::spawn(async move {
        while let Some(frame) = receiver.recv().await {
            if write_frame(&mut write, &frame).await.is_err() {
                return;
            }
        }
    });
    (sender, task)
}

fn protocol_failure(message: &str) -> ExitCode {
    eprintln!("fido __subagent: {message}");
    ExitCode::from(1)
}
