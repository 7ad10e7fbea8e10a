//! One subagent run, from spawn to reap: the handshake, the serve loop
//! (gateway requests, lifecycle events, timeout, cancel, grace) and the
//! teardown that always reaps the child.

use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::StreamCommon as _;
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::{GenericNamespaced, ListenerOptions, ToNsName};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::protocol::delegate::{DelegateError, DelegateResult, DelegateStatus, DelegateUsage};
use crate::protocol::ipc::{
    ChildFrame, ChildStatus, ForkFrameRef, PROTOCOL_VERSION, ParentFrame, catalog_fingerprint,
};
use crate::protocol::{EventKind, Message};
use crate::sandbox::{PrivateDir, ProcessGroup, sweep};
use crate::subagent::ipc::{IpcError, encode_frame};
use crate::subagent::result::normalise;
use crate::text;

use super::io::*;
use super::*;

/// MCP calls of one subagent running at once.
const MAX_MCP_CALLS: usize = 16;

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopReason {
    Timeout,
    Cancelled,
    /// The child's or the session's token budget was spent.
    Budget,
}

impl StopReason {
    fn code(self) -> &'static str {
        match self {
            StopReason::Timeout => "timeout",
            StopReason::Cancelled => "cancelled",
            StopReason::Budget => "budget_exceeded",
        }
    }

    /// Why the run was stopped, when the child returned what it had.
    fn partial_message(self, job: &Job, usage: &DelegateUsage) -> String {
        match self {
            StopReason::Timeout => format!(
                "the subagent ran out of time after {} ms and returned what it had",
                job.timeout.as_millis()
            ),
            StopReason::Cancelled => "the subagent was cancelled and returned what it had".into(),
            StopReason::Budget => budget_message(job, usage, "returned what it had"),
        }
    }

    /// Why the run was stopped, when the child returned nothing in time.
    fn failed_message(self, job: &Job, usage: &DelegateUsage) -> String {
        match self {
            StopReason::Timeout => format!(
                "the subagent did not finish within {} ms and returned nothing in time; it was stopped",
                job.timeout.as_millis()
            ),
            StopReason::Cancelled => {
                "the subagent was cancelled before it returned a result; it was stopped".into()
            }
            StopReason::Budget => budget_message(job, usage, "returned nothing in time"),
        }
    }
}

fn budget_message(job: &Job, usage: &DelegateUsage, what: &str) -> String {
    match job.budget {
        Some(budget) if usage.budget_tokens() >= budget => format!(
            "the subagent used {} tokens, crossing its budget of {budget} (budget_tokens), and {what}",
            usage.budget_tokens()
        ),
        _ => format!(
            "the subagents of this session crossed their token budget (delegate_session_budget_tokens), and this one {what}"
        ),
    }
}

