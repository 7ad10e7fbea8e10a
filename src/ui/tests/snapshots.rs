//! Whole frames at several sizes, snapshotted (each row quoted, so widths
//! are pinned), plus assertions on what snapshots cannot show: styles, and
//! that no plan item is ever dropped.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

use super::*;
use crate::protocol::TurnStatus;
use crate::ui::keys::handle_key;
use crate::ui::layout::{self, Screen};
use crate::ui::store::Store;
use crate::ui::widgets::{SUBAGENT_ACCENT, SUBAGENT_TEXT};

fn snapshot(name: &str, terminal: &Terminal<TestBackend>) {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, terminal.backend().to_string());
    });
}

fn press(store: &mut Store, code: crossterm::event::KeyCode) {
    let key = crossterm::event::KeyEvent::new(code, crossterm::event::KeyModifiers::NONE);
    handle_key(store, key, std::time::Instant::now());
}

/// A finished turn: a prompt, tool calls, a plan update, an answer.
fn worked_store(size: (u16, u16), plan: Vec<crate::plan::PlanItem>) -> Store {
    let mut store = store_with(size, &[session()]);
    store.begin_turn("fix the operator precedence bug in the parser");
    let now = std::time::Instant::now();
    for event in [
        EventKind::TurnStarted { turn: 1 },
        tool_call("c1", "read_file", "src/parser.rs"),
        tool_result("c1", "read_file", true, "120 lines"),
        tool_call("c2", "update_plan", ""),
        tool_result("c2", "update_plan", true, "{\"version\": 1"),
        plan_event(plan_value("Precedence fix under way", plan)),
        EventKind::AssistantText {
            text: "I read the parser and made a plan. The fix goes into parse_expr.".into(),
        },
        turn_completed(1, TurnStatus::Completed),
    ] {
        store.apply(&event, now);
    }
    store
}

/// Every item id appears on screen (possibly across overlay pages).
fn assert_ids_shown(text: &str, ids: &[&str]) {
    for id in ids {
        assert!(text.contains(id), "item {id} missing from:\n{text}");
    }
}

#[test]
fn empty_plan_at_140_columns() {
    let store = store_with((140, 20), &[session()]);
    let terminal = render(&store);
    assert!(screen_text(&terminal).contains("No plan yet."));
    snapshot("empty_plan_140x20", &terminal);
}

#[test]
fn three_item_plan_with_every_field_at_140_columns() {
    let store = worked_store((140, 30), three_items());
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert_ids_shown(&text, &["inspect", "implement", "verify"]);
    for field in [
        "tokens and AST live in src/parser.rs",
        "depends on: implement, inspect",
        "next: ask ops to restart the runner",
        "evidence: cargo test parser: 4 passed",
        "· in_progress",
        "· blocked",
    ] {
        assert!(text.contains(field), "{field:?} missing:\n{text}");
    }
    // The transcript (left of the panel) has one plan line, not the plan.
    let Screen::Normal(areas) = layout::compute(store.size, &store) else {
        panic!("too small");
    };
    let plan_x = usize::from(areas.plan.unwrap().x);
    let left: String = rows(terminal.backend().buffer())
        .iter()
        .map(|row| row.chars().take(plan_x).collect::<String>() + "\n")
        .collect();
    assert!(left.contains("plan updated: v1 · 3 items"));
    assert!(
        !left.contains("depends on") && !left.contains("evidence"),
        "{left}"
    );
    snapshot("three_item_plan_140x30", &terminal);
}

#[test]
fn three_item_plan_at_90_columns_moves_below_the_transcript() {
    let store = worked_store((90, 40), three_items());
    let terminal = render(&store);
    assert_ids_shown(&screen_text(&terminal), &["inspect", "implement", "verify"]);
    snapshot("three_item_plan_90x40", &terminal);
}

#[test]
fn long_plan_at_50_columns_says_how_many_items_are_below() {
    let store = worked_store((50, 30), twelve_items());
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert!(text.contains("more below · F2 to expand"), "{text}");
    snapshot("long_plan_50x30", &terminal);
}

