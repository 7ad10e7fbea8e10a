//! One live connection to a server: the rmcp client over the process's
//! pipes, the tool list, and calls raced against the time limit, the
//! server's exit and malformed output, so every call ends with a clear
//! answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::McpServerConfig;
use super::process::{Health, Pipes, ServerProcess};

/// Why a call or the start-up did not produce a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("{0}")]
    Start(String),
    #[error("the call timed out after {0} ms (tool_timeout_ms); it was cancelled")]
    Timeout(u128),
    #[error("the server {0}")]
    Crashed(String),
    #[error("the server sent malformed JSON-RPC: {0}")]
    Malformed(String),
    #[error("the server answered with an error: {0}")]
    Remote(String),
    #[error("cancelled before the server answered")]
    Cancelled,
}

/// Notes, once each, that a server changed its tools mid-session.
struct Notes {
    server: String,
    noted: AtomicBool,
}

impl ClientHandler for Notes {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        if !self.noted.swap(true, Ordering::Relaxed) {
            warn!(
                "MCP server {} changed its tool list; the catalog is fixed for this session, so the change takes effect in the next session",
                self.server
            );
        }
    }
}

/// A tool as the server listed it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// A started, handshaken server.
pub struct Connection {
    service: RunningService<RoleClient, Notes>,
    process: ServerProcess,
    /// Its failure was reported (once per connection).
    reported: AtomicBool,
}

impl Connection {
    /// Spawns the server, runs the handshake and lists its tools, all
    /// within `startup_timeout`.
    pub async fn open(
        config: &McpServerConfig,
        workspace: &std::path::Path,
    ) -> Result<(Connection, Vec<RemoteTool>), McpError> {
        let (process, pipes) = super::process::spawn(config, workspace)
            .map_err(|err| McpError::Start(format!("cannot run `{}`: {err}", config.command)))?;
        let health = process.health.clone();
        let stop = process.stop.clone();
        let started = tokio::time::timeout(config.startup_timeout, async {
            handshake(config, process, pipes).await
        })
        .await;
        match started {
            Ok(Ok(opened)) => Ok(opened),
            Ok(Err(err)) => Err(err),
            Err(_) => {
                stop.cancel();
                Err(McpError::Start(format!(
                    "it did not answer the handshake and the tool list within {} ms (startup_timeout_ms){}",
                    config.startup_timeout.as_millis(),
                    health.stderr_hint()
                )))
            }
        }
    }

    /// Calls `tool` with `arguments`; the result is the raw `CallToolResult`.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, McpError> {
        let health = &self.process.health;
        let mut changes = health.subscribe();
        if let Some(problem) = problem(health) {
            return Err(problem);
        }
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let call = self.service.peer().call_tool(params);
        tokio::pin!(call);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                result = &mut call => return self.answer(result).await,
                _ = &mut deadline => return Err(McpError::Timeout(timeout.as_millis())),
                _ = cancel.cancelled() => return Err(McpError::Cancelled),
                changed = changes.changed() => {
                    if let Some(problem) = problem(health) {
                        return Err(problem);
                    }
                    if changed.is_err() {
                        return Err(McpError::Crashed("stopped".into()));
                    }
                }
            }
        }
    }

    async fn answer(
        &self,
        result: Result<rmcp::model::CallToolResult, ServiceError>,
    ) -> Result<Value, McpError> {
        match result {
            Ok(result) => serde_json::to_value(&result)
                .map_err(|err| McpError::Malformed(format!("an unreadable result ({err})"))),
            Err(ServiceError::McpError(error)) => Err(McpError::Remote(error.message.to_string())),
            Err(other) => {
                // The transport ends a moment before the exit is seen.
                let health = &self.process.health;
                let _ = tokio::time::timeout(EXIT_SETTLE, settled(health)).await;
                Err(problem(health)
                    .unwrap_or(McpError::Crashed(format!("connection failed ({other})"))))
            }
        }
    }

    /// Why the connection is no good any more (exit, malformed output).
    pub fn problem(&self) -> Option<String> {
        problem(&self.process.health)
            .map(|p| p.to_string().trim_start_matches("the server ").to_string())
    }

    pub fn pid(&self) -> u32 {
        self.process.pid
    }

    /// True the first time only: a failure is reported once.
    pub fn first_report(&self) -> bool {
        !self.reported.swap(true, Ordering::Relaxed)
    }

    /// Asks the server to stop (SIGTERM, then SIGKILL to its group).
    pub fn stop(&self) {
        self.process.stop.cancel();
    }

    /// Stops the server and waits until its group is gone and reaped.
    pub async fn close(&self) {
        self.stop();
        self.service.cancellation_token().cancel();
        if tokio::time::timeout(Duration::from_secs(5), settled(&self.process.health))
            .await
            .is_err()
        {
            warn!(
                pid = self.process.pid,
                "an MCP server was not reaped within 5 s"
            );
        }
    }
}

async fn handshake(
    config: &McpServerConfig,
    process: ServerProcess,
    pipes: Pipes,
) -> Result<(Connection, Vec<RemoteTool>), McpError> {
    let notes = Notes {
        server: config.name.clone(),
        noted: AtomicBool::new(false),
    };
    let health: Arc<Health> = process.health.clone();
    let failed = |what: &'static str, detail: String| {
        start_failure(what, detail, health.clone(), process.stop.clone())
    };
    let service = match notes.serve((pipes.stdout, pipes.stdin)).await {
        Ok(service) => service,
        Err(err) => return Err(failed("the handshake failed", err.to_string()).await),
    };
    let listed = match service.peer().list_all_tools().await {
        Ok(tools) => tools,
        Err(err) => return Err(failed("listing its tools failed", err.to_string()).await),
    };
    let tools = listed
        .into_iter()
        .map(|tool| RemoteTool {
            name: tool.name.to_string(),
            description: tool.description.map(|d| d.to_string()).unwrap_or_default(),
            input_schema: Value::Object((*tool.input_schema).clone()),
        })
        .collect();
    let connection = Connection {
        service,
        process,
        reported: AtomicBool::new(false),
    };
    Ok((connection, tools))
}

/// The error of a start that failed at `what`, stopping the process.
async fn start_failure(
    what: &str,
    detail: String,
    health: Arc<Health>,
    stop: CancellationToken,
) -> McpError {
    // The pipe closes a moment before the exit is seen.
    let _ = tokio::time::timeout(Duration::from_millis(200), settled(&health)).await;
    stop.cancel();
    let detail = match problem(&health) {
        Some(problem) => problem.to_string(),
        None => format!("{detail}{}", health.stderr_hint()),
    };
    McpError::Start(format!("{what}: {detail}"))
}

/// How long a call whose transport failed waits for the server's exit to
/// be recorded, so its error names the exit and the server's stderr. The
/// reaper records it after the rest of the group is gone (up to the
/// process's 500 ms `TERM_GRACE`); 200 ms was too short for a full test run
/// on two cores, which then got "connection failed" instead.
const EXIT_SETTLE: Duration = Duration::from_secs(2);

/// Resolves once the process has exited and been reaped (the reaper records
/// the exit last).
async fn settled(health: &Health) {
    let mut changes = health.subscribe();
    while health.exit_reason().is_none() && changes.changed().await.is_ok() {}
}

/// The process's exit or malformed output, as the error of a call.
fn problem(health: &Health) -> Option<McpError> {
    if let Some(line) = health.malformed_line() {
        return Some(McpError::Malformed(line));
    }
    health
        .exit_reason()
        .map(|reason| McpError::Crashed(format!("{reason}{}", health.stderr_hint())))
}
