//! `bash_exec`: run a shell command in the workspace.
//!
//! Theory of operation: `bash -c COMMAND` leads its own process group
//! ([`ProcessGroup`]), stdin `/dev/null`, stdout and stderr both the write
//! end of ONE pipe, so the model sees them interleaved in the order they
//! were written. The read end is drained asynchronously into a [`Capture`]
//! that keeps the head and the tail of the output (`limits.bash_output_cap`
//! bytes in all). The run ends in one of three ways:
//! - bash exits: whatever is left in its group (background jobs) is killed,
//!   and the pipe is drained for a short while, so a forgotten `sleep 100 &`
//!   cannot hang the tool;
//! - the timeout fires, or the invocation is cancelled: the group is
//!   terminated (SIGTERM, a grace period, SIGKILL) and the output so far is
//!   returned with a failed result.
//!
//! No process of the group outlives the tool. In a sandboxed mode the
//! command runs in a PID namespace of its own (`sandbox::pidns`), so a
//! process that leaves the group (`setsid`, a double fork) ends with it
//! too; in `danger-full-access`, and for a command approved to run outside
//! the sandbox, such a process is beyond its reach.
//!
//! Before anything runs, the session's approval policy is asked
//! ([`super::approval`]); then the command starts inside the session's
//! [`CommandSandbox`] (or, for an approved escalation, outside it). A
//! sandboxed command that fails with a permission error gets one more
//! line saying the sandbox may be the cause and how to ask for more.
//!
//! The command gets Fido's environment without its secrets, as the
//! session's [`EnvPolicy`] says (README, "Secrets"): only the model
//! gateway holds keys.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::fcntl::OFlag;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::Capability;
use super::approval::RunAs;
use super::{Call, ToolFuture, ToolLimits, ToolOutput, TypedTool};
use crate::net::proxy::{self, Proxy};
use crate::process::ProcessGroup;
use crate::process::env::{EnvPolicy, Inherit};
use crate::protocol::schema::tool_args;
use crate::protocol::tool_facts::{CommandExit, CommandRun, ToolFacts, Truncation};
use crate::protocol::{ApprovalPolicy, NetworkAccess, SandboxMode};
use crate::sandbox::limits::{CommandLimits, TmpdirLimit};
use crate::sandbox::new_repository::RepositoryWatch;
use crate::sandbox::{CommandConfinement, CommandSandbox};
use crate::text::sanitize;
use crate::workspace::{Workspace, is_missing};
use std::sync::Arc;

/// Grace between SIGTERM and SIGKILL on timeout or cancel.
const GRACE: Duration = Duration::from_secs(1);
/// How long output is still read after bash exited and its group was killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// How long output is still read after a terminated run.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(200);
/// What a command's output says when the sandbox refused it something.
const SANDBOX_SYMPTOMS: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "eacces",
    "eperm",
    // The command's limits (`sandbox::limits`).
    "no space left on device",
    "cannot fork",
    "resource temporarily unavailable",
];

pub struct BashExec;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        command: String,
        #[schema(minimum = 1, description = "Default 120000.")]
        #[serde(default)]
        timeout_ms: Option<u64>,
        #[serde(default)]
        cwd: Option<String>,
        #[schema(description = "Ask to run it outside the sandbox.")]
        #[serde(default)]
        escalate: bool,
        #[serde(default)]
        justification: Option<String>,
    }
}

impl TypedTool for BashExec {
    const NAME: &'static str = super::names::BASH_EXEC;
    const CAPABILITY: Capability = Capability {
        executes: true,
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        let limits = ToolLimits::default();
        format!(
            "Run a `bash -c` command in the workspace (or `cwd`); returns its output and `exit code: N` (non-zero fails). No stdin or terminal: pass flags like `-y`. Timeout {} s, up to {} s with timeout_ms; background processes die when it returns. Output past {} bytes keeps its head and tail.",
            limits.bash_default_timeout.as_secs(),
            limits.bash_max_timeout.as_secs(),
            limits.bash_output_cap
        )
        .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let env = call.env;
            if args.command.trim().is_empty() {
                return ToolOutput::error("`command` is empty; give a bash command line to run");
            }
            if args.timeout_ms == Some(0) {
                return ToolOutput::error("timeout_ms must be at least 1");
            }
            let timeout = args
                .timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(env.limits.bash_default_timeout)
                .min(env.limits.bash_max_timeout);
            let cwd = match working_dir(&env.workspace, args.cwd.as_deref()) {
                Ok(cwd) => cwd,
                Err(refusal) => return refusal,
            };
            let shown_cwd = env.workspace.display(&cwd);
            let approved = env
                .approvals
                .command(
                    &args.command,
                    &shown_cwd,
                    args.escalate,
                    args.justification.as_deref(),
                )
                .await;
            let (sandbox, proxy) = match approved {
                Ok(RunAs::Sandboxed) => (env.sandbox.current(), env.proxy.clone()),
                Ok(RunAs::Unsandboxed) => (Arc::new(CommandSandbox::unconfined()), None),
                Err(refusal) => return refusal.into_output(),
            };
            let run = Run {
                command: &args.command,
                cwd,
                timeout,
                cap: env.limits.bash_output_cap,
                sandbox,
                proxy,
                env_policy: &env.env_policy,
                escalation_allowed: env.approvals.settings().approval_policy
                    != ApprovalPolicy::Never,
            };
            run.execute(call.cancel).await
        })
    }
}

