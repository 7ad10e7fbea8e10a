//! Type-ahead: lines entered while a turn runs are queued, edited (Up),
//! dropped (Esc), released one per turn end, held after Ctrl+C; the
//! queued view snapshotted at 60×20 and 100×30.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::snapshots::snapshot;
use super::*;
use crate::protocol::TurnStatus;
use crate::ui::keys::{Action, handle_key, release_queued};
use crate::ui::state::Store;

/// The id the fake "actor" gives the running turn's prompt.
const TURN: u64 = 7;

fn press(store: &mut Store, code: KeyCode) -> Option<Action> {
    handle_key(
        store,
        KeyEvent::new(code, KeyModifiers::NONE),
        Instant::now(),
    )
}

/// Types `text` and presses Enter.
fn enter_line(store: &mut Store, text: &str) -> Option<Action> {
    for c in text.chars() {
        assert_eq!(press(store, KeyCode::Char(c)), None);
    }
    press(store, KeyCode::Enter)
}

fn queued(store: &Store) -> Vec<String> {
    store.typeahead.iter().cloned().collect()
}

/// What the actor does with a `Submit`: the turn starts and the queue
/// waits for its reply.
fn submitted(store: &mut Store, prompt: &str, id: u64) {
    store.begin_turn(prompt);
    store.typeahead.wait_for(id);
    store.apply(&EventKind::TurnStarted { turn: 1 }, Instant::now());
}

fn running() -> Store {
    let mut store = store_with((120, 30), &[session()]);
    submitted(&mut store, "work", TURN);
    store
}

/// The turn's end as the actor sees it: `turn_completed`, then the reply
/// to the prompt, which releases the queue.
fn turn_ends(store: &mut Store, status: TurnStatus) -> Option<Action> {
    store.apply(&turn_completed(1, status), Instant::now());
    close_turn(store, status)
}

/// The reply to the running prompt (after its `turn_completed`).
fn close_turn(store: &mut Store, status: TurnStatus) -> Option<Action> {
    store.turn_replied(status, None);
    assert!(
        store.typeahead.replied(TURN),
        "the queue waited for the turn"
    );
    release_queued(store)
}

#[test]
fn lines_entered_during_a_turn_are_queued_and_go_one_per_turn_end() {
    let mut store = running();
    assert_eq!(enter_line(&mut store, "markdown please"), None);
    assert!(
        store.input.is_empty(),
        "the prompt clears for the next line"
    );
    assert_eq!(enter_line(&mut store, "patch it"), None);
    assert_eq!(queued(&store), ["markdown please", "patch it"]);
    assert_eq!(
        turn_ends(&mut store, TurnStatus::Completed),
        Some(Action::Submit("markdown please".into()))
    );
    assert_eq!(queued(&store), ["patch it"], "the rest wait for their turn");
    submitted(&mut store, "markdown please", TURN);
    assert_eq!(
        turn_ends(&mut store, TurnStatus::Failed),
        Some(Action::Submit("patch it".into())),
        "a failed turn releases the next line too"
    );
    assert!(store.typeahead.is_empty());
    // Both lines went to the history as they were entered.
    assert_eq!(store.history, ["markdown please", "patch it"]);
}

#[test]
fn a_line_entered_after_turn_completed_but_before_the_reply_waits_for_the_reply() {
    let mut store = running();
    store.apply(&turn_completed(1, TurnStatus::Completed), Instant::now());
    assert!(!store.turn.is_busy(), "the answer is on screen");
    // The engine takes the next prompt only after its reply: queued.
    assert_eq!(enter_line(&mut store, "next one"), None);
    assert_eq!(queued(&store), ["next one"]);
    assert_eq!(
        close_turn(&mut store, TurnStatus::Completed),
        Some(Action::Submit("next one".into()))
    );
    assert!(store.typeahead.is_empty() && store.input.is_empty());
    // The next line typed is a line of its own.
    assert_eq!(
        enter_line(&mut store, "and more"),
        Some(Action::Submit("and more".into()))
    );
}

