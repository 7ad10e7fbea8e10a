//! Keys in, actions out: the pure key handler on a store.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::*;
use crate::ui::keys::{Action, QUIT_WINDOW, handle_key};
use crate::ui::state::{Store, TurnState};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(store: &mut Store, text: &str, now: Instant) {
    for c in text.chars() {
        assert_eq!(handle_key(store, key(KeyCode::Char(c)), now), None);
    }
}

fn idle() -> Store {
    store_with((120, 30), &[session()])
}

fn busy() -> Store {
    let mut store = idle();
    store.begin_turn("work");
    store.apply(&EventKind::TurnStarted { turn: 1 }, Instant::now());
    store
}

#[test]
fn enter_submits_the_prompt_and_clears_the_line() {
    let mut store = idle();
    let now = Instant::now();
    type_text(&mut store, "  explain the parser  ", now);
    let action = handle_key(&mut store, key(KeyCode::Enter), now);
    assert_eq!(action, Some(Action::Submit("explain the parser".into())));
    assert!(store.input.is_empty());
    // An empty line submits nothing.
    assert_eq!(handle_key(&mut store, key(KeyCode::Enter), now), None);
}

#[test]
fn enter_while_a_turn_runs_queues_the_input_and_clears_the_line() {
    let mut store = busy();
    let now = Instant::now();
    type_text(&mut store, "next question", now);
    assert_eq!(handle_key(&mut store, key(KeyCode::Enter), now), None);
    assert!(store.input.is_empty());
    let queued: Vec<&String> = store.typeahead.iter().collect();
    assert_eq!(queued, ["next question"]);
}

#[test]
fn ctrl_c_interrupts_a_running_turn() {
    let mut store = busy();
    let now = Instant::now();
    assert_eq!(
        handle_key(&mut store, ctrl('c'), now),
        Some(Action::Interrupt)
    );
    assert_eq!(store.turn, TurnState::Interrupting);
    // Pressing it again while the turn winds down interrupts again; it never quits.
    assert_eq!(
        handle_key(&mut store, ctrl('c'), now),
        Some(Action::Interrupt)
    );
}

#[test]
fn ctrl_c_twice_when_idle_quits() {
    let mut store = idle();
    let t0 = Instant::now();
    assert_eq!(handle_key(&mut store, ctrl('c'), t0), None);
    assert!(
        store
            .notice
            .as_ref()
            .unwrap()
            .text
            .contains("again to quit")
    );
    let t1 = t0 + Duration::from_millis(400);
    assert_eq!(handle_key(&mut store, ctrl('c'), t1), Some(Action::Quit));
}

#[test]
fn ctrl_c_presses_too_far_apart_do_not_quit() {
    let mut store = idle();
    let t0 = Instant::now();
    assert_eq!(handle_key(&mut store, ctrl('c'), t0), None);
    let late = t0 + QUIT_WINDOW + Duration::from_millis(100);
    assert_eq!(handle_key(&mut store, ctrl('c'), late), None);
    // That press armed it again.
    let soon = late + Duration::from_millis(200);
    assert_eq!(handle_key(&mut store, ctrl('c'), soon), Some(Action::Quit));
}

#[test]
fn another_key_between_the_two_ctrl_c_disarms() {
    let mut store = idle();
    let t0 = Instant::now();
    handle_key(&mut store, ctrl('c'), t0);
    handle_key(&mut store, key(KeyCode::Char('x')), t0);
    assert_eq!(handle_key(&mut store, ctrl('c'), t0), None);
}

#[test]
fn ctrl_d_quits_only_on_an_empty_line() {
    let mut store = idle();
    let now = Instant::now();
    type_text(&mut store, "ab", now);
    handle_key(&mut store, key(KeyCode::Home), now);
    assert_eq!(handle_key(&mut store, ctrl('d'), now), None);
    assert_eq!(store.input.text(), "b");
    handle_key(&mut store, ctrl('d'), now);
    assert_eq!(handle_key(&mut store, ctrl('d'), now), Some(Action::Quit));
}

