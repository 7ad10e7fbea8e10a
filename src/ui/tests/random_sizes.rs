//! Random stores at random sizes, 1×1 to 200×60: drawing never panics,
//! every row of the buffer is exactly as wide as the terminal (no cell
//! written past the edge, no wide character cut in half), and the input
//! line and the cursor stay on screen.

use proptest::prelude::*;
use unicode_width::UnicodeWidthStr;

use super::*;
use crate::protocol::{ApprovalRequest, TurnStatus};
use crate::ui::state::Store;

/// Pieces of text that stress wrapping and Markdown: wide and combining
/// characters, emoji sequences, tabs, control bytes, Markdown syntax.
const PIECES: &[&str] = &[
    "word",
    " ",
    "\n",
    "\n\n",
    "日本語",
    "👩‍👩‍👧",
    "e\u{301}",
    "\t",
    "\u{1b}[31m",
    "**bold**",
    "`code`",
    "## Head\n",
    "- item\n",
    "  - nested\n",
    "> quote\n",
    "```rust\nfn x() {}\n```\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "[link](https://example.org/a/very/long/path)",
    "a_very_long_identifier_without_any_break_in_it",
    "---\n",
    "\u{200b}",
    "ﾃｽﾄ",
];

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..24).prop_map(|pieces| pieces.concat())
}

#[derive(Debug, Clone)]
enum Step {
    Prompt(String),
    Delta(String),
    Answer(String),
    Patch(String, String),
    Bash(String),
    Subagent(String),
    Plan,
    Draft(String),
    Approval(String),
    Expand,
    Overlay,
    Scroll,
    EndTurn,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        text().prop_map(Step::Prompt),
        text().prop_map(Step::Delta),
        text().prop_map(Step::Answer),
        (text(), text()).prop_map(|(old, new)| Step::Patch(old, new)),
        text().prop_map(Step::Bash),
        text().prop_map(Step::Subagent),
        Just(Step::Plan),
        text().prop_map(Step::Draft),
        text().prop_map(Step::Approval),
        Just(Step::Expand),
        Just(Step::Overlay),
        Just(Step::Scroll),
        Just(Step::EndTurn),
    ]
}

fn apply(store: &mut Store, index: usize, step: Step) {
    let now = std::time::Instant::now();
    let id = format!("c{index}");
    let events = match step {
        Step::Prompt(text) => {
            store.begin_turn(&text);
            vec![EventKind::TurnStarted { turn: 1 }]
        }
        Step::Delta(text) => vec![EventKind::AssistantDelta { text }],
        Step::Answer(text) => vec![EventKind::AssistantText { text }],
        Step::Patch(old_text, new_text) => {
            let arguments = serde_json::json!({
                "path": "src/a.rs",
                "edits": [{"old_text": old_text, "new_text": new_text}]
            });
            vec![
                tool_call(&id, "patch", "src/a.rs"),
                edited(&id, "src/a.rs", &[7]),
                EventKind::ToolOutput {
                    id: id.clone(),
                    name: "patch".into(),
                    arguments: arguments.to_string(),
                    content: String::new(),
                },
            ]
        }
        Step::Bash(output) => {
            let mut events = vec![tool_call(&id, "bash_exec", "make")];
            events.extend(command_ran(&id, "make", &output, 2));
            events
        }
        Step::Subagent(detail) => vec![subagent("read_file", 1_000, &detail)],
        Step::Plan => vec![plan_event(plan_value("because", twelve_items()))],
        Step::Draft(text) => {
            store.input.insert_str(&text);
            vec![]
        }
        Step::Approval(diff) => {
            crate::ui::approval::show(
                store,
                ApprovalRequest::FileChange {
                    tool: "patch".into(),
                    path: "src/a.rs".into(),
                    diff,
                },
            );
            vec![]
        }
        Step::Expand => {
            store.toggle_expanded();
            vec![]
        }
        Step::Overlay => {
            store.plan_overlay = !store.plan_overlay;
            vec![]
        }
        Step::Scroll => {
            store.transcript_scroll += 3;
            vec![]
        }
        Step::EndTurn => vec![turn_completed(1, TurnStatus::Completed)],
    };
    for event in events {
        store.apply(&event, now);
    }
}

/// The columns row `y` covers, walking it as a terminal would: a wide
/// character covers the cell after it too, so one cut at the right edge
/// makes the row too wide.
fn row_width(buffer: &ratatui::buffer::Buffer, y: u16) -> usize {
    let mut x = 0;
    while x < buffer.area.width {
        x += (buffer[(x, y)].symbol().width() as u16).max(1);
    }
    usize::from(x)
}

/// Draws the store after `steps` at `width`×`height`: every row exactly
/// as wide as the terminal, the cursor on screen.
fn draws_inside(steps: Vec<Step>, width: u16, height: u16) -> Result<(), TestCaseError> {
    let mut store = store_with((width, height), &[session()]);
    for (index, step) in steps.into_iter().enumerate() {
        apply(&mut store, index, step);
    }
    prepare_frame(&mut store);
    let mut terminal = render(&store);
    let buffer = terminal.backend().buffer().clone();
    for y in 0..height {
        prop_assert_eq!(
            row_width(&buffer, y),
            usize::from(width),
            "row {} of {}×{}",
            y,
            width,
            height
        );
    }
    let cursor = terminal.get_cursor_position().unwrap();
    prop_assert!(
        cursor.x < width && cursor.y < height,
        "{:?} at {}×{}",
        cursor,
        width,
        height
    );
    Ok(())
}

proptest! {
    // Failures are kept as the tests below, not in a file beside the
    // crate (the top level is fixed).
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_store_draws_inside_any_size(
        steps in prop::collection::vec(step(), 0..16),
        width in 1u16..=200,
        height in 1u16..=60,
    ) {
        draws_inside(steps, width, height)?;
    }
}

/// Found by the property test: the cursor after a wide draft, 4×1.
#[test]
fn a_wide_draft_in_a_four_by_one_terminal_keeps_the_cursor_on_screen() {
    draws_inside(vec![Step::Draft("日本語".into())], 4, 1).unwrap();
}

/// Found by the property test: an empty prompt at 1×1.
#[test]
fn an_empty_store_draws_in_a_one_by_one_terminal() {
    draws_inside(Vec::new(), 1, 1).unwrap();
}
