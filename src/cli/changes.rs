//! `fido changes [--json] [--all]`, `fido changes show|apply|discard ID`:
//! the change sets of write subagents, reviewed from any terminal, also
//! after the Fido that made them has ended (see `crate::changes`).
//!
//! Everything here is blocking file and git work; like `fido sessions`, it
//! runs on the main thread without an async runtime.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};
use serde::Serialize;

use super::{fail, init_logging};
use crate::changes::records::Layout;
use crate::changes::view::{Paint, conflict_lines, describe, diff, failure, line, marked};
use crate::changes::{Record, apply, records};
use crate::protocol::changes::{ChangeSet, MergeState};
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ChangesArgs {
    #[command(subcommand)]
    command: Option<ChangesCommand>,
    /// One JSON array: each change set with its task and claim.
    #[arg(long)]
    json: bool,
    /// Also list the applied and discarded change sets.
    #[arg(long)]
    all: bool,
}

#[derive(Debug, Subcommand)]
enum ChangesCommand {
    /// Print a change set: its files, conflicts and full diff.
    Show {
        /// The change set's id, as `fido changes` lists it.
        id: String,
        /// The change set as one JSON object, with its task and claim.
        #[arg(long)]
        json: bool,
    },
    /// Merge a change set into the checkout (`fido undo` reverts it).
    Apply {
        /// The change set's id, as `fido changes` lists it.
        id: String,
    },
    /// Drop a change set; the checkout is not touched.
    Discard {
        /// The change set's id, as `fido changes` lists it.
        id: String,
    },
}

/// A change set as `--json` prints it: the wire object plus what the
/// subagent was asked and where it might write.
#[derive(Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    set: &'a ChangeSet,
    task: &'a str,
    claim: &'a [String],
}

impl<'a> From<&'a Record> for Listed<'a> {
    fn from(record: &'a Record) -> Self {
        Listed {
            set: &record.set,
            task: &record.task,
            claim: &record.claim,
        }
    }
}

pub(super) fn run(dir: Option<PathBuf>, args: ChangesArgs) -> ExitCode {
    init_logging();
    let dir = dir.unwrap_or_else(|| PathBuf::from("."));
    let workspace = match Workspace::new(&dir) {
        Ok(workspace) => workspace,
        Err(err) => return fail(&format!("workspace {}: {err}", dir.display())),
    };
    // A dead Fido's write subagents: their change sets are built and kept
    // pending here too, not only when the next session starts.
    crate::changes::sweep_orphans(&workspace.root, &crate::sandbox::git_wall::for_change_set);
    match args.command {
        None => list(&workspace.root, args.json, args.all),
        Some(ChangesCommand::Show { id, json }) => show(&workspace.root, &id, json),
        Some(ChangesCommand::Apply { id }) => apply_one(&workspace, &id),
        Some(ChangesCommand::Discard { id }) => discard_one(&workspace.root, &id),
    }
}

fn list(root: &Path, json: bool, all: bool) -> ExitCode {
    let records = if all {
        records::list(root)
    } else {
        records::open(root)
    };
    let records: Vec<Record> = records
        .into_iter()
        .map(|record| marked(root, record))
        .collect();
    if json {
        let listed: Vec<Listed> = records.iter().map(Listed::from).collect();
        return print_json(&listed);
    }
    if records.is_empty() {
        println!(
            "{}",
            if all {
                "no change sets"
            } else {
                "no pending change sets"
            }
        );
    }
    for record in &records {
        println!("{}", line(record));
    }
    ExitCode::SUCCESS
}

fn print_json<T: Serialize + ?Sized>(value: &T) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(text) => {
            println!("{}", crate::text::json_for_terminal(&text));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&format!("cannot print the change sets: {err}")),
    }
}

fn show(root: &Path, id: &str, json: bool) -> ExitCode {
    let record = match Record::load(root, id) {
        Ok(record) => marked(root, record),
        Err(err) => return fail(&failure("show", id, &err)),
    };
    if json {
        return print_json(&Listed::from(&record));
    }
    let paint = Paint::for_stdout();
    print!("{}", describe(&record, paint));
    let patch = match std::fs::read(Layout::new(root, id).patch()) {
        Ok(patch) => patch,
        Err(err) => return fail(&format!("cannot read the patch of {id}: {err}")),
    };
    print!("{}", diff(&String::from_utf8_lossy(&patch), paint));
    ExitCode::SUCCESS
}

fn apply_one(workspace: &Workspace, id: &str) -> ExitCode {
    let undo = UndoLog::new(&workspace.root);
    let record = match apply::apply(workspace, &undo, id) {
        Ok(record) => record,
        Err(err) => return fail(&failure("apply", id, &err)),
    };
    match record.set.merge {
        MergeState::Applied => {
            println!(
                "applied {id}: {}; `fido undo` reverts it",
                crate::text::counted(record.set.files.len() as u64, "file")
            );
            ExitCode::SUCCESS
        }
        MergeState::Pending | MergeState::Discarded => fail(&format!(
            "change set {id} is {} after the apply",
            record.set.merge
        )),
        MergeState::Conflict => {
            eprint!(
                "fido: change set {id} conflicts with edits made since its base:\n{}",
                conflict_lines(&record.set.conflicts)
            );
            eprintln!(
                "nothing was written; the change set stays pending (`fido changes show {id}`, then apply or discard it)"
            );
            ExitCode::from(1)
        }
    }
}

fn discard_one(root: &Path, id: &str) -> ExitCode {
    match apply::discard(root, id) {
        Ok(_) => {
            println!("discarded {id}");
            ExitCode::SUCCESS
        }
        Err(err) => fail(&failure("discard", id, &err)),
    }
}
