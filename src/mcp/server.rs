//! One configured server over the session: started once, its tools listed
//! once (the catalog is fixed), restarted after a crash at most
//! `max_restarts` times, then "unavailable" for the rest of the session.
//! Each crash, and the end of the restarts, is reported once (a warning);
//! the calls themselves get a clear error each.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::McpServerConfig;
use super::client::{Connection, McpError, RemoteTool};

/// Where a server stands.
enum State {
    Running(Arc<Connection>),
    /// Crashed (or sent garbage); restarted on the next call.
    Crashed(String),
    /// Never started: it has no tools in the catalog.
    Failed(String),
    /// Out of restarts.
    Unavailable(String),
    Stopped,
}

struct Inner {
    state: State,
    restarts: u32,
    /// Connections replaced after a crash, reaped at shutdown.
    retired: Vec<Arc<Connection>>,
}

/// Why a call to a server's tool failed; the sentence is the tool result
/// the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// It never started, or is out of restarts.
    #[error("MCP server {server} unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    #[error("MCP server {server} unavailable: Fido is shutting down")]
    ShuttingDown { server: String },
    /// It had crashed, and starting it again failed.
    #[error("MCP server {server} unavailable: its restart failed: {source}")]
    RestartFailed {
        server: String,
        #[source]
        source: McpError,
    },
    /// It crashed (or sent garbage) during the call; `next` says what the
    /// model may expect of the next call.
    #[error("MCP server {server}: {source}. The call may or may not have taken effect; {next}")]
    Crashed {
        server: String,
        #[source]
        source: McpError,
        next: String,
    },
    /// The call failed, and the server runs on.
    #[error("MCP server {server}: {source}")]
    Failed {
        server: String,
        #[source]
        source: McpError,
    },
}

/// A server and the tools it listed at session start.
pub struct McpServer {
    pub config: McpServerConfig,
    workspace: PathBuf,
    /// As listed at start; later changes wait for the next session.
    pub tools: Vec<RemoteTool>,
    inner: Mutex<Inner>,
}

/// A server's state, for `fido mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Running { pid: u32 },
    Failed(String),
}

impl McpServer {
    /// Starts the server and lists its tools; a failure is kept as the
    /// server's state (and returned as the warning to show once).
    pub async fn start(config: McpServerConfig, workspace: PathBuf) -> (McpServer, Option<String>) {
        let (state, tools, warning) = match Connection::open(&config, &workspace).await {
            Ok((connection, tools)) => (State::Running(Arc::new(connection)), tools, None),
            Err(err) => {
                let warning = format!(
                    "MCP server {} failed to start: {err}; its tools are not available in this session",
                    config.name
                );
                (State::Failed(err.to_string()), Vec::new(), Some(warning))
            }
        };
        let server = McpServer {
            config,
            workspace,
            tools,
            inner: Mutex::new(Inner {
                state,
                restarts: 0,
                retired: Vec::new(),
            }),
        };
        (server, warning)
    }

    pub async fn state(&self) -> ServerState {
        match &self.inner.lock().await.state {
            State::Running(connection) => match connection.problem() {
                None => ServerState::Running {
                    pid: connection.pid(),
                },
                Some(reason) => ServerState::Failed(format!("crashed: {reason}")),
            },
            State::Crashed(reason) => ServerState::Failed(format!("crashed: {reason}")),
            State::Failed(reason) => ServerState::Failed(reason.clone()),
            State::Unavailable(reason) => ServerState::Failed(format!("unavailable: {reason}")),
            State::Stopped => ServerState::Failed("stopped".into()),
        }
    }

    /// Calls the server's tool `tool`; the error is one sentence for the model.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<Value, CallError> {
        let name = &self.config.name;
        let connection = self.connection().await?;
        match connection
            .call(tool, arguments, self.config.tool_timeout, cancel)
            .await
        {
            Ok(result) => Ok(result),
            Err(source @ (McpError::Crashed(_) | McpError::Malformed(_))) => {
                // Stopped now, restarted (if it may be) on the next call.
                connection.stop();
                let next = self.next_step().await;
                if connection.first_report() {
                    warn!("MCP server {name} failed: {source}; {next}");
                }
                Err(CallError::Crashed {
                    server: name.clone(),
                    source,
                    next,
                })
            }
            Err(source) => Err(CallError::Failed {
                server: name.clone(),
                source,
            }),
        }
    }

    /// What the model may expect after a crash.
    async fn next_step(&self) -> String {
        let restarts = self.inner.lock().await.restarts;
        self.after_crash(restarts)
    }

    fn after_crash(&self, restarts: u32) -> String {
        let max = self.config.max_restarts;
        if restarts < max {
            format!(
                "the server will be restarted for the next call (restart {} of {max})",
                restarts + 1
            )
        } else {
            "the server has no restarts left (max_restarts), so its tools are unavailable for the rest of the session".into()
        }
    }

    /// The live connection, restarting a crashed server if it may be.
    async fn connection(&self) -> Result<Arc<Connection>, CallError> {
        let name = &self.config.name;
        let mut inner = self.inner.lock().await;
        let reason = match &inner.state {
            State::Running(connection) => match connection.problem() {
                None => return Ok(connection.clone()),
                Some(reason) => {
                    connection.stop();
                    if connection.first_report() {
                        warn!(
                            "MCP server {name} failed: the server {reason}; {}",
                            self.after_crash(inner.restarts)
                        );
                    }
                    let retired = connection.clone();
                    inner.retired.push(retired);
                    reason
                }
            },
            State::Crashed(reason) => reason.clone(),
            State::Failed(reason) | State::Unavailable(reason) => {
                return Err(CallError::Unavailable {
                    server: name.clone(),
                    reason: reason.clone(),
                });
            }
            State::Stopped => {
                return Err(CallError::ShuttingDown {
                    server: name.clone(),
                });
            }
        };
        if inner.restarts >= self.config.max_restarts {
            let reason = format!(
                "it crashed ({reason}) after {} restarts (max_restarts)",
                inner.restarts
            );
            // Already said in the crash's warning.
            info!("MCP server {name} is unavailable for the rest of the session: {reason}");
            inner.state = State::Unavailable(reason.clone());
            return Err(CallError::Unavailable {
                server: name.clone(),
                reason,
            });
        }
        inner.restarts += 1;
        info!(
            "MCP server {name} crashed ({reason}); restarting it ({} of {} restarts)",
            inner.restarts, self.config.max_restarts
        );
        match Connection::open(&self.config, &self.workspace).await {
            Ok((connection, tools)) => {
                if tools != self.tools {
                    warn!(
                        "MCP server {name} lists different tools after its restart; the catalog is fixed for this session, so the change takes effect in the next session"
                    );
                }
                let connection = Arc::new(connection);
                inner.state = State::Running(connection.clone());
                Ok(connection)
            }
            Err(source) => {
                inner.state = State::Crashed(source.to_string());
                Err(CallError::RestartFailed {
                    server: name.clone(),
                    source,
                })
            }
        }
    }

    /// Stops the server and waits until its processes are reaped.
    pub async fn shutdown(&self) {
        let mut inner = self.inner.lock().await;
        if let State::Running(connection) = std::mem::replace(&mut inner.state, State::Stopped) {
            inner.retired.push(connection);
        }
        for connection in std::mem::take(&mut inner.retired) {
            connection.close().await;
        }
    }
}
