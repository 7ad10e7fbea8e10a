//! `fido exec`'s progress on stderr, as the work happens: each tool call
//! on one line, subagents starting and ending, plan changes, approvals
//! refused. Every piece of text from the model, the workspace or a
//! subagent is shown escaped (it cannot move the cursor or set the
//! clipboard); colour (dim) only on a terminal, never under `NO_COLOR`.

use std::io::{IsTerminal, Write};

use crate::protocol::plan::{PlanSnapshot, Status, TaskStatus};
use crate::protocol::{EventKind, SubagentPhase};
use crate::text::{elapsed, escape_line, short};

/// Longest piece of one progress line taken from a tool or a subagent.
const DETAIL_CHARS: usize = 100;

/// The start of what a refused approval's tool result says.
const REFUSED: &str = "not approved: ";

/// Prints progress lines on stderr.
pub struct Progress {
    dim: bool,
}

impl Progress {
    /// Plain when stderr is not a terminal (a log file, a pipe).
    pub fn for_stderr() -> Progress {
        Progress {
            dim: std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    /// The line for `event`, if it has one, on stderr.
    pub fn show(&mut self, event: &EventKind) {
        let Some(line) = line_for(event) else {
            return;
        };
        let mut stderr = std::io::stderr().lock();
        // A closed stderr must not stop the agent.
        let _ = if self.dim {
            writeln!(stderr, "\x1b[2mfido: {line}\x1b[0m")
        } else {
            writeln!(stderr, "fido: {line}")
        };
    }
}

/// The progress line of one event (escaped, no newline), if it has one.
pub fn line_for(event: &EventKind) -> Option<String> {
    match event {
        EventKind::ToolCall { name, summary, .. } => Some(tool_line(name, summary)),
        EventKind::ToolResult {
            name,
            ok: false,
            summary,
            facts: None,
            ..
        } => Some(failed_line(name, summary)),
        // A subagent is announced twice as starting: before its spawn, then
        // with its pid. It started once it has one.
        EventKind::Subagent {
            pid: None,
            phase: SubagentPhase::Starting,
            ..
        } => None,
        EventKind::Subagent {
            agent_id,
            phase,
            elapsed_ms,
            detail,
            plan_item,
            ..
        } => subagent_line(agent_id, phase, *elapsed_ms, detail, plan_item.as_deref()),
        EventKind::PlanUpdated { plan } => Some(plan_line(plan)),
        _ => None,
    }
}

/// `→ read_file README.md`
fn tool_line(name: &str, summary: &str) -> String {
    let summary = piece(summary);
    if summary.is_empty() {
        format!("→ {}", escape_line(name))
    } else {
        format!("→ {} {summary}", escape_line(name))
    }
}

/// A refused approval says so; any other failure names its tool.
fn failed_line(name: &str, summary: &str) -> String {
    let said = summary.strip_prefix("Error: ").unwrap_or(summary);
    match said.strip_prefix(REFUSED) {
        Some(why) => format!("approval refused: {}: {}", escape_line(name), piece(why)),
        None => format!("✗ {} failed: {}", escape_line(name), piece(said)),
    }
}

/// A subagent starting and ending; its steps in between stay quiet.
fn subagent_line(
    agent_id: &str,
    phase: &SubagentPhase,
    elapsed_ms: u64,
    detail: &str,
    plan_item: Option<&str>,
) -> Option<String> {
    let id = escape_line(agent_id);
    let item = plan_item
        .map(|item| format!(" (plan: {})", escape_line(item)))
        .unwrap_or_default();
    if *phase == SubagentPhase::Starting {
        return Some(format!("subagent {id} started{item}"));
    }
    if !phase.is_final() {
        return None;
    }
    let how = escape_line(&phase.label()).into_owned();
    let took = elapsed(elapsed_ms);
    let detail = piece(detail);
    Some(match detail.is_empty() {
        true => format!("subagent {id} {how} after {took}{item}"),
        false => format!("subagent {id} {how} after {took}{item}: {detail}"),
    })
}

/// `plan v3: 1/3 done · now: i2 Read the README`
fn plan_line(plan: &PlanSnapshot) -> String {
    match plan {
        PlanSnapshot::UpdatePlan(state) => {
            let done = state
                .items
                .iter()
                .filter(|item| item.status == Status::Done)
                .count();
            let now = state
                .items
                .iter()
                .find(|item| item.status == Status::InProgress)
                .map(|item| format!(" · now: {} {}", item.id, item.title))
                .unwrap_or_default();
            let line = format!(
                "plan v{}: {done}/{} done{now}",
                state.version,
                state.items.len()
            );
            piece(&line)
        }
        PlanSnapshot::Todo(snapshot) => {
            let live: Vec<_> = snapshot
                .tasks
                .iter()
                .filter(|task| task.status != TaskStatus::Deleted)
                .collect();
            let done = live
                .iter()
                .filter(|task| task.status == TaskStatus::Completed)
                .count();
            let now = live
                .iter()
                .find(|task| task.status == TaskStatus::InProgress)
                .map(|task| format!(" · now: #{} {}", task.id, task.subject))
                .unwrap_or_default();
            piece(&format!("todo: {done}/{} done{now}", live.len()))
        }
    }
}

/// Text from outside on one line: escaped, cut short.
fn piece(text: &str) -> String {
    short(&escape_line(text), DETAIL_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_is_one_escaped_line_and_a_refusal_says_so() {
        let call = EventKind::ToolCall {
            id: "c1".into(),
            name: "bash_exec".into(),
            summary: "echo \x1b]52;c;aGk=\x07 \nrm -rf".into(),
        };
        let line = line_for(&call).unwrap();
        assert!(!line.contains('\x1b') && !line.contains('\n'), "{line}");
        assert!(line.starts_with("→ bash_exec echo \\x1b]52"), "{line}");
        let refused = EventKind::ToolResult {
            id: "c1".into(),
            name: "patch".into(),
            ok: false,
            summary: "Error: not approved: approval_policy untrusted requires …".into(),
            facts: None,
        };
        assert_eq!(
            line_for(&refused).unwrap(),
            "approval refused: patch: approval_policy untrusted requires …"
        );
        let worked = EventKind::ToolResult {
            id: "c1".into(),
            name: "patch".into(),
            ok: true,
            summary: "ok".into(),
            facts: None,
        };
        assert_eq!(line_for(&worked), None);
    }

    #[test]
    fn a_subagent_shows_its_start_and_its_end_only() {
        let event_of = |pid: Option<u32>, phase: &str, detail: &str| EventKind::Subagent {
            agent_id: "subagent-1".into(),
            pid,
            phase: SubagentPhase::parse(phase),
            elapsed_ms: 1200,
            detail: detail.into(),
            tokens: 10,
            plan_item: Some("p1".into()),
        };
        let event = |phase: &str, detail: &str| event_of(Some(7), phase, detail);
        // Before its spawn there is no process yet: no line.
        assert_eq!(line_for(&event_of(None, "starting", "spawning")), None);
        assert_eq!(
            line_for(&event("starting", "")).unwrap(),
            "subagent subagent-1 started (plan: p1)"
        );
        assert_eq!(line_for(&event("read_file", "README.md")), None);
        let ended = line_for(&event("completed", "2 findings")).unwrap();
        assert!(
            ended.starts_with("subagent subagent-1 completed after 1")
                && ended.ends_with("(plan: p1): 2 findings"),
            "{ended}"
        );
    }
}