#[test]
fn local_commands_become_actions_without_a_turn() {
    let now = Instant::now();
    for (text, action) in [
        ("/plan", Action::ShowPlan),
        ("/plan clear", Action::ClearPlan),
        ("  /plan   clear ", Action::ClearPlan),
        ("/quit", Action::Quit),
    ] {
        let mut store = idle();
        type_text(&mut store, text, now);
        assert_eq!(
            handle_key(&mut store, key(KeyCode::Enter), now),
            Some(action)
        );
        assert!(store.input.is_empty());
        assert!(store.transcript.is_empty(), "a local command is no prompt");
    }
}

#[test]
fn plan_clear_waits_for_the_turn_and_unknown_commands_are_explained() {
    let now = Instant::now();
    let mut store = busy();
    type_text(&mut store, "/plan clear", now);
    assert_eq!(handle_key(&mut store, key(KeyCode::Enter), now), None);
    assert!(store.input.is_empty());
    let queued: Vec<&String> = store.typeahead.iter().collect();
    assert_eq!(queued, ["/plan clear"], "it runs when its turn comes");
    // /plan only reads, so it works during a turn.
    let mut store = busy();
    type_text(&mut store, "/plan", now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Enter), now),
        Some(Action::ShowPlan)
    );

    let mut store = idle();
    type_text(&mut store, "/bogus", now);
    assert_eq!(handle_key(&mut store, key(KeyCode::Enter), now), None);
    assert!(store.notice.as_ref().unwrap().text.contains("/plan clear"));
}

#[test]
fn esc_cancels_only_a_running_subagent() {
    let now = Instant::now();
    let mut store = busy();
    assert_eq!(handle_key(&mut store, key(KeyCode::Esc), now), None);
    store.apply(&subagent("reasoning", 1000, ""), now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Esc), now),
        Some(Action::CancelSubagent(Some("subagent-7f3a".into())))
    );
    store.apply(&subagent("completed", 2000, ""), now);
    assert_eq!(handle_key(&mut store, key(KeyCode::Esc), now), None);
}

#[test]
fn page_keys_scroll_the_transcript_within_its_content() {
    let now = Instant::now();
    let mut store = idle();
    for n in 0..100 {
        store.apply(
            &EventKind::AssistantText {
                text: format!("line {n}"),
            },
            now,
        );
    }
    prepare_frame(&mut store);
    handle_key(&mut store, key(KeyCode::PageUp), now);
    let page = store.transcript_scroll;
    assert!(page > 10, "{page}");
    for _ in 0..50 {
        handle_key(&mut store, key(KeyCode::PageUp), now);
    }
    let text = screen_text(&render(&store));
    assert!(text.contains("line 0"), "the top is reachable:\n{text}");
    for _ in 0..50 {
        handle_key(&mut store, key(KeyCode::PageDown), now);
    }
    assert_eq!(store.transcript_scroll, 0);
    // A new prompt follows the tail again.
    handle_key(&mut store, key(KeyCode::PageUp), now);
    store.begin_turn("again");
    assert_eq!(store.transcript_scroll, 0);
}

#[test]
fn f2_and_ctrl_p_toggle_the_plan_overlay() {
    let now = Instant::now();
    let mut store = idle();
    handle_key(&mut store, key(KeyCode::F(2)), now);
    assert!(store.plan_overlay);
    handle_key(&mut store, ctrl('p'), now);
    assert!(!store.plan_overlay);
}

#[test]
fn key_releases_are_ignored() {
    let mut store = idle();
    let mut release = key(KeyCode::Char('x'));
    release.kind = KeyEventKind::Release;
    assert_eq!(handle_key(&mut store, release, Instant::now()), None);
    assert!(store.input.is_empty());
}

#[test]
fn up_and_down_walk_through_the_lines_entered_this_session() {
    let now = Instant::now();
    let mut store = idle();
    for line in ["first prompt", "/plan", "second prompt"] {
        type_text(&mut store, line, now);
        assert!(handle_key(&mut store, key(KeyCode::Enter), now).is_some());
    }
    let up = |store: &mut Store| handle_key(store, key(KeyCode::Up), now);
    assert!(up(&mut store).is_none());
    assert_eq!(store.input.text(), "second prompt");
    up(&mut store);
    assert_eq!(store.input.text(), "/plan");
    up(&mut store);
    up(&mut store);
    assert_eq!(store.input.text(), "first prompt", "stops at the oldest");
    handle_key(&mut store, key(KeyCode::Down), now);
    assert_eq!(store.input.text(), "/plan");
    handle_key(&mut store, key(KeyCode::Down), now);
    handle_key(&mut store, key(KeyCode::Down), now);
    assert_eq!(store.input.text(), "", "past the newest the line is empty");
    // The same line twice in a row is remembered once.
    type_text(&mut store, "second prompt", now);
    handle_key(&mut store, key(KeyCode::Enter), now);
    assert_eq!(store.history.len(), 3);
}