fn working_dir(workspace: &Workspace, cwd: Option<&str>) -> Result<PathBuf, ToolOutput> {
    let resolved = workspace
        .resolve(cwd.unwrap_or("."))
        .map_err(|err| ToolOutput::error(err.to_string()))?;
    match std::fs::metadata(&resolved.abs) {
        Ok(metadata) if metadata.is_dir() => Ok(resolved.abs),
        Ok(_) => Err(ToolOutput::error(format!(
            "cwd `{}` is a file, not a directory",
            resolved.shown
        ))),
        Err(err) if is_missing(&err) => Err(ToolOutput::error(format!(
            "cwd `{}` does not exist",
            resolved.shown
        ))),
        Err(err) => Err(ToolOutput::error(format!(
            "cannot use cwd `{}`: {err}",
            resolved.shown
        ))),
    }
}

/// Moves a `.git` the command made at the top of the workspace or in a
/// gitlink folder out of git's way (`sandbox::new_repository`) and says
/// so after its output.
async fn set_aside_new_repository(watch: RepositoryWatch, output: &mut ToolOutput) {
    let note = match tokio::task::spawn_blocking(move || watch.set_aside()).await {
        Ok(Ok(None)) => return,
        Ok(Ok(Some(moved))) => {
            tracing::warn!(moved = ?moved.moved, "a sandboxed command made .git; set aside");
            moved.note()
        }
        Ok(Err(err)) => format!(
            "note: this command created .git at the top of the workspace and Fido could not move it aside ({err}): do not use git here before you have read .git/config and .git/hooks"
        ),
        Err(err) => format!("note: checking for a new .git failed: {err}"),
    };
    output.content.push('\n');
    output.content.push_str(&note);
}

/// How a run ended.
enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
}

struct Run<'a> {
    command: &'a str,
    cwd: PathBuf,
    timeout: Duration,
    cap: usize,
    sandbox: Arc<CommandSandbox>,
    /// The allowlist proxy the sandbox routes the command through.
    proxy: Option<Arc<Proxy>>,
    /// Which of Fido's variables the command gets (escalated or not).
    env_policy: &'a EnvPolicy,
    /// The policy lets the model ask for an escalated run.
    escalation_allowed: bool,
}

