//! One MCP server process: spawned the one way (`crate::process`: its own
//! process group and cgroup, a short environment without secrets, the
//! parent-death signal), its stderr copied
//! into the log, its stdout checked line by line on the way to the client
//! (a line that is not JSON-RPC is reported, not silently skipped), and a
//! reaper task that owns the group until the server exits or is stopped.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{ChildStdin, Command};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::McpServerConfig;
use crate::process::ProcessGroup;
use crate::process::env::Inherit;

/// The variables a server inherits from Fido, besides those of
/// `env_passthrough`; everything else (API keys above all) is left out.
/// The server's own `env` is added on top.
const INHERITED_ENV: Inherit = Inherit::Only(&[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL",
]);

/// Longest line a server may write to stdout (a single JSON-RPC message).
const MAX_LINE: u64 = 16 * 1024 * 1024;
/// Time between SIGTERM and SIGKILL when a server is stopped.
const TERM_GRACE: Duration = Duration::from_millis(500);
/// Bytes of a server's stderr copied into the log.
const MAX_STDERR_LOGGED: usize = 64 * 1024;
/// How long an exit waits for the rest of the server's stderr, which the
/// failure message quotes (a process that left the pipe open to a child
/// of its own cannot hold the exit longer).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// The pipes the client speaks over.
pub struct Pipes {
    /// Requests go here.
    pub stdin: ChildStdin,
    /// Checked JSON-RPC lines from the server's stdout.
    pub stdout: DuplexStream,
}

/// A running server process.
pub struct ServerProcess {
    pub pid: u32,
    /// What went wrong with the process or its output.
    pub health: Arc<Health>,
    /// Stops the process (SIGTERM, then SIGKILL to its group).
    pub stop: CancellationToken,
}

/// Problems seen on the process, shared with the calls waiting on it.
pub struct Health {
    /// Set once the server exited and its group is gone: how.
    pub exit: Mutex<Option<String>>,
    /// The first line of stdout that was not JSON-RPC.
    pub malformed: Mutex<Option<String>>,
    /// The last lines of stderr, to explain a failure.
    pub stderr_tail: Mutex<Vec<String>>,
    /// Bumped on exit and on malformed output; waiters subscribe first,
    /// then check the fields, so no change is missed.
    changes: watch::Sender<u64>,
}

impl Health {
    fn new() -> Health {
        Health {
            exit: Mutex::new(None),
            malformed: Mutex::new(None),
            stderr_tail: Mutex::new(Vec::new()),
            changes: watch::Sender::new(0),
        }
    }

    /// A receiver that sees every later change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn exit_reason(&self) -> Option<String> {
        self.exit.lock().ok().and_then(|exit| exit.clone())
    }

    pub fn malformed_line(&self) -> Option<String> {
        self.malformed.lock().ok().and_then(|line| line.clone())
    }

    /// The last stderr lines, as one clause for an error message.
    pub fn stderr_hint(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .map(|t| t.join(" | "))
            .unwrap_or_default();
        if tail.is_empty() {
            String::new()
        } else {
            format!(
                "; its stderr ended with: {}",
                crate::text::short(&tail, 300)
            )
        }
    }
}

/// Starts `config`'s command in `workspace` (or its `cwd`).
pub fn spawn(
    config: &McpServerConfig,
    workspace: &Path,
) -> std::io::Result<(ServerProcess, Pipes)> {
    let mut command = Command::new(&config.command);
    config.env_policy.apply(&mut command, INHERITED_ENV);
    command
        .args(&config.args)
        .current_dir(config.working_dir(workspace))
        .envs(&config.env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut group = ProcessGroup::spawn_with_stdin(&mut command, Stdio::piped())?;
    let pid = group.pid();
    let child = group.child_mut();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = group.kill();
        return Err(std::io::Error::other("the server's pipes were not opened"));
    };
    info!(server = %config.name, pid, "MCP server started");
    let health = Arc::new(Health::new());
    let (client_side, checked) = tokio::io::duplex(256 * 1024);
    tokio::spawn(check_stdout(stdout, checked, health.clone()));
    let stderr_drained = CancellationToken::new();
    tokio::spawn(log_stderr(
        config.name.clone(),
        stderr,
        health.clone(),
        stderr_drained.clone(),
    ));
    let stop = CancellationToken::new();
    tokio::spawn(reap(group, stop.clone(), health.clone(), stderr_drained));
    let pipes = Pipes {
        stdin,
        stdout: client_side,
    };
    Ok((ServerProcess { pid, health, stop }, pipes))
}

/// Owns the group: waits for the leader's exit or for `stop`, then kills
/// what is left of the group and reaps the leader.
///
/// The exit is recorded once the server's stderr is read to its end (or
/// after [`STDERR_DRAIN`]), so the failure it explains quotes its last words.
async fn reap(
    mut group: ProcessGroup,
    stop: CancellationToken,
    health: Arc<Health>,
    stderr_drained: CancellationToken,
) {
    let reason = tokio::select! {
        status = group.wait() => match status {
            Ok(status) => describe(status),
            Err(err) => format!("could not be watched ({err})"),
        },
        _ = stop.cancelled() => "was stopped".to_string(),
    };
    if let Err(err) = group.terminate(TERM_GRACE).await {
        debug!(pid = group.pid(), error = %err, "could not terminate the MCP server's group");
    }
    let _ = tokio::time::timeout(STDERR_DRAIN, stderr_drained.cancelled()).await;
    if let Ok(mut exit) = health.exit.lock() {
        exit.get_or_insert(reason);
    }
    health.bump();
}

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "exited".to_string(),
    }
}

/// Forwards each JSON-RPC line to the client; the first line that is not
/// one is recorded in `health` (and dropped, as the client would drop it).
async fn check_stdout(
    stdout: impl AsyncRead + Unpin,
    mut checked: DuplexStream,
    health: Arc<Health>,
) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() as u64 >= MAX_LINE && line.last() != Some(&b'\n') {
            note_malformed(&health, "a line longer than 16 MiB");
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if !is_json_rpc(&line) {
            note_malformed(&health, &String::from_utf8_lossy(&line));
            continue;
        }
        if checked.write_all(&line).await.is_err() {
            break;
        }
    }
    let _ = checked.shutdown().await;
}

fn is_json_rpc(line: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(message)) => {
            message.get("jsonrpc").and_then(|v| v.as_str()) == Some("2.0")
        }
        Ok(serde_json::Value::Array(_)) => true,
        _ => false,
    }
}

fn note_malformed(health: &Health, line: &str) {
    let shown = crate::text::summary(line, 120);
    if let Ok(mut malformed) = health.malformed.lock() {
        malformed.get_or_insert(shown);
    }
    health.bump();
}

/// Copies stderr into the log (up to a cap) and keeps its last lines; the
/// rest is drained so the server never blocks on a full pipe.
async fn log_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    health: Arc<Health>,
    drained: CancellationToken,
) {
    let _drained = drained.drop_guard();
    let mut lines = BufReader::new(stderr);
    let mut line = Vec::new();
    let mut logged = 0usize;
    loop {
        line.clear();
        match (&mut lines)
            .take(64 * 1024)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = crate::text::summary(&String::from_utf8_lossy(&line), 300);
        if text.is_empty() {
            continue;
        }
        if logged < MAX_STDERR_LOGGED {
            logged += text.len();
            info!(server = %server, "MCP server stderr: {text}");
        }
        if let Ok(mut tail) = health.stderr_tail.lock() {
            if tail.len() == 3 {
                tail.remove(0);
            }
            tail.push(text);
        }
    }
}
