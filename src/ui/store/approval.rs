//! The approval request on screen, as the store keeps it and the prompt
//! widget shows it; the keys that answer it are in [`crate::ui::approval`].

use crate::protocol::ApprovalRequest;

/// An approval request waiting for the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    pub request: ApprovalRequest,
    /// `n` was pressed: the input line now takes the reason.
    pub typing_reason: bool,
}

impl PendingApproval {
    /// The title of the prompt.
    pub fn title(&self) -> &'static str {
        match &self.request {
            ApprovalRequest::Command {
                escalated: true, ..
            } => "Run this command OUTSIDE the sandbox?",
            ApprovalRequest::Command { .. } => "Run this command?",
            ApprovalRequest::FileChange { .. } => "Make this change?",
            ApprovalRequest::McpCall { .. } => "Call this MCP tool?",
        }
    }

    /// The lines of the prompt's body: what would run or change.
    pub fn body(&self) -> Vec<String> {
        match &self.request {
            ApprovalRequest::Command {
                command,
                cwd,
                justification,
                ..
            } => {
                let mut lines = vec![format!("$ {command}"), format!("in {cwd}")];
                if let Some(why) = justification {
                    lines.push(format!("why: {why}"));
                }
                lines
            }
            ApprovalRequest::FileChange { tool, path, diff } => {
                let mut lines = vec![format!("{tool} {path}")];
                lines.extend(diff.lines().map(str::to_owned));
                lines
            }
            ApprovalRequest::McpCall {
                tool,
                server,
                arguments,
            } => vec![
                format!("{tool} {arguments}"),
                format!("on MCP server {server}"),
            ],
        }
    }

    /// The keys that apply now.
    pub fn hint(&self) -> &'static str {
        if self.typing_reason {
            "type why not (optional), Enter sends the denial · Esc denies without a reason"
        } else {
            "y approve once · a approve for this session · n deny (with a reason) · Esc deny · Ctrl+C interrupt"
        }
    }
}
