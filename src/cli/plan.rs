//! `fido plan show [--json]` and `fido plan clear`: the local `/plan`
//! commands; no model turn.

use std::process::ExitCode;

use clap::Subcommand;

use super::{fail, init_logging};
use crate::config::{Config, Overrides};
use crate::plan::{PlanState, PlanStore, Status};

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Print the current plan (`--json`: the complete normalised state).
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Start a new, empty plan (the version keeps counting).
    Clear,
}

pub fn run(overrides: &Overrides, command: PlanCommand) -> ExitCode {
    init_logging();
    let config = match Config::load(overrides) {
        Ok(config) => config,
        Err(err) => return fail(&err.to_string()),
    };
    let store = PlanStore::new(config.plan_file.clone());
    match command {
        PlanCommand::Show { json } => {
            let loaded = match store.load() {
                Ok(loaded) => loaded,
                Err(err) => return fail(&err.to_string()),
            };
            if let Some(warning) = &loaded.warning {
                eprintln!("fido: {warning}");
            }
            if json {
                println!("{}", loaded.state.to_json_text());
            } else {
                print!("{}", render(&loaded.state));
            }
            ExitCode::SUCCESS
        }
        PlanCommand::Clear => {
            let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
            let cleared = store.update(|current: &PlanState| {
                Ok::<_, std::convert::Infallible>(current.successor(
                    "Plan cleared by the user.".into(),
                    Vec::new(),
                    now,
                ))
            });
            match cleared {
                Ok(Ok((state, warning))) => {
                    if let Some(warning) = warning {
                        eprintln!("fido: {warning}");
                    }
                    println!("Plan cleared (version {}).", state.version);
                    ExitCode::SUCCESS
                }
                Ok(Err(never)) => match never {},
                Err(err) => fail(&err.to_string()),
            }
        }
    }
}

/// The plan as text for a person: every item with every field.
pub fn render(state: &PlanState) -> String {
    if state.version == 0 {
        return "No plan yet.\n".into();
    }
    let mut out = format!(
        "Plan v{} · {} · {}\n",
        state.version,
        state.updated_at.as_deref().unwrap_or("never updated"),
        state.reason
    );
    if state.items.is_empty() {
        out.push_str("  (empty)\n");
    }
    for item in &state.items {
        let mark = match item.status {
            Status::Pending => "[ ]",
            Status::InProgress => "[>]",
            Status::Blocked => "[!]",
            Status::Done => "[x]",
        };
        out.push_str(&format!(
            "  {mark} {} — {} ({})\n",
            item.id,
            item.title,
            item.status.as_str()
        ));
        if let Some(details) = &item.details {
            out.push_str(&format!("      details: {details}\n"));
        }
        if !item.dependencies.is_empty() {
            out.push_str(&format!(
                "      depends on: {}\n",
                item.dependencies.join(", ")
            ));
        }
        if let Some(next) = &item.next_action {
            out.push_str(&format!("      next: {next}\n"));
        }
        for evidence in &item.evidence {
            out.push_str(&format!("      evidence: {evidence}\n"));
        }
    }
    out
}