#[test]
fn a_reply_to_another_op_leaves_the_queue_waiting() {
    let mut store = running();
    enter_line(&mut store, "later");
    assert!(!store.typeahead.replied(TURN + 1));
    assert!(store.turn_open());
    assert_eq!(queued(&store), ["later"]);
}

#[test]
fn up_on_an_empty_prompt_takes_the_last_queued_line_back_and_enter_queues_it_again() {
    let mut store = running();
    enter_line(&mut store, "first");
    enter_line(&mut store, "secnd");
    assert_eq!(press(&mut store, KeyCode::Up), None);
    assert_eq!(store.input.text(), "secnd");
    assert_eq!(queued(&store), ["first"]);
    press(&mut store, KeyCode::Left);
    press(&mut store, KeyCode::Left);
    press(&mut store, KeyCode::Char('o'));
    assert_eq!(press(&mut store, KeyCode::Enter), None);
    assert_eq!(queued(&store), ["first", "second"]);
    // Taken back again, it is sent as it is once the turn is over.
    press(&mut store, KeyCode::Up);
    assert_eq!(
        turn_ends(&mut store, TurnStatus::Completed),
        Some(Action::Submit("first".into()))
    );
    submitted(&mut store, "first", TURN);
    assert_eq!(turn_ends(&mut store, TurnStatus::Completed), None);
    assert_eq!(
        press(&mut store, KeyCode::Enter),
        Some(Action::Submit("second".into()))
    );
    // With nothing queued, Up walks the history as before.
    press(&mut store, KeyCode::Up);
    assert_eq!(store.input.text(), "second");
}

#[test]
fn esc_on_an_empty_prompt_drops_the_last_queued_line_before_cancelling_a_subagent() {
    let mut store = running();
    store.apply(&subagent("reasoning", 1000, ""), Instant::now());
    enter_line(&mut store, "keep me");
    enter_line(&mut store, "drop me");
    assert_eq!(press(&mut store, KeyCode::Esc), None);
    assert_eq!(queued(&store), ["keep me"]);
    let notice = store.notice.as_ref().unwrap().text.clone();
    assert!(
        notice.contains("dropped") && notice.contains("drop me"),
        "{notice}"
    );
    // With a draft, Esc still cancels the focused subagent.
    press(&mut store, KeyCode::Char('x'));
    let cancel = Some(Action::CancelSubagent(Some("subagent-7f3a".into())));
    assert_eq!(press(&mut store, KeyCode::Esc), cancel);
    assert_eq!(queued(&store), ["keep me"]);
    press(&mut store, KeyCode::Backspace);
    assert_eq!(press(&mut store, KeyCode::Esc), None);
    assert!(store.typeahead.is_empty());
    assert_eq!(
        press(&mut store, KeyCode::Esc),
        cancel,
        "the queue is empty"
    );
}

#[test]
fn ctrl_c_keeps_the_queue_and_its_end_sends_nothing_until_enter() {
    let mut store = running();
    enter_line(&mut store, "one");
    enter_line(&mut store, "two");
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(
        handle_key(&mut store, ctrl_c, Instant::now()),
        Some(Action::Interrupt)
    );
    assert_eq!(turn_ends(&mut store, TurnStatus::Interrupted), None);
    assert_eq!(queued(&store), ["one", "two"], "the queue stays");
    let notice = store.notice.as_ref().unwrap().text.clone();
    assert!(
        notice.contains("2 queued: Enter sends the next"),
        "{notice}"
    );
    assert_eq!(
        press(&mut store, KeyCode::Enter),
        Some(Action::Submit("one".into()))
    );
    // The queue goes on by itself again from the next turn end.
    submitted(&mut store, "one", TURN);
    assert_eq!(
        turn_ends(&mut store, TurnStatus::Completed),
        Some(Action::Submit("two".into()))
    );
}