/// What the run loop ended with.
enum Ending {
    Final { status: ChildStatus, text: String },
    Failed { code: &'static str, message: String },
}

/// Runs one subagent to its end and always reaps it.
pub(super) async fn run(
    mut job: Job,
    shared: &Shared,
    cancel: CancellationToken,
    kill_now: CancellationToken,
) -> DelegateResult {
    let started = Instant::now();
    let agent_id = job.agent_id.clone();
    let plan_item = job.plan_item.clone();
    let events = &shared.events;
    // Live usage for the events, updated by the serve loop.
    let tokens = AtomicU64::new(0);
    let emit = |pid: Option<u32>, phase: &str, detail: &str| {
        let used = tokens.load(Ordering::Relaxed);
        shared.record_live(&agent_id, pid, phase, started, used, plan_item.as_ref());
        events.emit(EventKind::Subagent {
            agent_id: agent_id.clone(),
            pid,
            phase: crate::protocol::SubagentPhase::parse(phase),
            elapsed_ms: started.elapsed().as_millis() as u64,
            detail: text::summary(detail, 100),
            tokens: tokens.load(Ordering::Relaxed),
            plan_item: plan_item.clone(),
        });
    };
    if shared.session_budget_spent.is_cancelled() {
        let mut result = DelegateResult::failed(
            &agent_id,
            "budget_exceeded",
            "the subagents of this session already used their token budget (delegate_session_budget_tokens); no subagent was started",
        );
        result.usage = Some(DelegateUsage::default());
        emit(None, "failed", "budget_exceeded");
        return result;
    }
    emit(None, "starting", "spawning a sandboxed process");

    let mut usage = DelegateUsage::default();
    let mut stop: Option<StopReason> = None;
    // The time limit counts from the spawn: a child stuck before its
    // handshake is stopped on time too.
    let stops = Stops {
        cancel: &cancel,
        kill_now: &kill_now,
        turn_cancel: &job.turn_cancel,
        deadline: tokio::time::Instant::now() + job.timeout,
    };
    let (ending, pid) = match Session::open(&job, shared, &stops, &mut stop).await {
        Ok(mut session) => {
            let pid = session.group.pid();
            emit(
                Some(pid),
                "starting",
                &format!("pid {pid}, sandbox {}", shared.settings.sandbox),
            );
            // The fork was sent: from here on it is the child's history.
            let history = std::mem::take(&mut job.fork);
            let ending = session
                .serve(
                    &job,
                    history,
                    shared,
                    &stops,
                    Meters {
                        usage: &mut usage,
                        tokens: &tokens,
                    },
                    &mut stop,
                    &emit,
                )
                .await;
            session.close(matches!(ending, Ending::Final { .. })).await;
            (ending, Some(pid))
        }
        Err(failure) => (failure, None),
    };
    // Reaped (or never started): the record for the orphan sweep goes.
    let dir = crate::subagent::control::run_dir(&shared.settings.workspace);
    let id = agent_id.clone();
    let _ = tokio::task::spawn_blocking(move || crate::subagent::orphans::forget(&dir, &id)).await;

    usage.wall_ms = started.elapsed().as_millis() as u64;
    let mut result = match ending {
        Ending::Final { status, text } => {
            let run_status = match (stop, status) {
                (Some(_), _) | (None, ChildStatus::Partial) => DelegateStatus::Partial,
                (None, ChildStatus::Failed) => DelegateStatus::Failed,
                (None, ChildStatus::Completed) => DelegateStatus::Completed,
            };
            let mut result = normalise(&agent_id, run_status, &text, usage);
            if let Some(reason) = stop {
                result.error = Some(DelegateError {
                    code: reason.code().into(),
                    message: reason.partial_message(&job, &usage),
                });
            } else if result.status == DelegateStatus::Failed && result.error.is_none() {
                result.error = Some(DelegateError {
                    code: "provider_error".into(),
                    message: text::summary(&text, 300),
                });
            }
            result
        }
        Ending::Failed { code, message } => {
            let (code, message) = match stop {
                Some(reason) => (reason.code(), reason.failed_message(&job, &usage)),
                None => (code, message),
            };
            let mut result = DelegateResult::failed(&agent_id, code, &message);
            result.usage = Some(usage);
            result
        }
    };
    if result.status == DelegateStatus::Failed && result.recommended_next_steps.is_empty() {
        result.recommended_next_steps = vec![
            "Continue without the subagent: investigate directly with read_file and ripgrep."
                .into(),
        ];
    }
    let phase = match (stop, result.status) {
        (Some(StopReason::Cancelled), _) => "cancelled",
        (_, DelegateStatus::Completed) => "completed",
        (_, DelegateStatus::Partial) => "partial",
        (_, DelegateStatus::Failed) => "failed",
    };
    let detail = match &result.error {
        Some(error) => format!("{}: {}", error.code, error.message),
        None => format!("{} findings", result.findings.len()),
    };
    emit(pid, phase, &detail);
    info!(agent_id = %agent_id, phase, elapsed_ms = started.elapsed().as_millis() as u64, "subagent finished");
    result
}

/// What the serve loop counts: the run's usage, and its tokens for the
/// live events.
struct Meters<'a> {
    usage: &'a mut DelegateUsage,
    tokens: &'a AtomicU64,
}

/// What stops a run early: Esc, the shutdown, Ctrl+C on the parent's turn,
/// the time limit.
struct Stops<'a> {
    cancel: &'a CancellationToken,
    kill_now: &'a CancellationToken,
    turn_cancel: &'a CancellationToken,
    deadline: tokio::time::Instant,
}

