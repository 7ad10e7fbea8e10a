//! The child's process and socket: spawning it, the handshake, the fork,
//! and the teardown that always reaps it.

use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::StreamCommon as _;
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::{GenericNamespaced, ListenerOptions, ToNsName};
use nix::sys::signal::Signal;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::process::ProcessGroup;
use crate::process::env::{EnvPolicy, SUBAGENT_ENV};
use crate::process::ignores_signal;
use crate::process::sweep;
use crate::protocol::EventKind;
use crate::protocol::Message;
use crate::protocol::ipc::{ChildFrame, ForkFrameRef, ForkTag, PROTOCOL_VERSION};
use crate::sandbox::PrivateDir;
use crate::subagent::ipc::{IpcError, encode_frame_in};

use super::io::*;
use super::progress::{Ending, Progress, Stage, StopReason, Stops};
use super::*;

/// A spawned, connected, handshaken child.
pub(super) struct ChildLink {
    pub(super) group: ProcessGroup,
    pub(super) frames: mpsc::Receiver<Result<ChildFrame, IpcError>>,
    pub(super) writer: Writer,
    pub(super) exit: Option<ExitStatus>,
    /// The subagent's own process, the socket's peer: the group's leader,
    /// or, in a PID namespace of its own, PID 2 there (the leader is then
    /// the keeper that holds the namespace).
    process: u32,
    /// `process`'s start time, read when it connected.
    process_start: Option<u64>,
    /// The child's scratch `TMPDIR`, removed after the reap.
    scratch: Option<PrivateDir>,
}

/// A child that was started and has not connected yet.
struct Spawned {
    group: ProcessGroup,
    listener: Listener,
    scratch: PrivateDir,
    /// The `RLIMIT_NPROC` for its fork, counted while it starts.
    process_limit: tokio::task::JoinHandle<Option<u64>>,
}

/// The failure of a run stopped before the child was ready.
fn stopped_early(reason: StopReason, progress: &mut Progress<'_>) -> Ending {
    progress.stopped(reason);
    Ending::failed(reason.code(), "stopped before the subagent was ready")
}

/// The fork's messages as JSON, encoded on the blocking pool while the
/// child starts: a large fork is megabytes of JSON, too much work for a
/// runtime worker, and the spawn and handshake hide the time it takes.
pub(super) struct ForkEncoding(JoinHandle<(Vec<Message>, serde_json::Result<Box<RawValue>>)>);

impl ForkEncoding {
    pub(super) fn start(history: Vec<Message>) -> ForkEncoding {
        ForkEncoding(tokio::task::spawn_blocking(move || {
            let encoded = serde_json::value::to_raw_value(&history);
            (history, encoded)
        }))
    }

    /// The history, handed back, and its encoding.
    async fn finish(self) -> Result<(Vec<Message>, Box<RawValue>), Ending> {
        let failed = |e: &dyn std::fmt::Display| {
            Ending::failed(
                DelegateErrorCode::SpawnFailed,
                format!("cannot encode the fork: {e}"),
            )
        };
        let (history, encoded) = self.0.await.map_err(|e| failed(&e))?;
        Ok((history, encoded.map_err(|e| failed(&e))?))
    }
}

impl ChildLink {
    /// Spawning, then handshaking: spawn, accept (peer pid checked),
    /// `Hello`, `Fork`. A failure has already reaped the child. Gives back
    /// the fork's history with the link.
    pub(super) async fn open(
        progress: &mut Progress<'_>,
        stops: &Stops<'_>,
        fork: ForkEncoding,
    ) -> Result<(ChildLink, Vec<Message>), Ending> {
        let spawned = Spawned::start(progress).await?;
        progress.enter(Stage::Handshaking);
        let process_limit = spawned.process_limit;
        let mut link = ChildLink::accept(
            spawned.group,
            spawned.listener,
            spawned.scratch,
            progress,
            stops,
        )
        .await?;
        if let Err(ending) = link.hello(progress, stops).await {
            link.close(progress, false).await;
            return Err(ending);
        }
        let process_limit = process_limit.await.ok().flatten();
        match link.send_fork(progress, fork, process_limit).await {
            Ok(history) => Ok((link, history)),
            Err(ending) => {
                link.close(progress, false).await;
                Err(ending)
            }
        }
    }

    /// The subagent's own process, as this process sees it.
    pub(super) fn pid(&self) -> u32 {
        self.process
    }

