//! MCP client: the configured stdio servers and their tools in the catalog.
//!
//! # Theory of operation
//!
//! At session start [`McpHub::start`] starts every `[mcp_servers.NAME]` of
//! the trusted configuration at once ([`server`]): each is a process group
//! of its own with a scrubbed environment and a parent-death signal
//! ([`process`]), spoken to with the official SDK, `rmcp` ([`client`]).
//! Their tools join the catalog after the built-in ones, servers sorted by
//! name and tools in the order listed, as `mcp__SERVER__TOOL` ([`names`]);
//! the catalog then stays as it is for the session. A server that fails to
//! start is reported once and has no tools; one that changes its tools
//! later is noted, and the change waits for the next session.
//!
//! A call ([`tool`]) passes the invocation guard like any tool: the tools of
//! a `read_only = true` server are read-only, the others side-effecting (a
//! subagent gets `permission_denied`; the main agent asks as the approval
//! policy says). Results become text ([`content`]), capped like other
//! tools' output. A timeout, a crash (restarted up to `max_restarts`
//! times, then "unavailable"), malformed JSON-RPC: each is a clear tool
//! error, and the loop goes on.
//!
//! A subagent has no network and no servers: the fork names the MCP tools,
//! the child advertises the same specs, and sends each call of a read-only
//! server's tool to the parent ([`proxy`]), which runs it here.

pub mod client;
pub mod content;
pub mod names;
pub mod process;
pub mod proxy;
pub mod server;
pub mod settings;
pub mod tool;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::protocol::ToolSpec;
use crate::protocol::mcp::McpToolSpec;
use crate::tools::{McpServers, Tool, ToolFuture, ToolOutput};
use server::{McpServer, ServerState};
pub use settings::McpServerConfig;

/// Longest tool description taken from a server.
const MAX_DESCRIPTION: usize = 2_000;

/// One MCP tool of the catalog: its spec, and where it goes.
struct Entry {
    spec: McpToolSpec,
    server: usize,
    remote: String,
}

/// Every configured server of the session and the catalog entries of
/// their tools.
pub struct McpHub {
    servers: Vec<McpServer>,
    entries: Vec<Entry>,
    warnings: Vec<String>,
}

impl McpHub {
    /// A hub without servers.
    pub fn empty() -> Arc<McpHub> {
        Arc::new(McpHub {
            servers: Vec::new(),
            entries: Vec::new(),
            warnings: Vec::new(),
        })
    }

    /// Starts every server concurrently and lists their tools. Never fails:
    /// a server that cannot start is a warning and has no tools.
    pub async fn start(configs: &[McpServerConfig], workspace: &Path) -> Arc<McpHub> {
        let started = futures_util::future::join_all(
            configs
                .iter()
                .map(|config| McpServer::start(config.clone(), workspace.to_path_buf())),
        )
        .await;
        let mut servers = Vec::new();
        let mut warnings = Vec::new();
        for (server, warning) in started {
            servers.push(server);
            warnings.extend(warning);
        }
        let entries = catalog_entries(&servers);
        Arc::new(McpHub {
            servers,
            entries,
            warnings,
        })
    }

    /// What the person must be told once: servers that failed to start.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The MCP tools in catalog order, as the fork carries them.
    pub fn tool_specs(&self) -> Vec<McpToolSpec> {
        self.entries.iter().map(|e| e.spec.clone()).collect()
    }

    /// The catalog's MCP tools, which call through this hub.
    pub fn catalog_tools(self: &Arc<Self>) -> Vec<Box<dyn Tool>> {
        (0..self.entries.len())
            .map(|index| Box::new(tool::McpTool::new(self.clone(), index)) as Box<dyn Tool>)
            .collect()
    }

    /// Calls entry `index`; `cap` bounds the text.
    async fn call_entry(
        &self,
        index: usize,
        arguments: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
        cap: usize,
    ) -> ToolOutput {
        let Some(entry) = self.entries.get(index) else {
            return ToolOutput::error("no such MCP tool");
        };
        let Some(server) = self.servers.get(entry.server) else {
            return ToolOutput::error("no such MCP server");
        };
        match server.call(&entry.remote, arguments, cancel).await {
            Ok(result) if content::is_error(&result) => {
                ToolOutput::error(content::result_text(&result, cap))
            }
            Ok(result) => ToolOutput::ok(content::result_text(&result, cap)),
            Err(err) => ToolOutput::error(err.to_string()),
        }
    }

