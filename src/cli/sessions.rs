//! `fido sessions [--json]`: the journaled sessions of the workspace, and
//! the `ID | --last` choice that `fido resume` and `fido exec --resume` take.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::fail;
use crate::runtime::ResumeFrom;
use crate::store::journal::{self, SessionSummary};
use crate::text::escape_line;

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// One JSON object per session, one per line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The session id, or a prefix of exactly one (see `fido sessions`).
    #[arg(conflicts_with = "last")]
    id: Option<String>,
    /// The latest session no other Fido is running (the default).
    #[arg(long)]
    last: bool,
}

impl ResumeArgs {
    pub fn pick(&self) -> ResumeFrom {
        match &self.id {
            Some(id) => ResumeFrom::Id(id.clone()),
            None => ResumeFrom::Last,
        }
    }
}

/// `--resume ID`, `--resume --last` or `--last` of `fido exec`; an empty
/// `--resume` value is `--last`.
pub fn exec_pick(resume: Option<&str>, last: bool) -> Option<ResumeFrom> {
    match (resume, last) {
        (Some(id), _) if !id.is_empty() => Some(ResumeFrom::Id(id.to_string())),
        (Some(_), _) | (None, true) => Some(ResumeFrom::Last),
        (None, false) => None,
    }
}

pub(super) fn run(workspace: Option<PathBuf>, args: SessionsArgs) -> ExitCode {
    let workspace = workspace.unwrap_or_else(|| PathBuf::from("."));
    let sessions = match journal::list(&workspace) {
        Ok(sessions) => sessions,
        Err(err) => return fail(&format!("cannot list the sessions: {err}")),
    };
    for session in &sessions {
        if args.json {
            match serde_json::to_string(session) {
                Ok(line) => println!("{}", crate::text::json_for_terminal(&line)),
                Err(err) => return fail(&format!("cannot print session {}: {err}", session.id)),
            }
        } else {
            println!("{}", line(session));
        }
    }
    if sessions.is_empty() && !args.json {
        eprintln!(
            "no sessions in {} yet",
            crate::text::escape(&workspace.display().to_string())
        );
    }
    ExitCode::SUCCESS
}

fn line(s: &SessionSummary) -> String {
    let tokens = s
        .usage
        .prompt_tokens
        .saturating_add(s.usage.completion_tokens);
    let what = match &s.error {
        Some(error) => error.clone(),
        None => s.first_prompt.clone(),
    };
    // The journal's text (the first prompt, an error) on this one line,
    // escaped: the journal may hold anything the model or a file said.
    let what = what.split_whitespace().collect::<Vec<_>>().join(" ");
    format!(
        "{}  {:<11}  {}  {} turns  {} tokens  {}",
        escape_line(&s.id),
        s.status.as_str(),
        escape_line(s.started_at.get(..16).unwrap_or(&s.started_at)),
        s.turns,
        tokens,
        escape_line(&what)
    )
}
