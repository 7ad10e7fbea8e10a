//! The command line (contract: the README's "Set-up" and command sections).
//!
//! Parses arguments, sets up logging and the runtime, and hands over to one
//! function per command. This is the one place where errors become text for
//! the person at the terminal and exit codes.

mod acp;
mod changes;
mod exec;
mod log_fields;
mod mcp;
mod plan;
mod preamble;
mod sandbox;
mod sessions;
mod subagents;
mod tool;
mod trust;
mod tui;
mod undo;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use crate::config::Overrides;

#[derive(Debug, Parser)]
#[command(
    name = "fido",
    version,
    about = "A terminal coding agent with a durable plan and safe delegation"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// `fido __subagent`, the child side of a subagent (not for people). It
/// is parsed on its own, before the rest of the command line is built:
/// every delegation starts one, and building the whole parser took about
/// a fifth of its start-up (2.9 → 2.3 ms of CPU).
#[derive(Debug, Parser)]
#[command(name = "fido __subagent")]
struct SubagentCommandLine {
    #[arg(long)]
    socket: String,
    #[arg(long)]
    agent_id: String,
    #[arg(long)]
    parent_pid: i32,
    #[arg(long)]
    sandbox: String,
    #[arg(long, value_name = "PATH")]
    deny_read: Vec<PathBuf>,
    #[arg(long, value_name = "DIR")]
    scratch: Option<PathBuf>,
    /// A write subagent's worktree: writable (repeatable).
    #[arg(long, value_name = "DIR")]
    write_root: Vec<PathBuf>,
    /// Read-only besides the workspace: a write subagent's private
    /// repository and the object folder it borrows (repeatable).
    #[arg(long, value_name = "DIR")]
    read_root: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct GlobalArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cd", global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Provider: openai, anthropic or script (beats FIDO_PROVIDER).
    #[arg(long, global = true)]
    provider: Option<String>,
    /// Model name (beats FIDO_MODEL).
    #[arg(long, global = true)]
    model: Option<String>,
    /// Provider base URL (beats FIDO_BASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    base_url: Option<String>,
    /// Any configuration key, e.g. `-c max_steps=20` (repeatable).
    #[arg(short = 'c', long = "config", global = true, value_name = "KEY=VALUE")]
    config: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one prompt headless to completion and print the final answer.
    Exec(exec::ExecArgs),
    /// Show or clear the workspace plan (no model turn).
    Plan {
        #[command(subcommand)]
        command: plan::PlanCommand,
    },
    /// List or call the model-facing tools directly.
    Tool {
        #[command(subcommand)]
        command: tool::ToolCommand,
    },
    /// Trust a workspace folder, so that its fido.toml is read in full.
    Trust(trust::TrustArgs),
    /// List the journaled sessions of the workspace.
    Sessions(sessions::SessionsArgs),
    /// Continue a journaled session in the terminal UI.
    Resume(sessions::ResumeArgs),
    /// List the running subagents of every Fido session in the workspace.
    #[command(alias = "agents")]
    Subagents(subagents::SubagentsArgs),
    /// Cancel a running subagent (or --all) cooperatively; its parent goes on.
    Cancel(subagents::CancelArgs),
    /// List, show, apply or discard the change sets of write subagents.
    Changes(changes::ChangesArgs),
    /// Revert the latest undoable change in the workspace, as `/undo` does.
    Undo,
    /// Prove what the subagent sandbox enforces on this machine.
    Sandbox {
        #[command(subcommand)]
        command: sandbox::SandboxCommand,
    },
    /// Serve the Agent Client Protocol on stdio, for editors.
    Acp,
    /// The configured MCP servers, their state and tools.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
}

/// Entry point of the `fido` binary.
pub fn main() -> ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == "__subagent")
    {
        return subagent_main();
    }
    // Before any thread or child exists: nothing of the same user may read
    // this process's memory or environment (the API key).
    crate::sandbox::command::make_non_dumpable();
    crate::process::leavers::adopt_orphans();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version are not errors.
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let overrides = match overrides(&cli.global) {
        Ok(overrides) => overrides,
        Err(bad) => return fail(&bad.to_string()),
    };
    match cli.command {
        Some(Command::Exec(args)) => exec::run(&overrides, args),
        Some(Command::Acp) => acp::run(&overrides),
        Some(Command::Tool { command }) => tool::run(&overrides, command),
        Some(Command::Plan { command }) => plan::run(&overrides, command),
        Some(Command::Sandbox { command }) => sandbox::run(&overrides, command),
        Some(Command::Mcp { command }) => mcp::run(&overrides, command),
        Some(Command::Trust(args)) => trust::run(overrides.workspace.clone(), args),
        Some(Command::Sessions(args)) => sessions::run(overrides.workspace.clone(), args),
        Some(Command::Subagents(args)) => subagents::list(overrides.workspace.clone(), args),
        Some(Command::Cancel(args)) => subagents::cancel(overrides.workspace.clone(), args),
        Some(Command::Changes(args)) => changes::run(overrides.workspace.clone(), args),
        Some(Command::Undo) => undo::run(overrides.workspace.clone()),
        Some(Command::Resume(args)) => tui::run(&overrides, Some(args.pick())),
        None => tui::run(&overrides, None),
    }
}

/// The child side of a subagent, `fido __subagent` or the
/// `fido-subagent` binary; its arguments come from the parent.
pub fn subagent_main() -> ExitCode {
    // As `main`: before any thread or child exists.
    crate::sandbox::command::make_non_dumpable();
    // In a PID namespace of its own, what it starts ends with it, and
    // `/proc` names other processes than its pids: nothing to adopt.
    if !crate::sandbox::subagent_ns::in_own_namespace() {
        crate::process::leavers::adopt_orphans();
    }
    let mut args: Vec<_> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == "__subagent") {
        args.remove(0);
    }
    let line = match SubagentCommandLine::try_parse_from(args) {
        Ok(line) => line,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(2);
        }
    };
    init_logging();
    crate::subagent::runner::main(crate::subagent::runner::SubagentArgs {
        socket: line.socket,
        agent_id: line.agent_id,
        parent_pid: line.parent_pid,
        sandbox: line.sandbox,
        deny_read: line.deny_read,
        scratch: line.scratch,
        write_roots: line.write_root,
        read_roots: line.read_root,
    })
}

/// A `-c` value that is not `KEY=VALUE`.
#[derive(Debug, thiserror::Error)]
#[error("-c {0:?}: expected KEY=VALUE")]
struct BadOverride(String);

fn overrides(global: &GlobalArgs) -> Result<Overrides, BadOverride> {
    let mut values = Vec::new();
    for (key, value) in [
        ("provider", &global.provider),
        ("model", &global.model),
        ("base_url", &global.base_url),
    ] {
        if let Some(value) = value {
            values.push((key.to_string(), value.clone()));
        }
    }
    for pair in &global.config {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(BadOverride(pair.clone()));
        };
        values.push((key.trim().to_string(), value.to_string()));
    }
    Ok(Overrides {
        workspace: global.workspace.clone(),
        values,
    })
}

/// Prints one clear sentence and returns exit code 1.
fn fail(message: &str) -> ExitCode {
    eprintln!("fido: {}", crate::text::escape(message));
    ExitCode::from(1)
}

/// Logs go to stderr; stdout is the product. `RUST_LOG` is honoured,
/// the default is `warn`.
fn init_logging() {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(log_fields::escaped())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
