//! Whole frames at several sizes, snapshotted (each row quoted, so widths
//! are pinned), plus assertions on what snapshots cannot show: styles, and
//! that no plan item is ever dropped.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;

use super::*;
use crate::protocol::TurnStatus;
use crate::ui::frame;
use crate::ui::keys::handle_key;
use crate::ui::state::Store;
use crate::ui::widgets::{SUBAGENT_ACCENT, SUBAGENT_TEXT};

pub(super) fn snapshot(name: &str, terminal: &Terminal<TestBackend>) {
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, terminal.backend().to_string());
    });
}

/// A key, after the frame the actor draws before it.
fn press(store: &mut Store, code: crossterm::event::KeyCode) {
    prepare_frame(store);
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
    let areas = frame::layout_of(&store);
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
    assert!(text.contains("subagent-7f3a · ▶ read_file · 12s · 0 tok · pid 4242 · src/lexer.rs"));
    assert_bar_is_accented(&terminal, 1);
    snapshot("running_subagent_140x30", &terminal);
}

/// A subagent that keeps a plan of its own: its row counts the steps
/// done, also after its next lifecycle event; another agent's plan is not
/// its, and the session's plan panel is untouched.
#[test]
fn a_subagents_own_plan_counts_its_steps_on_its_row() {
    let mut store = running_subagent_store((140, 30));
    let panel_before = store.plan.clone();
    let state = |done: &str| -> crate::protocol::plan::PlanState {
        serde_json::from_value(serde_json::json!({
            "version": 2, "updatedAt": null, "reason": "r",
            "items": [
                {"id": "a", "title": "Read", "status": done, "details": null, "next_action": null, "evidence": ["read"]},
                {"id": "b", "title": "Scan", "status": "pending", "details": null, "next_action": "scan"},
                {"id": "c", "title": "Report", "status": "pending", "details": null, "next_action": "say"},
            ],
        }))
        .unwrap()
    };
    let own_plan = |agent: &str, done: &str| EventKind::SubagentPlan {
        agent_id: agent.into(),
        plan: crate::protocol::plan::PlanSnapshot::UpdatePlan(state(done)),
    };
    let now = std::time::Instant::now();
    assert!(store.apply(&own_plan("subagent-7f3a", "done"), now));
    assert!(!store.apply(&own_plan("subagent-other", "pending"), now));
    store.apply(&subagent("ripgrep", 14_000, "fn lex"), now);
    let text = screen_text(&render(&store));
    assert!(
        text.contains("subagent-7f3a · ▶ ripgrep · 14s · 0 tok · 1/3 steps · pid 4242"),
        "{text}"
    );
    assert_eq!(
        store.plan, panel_before,
        "the session's plan is the parent's"
    );
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
    assert!(store.subagents.is_empty());
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
fn a_tiny_terminal_keeps_the_transcript_the_input_and_the_status() {
    let store = running_subagent_store((20, 6));
    let terminal = render(&store);
    let rows = rows(terminal.backend().buffer());
    // No header or bar: the status line says what the turn waits for.
    assert!(rows[5].starts_with(" waiting for 1"), "{rows:?}");
    assert!(rows[4].starts_with("⋯ "), "{rows:?}");
    assert!(rows[3].starts_with("────"), "{rows:?}");
    snapshot("tiny_subagent_20x6", &terminal);
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
            plan: crate::plan::PlanSnapshot::Todo(serde_json::from_value(envelope).unwrap()),
        },
        std::time::Instant::now(),
    );
    let terminal = render(&store);
    let text = screen_text(&terminal);
    assert_ids_shown(&text, &["#1", "#2", "#4"]);
    assert!(text.contains("(1 deleted not shown)"), "{text}");
    snapshot("todo_plan_100x20", &terminal);
}

/// A turn with `n` subagents running (ids `subagent-0000000N`), the second
/// one working on plan item `i2`.
fn parallel_store(size: (u16, u16), n: usize) -> Store {
    let mut store = worked_store(size, three_items());
    store.begin_turn("review the lexer, the parser and the tests in parallel");
    let now = std::time::Instant::now();
    store.apply(&EventKind::TurnStarted { turn: 2 }, now);
    for i in 0..n {
        let id = format!("subagent-0000000{i}");
        let item = (i == 1).then_some("i2");
        store.apply(
            &subagent_as(
                &id,
                "reasoning",
                3_000 + i as u64 * 1_000,
                1_200 * i as u64,
                item,
            ),
            now,
        );
    }
    store
}