#[test]
fn commands_that_wait_for_the_turn_are_queued_and_the_others_run_at_once() {
    let mut store = running();
    assert_eq!(enter_line(&mut store, "/compact"), None);
    assert_eq!(enter_line(&mut store, "/status"), Some(Action::Status));
    assert_eq!(enter_line(&mut store, "then this"), None);
    assert_eq!(queued(&store), ["/compact", "then this"]);
    assert_eq!(
        turn_ends(&mut store, TurnStatus::Completed),
        Some(Action::Compact)
    );
    assert_eq!(queued(&store), ["then this"], "after /compact's answer");
}

#[test]
fn the_status_line_and_the_placeholder_say_what_enter_does() {
    let mut store = running();
    let text = screen_text(&render(&store));
    assert!(
        text.contains("Fido is working: Enter queues your message"),
        "{text}"
    );
    enter_line(&mut store, "one");
    enter_line(&mut store, "two");
    let text = screen_text(&render(&store));
    assert!(text.contains("· 2 queued"), "{text}");
    assert!(text.contains("↳ one") && text.contains("↳ two"), "{text}");
    store.typeahead.hold();
    turn_ends(&mut store, TurnStatus::Interrupted);
    store.notice = None;
    let text = screen_text(&render(&store));
    assert!(text.contains("idle · 2 queued"), "{text}");
    assert!(
        text.contains("Enter sends the next queued message"),
        "{text}"
    );
}

/// Five lines queued (one long, one of two lines) and a draft.
fn queued_store(size: (u16, u16)) -> Store {
    let mut store = store_with(size, &[session()]);
    submitted(&mut store, "rename the lexer module", TURN);
    store.apply(
        &EventKind::AssistantDelta {
            text: "Renaming `lexer` to `scanner` in three files…".into(),
        },
        Instant::now(),
    );
    for line in [
        "then run the tests",
        "and the benchmarks",
        "markdown please, with a table of every renamed item, the file it lives in and the line where it was renamed",
        "patch it",
    ] {
        enter_line(&mut store, line);
    }
    store.input.insert_str("one more\nthing");
    press(&mut store, KeyCode::Enter);
    store.input.insert_str("a draft");
    store
}

#[test]
fn the_queued_view_at_60_and_100_columns() {
    for (size, name) in [((60, 20), "queued_60x20"), ((100, 30), "queued_100x30")] {
        let store = queued_store(size);
        let terminal = render(&store);
        let rows = rows(terminal.backend().buffer());
        let input_row = rows.iter().position(|r| r.starts_with("⋯ a draft"));
        let input_row = input_row.unwrap_or_else(|| panic!("{}", rows.join("\n")));
        // The newest three above the draft, under the count of the others.
        assert!(rows[input_row - 4].contains("+2 more queued"), "{rows:#?}");
        assert!(rows[input_row - 3].contains("↳ markdown please"));
        assert!(
            rows[input_row - 3].trim_end().ends_with('…'),
            "cut to width"
        );
        assert!(rows[input_row - 2].contains("↳ patch it"));
        assert!(rows[input_row - 1].contains("↳ one more thing"));
        snapshot(name, &terminal);
    }
}

#[test]
fn a_tiny_terminal_keeps_the_draft_and_shows_the_newest_queued_line_if_it_can() {
    for (size, queue_shown) in [((20, 6), true), ((20, 2), false), ((1, 1), false)] {
        let store = queued_store(size);
        let mut terminal = render(&store);
        let rows = rows(terminal.backend().buffer());
        let cursor = terminal.get_cursor_position().unwrap();
        let cursor_row = &rows[usize::from(cursor.y)];
        if size.0 > 1 {
            assert!(cursor_row.starts_with("⋯ a draft"), "{rows:#?}");
        }
        let newest = rows.iter().any(|r| r.starts_with("↳ one more"));
        assert_eq!(newest, queue_shown, "{size:?}: {rows:#?}");
    }
}
