//! How the TUI lays out the engine's typed answers to the local commands
//! (`/subagents`, `/sessions`, `/undo`, `/suspend`, `/recall`): the same text
//! the engine used to send, so the screen reads as before.

use crate::protocol::control::SessionSubagent;
use crate::protocol::op::{SessionEntry, UndoneChange};
use crate::text;

/// `/sessions`: one session per line (the current one marked), its
/// bookmarks under it, then the conversations older versions saved.
pub fn sessions_text(sessions: &[SessionEntry]) -> String {
    if sessions.is_empty() {
        return "no sessions yet".into();
    }
    let mut lines = Vec::new();
    for s in sessions {
        let this = if s.current { " (this one)" } else { "" };
        lines.push(format!("{}  {}{this}  {}", s.id, s.status, s.preview));
        lines.extend(
            s.bookmarks
                .iter()
                .map(|b| format!("    bookmark {}  {}", b.name, b.at)),
        );
    }
    lines.join("\n")
}

/// `/undo`: what was reverted; the file's name is the repository's, so
/// it is escaped to one line that acts on no terminal.
pub fn undone_text(change: Option<&UndoneChange>) -> String {
    match change {
        Some(change) => format!(
            "undone: {} of {}",
            change.kind,
            text::escape_line(&change.path)
        ),
        None => "nothing to undo".into(),
    }
}

/// `/suspend`: the bookmark set.
pub fn bookmarked_text(name: &str) -> String {
    format!("bookmarked as {name}; /recall {name} brings the conversation back to this point")
}

/// `/recall`: what came back.
pub fn recalled_text(from: &str, messages: usize) -> String {
    format!(
        "recalled {messages} messages from {from}; the workspace plan was kept and re-delivered to the model"
    )
}

/// Every subagent of the session, in start order: status, elapsed time,
/// tokens, the plan item, and a one-line result (or what it is doing now).
pub fn subagents_text(agents: &[SessionSubagent]) -> String {
    if agents.is_empty() {
        return "no subagent has run in this session".into();
    }
    let running = agents.iter().filter(|agent| agent.running).count();
    let count = text::counted(agents.len() as u64, "subagent");
    let mut lines = vec![format!("{count} this session, {running} running")];
    lines.extend(agents.iter().map(subagent_line));
    lines.join("\n")
}

/// `  subagent-1a2b3c4d  completed · 4s · 2.5k tok · plan: i1 · 3 findings`
fn subagent_line(agent: &SessionSubagent) -> String {
    let status = if agent.running {
        format!("running ({})", agent.phase.label())
    } else if agent.phase.is_final() {
        agent.phase.label()
    } else {
        // Its run ended without saying how (it went with the turn).
        "stopped with its turn".to_string()
    };
    let mut line = format!(
        "  {:<18} {status} · {} · {} tok",
        agent.agent_id,
        text::elapsed(agent.elapsed_ms),
        text::tokens(agent.tokens)
    );
    if let Some(item) = &agent.plan_item {
        line.push_str(&format!(" · plan: {item}"));
    }
    if !agent.detail.is_empty() {
        line.push_str(&format!(" · {}", text::summary(&agent.detail, 100)));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SubagentPhase;

    fn agent(
        id: &str,
        phase: &str,
        running: bool,
        elapsed_ms: u64,
        tokens: u64,
    ) -> SessionSubagent {
        SessionSubagent {
            agent_id: id.into(),
            child_pid: None,
            phase: SubagentPhase::parse(phase),
            running,
            elapsed_ms,
            tokens,
            plan_item: None,
            detail: String::new(),
        }
    }

    #[test]
    fn every_subagent_of_the_session_with_how_it_ended_or_what_it_does() {
        let mut a = agent("subagent-a", "completed", false, 4_000, 2_500);
        a.plan_item = Some("i1".into());
        a.detail = "3 findings".into();
        let mut d = agent("subagent-d", "read_file", true, 61_000, 900);
        d.detail = "src/\u{1b}[31mmain.rs".into();
        let agents = [
            a,
            agent("subagent-b", "cancelled", false, 2_000, 40),
            agent("subagent-c", "reasoning", false, 1_000, 10),
            d,
        ];
        let text = subagents_text(&agents);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "4 subagents this session, 1 running",
                "  subagent-a         completed · 4s · 2.5k tok · plan: i1 · 3 findings",
                "  subagent-b         cancelled · 2s · 40 tok",
                "  subagent-c         stopped with its turn · 1s · 10 tok",
                "  subagent-d         running (read_file) · 1m01s · 900 tok · src/main.rs",
            ]
        );
        let one = subagents_text(&agents[1..2]);
        assert!(
            one.starts_with("1 subagent this session, 0 running\n"),
            "{one}"
        );
        assert_eq!(subagents_text(&[]), "no subagent has run in this session");
    }
}
