//! `fido mcp list [--json]`: each configured MCP server, its state
//! (running, or failed and why) and its tools as the catalog names them.
//! The servers are started for the listing and stopped after it.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::Value;

use super::fail;
use super::preamble::run_configured;
use crate::config::Overrides;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start the configured servers and show their state and tools.
    List {
        /// One JSON array instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(overrides: &Overrides, command: McpCommand) -> ExitCode {
    let McpCommand::List { json } = command;
    run_configured(overrides, |config| async move {
        let hub = crate::runtime::start_mcp(&config).await;
        let status = hub.status().await;
        hub.shutdown().await;
        if json {
            match serde_json::to_string_pretty(&status) {
                Ok(text) => println!("{}", crate::text::json_for_terminal(&text)),
                Err(err) => return fail(&format!("cannot print the servers: {err}")),
            }
        } else {
            print!("{}", render(&status, config.workspace_trusted));
        }
        ExitCode::SUCCESS
    })
}

/// The listing as text: one line per server, one indented line per tool.
fn render(status: &Value, trusted: bool) -> String {
    let servers = status.as_array().map(Vec::as_slice).unwrap_or_default();
    if servers.is_empty() {
        let hint = if trusted {
            ""
        } else {
            " (a workspace fido.toml defines servers only once the folder is trusted: `fido trust`)"
        };
        return format!("no MCP servers configured; add [mcp_servers.NAME] to your config{hint}\n");
    }
    // What a server says of itself and its tools, on one line each, escaped.
    let text = |value: &Value, key: &str| {
        crate::text::escape_line(value[key].as_str().unwrap_or("")).into_owned()
    };
    let mut out = String::new();
    for server in servers {
        let state = match server["state"].as_str() {
            Some("running") => format!("running (pid {})", server["pid"]),
            _ => format!("failed: {}", text(server, "reason")),
        };
        let access = if server["read_only"] == Value::Bool(true) {
            "read-only"
        } else {
            "side effects"
        };
        out.push_str(&format!(
            "{}  {state}  [{access}]  {}\n",
            text(server, "name"),
            text(server, "command")
        ));
        for tool in server["tools"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            out.push_str(&format!(
                "  {}  {}\n",
                text(tool, "name"),
                crate::text::short(&text(tool, "description"), 80)
            ));
        }
    }
    out
}
