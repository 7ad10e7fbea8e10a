//! `fido plan show [--json]`, `fido plan clear` and `fido plan approve
//! FILE.md`: the local `/plan` commands; no model turn. They act on the
//! configured flavour's state (`approve` always on the `todo` state).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::preamble::{ConfigWarnings, load_config};
use super::{fail, init_logging};
use crate::config::{Config, Overrides};
use crate::plan::todo::{self, TodoStore};
use crate::plan::{PlanFlavour, PlanSnapshot, PlanStore};
use crate::runtime::local::plan_text as render;
use crate::text::{escape, escape_line, json_for_terminal};

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Print the current plan (`--json`: the complete normalised state).
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Start a new, empty plan (the version keeps counting). With the `todo`
    /// flavour: drop every agent-created task (plan items stay).
    Clear,
    /// `todo` flavour: seed plan items from an approved Markdown plan.
    Approve {
        /// The plan, in Markdown.
        file: PathBuf,
    },
}

pub fn run(overrides: &Overrides, command: PlanCommand) -> ExitCode {
    init_logging();
    let config = match load_config(overrides, ConfigWarnings::Print) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match (config.plan_tool, command) {
        (flavour, PlanCommand::Approve { file }) => {
            if flavour == PlanFlavour::UpdatePlan {
                eprintln!(
                    "fido: note: this workspace advertises update_plan; the approved plan is used once plan_tool = \"todo\" (FIDO_PLAN_TOOL=todo)"
                );
            }
            approve_todo(&config, &file)
        }
        (PlanFlavour::Todo, PlanCommand::Show { json }) => show_todo(&config, json),
        (PlanFlavour::Todo, PlanCommand::Clear) => clear_todo(&config),
        (PlanFlavour::UpdatePlan, command @ (PlanCommand::Show { .. } | PlanCommand::Clear)) => {
            update_plan_command(&config, command)
        }
    }
}

/// `todo` flavour: `show` prints the reference's `list` text (`--json`: the
/// `list` envelope).
fn show_todo(config: &Config, json: bool) -> ExitCode {
    let loaded = match TodoStore::in_workspace(&config.workspace).load() {
        Ok(loaded) => loaded,
        Err(err) => return fail(&err.to_string()),
    };
    if let Some(warning) = &loaded.warning {
        eprintln!("fido: {}", escape(warning));
    }
    let (text, envelope) = todo::format::list_view(&loaded.state);
    if json {
        println!(
            "{}",
            json_for_terminal(&PlanSnapshot::Todo(envelope).to_json().to_string())
        );
    } else {
        println!("{}", escape(&text));
    }
    ExitCode::SUCCESS
}

/// `todo` flavour: `clear` is the `clear` action.
fn clear_todo(config: &Config) -> ExitCode {
    let store = TodoStore::in_workspace(&config.workspace);
    match todo::run_call(&store, &serde_json::json!({"action": "clear"})) {
        Ok(output) => {
            if let Some(warning) = &output.warning {
                eprintln!("fido: {}", escape(warning));
            }
            println!("{}", escape(&output.content));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err.to_string()),
    }
}

/// Seeds plan items from `file`, then prints the list as `show` does.
fn approve_todo(config: &Config, file: &std::path::Path) -> ExitCode {
    // Relative to the workspace (as `-C DIR` promises), else to the
    // current directory.
    let in_workspace = config.workspace.join(file);
    let path = if in_workspace.exists() || file.is_absolute() {
        in_workspace
    } else {
        file.to_path_buf()
    };
    let markdown = match std::fs::read_to_string(&path) {
        Ok(markdown) => markdown,
        Err(err) => return fail(&format!("cannot read the plan {}: {err}", path.display())),
    };
    let store = TodoStore::in_workspace(&config.workspace);
    let (approval, loaded) = match todo::approve_plan(&store, &markdown) {
        Ok(approved) => approved,
        Err(err) => return fail(&err.to_string()),
    };
    if let Some(warning) = &loaded.warning {
        eprintln!("fido: {}", escape(warning));
    }
    let title = todo::sanitize::display(
        approval
            .state
            .plan
            .as_ref()
            .map_or("plan", |plan| plan.title.as_str()),
    );
    let items = approval
        .state
        .tasks
        .iter()
        .filter(|t| t.is_plan_item())
        .count();
    if !approval.changed {
        println!(
            "Plan already approved: {}; nothing changed.",
            escape_line(&title)
        );
    } else {
        let carried = match approval.carried {
            0 => String::new(),
            n => format!("; {n} unchanged items kept their status"),
        };
        println!(
            "Plan approved: {} ({items} plan items{carried})",
            escape_line(&title)
        );
        if items == 0 {
            eprintln!("fido: the plan has no actionable items (bullets or prose sections)");
        }
    }
    println!("{}", escape(&todo::format::list_view(&loaded.state).0));
    ExitCode::SUCCESS
}

fn update_plan_command(config: &Config, command: PlanCommand) -> ExitCode {
    let store = PlanStore::new(&config.workspace, config.plan_file.clone());
    match command {
        PlanCommand::Show { json } => {
            let loaded = match store.load() {
                Ok(loaded) => loaded,
                Err(err) => return fail(&err.to_string()),
            };
            if let Some(warning) = &loaded.warning {
                eprintln!("fido: {}", escape(warning));
            }
            if json {
                println!("{}", json_for_terminal(&loaded.state.to_json_text()));
            } else {
                print!("{}", escape(&render(&loaded.state)));
            }
            ExitCode::SUCCESS
        }
        PlanCommand::Clear => match store.clear() {
            Ok((state, warning)) => {
                if let Some(warning) = warning {
                    eprintln!("fido: {}", escape(&warning));
                }
                println!("Plan cleared (version {}).", state.version);
                ExitCode::SUCCESS
            }
            Err(err) => fail(&err.to_string()),
        },
        PlanCommand::Approve { .. } => fail("fido plan approve needs the todo flavour"),
    }
}