    /// Exactly one connection, from the child itself; then the listener
    /// is closed, so no second one can be made.
    async fn accept(
        mut group: ProcessGroup,
        listener: Listener,
        scratch: PrivateDir,
        progress: &mut Progress<'_>,
        stops: &Stops<'_>,
    ) -> Result<ChildLink, Ending> {
        let accepted = tokio::select! {
            accepted = tokio::time::timeout(HANDSHAKE_TIMEOUT, listener.accept()) => accepted,
            status = group.wait() => {
                let status = describe_exit(status.ok());
                let _ = group.terminate(TERM_GRACE).await;
                return Err(Ending::failed(DelegateErrorCode::SubagentCrashed, format!("the subagent exited before it connected ({status})")));
            }
            reason = stops.before_handshake() => {
                let _ = group.terminate(TERM_GRACE).await;
                return Err(stopped_early(reason, progress));
            }
        };
        drop(listener);
        let stream: Stream = match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                let _ = group.terminate(TERM_GRACE).await;
                return Err(Ending::failed(
                    DelegateErrorCode::SpawnFailed,
                    format!("the IPC socket failed: {e}"),
                ));
            }
            Err(_) => {
                let _ = group.terminate(TERM_GRACE).await;
                let seconds = HANDSHAKE_TIMEOUT.as_secs();
                return Err(Ending::failed(
                    DelegateErrorCode::SpawnFailed,
                    format!("the subagent did not connect within {seconds} s"),
                ));
            }
        };
        let pid = group.pid();
        let peer = stream.peer_creds().ok().and_then(|c| c.pid());
        let process = peer.filter(|peer| is_the_subagent(*peer, pid));
        let Some(process) = process.and_then(|p| u32::try_from(p).ok()) else {
            let _ = group.terminate(TERM_GRACE).await;
            return Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!(
                    "a process other than the subagent (pid {peer:?}, expected {pid}) connected to its socket; refused"
                ),
            ));
        };
        let stream = Arc::new(stream);
        Ok(ChildLink {
            group,
            frames: spawn_reader(stream.clone()),
            writer: spawn_writer(stream),
            exit: None,
            process,
            process_start: crate::procfs::start_time(process as i32),
            scratch: Some(scratch),
        })
    }

    /// The child's `Hello`: its protocol version and whether its sandbox
    /// holds.
    async fn hello(
        &mut self,
        progress: &mut Progress<'_>,
        stops: &Stops<'_>,
    ) -> Result<(), Ending> {
        let hello = tokio::select! {
            hello = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.frames.recv()) => hello,
            reason = stops.before_handshake() => return Err(stopped_early(reason, progress)),
        };
        let frame = match hello {
            Ok(Some(Ok(frame))) => frame,
            Ok(Some(Err(e))) => {
                return Err(Ending::failed(
                    DelegateErrorCode::ProtocolError,
                    format!("bad frame from the subagent: {e}"),
                ));
            }
            Ok(None) => {
                let status = self.reap_quickly().await;
                return Err(Ending::failed(
                    DelegateErrorCode::SubagentCrashed,
                    format!("the subagent exited before its handshake ({status})"),
                ));
            }
            Err(_) => {
                return Err(Ending::failed(
                    DelegateErrorCode::ProtocolError,
                    "the subagent did not say hello in time",
                ));
            }
        };
        check_hello(frame, progress)
    }

    /// The fork, its messages encoded once, the frame around them from
    /// borrowed parts. Gives back the history.
    async fn send_fork(
        &mut self,
        progress: &Progress<'_>,
        fork: ForkEncoding,
        process_limit: Option<u64>,
    ) -> Result<Vec<Message>, Ending> {
        let (job, shared) = (progress.job, progress.shared());
        let settings = &shared.settings;
        // Known by now: the parent asked before its first request (cached).
        let context_window = shared.provider.context_window().await;
        let mcp_tools = shared
            .catalog
            .mcp()
            .map(|hub| hub.tool_specs())
            .unwrap_or_default();
        let (history, messages) = fork.finish().await?;
        // The rest of the frame is small: room for it, so the messages
        // are copied once.
        let room = messages.get().len() + 64 * 1024;
        let encoded = encode_frame_in(
            Vec::with_capacity(room),
            &ForkFrameRef {
                kind: ForkTag::Fork,
                version: PROTOCOL_VERSION,
                agent_id: &job.agent_id,
                messages: &messages,
                instructions: &job.instructions,
                max_steps: job.max_steps,
                plan_tool: settings.plan_tool,
                context_window,
                mcp_tools: &mcp_tools,
                profiles: &settings.profiles.offers(),
                process_limit,
                tool_call_fallback: settings.tool_call_fallback,
            },
        )
        .map_err(|e| {
            Ending::failed(
                DelegateErrorCode::SpawnFailed,
                format!("cannot encode the fork: {e}"),
            )
        })?;
        if self.writer.send(Outgoing::Encoded(encoded)).is_err() {
            return Err(Ending::failed(
                DelegateErrorCode::SubagentCrashed,
                "the subagent closed its socket before the fork",
            ));
        }
        Ok(history)
    }

    /// Waits briefly for the child's exit status after its socket closed.
    pub(super) async fn reap_quickly(&mut self) -> String {
        if self.exit.is_none() {
            self.exit = tokio::time::timeout(Duration::from_millis(500), self.group.wait())
                .await
                .ok()
                .and_then(Result::ok);
        }
        describe_exit(self.exit)
    }

    /// Terminating, to reaped: a child that sent `Final` gets a moment to
    /// exit on its own; then its group is killed and it is reaped, and its
    /// scratch folder removed.
    pub(super) async fn close(&mut self, progress: &mut Progress<'_>, finished: bool) {
        progress.enter(Stage::Terminating);
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
            // In a namespace of its own, all it started ends with the
            // namespace, and the keeper's deafness to SIGTERM says nothing.
            let (process, namespaced) = (self.process, self.in_own_namespace());
            let (left, deaf) = tokio::task::spawn_blocking(move || {
                let deaf = ignores_signal(process, Signal::SIGTERM);
                let left = if namespaced {
                    Vec::new()
                } else {
                    sweep::descendants(root)
                };
                (left, deaf)
            })
            .await
            .unwrap_or_default();
            // SIGTERM can end the wait only through a process that acts on
            // it: a child that ignores it, with nothing below it, is killed
            // at once instead of after TERM_GRACE. (Its commands run in
            // groups of their own and are in `left`, killed below.)
            let grace = if deaf && left.is_empty() {
                Duration::ZERO
            } else {
                TERM_GRACE
            };
            if let Err(err) = self.group.terminate(grace).await {
                warn!(pid = root, error = %err, "could not terminate the subagent's group");
            }
            left
        };
        kill_left_behind(root, left).await;
        self.wait_for_the_namespace_to_end().await;
        if let Some(scratch) = self.scratch.take() {
            let _ = tokio::task::spawn_blocking(move || scratch.remove()).await;
        }
    }

    /// Whether the subagent runs in a PID namespace of its own, below the
    /// group's leader that keeps it.
    fn in_own_namespace(&self) -> bool {
        self.process != self.group.pid()
    }

    /// Once the keeper is reaped, the kernel is still ending the namespace
    /// it kept (its init, killed with it, reaps every process there
    /// first): waits, at most `NAMESPACE_END`, until the subagent's own
    /// process is gone too, so that "ended" means no process of it is
    /// left.
    async fn wait_for_the_namespace_to_end(&self) {
        let Some(start) = self.process_start.filter(|_| self.in_own_namespace()) else {
            return;
        };
        let pid = self.process as i32;
        let ended = tokio::task::spawn_blocking(move || {
            let deadline = std::time::Instant::now() + NAMESPACE_END;
            while crate::procfs::is_running(pid, start) {
                if std::time::Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            true
        });
        if !ended.await.unwrap_or(false) {
            warn!(pid, "the subagent's namespace has not ended yet");
        }
    }
}

