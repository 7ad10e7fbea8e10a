//! The approval request on screen, as the store keeps it and the prompt
//! widget shows it; the keys that answer it are in [`crate::ui::approval`].

pub mod readiness;

use std::time::Instant;

use super::views::ScrollLimit;
use crate::protocol::ApprovalRequest;
use crate::ui::input::InputBuffer;
use readiness::Readiness;

/// An approval request waiting for the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    pub request: ApprovalRequest,
    /// `n` was pressed: the reason typed so far. It is edited in the
    /// prompt, so a draft on the input line stays there.
    pub reason: Option<InputBuffer>,
    /// Keys answer only after a quiet moment on screen.
    pub readiness: Readiness,
    /// The full view is open, scrolled this many rows down from its top.
    pub full_view: Option<usize>,
    /// Every row of the request has been on screen (the box held it
    /// whole, or the full view reached its end): `y` and `a` count only
    /// then.
    pub seen_whole: bool,
    /// The full view's page and end, as the last frame measured them.
    pub full_view_limit: ScrollLimit,
}

impl PendingApproval {
    /// A request that appeared at `now`.
    pub fn new(request: ApprovalRequest, now: Instant) -> PendingApproval {
        PendingApproval {
            request,
            reason: None,
            readiness: Readiness::new(now),
            full_view: None,
            seen_whole: false,
            full_view_limit: ScrollLimit::default(),
        }
    }

    /// `n` was pressed: the reason is being typed.
    pub fn typing_reason(&self) -> bool {
        self.reason.is_some()
    }

    /// The title when the terminal is too narrow for [`Self::title`].
    pub fn short_title(&self) -> &'static str {
        match &self.request {
            ApprovalRequest::Command {
                escalated: true, ..
            } => "Run OUTSIDE sandbox?",
            ApprovalRequest::Command { .. } => "Run this command?",
            ApprovalRequest::FileChange { .. } => "Make this change?",
            ApprovalRequest::McpCall { .. } => "Call MCP tool?",
            ApprovalRequest::Browse { .. } => "Browse this host?",
            ApprovalRequest::WriteDelegation { .. } => "Subagent writes?",
            ApprovalRequest::ChangeSet { .. } => "Apply change set?",
            ApprovalRequest::HookAsk { .. } => "Hook asks: run?",
        }
    }

    /// The title of the prompt.
    pub fn title(&self) -> &'static str {
        match &self.request {
            ApprovalRequest::Command {
                escalated: true, ..
            } => "Run this command OUTSIDE the sandbox?",
            ApprovalRequest::Command { .. } => "Run this command?",
            ApprovalRequest::FileChange { .. } => "Make this change?",
            ApprovalRequest::McpCall { .. } => "Call this MCP tool?",
            ApprovalRequest::Browse { .. } => "Allow browsing this host?",
            ApprovalRequest::WriteDelegation { .. } => "Let a subagent write in its own worktree?",
            ApprovalRequest::ChangeSet { .. } => "Apply this change set to your checkout?",
            ApprovalRequest::HookAsk { .. } => "A hook asks: run this tool call?",
        }
    }

    /// The lines of the prompt's body: what would run or change (a
    /// change set's diff folded per file). Raw: the widget marks what
    /// would not show and cuts rows to its width.
    pub fn body(&self) -> Vec<String> {
        self.lines(true)
    }

    /// The lines of the full view: the body, nothing folded.
    pub fn full_body(&self) -> Vec<String> {
        self.lines(false)
    }

    fn lines(&self, fold: bool) -> Vec<String> {
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
            ApprovalRequest::Browse { host, url } => vec![
                format!("browse_url wants {host}"),
                format!("url: {url}"),
                "It is not in network_allow: y allows this fetch, a this host for the session."
                    .into(),
            ],
            ApprovalRequest::WriteDelegation {
                agent_id,
                task,
                claim,
                base,
            } => vec![
                format!("{agent_id}: {task}"),
                format!("claim: {}", claim.join(", ")),
                format!("base: {base} (HEAD plus your uncommitted changes)"),
                "It writes only its own worktree; its changes come back for review.".into(),
            ],
            ApprovalRequest::ChangeSet {
                id,
                task,
                summary,
                files,
                outside_claim,
                diff,
                control_files,
            } => {
                let head = format!("{id}: {summary} · {task}");
                change_set_body(head, files, outside_claim, diff, control_files, fold)
            }
            ApprovalRequest::HookAsk {
                tool,
                arguments,
                reason,
            } => {
                let mut lines = vec![format!("{tool} {arguments}")];
                lines.extend(reason.iter().map(|why| format!("hook: {why}")));
                lines
            }
        }
    }

    /// The keys that apply now: none until the prompt is ready; `y` and
    /// `a` only once all of the request has been on screen.
    pub fn hint(&self) -> &'static str {
        let review = matches!(self.request, ApprovalRequest::ChangeSet { .. });
        if self.typing_reason() {
            "type why not (optional), Enter sends the denial · Esc denies without a reason"
        } else if !self.readiness.shows_ready() {
            "keys answer after a moment without typing · what you type goes to the input line"
        } else if self.full_view.is_some() {
            match (self.seen_whole, review) {
                (true, true) => {
                    "↑↓ PgUp PgDn Home End scroll · o/Esc back · y apply · a apply, and later clean ones · n discard"
                }
                (true, false) => {
                    "↑↓ PgUp PgDn Home End scroll · o/Esc back · y approve once · a approve for this session · n deny"
                }
                (false, true) => {
                    "↑↓ PgUp PgDn Home End scroll · o/Esc back · End: read to the end before y/a · n discard"
                }
                (false, false) => {
                    "↑↓ PgUp PgDn Home End scroll · o/Esc back · End: read to the end before y/a · n deny"
                }
            }
        } else {
            match (self.seen_whole, review) {
                (true, true) => {
                    "y apply · a apply, and apply later clean ones · o full view · n discard (with a reason) · Esc discard"
                }
                (true, false) => {
                    "y approve once · a approve for this session · n deny (with a reason) · Esc deny · o full view"
                }
                (false, true) => {
                    "o full view (read it all before y/a) · n discard (with a reason) · Esc discard"
                }
                (false, false) => {
                    "o full view (read it all before y/a) · n deny (with a reason) · Esc deny"
                }
            }
        }
    }
}