    /// A subagent's call, proxied by its parent: only the tools of
    /// read-only servers; the parent checks again, whatever the child did.
    pub async fn call_for_subagent(
        &self,
        tool: &str,
        arguments: &str,
        cancel: &CancellationToken,
        cap: usize,
    ) -> ToolOutput {
        let Some(index) = self.entries.iter().position(|e| e.spec.spec.name == tool) else {
            return ToolOutput::error(format!(
                "unknown MCP tool `{}`",
                crate::text::short(tool, 60)
            ));
        };
        if !self.entries[index].spec.read_only {
            return tool::not_for_subagents(tool);
        }
        match tool::parse_object(tool, arguments) {
            Ok(arguments) => self.call_entry(index, arguments, cancel, cap).await,
            Err(refusal) => refusal,
        }
    }

    /// Each configured server with its state and tools (`fido mcp list`).
    pub async fn status(&self) -> Value {
        let mut servers = Vec::new();
        for (index, server) in self.servers.iter().enumerate() {
            let (state, pid, reason) = match server.state().await {
                ServerState::Running { pid } => ("running", Some(pid), None),
                ServerState::Failed(reason) => ("failed", None, Some(reason)),
            };
            let tools: Vec<Value> = self
                .entries
                .iter()
                .filter(|e| e.server == index)
                .map(|e| json!({"name": e.spec.spec.name, "remote_name": e.remote, "description": e.spec.spec.description}))
                .collect();
            servers.push(json!({
                "name": server.config.name,
                "command": server.config.command,
                "read_only": server.config.read_only,
                "state": state,
                "pid": pid,
                "reason": reason,
                "tools": tools,
            }));
        }
        Value::Array(servers)
    }

    /// Stops every server and waits until each is reaped.
    pub async fn shutdown(&self) {
        futures_util::future::join_all(self.servers.iter().map(McpServer::shutdown)).await;
    }
}

impl McpServers for McpHub {
    fn catalog_tools(self: Arc<Self>) -> Vec<Box<dyn Tool>> {
        McpHub::catalog_tools(&self)
    }

    fn tool_specs(&self) -> Vec<McpToolSpec> {
        McpHub::tool_specs(self)
    }

    fn call_for_subagent<'a>(
        &'a self,
        tool: &'a str,
        arguments: &'a str,
        cancel: &'a CancellationToken,
        cap: usize,
    ) -> ToolFuture<'a> {
        Box::pin(McpHub::call_for_subagent(
            self, tool, arguments, cancel, cap,
        ))
    }
}

/// The catalog entries: servers in their (name) order, tools as listed.
fn catalog_entries(servers: &[McpServer]) -> Vec<Entry> {
    let mut taken = HashSet::new();
    let mut entries = Vec::new();
    for (index, server) in servers.iter().enumerate() {
        for remote in &server.tools {
            let name = names::exposed_name(&server.config.name, &remote.name, &taken);
            taken.insert(name.clone());
            entries.push(Entry {
                spec: McpToolSpec {
                    spec: ToolSpec {
                        name,
                        description: description(&server.config.name, &remote.description),
                        parameters: object_schema(&remote.input_schema),
                    },
                    server: server.config.name.clone(),
                    read_only: server.config.read_only,
                },
                server: index,
                remote: remote.name.clone(),
            });
        }
    }
    entries
}

fn description(server: &str, remote: &str) -> String {
    let remote = crate::text::short(remote.trim(), MAX_DESCRIPTION);
    if remote.is_empty() {
        format!("A tool of the MCP server {server}.")
    } else {
        format!("{remote} (MCP server {server})")
    }
}

/// The server's input schema as an object schema (providers require
/// `"type": "object"` at the top).
fn object_schema(schema: &Value) -> Value {
    let mut schema = match schema {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    if !schema.contains_key("properties") {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}