impl Stops<'_> {
    /// Resolves when the run must stop before the child is ready to serve
    /// (during the spawn and the handshake nobody waits for a partial).
    async fn before_handshake(&self) -> StopReason {
        tokio::select! {
            _ = tokio::time::sleep_until(self.deadline) => StopReason::Timeout,
            _ = self.cancel.cancelled() => StopReason::Cancelled,
            _ = self.kill_now.cancelled() => StopReason::Cancelled,
            _ = self.turn_cancel.cancelled() => StopReason::Cancelled,
        }
    }
}

/// The failure of a run stopped during its handshake.
fn stopped_early(reason: StopReason, stop: &mut Option<StopReason>) -> Ending {
    *stop = Some(reason);
    Ending::Failed {
        code: reason.code(),
        message: "stopped before the subagent was ready".into(),
    }
}

/// A spawned, connected, handshaken child.
struct Session {
    group: ProcessGroup,
    frames: mpsc::Receiver<Result<ChildFrame, IpcError>>,
    writer: mpsc::UnboundedSender<Outgoing>,
    exit: Option<ExitStatus>,
    /// The child's scratch `TMPDIR`, removed after the reap.
    scratch: Option<PrivateDir>,
}

impl Session {
    /// Listener, spawn, accept (peer pid checked), `Hello`, `Fork`.
    async fn open(
        job: &Job,
        shared: &Shared,
        stops: &Stops<'_>,
        stop: &mut Option<StopReason>,
    ) -> Result<Session, Ending> {
        let failed = |code: &'static str, message: String| Ending::Failed { code, message };
        let settings = &shared.settings;
        let socket_name = format!(
            "fido-{}-{}-{:016x}.sock",
            std::process::id(),
            job.agent_id,
            fastrand::u64(..)
        );
        let name = socket_name
            .as_str()
            .to_ns_name::<GenericNamespaced>()
            .map_err(|e| failed("spawn_failed", format!("cannot name the IPC socket: {e}")))?;
        let listener = ListenerOptions::new()
            .name(name)
            .create_tokio()
            .map_err(|e| failed("spawn_failed", format!("cannot open the IPC socket: {e}")))?;

        // The one folder the child's commands may write (its TMPDIR).
        let label = format!("{}-", job.agent_id);
        let scratch = tokio::task::spawn_blocking(move || PrivateDir::create_named(&label))
            .await
            .map_err(|e| {
                failed(
                    "spawn_failed",
                    format!("cannot create the scratch folder: {e}"),
                )
            })?
            .map_err(|e| {
                failed(
                    "spawn_failed",
                    format!("cannot create the scratch folder: {e}"),
                )
            })?;
        let mut command = tokio::process::Command::new(&settings.program);
        command
            .arg("__subagent")
            .arg("--socket")
            .arg(&socket_name)
            .arg("--agent-id")
            .arg(&job.agent_id)
            .arg("--parent-pid")
            .arg(std::process::id().to_string())
            .arg("--sandbox")
            .arg(settings.sandbox.as_str())
            .arg("--scratch")
            .arg(scratch.path())
            .args(
                settings
                    .deny_read
                    .iter()
                    .flat_map(|path| [std::ffi::OsStr::new("--deny-read"), path.as_os_str()]),
            )
            .current_dir(&settings.workspace)
            .env_clear()
            .envs(scrubbed_env())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut group = ProcessGroup::spawn(&mut command).map_err(|e| {
            failed(
                "spawn_failed",
                format!("cannot start the subagent process: {e}"),
            )
        })?;
        let pid = group.pid();
        info!(agent_id = %job.agent_id, pid, "subagent spawned");
        // Counting the user's processes reads all of /proc: done while the
        // child starts, it costs the delegation nothing.
        let process_limit = tokio::task::spawn_blocking(crate::sandbox::child::process_limit);
        // For the orphan sweep of a later Fido, should this one die
        // without reaping it.
        let (dir, agent_id) = (
            crate::subagent::control::run_dir(&settings.workspace),
            job.agent_id.clone(),
        );
        let recorded = tokio::task::spawn_blocking(move || {
            crate::subagent::orphans::record(&dir, &agent_id, pid)
        })
        .await;
        if let Ok(Err(message)) = recorded {
            warn!(agent_id = %job.agent_id, %message, "the subagent is not recorded for the orphan sweep");
        }
        if let Some(stderr) = group.child_mut().stderr.take() {
            tokio::spawn(log_stderr(job.agent_id.clone(), stderr));
        }

        let interrupted = stops.before_handshake();
        tokio::pin!(interrupted);

        // Exactly one connection, from the child itself.
        let accepted = tokio::select! {
            accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, listener.accept()) => accepted,
            status = group.wait() => {
                let status = describe_exit(status.ok());
                let _ = group.terminate(TERM_GRACE).await;
                return Err(failed("subagent_crashed", format!("the subagent exited before it connected ({status})")));
            }
            reason = &mut interrupted => {
                let _ = group.terminate(TERM_GRACE).await;
                return Err(stopped_early(reason, stop));
            }
        };
        drop(listener);
        let stream: Stream = match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                let _ = group.terminate(TERM_GRACE).await;
                return Err(failed(
                    "spawn_failed",
                    format!("the IPC socket failed: {e}"),
                ));
            }
            Err(_) => {
                let _ = group.terminate(TERM_GRACE).await;
                return Err(failed(
                    "spawn_failed",
                    format!(
                        "the subagent did not connect within {} s",
                        HANDSHAKE_TIMEOUT.as_secs()
                    ),
                ));
            }
        };
        let peer = stream.peer_creds().ok().and_then(|c| c.pid());
        if peer != i32::try_from(pid).ok() {
            let _ = group.terminate(TERM_GRACE).await;
            return Err(failed(
                "protocol_error",
                format!(
                    "a process other than the subagent (pid {peer:?}, expected {pid}) connected to its socket; refused"
                ),
            ));
        }
        let stream = Arc::new(stream);
        let frames = spawn_reader(stream.clone());
        let writer = spawn_writer(stream);
        let mut session = Session {
            group,
            frames,
            writer,
            exit: None,
            scratch: Some(scratch),
        };

        let hello = tokio::select! {
            hello = tokio::time::timeout(HANDSHAKE_TIMEOUT, session.frames.recv()) => hello,
            reason = &mut interrupted => {
                session.close(false).await;
                return Err(stopped_early(reason, stop));
            }
        };
        match hello {
            Ok(Some(Ok(ChildFrame::Hello {
                version,
                sandbox_error,
                sandbox_summary,
                sandbox_warnings,
                ..
            }))) => {
                if version != PROTOCOL_VERSION {
                    session.close(false).await;
                    return Err(failed(
                        "protocol_error",
                        format!(
                            "the subagent speaks protocol {version}, this Fido {PROTOCOL_VERSION}"
                        ),
                    ));
                }
                if let Some(error) = sandbox_error {
                    session.close(false).await;
                    return Err(failed(
                        "sandbox_unavailable",
                        format!(
                            "the read-only sandbox could not be enforced, so no subagent ran: {error}. Set sandbox = \"best_effort\" to run with the invocation guard only."
                        ),
                    ));
                }
                debug!(agent_id = %job.agent_id, %sandbox_summary, "subagent sandboxed");
                if !sandbox_warnings.is_empty() {
                    let message = format!(
                        "{} runs without a complete sandbox (sandbox = {}): {}",
                        job.agent_id,
                        settings.sandbox,
                        sandbox_warnings.join("; ")
                    );
                    warn!("{message}");
                    shared.events.emit(EventKind::Error { message });
                }
            }
            Ok(Some(Ok(other))) => {
                session.close(false).await;
                return Err(failed(
                    "protocol_error",
                    format!(
                        "the subagent's first frame was {}, not hello",
                        frame_name(&other)
                    ),
                ));
            }
            Ok(Some(Err(e))) => {
                session.close(false).await;
                return Err(failed(
                    "protocol_error",
                    format!("bad frame from the subagent: {e}"),
                ));
            }
            Ok(None) => {
                let status = session.reap_quickly().await;
                session.close(false).await;
                return Err(failed(
                    "subagent_crashed",
                    format!("the subagent exited before its handshake ({status})"),
                ));
            }
            Err(_) => {
                session.close(false).await;
                return Err(failed(
                    "protocol_error",
                    "the subagent did not say hello in time".into(),
                ));
            }
        }

        // Known by now: the parent asked before its first request (cached).
        let context_window = shared.provider.context_window().await;
        let mcp_tools = shared
            .catalog
            .mcp()
            .map(|hub| hub.tool_specs())
            .unwrap_or_default();
        let fork = encode_frame(&ForkFrameRef {
            kind: "fork",
            version: PROTOCOL_VERSION,
            agent_id: &job.agent_id,
            messages: &job.fork,
            instructions: &job.instructions,
            max_steps: job.max_steps,
            plan_tool: settings.plan_tool,
            context_window,
            mcp_tools: &mcp_tools,
            agents: &settings.profiles.offers(),
            process_limit: process_limit.await.ok().flatten(),
        });
        let fork = match fork {
            Ok(bytes) => bytes,
            Err(e) => {
                session.close(false).await;
                return Err(failed(
                    "spawn_failed",
                    format!("cannot encode the fork: {e}"),
                ));
            }
        };
        if session.writer.send(Outgoing::Encoded(fork)).is_err() {
            session.close(false).await;
            return Err(failed(
                "subagent_crashed",
                "the subagent closed its socket before the fork".into(),
            ));
        }
        Ok(session)
    }

    /// Serves the child until it sends `Final`, fails, or is stopped.
    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &mut self,
        job: &Job,
        history: Vec<Message>,
        shared: &Shared,
        stops: &Stops<'_>,
        meters: Meters<'_>,
        stop: &mut Option<StopReason>,
        emit: &(dyn Fn(Option<u32>, &str, &str) + Sync),
    ) -> Ending {
        let Meters { usage, tokens } = meters;
        let pid = Some(self.group.pid());
        let Stops {
            cancel,
            kill_now,
            turn_cancel,
            deadline,
        } = stops;
        let deadline = tokio::time::sleep_until(*deadline);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(grace);
        let (done_sender, mut done) = mpsc::unbounded_channel::<GatewayOutcome>();
        let fork_len = history.len();
        // Leading fork messages still in `history`.
        let mut intact = fork_len;
        let mut history = Some(history);
        let mut inflight: Option<tokio::task::JoinHandle<()>> = None;
        let mut frames_seen = 0u32;
        let mut requests = 0u32;
        let mut last_lifecycle: Option<(String, Instant)> = None;
        // What the child does now, for the usage events between phases.
        let mut phase_now = String::from("reasoning");
        // The child's MCP calls, run here; ended with the run.
        let mcp_cancel = CancellationToken::new();
        let _mcp_guard = mcp_cancel.clone().drop_guard();
        let mut mcp_calls: Vec<tokio::task::JoinHandle<()>> = Vec::new();

        let ending = loop {
            tokio::select! {
                frame = self.frames.recv() => {
                    frames_seen += 1;
                    if frames_seen > MAX_FRAMES {
                        break Ending::Failed { code: "protocol_error", message: format!("the subagent flooded the parent with more than {MAX_FRAMES} frames") };
                    }
                    match frame {
                        Some(Ok(ChildFrame::ModelRequest { request_id, fork_prefix, tail, catalog })) => {
                            if !catalog.is_empty() && catalog != catalog_fingerprint(shared.catalog.specs()) {
                                break Ending::Failed { code: "protocol_error", message: format!("the subagent's tool catalog ({catalog}) is not the parent's ({}): its requests would not share the cached prefix", catalog_fingerprint(shared.catalog.specs())) };
                            }
                            if inflight.is_some() {
                                break Ending::Failed { code: "protocol_error", message: "the subagent sent a model request while another was running".into() };
                            }
                            if fork_prefix > fork_len {
                                break Ending::Failed { code: "protocol_error", message: format!("the subagent referred to {fork_prefix} fork messages; the fork has {fork_len}") };
                            }
                            if fork_prefix > intact {
                                break Ending::Failed { code: "protocol_error", message: format!("the subagent referred to {fork_prefix} fork messages after it had dropped all but {intact}") };
                            }
                            if stop.is_some() {
                                let _ = self.writer.send(Outgoing::Frame(ParentFrame::ModelError { request_id, message: "cancelled".into() }));
                                continue;
                            }
                            // The gateway holds the credentials, so it keeps
                            // the budget: the child's own loop is not trusted.
                            if requests >= job.max_steps {
                                break Ending::Failed { code: "protocol_error", message: format!("the subagent asked for more than {} model requests (max_steps)", job.max_steps) };
                            }
                            requests += 1;
                            phase_now = "reasoning".into();
                            emit(pid, "reasoning", &format!("model request {requests}"));
                            // The child's conversation is the fork's first
                            // `fork_prefix` messages and its tail: rebuilt in
                            // place, so a large fork is never copied again.
                            let Some(mut messages) = history.take() else {
                                break Ending::Failed { code: "protocol_error", message: "the subagent sent a model request while another was running".into() };
                            };
                            messages.truncate(fork_prefix);
                            intact = fork_prefix;
                            messages.extend(tail);
                            inflight = Some(tokio::spawn(gateway(
                                request_id,
                                Requester { agent_id: job.agent_id.clone(), model: job.model.clone() },
                                messages,
                                shared.provider.clone(),
                                shared.catalog.clone(),
                                done_sender.clone(),
                            )));
                        }
                        Some(Ok(ChildFrame::Lifecycle { phase, detail })) => {
                            let phase = sanitize_phase(&phase);
                            phase_now.clone_from(&phase);
                            let due = match &last_lifecycle {
                                Some((last, at)) => *last != phase || at.elapsed() >= LIFECYCLE_INTERVAL,
                                None => true,
                            };
                            if due {
                                emit(pid, &phase, &detail);
                                last_lifecycle = Some((phase, Instant::now()));
                            }
                        }
                        Some(Ok(ChildFrame::Final { status, text })) => break Ending::Final { status, text },
                        Some(Ok(ChildFrame::McpCall { call_id, tool, arguments })) => {
                            mcp_calls.retain(|call| !call.is_finished());
                            if mcp_calls.len() >= MAX_MCP_CALLS {
                                break Ending::Failed { code: "protocol_error", message: format!("the subagent ran more than {MAX_MCP_CALLS} MCP calls at once") };
                            }
                            mcp_calls.push(tokio::spawn(mcp_call(shared.catalog.clone(), call_id, tool, arguments, self.writer.clone(), mcp_cancel.clone())));
                        }
                        Some(Ok(other @ ChildFrame::Hello { .. })) => {
                            break Ending::Failed { code: "protocol_error", message: format!("out-of-order {} frame from the subagent", frame_name(&other)) };
                        }
                        Some(Err(e)) => break Ending::Failed { code: "protocol_error", message: format!("bad frame from the subagent: {e}") },
                        None => {
                            let status = self.reap_quickly().await;
                            break Ending::Failed { code: "subagent_crashed", message: format!("the subagent exited without a result ({status})") };
                        }
                    }
                }
                Some(outcome) = done.recv() => {
                    // The answer is written from here, after the request is
                    // marked done, so the child's next request can never
                    // arrive while this one still counts as running.
                    inflight = None;
                    history = Some(outcome.messages);
                    let _ = self.writer.send(Outgoing::Frame(outcome.frame));
                    if let Some(request_usage) = outcome.usage {
                        usage.requests += 1;
                        usage.prompt_tokens += request_usage.prompt_tokens;
                        usage.cached_tokens += request_usage.cached_tokens;
                        usage.completion_tokens += request_usage.completion_tokens;
                        tokens.store(usage.budget_tokens(), Ordering::Relaxed);
                        let session_spent = shared.charge_session(
                            request_usage.prompt_tokens + request_usage.completion_tokens,
                        );
                        let own_spent = job.budget.is_some_and(|b| usage.budget_tokens() >= b);
                        if (own_spent || session_spent) && stop.is_none() {
                            info!(agent_id = %job.agent_id, tokens = usage.budget_tokens(), "the subagent crossed its token budget; cancelling it");
                            *stop = Some(StopReason::Budget);
                            let _ = self.writer.send(Outgoing::Frame(ParentFrame::Cancel { reason: "budget_exceeded".into() }));
                            grace.as_mut().reset(tokio::time::Instant::now() + shared.settings.grace);
                        }
                        emit(pid, &phase_now, &format!("{} tokens", usage.budget_tokens()));
                        shared.events.emit(EventKind::Usage {
                            identity: job.agent_id.clone(),
                            prompt_tokens: request_usage.prompt_tokens,
                            cached_tokens: request_usage.cached_tokens,
                            completion_tokens: request_usage.completion_tokens,
                        });
                    }
                }
                _ = &mut deadline, if stop.is_none() => {
                    *stop = Some(StopReason::Timeout);
                    let _ = self.writer.send(Outgoing::Frame(ParentFrame::Cancel { reason: "timeout".into() }));
                    grace.as_mut().reset(tokio::time::Instant::now() + shared.settings.grace);
                }
                _ = shared.session_budget_spent.cancelled(), if stop.is_none() => {
                    *stop = Some(StopReason::Budget);
                    let _ = self.writer.send(Outgoing::Frame(ParentFrame::Cancel { reason: "budget_exceeded".into() }));
                    grace.as_mut().reset(tokio::time::Instant::now() + shared.settings.grace);
                }
                _ = cancel.cancelled(), if stop.is_none() => {
                    *stop = Some(StopReason::Cancelled);
                    let _ = self.writer.send(Outgoing::Frame(ParentFrame::Cancel { reason: "cancelled".into() }));
                    grace.as_mut().reset(tokio::time::Instant::now() + shared.settings.grace);
                }
                _ = &mut grace => {
                    break Ending::Failed { code: "timeout", message: "no partial result within the grace period".into() };
                }
                _ = turn_cancel.cancelled() => {
                    // The whole turn is interrupted: nobody waits for a partial.
                    *stop = Some(StopReason::Cancelled);
                    break Ending::Failed { code: "cancelled", message: "the turn was interrupted".into() };
                }
                _ = kill_now.cancelled() => {
                    *stop = Some(StopReason::Cancelled);
                    break Ending::Failed { code: "cancelled", message: "Fido is shutting down".into() };
                }
                status = self.group.wait(), if self.exit.is_none() => {
                    // The child exited; a Final it sent may still be in flight.
                    self.exit = status.ok();
                    match tokio::time::timeout(Duration::from_millis(200), self.frames.recv()).await {
                        Ok(Some(Ok(ChildFrame::Final { status, text }))) => break Ending::Final { status, text },
                        _ => {
                            let status = describe_exit(self.exit);
                            break Ending::Failed { code: "subagent_crashed", message: format!("the subagent exited without a result ({status})") };
                        }
                    }
                }
            }
        };
        if let Some(task) = inflight {
            task.abort();
        }
        for call in mcp_calls {
            call.abort();
        }
        ending
    }

    /// Waits briefly for the child's exit status after its socket closed.
    async fn reap_quickly(&mut self) -> String {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(Duration::from_millis(500), self.group.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        describe_exit(self.exit)
    }

    /// Ends the child: a child that sent `Final` gets a moment to exit on its
    /// own; then SIGTERM and SIGKILL to its group, and the reap.
    async fn close(&mut self, finished: bool) {
        if finished && self.exit.is_none() {
            self.exit = tokio::time::timeout(Duration::from_millis(500), self.group.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        let root = self.group.pid() as i32;
        let left = if self.exit.is_some() {
            // A child that exited swept its tree itself, and its death
            // re-parented whatever it missed: no tree is left to read.
            // What is left in its group is killed now, as a command's
            // background jobs are.
            if let Err(err) = self.group.kill() {
                warn!(pid = root, error = %err, "could not kill the subagent's group");
            }
            Vec::new()
        } else {
            // Read while the child lives: as their subreaper it is the
            // parent of its commands' orphans, which its group kill would
            // miss.
            let left = tokio::task::spawn_blocking(move || sweep::descendants(root))
                .await
                .unwrap_or_default();
            if let Err(err) = self.group.terminate(TERM_GRACE).await {
                warn!(pid = root, error = %err, "could not terminate the subagent's group");
            }
            left
        };
        if !left.is_empty() {
            let killed = tokio::task::spawn_blocking(move || sweep::kill_all(&left))
                .await
                .unwrap_or(0);
            if killed > 0 {
                info!(
                    pid = root,
                    killed, "killed processes the subagent left behind"
                );
            }
        }
        if let Some(scratch) = self.scratch.take() {
            let _ = tokio::task::spawn_blocking(move || scratch.remove()).await;
        }
    }
}
