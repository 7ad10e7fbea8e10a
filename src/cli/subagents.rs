//! `fido subagents [--json]` (alias `fido agents`) and `fido cancel
//! AGENT_ID|--all`: the running subagents of every Fido session in the
//! workspace, through their control sockets (see `crate::subagent::control`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::fail;
use crate::protocol::control::{ControlReply, ControlRequest, RunningSubagent};
use crate::subagent::control::{AskError, SessionReply, ask_all};
use crate::text::{escape, escape_line, for_log, json_for_terminal};

#[derive(Debug, Args)]
pub struct SubagentsArgs {
    /// A JSON array of the running subagents instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The subagent to cancel (as `fido subagents` lists it).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    agent_id: Option<String>,
    /// Cancel every running subagent of every session in the workspace.
    #[arg(long)]
    all: bool,
}

fn workspace(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(|| PathBuf::from("."))
}

fn ask(
    workspace: &std::path::Path,
    request: ControlRequest,
) -> Result<Vec<SessionReply>, super::preamble::NoRuntime> {
    super::preamble::block_on(ask_all(workspace, &request))
}

/// Says on stderr why a session's socket gave no answer to use: it
/// refused or failed the request, answered something else, or could not
/// be asked.
fn say_unusable(socket: &std::path::Path, reply: Result<ControlReply, AskError>) {
    let why = match reply {
        Ok(ControlReply::Refused { message }) | Ok(ControlReply::Error { message }) => {
            escape(&message).into_owned()
        }
        Ok(other) => format!("unexpected reply {}", for_log(&format!("{other:?}"), 200)),
        Err(message) => escape(&message.to_string()).into_owned(),
    };
    eprintln!(
        "fido: {}: {why}",
        escape_line(&socket.display().to_string())
    );
}

pub(super) fn list(dir: Option<PathBuf>, args: SubagentsArgs) -> ExitCode {
    let workspace = workspace(dir);
    let replies = match ask(&workspace, ControlRequest::ListSubagents) {
        Ok(replies) => replies,
        Err(err) => return fail(&err.to_string()),
    };
    let mut agents: Vec<RunningSubagent> = Vec::new();
    let mut failed = false;
    for SessionReply { socket, reply } in replies {
        match reply {
            Ok(ControlReply::Subagents { agents: some, .. }) => agents.extend(some),
            unusable => {
                failed = true;
                say_unusable(&socket, unusable);
            }
        }
    }
    if args.json {
        match serde_json::to_string(&agents) {
            Ok(text) => println!("{}", json_for_terminal(&text)),
            Err(err) => return fail(&format!("cannot print the agents: {err}")),
        }
    } else if agents.is_empty() {
        println!(
            "no subagent is running in {}",
            escape_line(&workspace.display().to_string())
        );
    } else {
        println!(
            "{:<18} {:>10} {:>9}  {:<16} {:>8} {:>8}  PLAN ITEM",
            "AGENT ID", "PARENT PID", "CHILD PID", "PHASE", "ELAPSED", "TOKENS"
        );
        for agent in &agents {
            println!(
                "{:<18} {:>10} {:>9}  {:<16} {:>8} {:>8}  {}",
                escape_line(&agent.agent_id),
                agent.parent_pid,
                agent.child_pid.map_or("-".into(), |pid| pid.to_string()),
                crate::text::summary(agent.phase.as_str(), 16),
                crate::ui::widgets::subagent_bar::format_elapsed(agent.elapsed_ms),
                agent.tokens,
                escape_line(agent.plan_item.as_deref().unwrap_or("-")),
            );
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub(super) fn cancel(dir: Option<PathBuf>, args: CancelArgs) -> ExitCode {
    let workspace = workspace(dir);
    let wanted = if args.all { None } else { args.agent_id };
    let request = ControlRequest::Cancel {
        agent_id: wanted.clone(),
    };
    let replies = match ask(&workspace, request) {
        Ok(replies) => replies,
        Err(err) => return fail(&err.to_string()),
    };
    let mut cancelled = 0;
    let mut failed = false;
    for SessionReply { socket, reply } in replies {
        match reply {
            Ok(ControlReply::Cancelled {
                parent_pid,
                agent_ids,
                ..
            }) => {
                for id in agent_ids {
                    cancelled += 1;
                    println!(
                        "cancelling {} (fido pid {parent_pid}); its parent records the result and goes on",
                        escape_line(&id)
                    );
                }
            }
            unusable => {
                failed = true;
                say_unusable(&socket, unusable);
            }
        }
    }
    if cancelled == 0 {
        let what = match &wanted {
            Some(id) => format!("no running subagent {}", crate::text::short(id, 40)),
            None => "no subagent is running".into(),
        };
        return fail(&format!(
            "{what} in {} (fido agents lists them)",
            workspace.display()
        ));
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