/// Lines of diff shown per file before it is folded.
const FOLDED_LINES: usize = 12;

/// A change set's prompt: the files (those that touch control files
/// first, marked), then each file's diff, the control files' first,
/// folded to its first lines when `fold` (the full view shows it all).
fn change_set_body(
    head: String,
    files: &[String],
    outside_claim: &[String],
    diff: &str,
    control_files: &[String],
    fold: bool,
) -> Vec<String> {
    let mut lines = vec![head];
    if !control_files.is_empty() {
        lines.push(format!(
            "touches control files: {} (they configure Fido or git: read them before you apply)",
            control_files.join(", ")
        ));
    }
    // The lines are "status path +a -r" or "status from → path +a -r".
    let names_control = |text: &str| {
        control_files
            .iter()
            .any(|path| text.contains(&format!(" {path} ")))
    };
    lines.extend(files.iter().map(|f| {
        let mark = if names_control(f) {
            "  (control file)"
        } else {
            ""
        };
        format!("  {f}{mark}")
    }));
    lines.extend(
        outside_claim
            .iter()
            .map(|f| format!("  {f} (outside the claim: not applied)")),
    );
    let (control, rest): (Vec<_>, Vec<_>) = split_per_file(diff).into_iter().partition(|file| {
        file.first()
            .is_some_and(|header| diff_names_control(header, control_files))
    });
    for file in control.into_iter().chain(rest) {
        let shown = if fold {
            file.len().min(FOLDED_LINES)
        } else {
            file.len()
        };
        lines.extend(file[..shown].iter().map(|l| l.to_string()));
        if file.len() > shown {
            lines.push(format!("… {} more lines of this file", file.len() - shown));
        }
    }
    lines
}

/// Whether a `diff --git a/X b/Y` header names one of `control_files`.
fn diff_names_control(header: &str, control_files: &[String]) -> bool {
    header.starts_with("diff --git ")
        && control_files.iter().any(|path| {
            header.ends_with(&format!(" b/{path}")) || header.contains(&format!(" a/{path} "))
        })
}

/// A unified diff's lines, grouped per `diff --git` header.
fn split_per_file(diff: &str) -> Vec<Vec<&str>> {
    let mut files: Vec<Vec<&str>> = Vec::new();
    for line in diff.lines() {
        match files.last_mut() {
            Some(file) if !line.starts_with("diff --git ") => file.push(line),
            _ => files.push(vec![line]),
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_set_touching_control_files_says_so_and_shows_them_first() {
        let request = |control_files: Vec<String>| {
            PendingApproval::new(ApprovalRequest::ChangeSet {
                id: "subagent-1".into(),
                task: "t".into(),
                summary: "2 files (+2 -0)".into(),
                files: vec![
                    "modified fido.toml +1 -0".into(),
                    "modified a.rs +1 -0".into(),
                ],
                outside_claim: Vec::new(),
                diff: "diff --git a/a.rs b/a.rs\n+a\ndiff --git a/fido.toml b/fido.toml\n+[[hooks.Stop]]\n"
                    .into(),
                control_files,
            }, Instant::now())
        };
        let body = request(vec!["fido.toml".into()]).body();
        assert_eq!(
            body,
            [
                "subagent-1: 2 files (+2 -0) · t",
                "touches control files: fido.toml (they configure Fido or git: read them before you apply)",
                "  modified fido.toml +1 -0  (control file)",
                "  modified a.rs +1 -0",
                "diff --git a/fido.toml b/fido.toml",
                "+[[hooks.Stop]]",
                "diff --git a/a.rs b/a.rs",
                "+a",
            ]
        );
        let plain = request(Vec::new()).body();
        assert_eq!(plain[1], "  modified fido.toml +1 -0");
        assert_eq!(plain[3], "diff --git a/a.rs b/a.rs", "git's order kept");
    }
}