/// The verdict on the child's first frame.
fn check_hello(frame: ChildFrame, progress: &Progress<'_>) -> Result<(), Ending> {
    let ChildFrame::Hello {
        version,
        sandbox_error,
        sandbox_summary,
        sandbox_warnings,
        ..
    } = frame
    else {
        let name = frame_name(&frame);
        return Err(Ending::failed(
            DelegateErrorCode::ProtocolError,
            format!("the subagent's first frame was {name}, not hello"),
        ));
    };
    if version != PROTOCOL_VERSION {
        return Err(Ending::failed(
            DelegateErrorCode::ProtocolError,
            format!("the subagent speaks protocol {version}, this Fido {PROTOCOL_VERSION}"),
        ));
    }
    if let Some(error) = sandbox_error {
        return Err(Ending::failed(
            DelegateErrorCode::SandboxUnavailable,
            format!(
                "the read-only sandbox could not be enforced, so no subagent ran: {error}. Set sandbox = \"best_effort\" to run with the invocation guard only."
            ),
        ));
    }
    let (job, shared) = (progress.job, progress.shared());
    debug!(agent_id = %job.agent_id, %sandbox_summary, "subagent sandboxed");
    if !sandbox_warnings.is_empty() {
        let message = format!(
            "{} runs without a complete sandbox (sandbox = {}): {}",
            job.agent_id,
            shared.settings.limits.sandbox,
            sandbox_warnings.join("; ")
        );
        warn!("{message}");
        shared.events.emit(EventKind::Error { message });
    }
    Ok(())
}

