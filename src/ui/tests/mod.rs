//! Tests of the UI: whole frames rendered into a `TestBackend` from a store
//! fed with protocol events ([`snapshots`]), keys to actions ([`keys`]),
//! the real actor against a fake agent ([`actor`]), and type-ahead
//! ([`typeahead`]).

mod actor;
mod approval;
mod daily;
mod editor;
mod keys;
mod long;
mod patch_lines;
mod random_sizes;
mod snapshots;
mod typeahead;

use std::time::Instant;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;

use crate::plan::{PlanItem, PlanState, Status};
use crate::protocol::{EventKind, TurnStatus, UsageTotals};
use crate::ui::frame::Screen;
use crate::ui::state::Store;

pub const NOW: &str = "2025-01-01T12:00:00.000Z";

pub fn session() -> EventKind {
    EventKind::SessionStarted {
        workspace: "/work/demo".into(),
        provider: "openai".into(),
        model: "test-model".into(),
        tools: vec!["read_file".into(), "update_plan".into()],
        session_id: Some("20261201T100000-abcd".into()),
    }
}

/// A store of this terminal size fed with `events`.
pub fn store_with(size: (u16, u16), events: &[EventKind]) -> Store {
    let mut store = Store::new(size);
    let now = Instant::now();
    for event in events {
        store.apply(event, now);
    }
    store
}

/// The whole frame of `store` at its size, rendered afresh.
pub fn render(store: &Store) -> Terminal<TestBackend> {
    render_with(&mut Screen::default(), store)
}

/// The whole frame of `store` at its size, with the lines `screen` kept
/// from earlier frames.
pub fn render_with(screen: &mut Screen, store: &Store) -> Terminal<TestBackend> {
    let (width, height) = store.size;
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| {
            let areas = screen.layout(store, store.size);
            screen.render(frame, store, &areas);
        })
        .unwrap();
    terminal
}

/// What the actor does before each frame: the store settles on the
/// frame's layout (a scrolled view stays still, the keys' scroll limits).
pub fn prepare_frame(store: &mut Store) {
    let size = store.size;
    Screen::default().prepare(store, size);
}