#[test]
fn long_plan_overlay_at_50_columns_pages_through_every_item() {
    let mut store = worked_store((50, 30), twelve_items());
    press(&mut store, crossterm::event::KeyCode::F(2));
    let first = render(&store);
    snapshot("long_plan_overlay_50x30", &first);
    let mut seen = screen_text(&first);
    for _ in 0..20 {
        press(&mut store, crossterm::event::KeyCode::PageDown);
        seen.push_str(&screen_text(&render(&store)));
    }
    let last = render(&store);
    assert!(!screen_text(&last).contains("more below"));
    snapshot("long_plan_overlay_50x30_end", &last);
    let ids: Vec<String> = (1..=12).map(|n| format!("step-{n:02}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_ids_shown(&seen, &ids);
    // F2 again closes the overlay.
    press(&mut store, crossterm::event::KeyCode::F(2));
    assert!(!store.plan_overlay);
}

#[test]
fn long_plan_side_panel_at_140_columns_scrolls_in_the_overlay() {
    let store = worked_store((140, 24), twelve_items());
    let terminal = render(&store);
    assert!(screen_text(&terminal).contains("more below · F2 to expand"));
    snapshot("long_plan_140x24", &terminal);
}

fn running_subagent_store(size: (u16, u16)) -> Store {
    let mut store = worked_store(size, three_items());
    store.begin_turn("ask a subagent to review the lexer");
    let now = std::time::Instant::now();
    for event in [
        EventKind::TurnStarted { turn: 2 },
        tool_call("d1", "delegate", "review the lexer"),
        subagent("starting", 0, ""),
        subagent("read_file", 12_400, "src/lexer.rs"),
    ] {
        store.apply(&event, now);
    }
    store
}

#[test]
fn running_subagent_bar_at_140_columns() {
    let store = running_subagent_store((140, 30));
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert!(text.contains("SUBAGENT"));
    assert!(text.contains("subagent-7f3a · ▶ read_file · 12s · pid 4242 · src/lexer.rs"));
    assert_bar_is_accented(&terminal, 1);
    snapshot("running_subagent_140x30", &terminal);
}

#[test]
fn running_subagent_bar_wraps_at_50_columns() {
    let mut store = running_subagent_store((50, 30));
    store.apply(
        &subagent(
            "ripgrep",
            75_000,
            "searching for fn lex_number across src and tests",
        ),
        std::time::Instant::now(),
    );
    let terminal = render(&store);
    let rows = rows(terminal.backend().buffer());
    assert!(rows[1].contains("SUBAGENT") && rows[1].contains("subagent-7f3a"));
    assert!(rows[1].contains("ripgrep"), "{}", rows[1]);
    assert!(rows[2].contains("searching for"), "{}", rows[2]);
    assert_bar_is_accented(&terminal, 1);
    assert_bar_is_accented(&terminal, 2);
    snapshot("running_subagent_50x30", &terminal);
}

#[test]
fn failed_subagent_outcome_stays_until_the_next_prompt() {
    let mut store = running_subagent_store((90, 30));
    let now = std::time::Instant::now();
    for event in [
        subagent(
            "nested_delegation_rejected",
            20_000,
            "delegate called again",
        ),
        subagent("failed", 31_500, "provider error: 503 upstream unavailable"),
        tool_result("d1", "delegate", false, "failed: provider error"),
        EventKind::AssistantText {
            text: "The subagent failed; I will review the lexer myself.".into(),
        },
        turn_completed(2, TurnStatus::Completed),
    ] {
        store.apply(&event, now);
    }
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert!(text.contains("✗ failed · 31s"), "{text}");
    assert_bar_is_accented(&terminal, 1);
    snapshot("failed_subagent_90x30", &terminal);

    // The next prompt advances the parent turn: the bar goes away.
    store.begin_turn("go on");
    assert!(store.subagent.is_none());
    assert!(!screen_text(&render(&store)).contains("SUBAGENT"));
}

#[test]
fn nested_delegation_is_named_in_words() {
    let mut store = running_subagent_store((140, 30));
    store.apply(
        &subagent("nested_delegation_rejected", 3_000, ""),
        std::time::Instant::now(),
    );
    let text = screen_text(&render(&store));
    assert!(text.contains("! nested delegation rejected"), "{text}");
}

#[test]
fn transcript_with_tool_notifications_at_90_columns() {
    let mut store = store_with((90, 24), &[session()]);
    store.begin_turn("tidy the notes");
    let now = std::time::Instant::now();
    for event in [
        EventKind::TurnStarted { turn: 1 },
        tool_call("a", "read_file", "notes.txt"),
        tool_result("a", "read_file", true, "12 lines"),
        tool_call("b", "patch", "notes.txt"),
        tool_result("b", "patch", false, "the hunk does not apply at line 4"),
        EventKind::Retrying {
            attempt: 1,
            delay_ms: 1500,
            reason: "429 Too Many Requests".into(),
        },
        tool_call("c", "bash_exec", "cargo test"),
        EventKind::Error {
            message: "the provider closed the stream".into(),
        },
        turn_completed(1, TurnStatus::Interrupted),
    ] {
        store.apply(&event, now);
    }
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert!(text.contains("→ read_file notes.txt ✓"));
    assert!(text.contains("→ patch notes.txt ✗ the hunk does not apply at line 4"));
    assert!(text.contains("→ bash_exec cargo test …"));
    snapshot("transcript_tools_90x24", &terminal);
}

#[test]
fn a_tiny_terminal_says_it_is_too_small() {
    let store = running_subagent_store((20, 6));
    let terminal = render(&store);
    assert!(screen_text(&terminal).contains("too small"));
    snapshot("too_small_20x6", &terminal);
    // No size panics, with every widget populated.
    let mut store = running_subagent_store((0, 0));
    store
        .input
        .insert_str("a long prompt that does not fit anywhere at all");
    for width in 0..60 {
        for height in 0..16 {
            store.size = (width, height);
            render(&store);
        }
    }
}

#[test]
fn the_input_line_keeps_the_cursor_visible() {
    let mut store = store_with((40, 12), &[session()]);
    store
        .input
        .insert_str("0123456789 0123456789 0123456789 0123456789 end");
    let mut terminal = render(&store);
    let rows = rows(terminal.backend().buffer());
    assert!(rows[10].contains("end"), "{}", rows[10]);
    let cursor = terminal.get_cursor_position().unwrap();
    assert_eq!(cursor.y, 10);
    assert!(cursor.x < 40);
}

/// Every cell of the bar row has the accent background; the text is dark.
fn assert_bar_is_accented(terminal: &Terminal<TestBackend>, y: u16) {
    let buffer = terminal.backend().buffer();
    for x in 0..buffer.area.width {
        let cell = &buffer[(x, y)];
        let badge = cell.bg == SUBAGENT_TEXT && cell.fg == SUBAGENT_ACCENT;
        let bar = cell.bg == SUBAGENT_ACCENT && cell.fg == SUBAGENT_TEXT;
        assert!(
            badge || bar,
            "cell ({x}, {y}) is {:?} on {:?}",
            cell.fg,
            cell.bg
        );
    }
    // The badge is the only dark part, and the rest is the accent.
    let accent = (0..buffer.area.width)
        .filter(|&x| buffer[(x, y)].bg == SUBAGENT_ACCENT)
        .count();
    assert!(accent > usize::from(buffer.area.width) / 2);
    assert_eq!(SUBAGENT_ACCENT, Color::Rgb(0xa7, 0x8b, 0xfa));
}

#[test]
fn the_accent_is_used_only_by_the_subagent_bar() {
    let store = running_subagent_store((140, 30));
    let terminal = render(&store);
    let buffer = terminal.backend().buffer();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            let cell = &buffer[(x, y)];
            if cell.bg == SUBAGENT_ACCENT || cell.fg == SUBAGENT_ACCENT {
                assert_eq!(y, 1, "accent outside the bar at ({x}, {y})");
            }
        }
    }
}

#[test]
fn a_todo_flavour_plan_at_100_columns() {
    let envelope = serde_json::json!({"action": "list", "params": {"action": "list"}, "nextId": 5, "tasks": [
        {"id": 1, "subject": "Write the lexer", "status": "completed", "evidence": "cargo test lexer: 9 passed"},
        {"id": 2, "subject": "Test the parser", "status": "in_progress", "activeForm": "Testing the parser",
         "blockedBy": [1], "description": "cover precedence"},
        {"id": 3, "subject": "Old idea", "status": "deleted"},
        {"id": 4, "subject": "Benchmarks", "status": "deferred", "reason": "after the release"},
    ]});
    let mut store = store_with((100, 20), &[session()]);
    store.apply(
        &EventKind::PlanUpdated {
            flavour: crate::protocol::ipc::PlanFlavour::Todo,
            plan: envelope,
        },
        std::time::Instant::now(),
    );
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert_ids_shown(&text, &["#1", "#2", "#4"]);
    assert!(text.contains("(1 deleted not shown)"), "{text}");
    snapshot("todo_plan_100x20", &terminal);
}