impl Run<'_> {
    async fn execute(self, cancel: &CancellationToken) -> ToolOutput {
        let started = tokio::time::Instant::now();
        let mut output = self.run(cancel).await;
        self.add_blocked(&mut output, started);
        output
    }

    /// The proxy's refusals during the run, one line each: curl, for one,
    /// says only "CONNECT tunnel failed, response 403" for an HTTPS host.
    fn add_blocked(&self, output: &mut ToolOutput, started: tokio::time::Instant) {
        let Some(proxy) = &self.proxy else {
            return;
        };
        for line in proxy.blocked_since(started) {
            output.content.push('\n');
            output.content.push_str(&line);
        }
    }

    async fn run(&self, cancel: &CancellationToken) -> ToolOutput {
        let started = tokio::time::Instant::now();
        let (reader, writer) = match nix::unistd::pipe2(OFlag::O_CLOEXEC) {
            Ok(pair) => pair,
            Err(err) => return ToolOutput::error(format!("cannot create a pipe: {err}")),
        };
        let sandbox = Arc::clone(&self.sandbox);
        let (watch, confinement) =
            match tokio::task::spawn_blocking(move || sandbox.prepare_start()).await {
                Ok(prepared) => prepared,
                Err(err) => return ToolOutput::error(format!("cannot prepare the command: {err}")),
            };
        // From here a new repository may be the command's own
        // (`sandbox::nested_clones`).
        let _running = self.sandbox.command_started();
        let spawned = self.spawn(writer, confinement);
        let mut group = match spawned {
            Ok(group) => group,
            Err(refusal) => return refusal,
        };
        let mut receiver = match pipe::Receiver::from_owned_fd(reader) {
            Ok(receiver) => receiver,
            Err(err) => {
                let _ = group.terminate(Duration::ZERO).await;
                return ToolOutput::error(format!("cannot read the command's output: {err}"));
            }
        };
        let mut capture = Capture::new(self.cap);
        let mut buf = vec![0u8; 16 * 1024];
        let mut eof = false;
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let ending = loop {
            tokio::select! {
                read = receiver.read(&mut buf), if !eof => match read {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => capture.push(&buf[..n]),
                },
                status = group.wait() => match status {
                    Ok(status) => break Ending::Exited(status),
                    Err(err) => {
                        let _ = group.terminate(Duration::ZERO).await;
                        return ToolOutput::error(format!("lost track of the command: {err}"));
                    }
                },
                () = &mut deadline => break Ending::TimedOut,
                () = cancel.cancelled() => break Ending::Cancelled,
            }
        };
        let drain_for = match ending {
            Ending::Exited(_) => {
                // Background jobs do not outlive the command.
                if let Err(err) = group.kill() {
                    tracing::warn!(error = %err, "killing leftover processes failed");
                }
                DRAIN_AFTER_EXIT
            }
            Ending::TimedOut | Ending::Cancelled => {
                if let Err(err) = group.terminate(GRACE).await {
                    tracing::warn!(error = %err, "terminating the command failed");
                }
                DRAIN_AFTER_KILL
            }
        };
        if !eof {
            drain(&mut receiver, &mut buf, &mut capture, drain_for).await;
        }
        let mut output = self.result(ending, &capture, started.elapsed());
        if let Some(watch) = watch {
            set_aside_new_repository(watch, &mut output).await;
        }
        output
    }

    /// Starts `bash -c COMMAND` in the sandbox, its output into `writer`.
    fn spawn(
        &self,
        writer: std::os::fd::OwnedFd,
        confinement: CommandConfinement,
    ) -> Result<ProcessGroup, ToolOutput> {
        let writer_for_stderr = writer
            .try_clone()
            .map_err(|err| ToolOutput::error(format!("cannot create a pipe: {err}")))?;
        let mut command = Command::new("bash");
        self.env_policy.apply(&mut command, Inherit::All);
        command
            .arg("-c")
            .arg(self.command)
            .current_dir(&self.cwd)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(writer_for_stderr))
            .env("PAGER", "cat")
            .env("GIT_PAGER", "cat");
        if let Some(route) = self.sandbox.proxy() {
            proxy::route_command(&mut command, route.port);
        }
        self.sandbox.apply_prepared(&mut command, confinement);
        // The command (with our copies of the write end) is dropped on
        // return, so the pipe reaches EOF when the group's processes are
        // gone.
        ProcessGroup::spawn(&mut command)
            .map_err(|err| ToolOutput::error(format!("cannot start bash: {err}")))
    }

    fn result(&self, ending: Ending, capture: &Capture, elapsed: Duration) -> ToolOutput {
        let text = sanitize(&capture.render(), false);
        let text = text.trim_end_matches('\n');
        let body = if text.trim().is_empty() {
            "(no output)"
        } else {
            text
        };
        let exit = match ending {
            Ending::Exited(status) => exit_of(status),
            Ending::TimedOut => CommandExit::TimedOut {
                after_ms: millis(self.timeout),
            },
            Ending::Cancelled => CommandExit::Cancelled,
        };
        let content = match ending {
            Ending::Exited(status) => {
                let mut content = format!("{body}\n{exit}");
                if !status.success()
                    && let Some(note) = self.sandbox_note(&capture.render())
                {
                    content.push('\n');
                    content.push_str(&note);
                }
                content
            }
            Ending::TimedOut => format!(
                "{body}\ntimed out after {}; the command and everything it started were killed",
                humantime::format_duration(self.timeout)
            ),
            Ending::Cancelled => {
                format!("{body}\ncancelled; the command and everything it started were killed")
            }
        };
        let facts = ToolFacts {
            command: Some(CommandRun {
                exit: exit.clone(),
                elapsed_ms: millis(elapsed),
                output_bytes: body.len(),
            }),
            truncation: capture.truncation(),
            ..ToolFacts::default()
        };
        ToolOutput {
            ok: exit.success(),
            content,
            details: None,
            plan: None,
            facts: Some(Box::new(facts)),
        }
    }
}