/// The buffer's text, one string per row.
pub fn rows(buffer: &Buffer) -> Vec<String> {
    let area = buffer.area;
    (0..area.height)
        .map(|y| {
            (0..area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

pub fn screen_text(terminal: &Terminal<TestBackend>) -> String {
    rows(terminal.backend().buffer()).join("\n")
}

pub fn item(
    id: &str,
    title: &str,
    status: Status,
    details: Option<&str>,
    deps: &[&str],
    next: Option<&str>,
    evidence: &[&str],
) -> PlanItem {
    PlanItem {
        id: id.into(),
        title: title.into(),
        status,
        details: details.map(String::from),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        next_action: next.map(String::from),
        evidence: evidence.iter().map(|e| e.to_string()).collect(),
    }
}

/// The normalised plan, as `update_plan` returns it.
pub fn plan_value(reason: &str, items: Vec<PlanItem>) -> PlanState {
    PlanState::empty().successor(reason.into(), items, NOW.into())
}

pub fn plan_event(plan: PlanState) -> EventKind {
    EventKind::PlanUpdated {
        plan: crate::plan::PlanSnapshot::UpdatePlan(plan),
    }
}

/// Three items, each with every field.
pub fn three_items() -> Vec<PlanItem> {
    vec![
        item(
            "inspect",
            "Read the parser",
            Status::Done,
            Some("tokens and AST live in src/parser.rs"),
            &[],
            Some("hand over to implement"),
            &["src/parser.rs:10", "cargo test parser: 4 passed"],
        ),
        item(
            "implement",
            "Fix operator precedence",
            Status::InProgress,
            Some("binary operators bind too loosely"),
            &["inspect"],
            Some("edit parse_expr to climb precedence"),
            &["tests/precedence.rs fails as expected"],
        ),
        item(
            "verify",
            "Run the whole test suite",
            Status::Blocked,
            Some("the CI runner is offline"),
            &["implement", "inspect"],
            Some("ask ops to restart the runner"),
            &["ci.example/run/42: queued"],
        ),
    ]
}

/// Twelve items with details and next actions.
pub fn twelve_items() -> Vec<PlanItem> {
    (1..=12)
        .map(|n| {
            let status = match n {
                1..=3 => Status::Done,
                4 => Status::InProgress,
                _ => Status::Pending,
            };
            let evidence = if status == Status::Done {
                vec!["cargo test: ok"]
            } else {
                Vec::new()
            };
            let previous = format!("step-{:02}", n - 1);
            let deps: Vec<&str> = if n > 1 {
                vec![previous.as_str()]
            } else {
                vec![]
            };
            item(
                &format!("step-{n:02}"),
                &format!("Step number {n} of the migration"),
                status,
                Some(&format!("details of step {n}")),
                &deps,
                (status != Status::Done).then_some("start it"),
                &evidence,
            )
        })
        .collect()
}

pub fn turn_completed(turn: u32, status: TurnStatus) -> EventKind {
    EventKind::TurnCompleted {
        turn,
        status,
        usage: UsageTotals {
            requests: 2,
            prompt_tokens: 1834,
            cached_tokens: 1200,
            completion_tokens: 96,
        },
    }
}

pub fn subagent(phase: &str, elapsed_ms: u64, detail: &str) -> EventKind {
    EventKind::Subagent {
        agent_id: "subagent-7f3a".into(),
        pid: Some(4242),
        phase: phase.into(),
        elapsed_ms,
        detail: detail.into(),
        tokens: 0,
        plan_item: None,
    }
}

/// A `subagent` event of agent `id` with its tokens and plan item.
pub fn subagent_as(
    id: &str,
    phase: &str,
    elapsed_ms: u64,
    tokens: u64,
    plan_item: Option<&str>,
) -> EventKind {
    EventKind::Subagent {
        agent_id: id.into(),
        pid: Some(5000 + elapsed_ms as u32 % 1000),
        phase: phase.into(),
        elapsed_ms,
        detail: String::new(),
        tokens,
        plan_item: plan_item.map(Into::into),
    }
}

pub fn tool_call(id: &str, name: &str, summary: &str) -> EventKind {
    EventKind::ToolCall {
        id: id.into(),
        name: name.into(),
        summary: summary.into(),
    }
}

/// A `tool_result` with the facts the tool reported.
pub fn tool_result_with(
    id: &str,
    name: &str,
    (ok, summary): (bool, &str),
    facts: crate::protocol::ToolFacts,
) -> EventKind {
    EventKind::ToolResult {
        id: id.into(),
        name: name.into(),
        ok,
        summary: summary.into(),
        facts: Some(Box::new(facts)),
    }
}

/// A successful `patch` result whose edits start at `at_lines`.
pub fn edited(id: &str, path: &str, at_lines: &[usize]) -> EventKind {
    use crate::protocol::tool_facts::{FileAction, FileChange};
    let facts = crate::protocol::ToolFacts {
        file: Some(FileChange {
            path: path.into(),
            action: FileAction::Edited {
                at_lines: at_lines.to_vec(),
                added: 1,
                removed: 1,
            },
        }),
        ..Default::default()
    };
    tool_result_with(id, "patch", (true, &format!("Edited {path}")), facts)
}

/// A `bash_exec` result and its live output as the turn loop sends them:
/// the command's `output`, and how it ended in the facts.
pub fn command_ran(id: &str, command: &str, output: &str, code: i32) -> [EventKind; 2] {
    use crate::protocol::tool_facts::{CommandExit, CommandRun};
    let facts = crate::protocol::ToolFacts {
        command: Some(CommandRun {
            exit: CommandExit::Code { code },
            elapsed_ms: 10,
            output_bytes: output.len(),
        }),
        ..Default::default()
    };
    let summary = crate::text::summary(output, 120);
    [
        tool_result_with(id, "bash_exec", (code == 0, &summary), facts),
        EventKind::ToolOutput {
            id: id.into(),
            name: "bash_exec".into(),
            arguments: serde_json::json!({ "command": command }).to_string(),
            content: output.into(),
        },
    ]
}

pub fn tool_result(id: &str, name: &str, ok: bool, summary: &str) -> EventKind {
    EventKind::ToolResult {
        id: id.into(),
        name: name.into(),
        ok,
        summary: summary.into(),
        facts: None,
    }
}