/// Kills what the sweep found in a child's tree (each pid checked against
/// its start time, so a reused pid is never hit).
async fn kill_left_behind(root: i32, left: Vec<sweep::Descendant>) {
    if left.is_empty() {
        return;
    }
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

impl Spawned {
    /// Spawning: the socket, the scratch folder, the process, its record
    /// for the orphan sweep and its stderr log.
    async fn start(progress: &Progress<'_>) -> Result<Spawned, Ending> {
        let (job, settings) = (progress.job, &progress.shared().settings);
        let socket_name = format!(
            "fido-{}-{}-{:016x}.sock",
            std::process::id(),
            job.agent_id,
            fastrand::u64(..)
        );
        let listener = listen(&socket_name)?;
        // The one folder the child's commands may write (its TMPDIR).
        let label = format!("{}-", job.agent_id);
        let scratch = tokio::task::spawn_blocking(move || PrivateDir::create_named(&label))
            .await
            .map_err(|e| e.to_string())
            .and_then(|created| created.map_err(|e| e.to_string()))
            .map_err(|e| {
                Ending::failed(
                    DelegateErrorCode::SpawnFailed,
                    format!("cannot create the scratch folder: {e}"),
                )
            })?;
        let mut command = child_command(settings, &socket_name, job, scratch.path());
        crate::sandbox::subagent_ns::contain_subagent(&mut command, settings.max_processes);
        let mut group = ProcessGroup::spawn(&mut command).map_err(|e| {
            Ending::failed(
                DelegateErrorCode::SpawnFailed,
                format!("cannot start the subagent process: {e}"),
            )
        })?;
        let pid = group.pid();
        info!(agent_id = %job.agent_id, pid, "subagent spawned");
        // Counting the user's processes reads all of /proc: done while the
        // child starts (and at most once a second), it costs the
        // delegation nothing.
        let process_limit = progress.shared().process_limit();
        record_for_the_orphan_sweep(settings, &job.agent_id, pid).await;
        if let Some(stderr) = group.child_mut().stderr.take() {
            tokio::spawn(log_stderr(job.agent_id.clone(), stderr));
        }
        Ok(Spawned {
            group,
            listener,
            scratch,
            process_limit,
        })
    }
}

/// Whether the socket's peer is the subagent spawned as `pid`: that
/// process, or, where it runs as PID 2 of a namespace of its own, the one
/// child of the namespace's init, whose parent is `pid` (two small reads
/// of `/proc`). A process the subagent forked is neither.
fn is_the_subagent(peer: i32, pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    let parent = |child: i32| crate::procfs::stat(child).map(|(parent, _)| parent);
    peer == pid || parent(peer).and_then(parent) == Some(pid)
}

/// The listener of the child's socket (abstract namespace, random name).
fn listen(socket_name: &str) -> Result<Listener, Ending> {
    let name = socket_name.to_ns_name::<GenericNamespaced>().map_err(|e| {
        Ending::failed(
            DelegateErrorCode::SpawnFailed,
            format!("cannot name the IPC socket: {e}"),
        )
    })?;
    ListenerOptions::new()
        .name(name)
        .create_tokio()
        .map_err(|e| {
            Ending::failed(
                DelegateErrorCode::SpawnFailed,
                format!("cannot open the IPC socket: {e}"),
            )
        })
}

/// `fido __subagent` with its socket, identity, sandbox and scratch folder,
/// in the workspace, with the environment of [`SUBAGENT_ENV`].
fn child_command(
    settings: &DelegationSettings,
    socket_name: &str,
    job: &Job,
    scratch: &std::path::Path,
) -> tokio::process::Command {
    let agent_id = job.agent_id.as_str();
    let mut command = tokio::process::Command::new(&settings.program);
    // Never a variable of `env_passthrough`: a subagent is confined more
    // than the main agent's commands.
    EnvPolicy::default().apply(&mut command, SUBAGENT_ENV);
    command
        .arg("__subagent")
        .arg("--socket")
        .arg(socket_name)
        .arg("--agent-id")
        .arg(agent_id)
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .arg("--sandbox")
        .arg(settings.limits.sandbox.as_str())
        .arg("--scratch")
        .arg(scratch)
        .args(
            settings
                .deny_read
                .iter()
                .flat_map(|path| [std::ffi::OsStr::new("--deny-read"), path.as_os_str()]),
        )
        .current_dir(&settings.workspace)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(roots) = &job.write {
        for root in &roots.write {
            command.arg("--write-root").arg(root);
        }
        for root in &roots.read {
            command.arg("--read-root").arg(root);
        }
        command.current_dir(&roots.workspace).envs(roots.git_env());
    }
    command
}

/// For the orphan sweep of a later Fido, should this one die without
/// reaping the child.
async fn record_for_the_orphan_sweep(settings: &DelegationSettings, agent_id: &str, pid: u32) {
    let dir = crate::subagent::control::run_dir(&settings.workspace);
    let id = agent_id.to_string();
    let recorded =
        tokio::task::spawn_blocking(move || crate::subagent::orphans::record(&dir, &id, pid)).await;
    if let Ok(Err(message)) = recorded {
        warn!(%agent_id, %message, "the subagent is not recorded for the orphan sweep");
    }
}
