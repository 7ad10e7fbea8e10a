//! What a tool call did, as typed facts beside the text the model reads.
//!
//! A tool's result text is prose written for a model; front ends (the
//! terminal UI, ACP) read these facts instead, so rewording a result can
//! never change what they show. The tool fills them ([`crate::tools`]'s
//! `ToolOutput`) and they travel, in process, with the `tool_result`
//! event. They are not part of the `--json` stream (a contract): that
//! event's wire format leaves them out. They serialise (ACP sends them in
//! a tool call's `_meta.fido`), absent parts left out.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Everything a front end may know of a finished call beyond ok/failed.
/// Each part is `None` when the tool does not say (another tool, a call
/// refused before it ran).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolFacts {
    /// What a file tool did to which file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<FileChange>,
    /// How a command ran and ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandRun>,
    /// How much of the tool's output its text keeps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    /// Lines of files the call showed, for a front end that follows
    /// along: where `read_file`'s window starts, the lines `ripgrep`
    /// matched (the first [`MAX_FILE_LINES`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<FileLine>,
}

/// Lines a call names at most in [`ToolFacts::lines`].
pub const MAX_FILE_LINES: usize = 50;

/// A line of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileLine {
    /// Workspace-relative, as the result names it.
    pub path: String,
    /// 1-based.
    pub line: u64,
}

/// A file the call changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// Workspace-relative, as the result names it.
    pub path: String,
    #[serde(flatten)]
    pub action: FileAction,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FileAction {
    /// The file did not exist; it now has `lines` lines.
    Created { lines: usize },
    /// The whole file was replaced (its old text is not in the call).
    Overwrote { lines: usize, was_lines: usize },
    /// Edits were applied in place.
    Edited {
        /// The 1-based line each edit starts on in the edited file, in
        /// the order of the call's edits.
        at_lines: Vec<usize>,
        added: usize,
        removed: usize,
    },
    /// The edits leave the text as it was; nothing was written.
    Unchanged,
}

/// A command the call ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandRun {
    pub exit: CommandExit,
    /// Wall time from start to the end of its output.
    pub elapsed_ms: u64,
    /// The result text starts with the command's output, this many bytes
    /// (`(no output)` when it printed nothing); the tool's own lines
    /// (the exit line first, then notes) follow after a newline. Where
    /// the output ends in this process's text only: not serialised.
    #[serde(skip)]
    pub output_bytes: usize,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CommandExit {
    /// It exited with this status code.
    #[serde(rename = "exited")]
    Code { code: i32 },
    /// A signal ended it (`name` as `SIGKILL`, or `signal N`).
    Signal { number: i32, name: String },
    /// It ran past its timeout and was killed.
    TimedOut { after_ms: u64 },
    /// The call was cancelled and the command killed.
    Cancelled,
    /// The system reported neither a code nor a signal.
    Unknown,
}

impl CommandExit {
    pub fn success(&self) -> bool {
        matches!(self, CommandExit::Code { code: 0 })
    }
}

/// One line, as a person reads it: `exit code: 3`, `exit code: none
/// (killed by SIGKILL)`, `timed out after 2s`, `cancelled`.
impl fmt::Display for CommandExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandExit::Code { code } => write!(f, "exit code: {code}"),
            CommandExit::Signal { name, .. } => write!(f, "exit code: none (killed by {name})"),
            CommandExit::TimedOut { after_ms } => write!(
                f,
                "timed out after {}",
                humantime::format_duration(std::time::Duration::from_millis(*after_ms))
            ),
            CommandExit::Cancelled => f.write_str("cancelled"),
            CommandExit::Unknown => f.write_str("exit code: unknown"),
        }
    }
}

/// The text keeps part of the output: `shown_bytes` of `total_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Truncation {
    pub shown_bytes: u64,
    pub total_bytes: u64,
}

/// A `patch` call's arguments as a front end reads them to show its diff
/// (the terminal UI and ACP alike): the file, and the edits or the whole
/// new text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PatchCall {
    pub path: String,
    #[serde(default)]
    pub edits: Option<Vec<PatchEdit>>,
    #[serde(default)]
    pub content: Option<String>,
}

/// One edit of a [`PatchCall`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PatchEdit {
    pub old_text: String,
    pub new_text: String,
    #[serde(default)]
    pub replace_all: bool,
}

impl PatchCall {
    /// The call's JSON arguments read; `None` when they cannot be.
    pub fn parse(arguments: &str) -> Option<PatchCall> {
        serde_json::from_str(arguments).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_read_as_one_line() {
        assert_eq!(CommandExit::Code { code: 3 }.to_string(), "exit code: 3");
        let killed = CommandExit::Signal {
            number: 9,
            name: "SIGKILL".into(),
        };
        assert_eq!(killed.to_string(), "exit code: none (killed by SIGKILL)");
        assert_eq!(
            CommandExit::TimedOut { after_ms: 2500 }.to_string(),
            "timed out after 2s 500ms"
        );
        assert!(CommandExit::Code { code: 0 }.success());
        assert!(!CommandExit::Cancelled.success());
        assert!(!killed.success());
    }

    /// What ACP sends in `_meta.fido`: tagged, absent parts left out, and
    /// nothing about where this process's text splits.
    #[test]
    fn facts_serialise_tagged_without_the_text_offset() {
        let facts = ToolFacts {
            file: Some(FileChange {
                path: "a.rs".into(),
                action: FileAction::Edited {
                    at_lines: vec![3, 9],
                    added: 2,
                    removed: 1,
                },
            }),
            command: Some(CommandRun {
                exit: CommandExit::Code { code: 3 },
                elapsed_ms: 12,
                output_bytes: 40,
            }),
            truncation: None,
            lines: vec![FileLine {
                path: "b.rs".into(),
                line: 7,
            }],
        };
        assert_eq!(
            serde_json::to_string(&facts).unwrap(),
            r#"{"file":{"path":"a.rs","action":"edited","at_lines":[3,9],"added":2,"removed":1},"command":{"exit":{"kind":"exited","code":3},"elapsed_ms":12},"lines":[{"path":"b.rs","line":7}]}"#
        );
        assert_eq!(serde_json::to_string(&ToolFacts::default()).unwrap(), "{}");
    }
}