fn alt(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::ALT)
}

/// A running turn with three live subagents `subagent-a`, `-b`, `-c`.
fn three_running() -> Store {
    let now = Instant::now();
    let mut store = busy();
    for id in ["subagent-a", "subagent-b", "subagent-c"] {
        store.apply(&subagent_as(id, "reasoning", 1000, 10, None), now);
    }
    store
}

#[test]
fn alt_down_then_esc_cancels_only_the_focused_subagent() {
    let now = Instant::now();
    let mut store = three_running();
    assert_eq!(store.subagent_focus.as_deref(), Some("subagent-a"));
    assert_eq!(handle_key(&mut store, alt(KeyCode::Down), now), None);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Esc), now),
        Some(Action::CancelSubagent(Some("subagent-b".into())))
    );
    assert!(store.turn.is_busy(), "the parent turn goes on");
    // Alt+Up goes back and stops at the top.
    handle_key(&mut store, alt(KeyCode::Up), now);
    handle_key(&mut store, alt(KeyCode::Up), now);
    assert_eq!(store.subagent_focus.as_deref(), Some("subagent-a"));
    // Once none runs, Esc means nothing again.
    for id in ["subagent-a", "subagent-b", "subagent-c"] {
        store.apply(&subagent_as(id, "completed", 2000, 10, None), now);
    }
    assert_eq!(store.subagent_focus, None);
    assert_eq!(handle_key(&mut store, key(KeyCode::Esc), now), None);
}

#[test]
fn esc_with_a_question_on_screen_still_dismisses_it() {
    let now = Instant::now();
    let mut store = three_running();
    store.ask("which file?");
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Esc), now),
        Some(Action::Answer(None))
    );
}

#[test]
fn slash_cancel_takes_an_id_its_short_form_or_all() {
    let now = Instant::now();
    let mut store = three_running();
    type_text(&mut store, "/cancel subagent-c", now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Enter), now),
        Some(Action::CancelSubagent(Some("subagent-c".into())))
    );
    type_text(&mut store, "/cancel b", now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Enter), now),
        Some(Action::CancelSubagent(Some("subagent-b".into())))
    );
    type_text(&mut store, "/cancel all", now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Enter), now),
        Some(Action::CancelSubagent(None))
    );
    type_text(&mut store, "/cancel subagent-zz", now);
    assert_eq!(handle_key(&mut store, key(KeyCode::Enter), now), None);
    let notice = store.notice.as_ref().unwrap();
    assert!(
        notice.warning && notice.text.contains("no running subagent subagent-zz"),
        "{notice:?}"
    );
    // Nothing running: /cancel all says so instead of asking the agent.
    let mut idle = idle();
    type_text(&mut idle, "/cancel all", now);
    assert_eq!(handle_key(&mut idle, key(KeyCode::Enter), now), None);
    assert!(
        idle.notice
            .as_ref()
            .unwrap()
            .text
            .contains("no subagent is running")
    );
}

/// `/agents` is an op whatever the bar holds: the session's list is the
/// engine's (its text is tested in `agent::ops::agents`, its showing in
/// `ui::tests::actor`).
#[test]
fn slash_agents_asks_the_engine_for_every_subagent_of_the_session() {
    let now = Instant::now();
    let mut store = three_running();
    store.apply(
        &subagent_as("subagent-b", "cancelled", 2_000, 40, None),
        now,
    );
    // The next prompt clears the bar, not the session's list.
    store.turn_replied(TurnStatus::Completed, None);
    store.begin_turn("next");
    assert!(store.subagents.is_empty());
    type_text(&mut store, "/agents", now);
    assert_eq!(
        handle_key(&mut store, key(KeyCode::Enter), now),
        Some(Action::Subagents)
    );
    let mut idle = idle();
    type_text(&mut idle, "/agents", now);
    assert_eq!(
        handle_key(&mut idle, key(KeyCode::Enter), now),
        Some(Action::Subagents)
    );
}
