//! The slash commands an editor may send as a prompt, the ones the engine
//! answers on its own (the terminal UI's local commands that make sense
//! without a screen): advertised with `available_commands_update`, run as
//! one op each, and answered as the agent's message.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};

use crate::protocol::op::{ChangesOp, ChangesVerb, Op, OpReply};
use crate::ui::replies;

/// Name, what it does, and the hint for its input (`None`: none taken).
const COMMANDS: &[(&str, &str, Option<&str>)] = &[
    (
        "status",
        "Show the sandbox, the approval policy and the instruction files",
        None,
    ),
    ("plan", "Show the plan, or clear it", Some("clear")),
    ("compact", "Summarise older turns to free context", None),
    ("undo", "Revert the last file change", None),
    ("diff", "Show the workspace's git diff", None),
    ("subagents", "List the session's subagents", None),
    (
        "changes",
        "List write subagents' change sets, or show, apply or discard one",
        Some("show|apply|discard ID"),
    ),
    ("sessions", "List the workspace's sessions", None),
    (
        "model",
        "Switch the model from the next turn on",
        Some("NAME"),
    ),
];

/// The commands, as the update that advertises them.
pub fn available() -> SessionUpdate {
    let commands = COMMANDS
        .iter()
        .map(|(name, description, hint)| {
            let command = AvailableCommand::new(*name, *description);
            match hint {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(*hint),
                )),
                None => command,
            }
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// The op a prompt asks for, when it is one of the commands; `Err` is
/// why a command's input is wrong. Any other prompt goes to the model.
pub fn parse(prompt: &str) -> Option<Result<Op, Usage>> {
    let command = prompt.trim().strip_prefix('/')?;
    let words: Vec<&str> = command.split_whitespace().collect();
    let name = *words.first()?;
    COMMANDS.iter().find(|(known, ..)| *known == name)?;
    Some(match words.as_slice() {
        ["status"] => Ok(Op::Status),
        ["plan"] => Ok(Op::ShowPlan),
        ["plan", "clear"] => Ok(Op::ClearPlan),
        ["compact"] => Ok(Op::Compact),
        ["undo"] => Ok(Op::Undo),
        ["diff"] => Ok(Op::Diff),
        ["subagents"] | ["agents"] => Ok(Op::ListSubagents),
        ["sessions"] => Ok(Op::ListSessions),
        ["changes"] => Ok(Op::Changes(ChangesOp::List)),
        ["changes", verb, id] => match ChangesVerb::parse(verb) {
            Some(ChangesVerb::List) | None => Err(usage("changes")),
            Some(verb) => Ok(Op::Changes(ChangesOp::on(verb, (*id).to_string()))),
        },
        ["model", model] => Ok(Op::SwitchModel {
            model: (*model).to_string(),
        }),
        _ => Err(usage(name)),
    })
}

/// A command whose input is wrong: shown as its usage line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    name: String,
    hint: Option<&'static str>,
}

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.hint {
            Some(hint) => write!(f, "usage: /{} {hint}", self.name),
            None => write!(f, "usage: /{}", self.name),
        }
    }
}

fn usage(name: &str) -> Usage {
    let hint = COMMANDS
        .iter()
        .find(|(known, ..)| *known == name)
        .and_then(|(_, _, hint)| *hint);
    Usage {
        name: name.to_string(),
        hint,
    }
}

/// The engine's answer as the text the agent's message shows.
pub fn reply_text(reply: OpReply) -> String {
    match reply {
        OpReply::Compacted { cut: true } => "compacted older turns".into(),
        OpReply::Compacted { cut: false } => "nothing to compact".into(),
        OpReply::ModelSwitched { model } => format!("the model is now {model}"),
        OpReply::PlanCleared(cleared) => cleared.message,
        OpReply::Status(status) => status_text(&status),
        OpReply::Plan(shown) => match shown.warning {
            Some(warning) => format!("{}\n\n{warning}", shown.text),
            None => shown.text,
        },
        OpReply::Sessions { sessions } => fenced(&replies::sessions_text(&sessions), ""),
        OpReply::Subagents { subagents } => fenced(&replies::subagents_text(&subagents), ""),
        OpReply::Undone { change } => replies::undone_text(change.as_ref()),
        OpReply::Info { text } => text,
        OpReply::Output { text } => fenced(&text, ""),
        OpReply::Diff { text } => fenced(&text, "diff"),
        OpReply::Failed { message } => format!("[fido] {message}"),
        other => format!("[fido] unexpected answer: {other:?}"),
    }
}

fn status_text(status: &crate::protocol::op::StatusInfo) -> String {
    let or_unknown = |value: Option<String>| value.unwrap_or_else(|| "unknown".into());
    let files = if status.instruction_files.is_empty() {
        "none".to_string()
    } else {
        status.instruction_files.join(", ")
    };
    format!(
        "sandbox: {}\napproval policy: {}\ninstruction files: {files}",
        or_unknown(status.sandbox_mode.map(|m| m.as_str().to_string())),
        or_unknown(status.approval_policy.map(|p| p.as_str().to_string())),
    )
}

/// `text` in a code fence longer than any backtick run in it.
fn fenced(text: &str, language: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{language}\n{text}\n{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_engines_commands_are_commands() {
        assert_eq!(parse("/status"), Some(Ok(Op::Status)));
        assert_eq!(parse(" /plan clear "), Some(Ok(Op::ClearPlan)));
        assert_eq!(
            parse("/changes show subagent-1"),
            Some(Ok(Op::Changes(ChangesOp::Show {
                id: "subagent-1".into()
            })))
        );
        let usage = |prompt| parse(prompt).and_then(Result::err).map(|u| u.to_string());
        assert_eq!(
            usage("/changes list x").as_deref(),
            Some("usage: /changes show|apply|discard ID")
        );
        assert_eq!(usage("/model").as_deref(), Some("usage: /model NAME"));
        assert_eq!(usage("/status now").as_deref(), Some("usage: /status"));
        assert_eq!(parse("/quit"), None, "not offered: goes to the model");
        assert_eq!(parse("fix /status"), None);
        assert_eq!(fenced("a ``` b", ""), "````\na ``` b\n````");
    }
}