#[test]
fn three_subagents_get_a_row_each_and_the_focus_is_marked() {
    let mut store = parallel_store((140, 30), 3);
    let terminal = render(&store);
    let rows = rows(terminal.backend().buffer());
    for (y, id) in [
        (1, "subagent-00000000"),
        (2, "subagent-00000001"),
        (3, "subagent-00000002"),
    ] {
        assert!(
            rows[y].contains("SUBAGENT") && rows[y].contains(id),
            "{}",
            rows[y]
        );
        assert_bar_is_accented(&terminal, y as u16);
    }
    assert!(
        rows[1].contains("SUBAGENT ›subagent-00000000"),
        "{}",
        rows[1]
    );
    assert!(rows[2].contains("1.2k tok · plan: i2 · pid"), "{}", rows[2]);
    assert!(!rows[4].contains("SUBAGENT"), "{}", rows[4]);
    snapshot("three_subagents_140x30", &terminal);

    // Alt+Down moves the mark; it stops at the last row.
    let alt_down = crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Down,
        crossterm::event::KeyModifiers::ALT,
    );
    for _ in 0..3 {
        handle_key(&mut store, alt_down, std::time::Instant::now());
    }
    let rows = super::rows(render(&store).backend().buffer());
    assert!(
        rows[3].contains("SUBAGENT ›subagent-00000002"),
        "{}",
        rows[3]
    );
    assert!(!rows[1].contains('›'), "{}", rows[1]);
}

#[test]
fn past_four_subagents_the_bar_says_how_many_more() {
    let store = parallel_store((120, 30), 6);
    let terminal = render(&store);
    let rows = rows(terminal.backend().buffer());
    for row in &rows[1..=4] {
        assert!(row.contains("SUBAGENT"), "{row}");
    }
    assert!(rows[5].contains("+2 more"), "{}", rows[5]);
    assert!(!rows[6].contains("SUBAGENT"), "{}", rows[6]);
    snapshot("six_subagents_120x30", &terminal);
}

#[test]
fn the_focused_subagent_stays_on_screen_and_finished_ones_move_down() {
    let mut store = parallel_store((120, 30), 6);
    let now = std::time::Instant::now();
    store.subagent_focus = Some("subagent-00000005".into());
    let text = screen_text(&render(&store));
    assert!(text.contains("›subagent-00000005"), "{text}");
    // A finished subagent leaves the live rows at the top; the focus stays.
    store.apply(
        &subagent_as("subagent-00000000", "completed", 9_000, 900, None),
        now,
    );
    let text = screen_text(&render(&store));
    assert!(!text.contains("subagent-00000000"), "{text}");
    assert!(
        text.contains("›subagent-00000005") && text.contains("+2 more"),
        "{text}"
    );
    assert_eq!(store.subagent_focus.as_deref(), Some("subagent-00000005"));
    // The focused one ends: the first live one takes the focus.
    store.apply(
        &subagent_as("subagent-00000005", "cancelled", 9_000, 900, None),
        now,
    );
    assert_eq!(store.subagent_focus.as_deref(), Some("subagent-00000001"));
}

#[test]
fn many_subagents_on_a_short_terminal_leave_the_transcript_rows() {
    for height in 10..=16u16 {
        let store = parallel_store((60, height), 9);
        let areas = frame::layout_of(&store);
        let bar = areas.bar.expect("a bar");
        assert!(bar.height <= (height - 4) / 2, "{bar:?} at {height} rows");
        assert!(bar.bottom() <= areas.transcript.y, "{bar:?} {areas:?}");
        let text = screen_text(&render(&store));
        assert!(text.contains("›subagent-00000000"), "{text}");
    }
    // Hostile sizes: nothing panics.
    for (w, h) in [(0, 0), (1, 1), (40, 10), (200, 11), (41, 12)] {
        let mut store = parallel_store((w, h), 9);
        store.size = (w, h);
        render(&store);
    }
}