impl Run<'_> {
    /// The line that tells the model the sandbox may have refused the
    /// command something, when it ran sandboxed and says so.
    fn sandbox_note(&self, output: &str) -> Option<String> {
        let mode = self.sandbox.mode();
        if mode == SandboxMode::DangerFullAccess {
            return None;
        }
        let lower = output.to_lowercase();
        if !SANDBOX_SYMPTOMS.iter().any(|s| lower.contains(s)) {
            return None;
        }
        let allowed = match (mode, self.sandbox.protection()) {
            (SandboxMode::ReadOnly, _) if self.sandbox.is_subagent_shell() => {
                "writes only in $TMPDIR"
            }
            (SandboxMode::ReadOnly, _) => "writes nowhere",
            (_, Some(mechanism)) if !mechanism.uses_namespace() => {
                "writes only in the workspace's existing top-level entries and $TMPDIR, never in the protected .git, .fido, .fido-state or fido.toml"
            }
            (_, Some(_)) => {
                "writes only in the workspace and $TMPDIR, never in the protected .git, .fido, .fido-state or fido.toml (read-only file system)"
            }
            (SandboxMode::WorkspaceWrite | SandboxMode::DangerFullAccess, None) => {
                "writes only in the workspace and $TMPDIR"
            }
        };
        let network = match self.sandbox.network() {
            NetworkAccess::On => "",
            NetworkAccess::Allowlist => ", network only to the hosts of network_allow",
            NetworkAccess::Off => ", no network",
        };
        let how = if self.sandbox.is_subagent_shell() {
            "A subagent cannot escalate: report what would need more to the parent."
        } else if self.escalation_allowed {
            "If the command needs more, call bash_exec again with escalate: true and a justification; the user decides."
        } else {
            "This session cannot escalate (approval_policy never): work within the sandbox, or tell the user what needs to run outside it."
        };
        let limits = self.sandbox.limits().map(limits_note).unwrap_or_default();
        Some(format!(
            "note: this may have been refused by the sandbox ({mode}: {allowed}{network}{limits}, no credential files). {how}"
        ))
    }
}

/// The limits part of the sandbox note: the process limit where the
/// kernel keeps it, the `TMPDIR` size where it is a tmpfs.
fn limits_note((limits, tmpdir): &(CommandLimits, TmpdirLimit)) -> String {
    let mut note = String::new();
    if crate::sandbox::limits::process_limit_support().is_ok() {
        note.push_str(&format!(
            ", at most {} processes and threads",
            limits.max_processes
        ));
    }
    if let TmpdirLimit::Tmpfs { mib } = tmpdir {
        note.push_str(&format!(", $TMPDIR at most {mib} MiB"));
    }
    note
}

/// Reads what is left in the pipe until EOF or until `limit` has passed.
async fn drain(
    receiver: &mut pipe::Receiver,
    buf: &mut [u8],
    capture: &mut Capture,
    limit: Duration,
) {
    let _ = tokio::time::timeout(limit, async {
        loop {
            match receiver.read(buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => capture.push(&buf[..n]),
            }
        }
    })
    .await;
}

/// How an exited command ended: its code, or the signal that ended it.
fn exit_of(status: ExitStatus) -> CommandExit {
    if let Some(code) = status.code() {
        return CommandExit::Code { code };
    }
    match status.signal() {
        Some(signal) => CommandExit::Signal {
            number: signal,
            name: nix::sys::signal::Signal::try_from(signal)
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|_| format!("signal {signal}")),
        },
        None => CommandExit::Unknown,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The head and the tail of a byte stream, `cap` bytes in all.
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: usize,
}

impl Capture {
    fn new(cap: usize) -> Capture {
        let head_cap = cap / 2;
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
        } else {
            self.tail.extend(bytes);
            let excess = self.tail.len().saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
        }
    }

    /// The bytes kept of all the command wrote, when some were left out.
    fn truncation(&self) -> Option<Truncation> {
        let shown = self.head.len() + self.tail.len();
        (shown < self.total).then_some(Truncation {
            shown_bytes: shown as u64,
            total_bytes: self.total as u64,
        })
    }

    /// The text, with a marker where bytes were left out.
    fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let elided = self.total - self.head.len() - tail.len();
        if elided == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        // Cut on character boundaries so the seams are clean.
        let head_end = match std::str::from_utf8(&self.head) {
            Err(err) if err.error_len().is_none() => err.valid_up_to(),
            Ok(_) | Err(_) => self.head.len(),
        };
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|&&b| b & 0b1100_0000 == 0b1000_0000)
            .count();
        let elided = elided + (self.head.len() - head_end) + tail_start;
        let mut out = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("[… {elided} bytes of output elided …]\n"));
        out.push_str(&String::from_utf8_lossy(&tail[tail_start..]));
        out
    }
}

#[cfg(test)]
#[path = "bash_exec_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "bash_exec_protect_tests.rs"]
mod protect_tests;
