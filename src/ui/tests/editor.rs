//! The prompt editor and the transcript keys: new lines, moving in a
//! multi-line draft before the history, folded pastes, the new-output
//! marker, End, the mouse wheel and Ctrl+O.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;
use crate::ui::keys::{Action, handle_key, handle_paste, wheel};
use crate::ui::state::Direction;
use crate::ui::state::Store;

fn press(store: &mut Store, code: KeyCode, modifiers: KeyModifiers) -> Option<Action> {
    handle_key(store, KeyEvent::new(code, modifiers), Instant::now())
}

fn type_text(store: &mut Store, text: &str) {
    for c in text.chars() {
        press(store, KeyCode::Char(c), KeyModifiers::NONE);
    }
}

fn idle() -> Store {
    store_with((100, 30), &[session()])
}

#[test]
fn alt_enter_shift_enter_and_ctrl_j_make_new_lines_and_enter_sends() {
    let mut store = idle();
    type_text(&mut store, "one");
    press(&mut store, KeyCode::Enter, KeyModifiers::ALT);
    type_text(&mut store, "two");
    press(&mut store, KeyCode::Enter, KeyModifiers::SHIFT);
    type_text(&mut store, "three");
    press(&mut store, KeyCode::Char('j'), KeyModifiers::CONTROL);
    type_text(&mut store, "four");
    assert_eq!(store.input.text(), "one\ntwo\nthree\nfour");
    let sent = press(&mut store, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(sent, Some(Action::Submit("one\ntwo\nthree\nfour".into())));
    assert!(store.input.is_empty());
}

#[test]
fn up_and_down_move_inside_a_draft_before_walking_the_history() {
    let mut store = idle();
    store.history = vec!["older prompt".into()];
    type_text(&mut store, "a");
    press(&mut store, KeyCode::Enter, KeyModifiers::ALT);
    type_text(&mut store, "b");
    press(&mut store, KeyCode::Up, KeyModifiers::NONE);
    assert_eq!(
        store.input.text(),
        "a\nb",
        "first Up moves to the line above"
    );
    assert_eq!(store.input.cursor(), 1);
    press(&mut store, KeyCode::Up, KeyModifiers::NONE);
    assert_eq!(store.input.text(), "older prompt", "then the history");
}

#[test]
fn readline_keys_edit_the_draft() {
    let mut store = idle();
    type_text(&mut store, "alpha beta gamma");
    press(&mut store, KeyCode::Char('b'), KeyModifiers::ALT);
    press(&mut store, KeyCode::Left, KeyModifiers::CONTROL);
    press(&mut store, KeyCode::Char('k'), KeyModifiers::CONTROL);
    assert_eq!(store.input.text(), "alpha ");
    press(&mut store, KeyCode::Char('a'), KeyModifiers::CONTROL);
    press(&mut store, KeyCode::Char('f'), KeyModifiers::ALT);
    assert_eq!(store.input.cursor(), 5);
    press(&mut store, KeyCode::Char('e'), KeyModifiers::CONTROL);
    press(&mut store, KeyCode::Char('w'), KeyModifiers::CONTROL);
    assert_eq!(store.input.text(), "");
}

#[test]
fn a_large_paste_is_folded_and_sent_whole() {
    let mut store = idle();
    let big: String = (1..=40).map(|n| format!("line {n}\n")).collect();
    type_text(&mut store, "look: ");
    handle_paste(&mut store, &big);
    assert_eq!(store.input.text(), "look: [paste #1: 40 lines, 311 chars]");
    let text = screen_text(&render(&store));
    assert!(text.contains("[paste #1: 40 lines"), "{text}");
    assert!(!text.contains("line 17"), "{text}");
    let sent = press(&mut store, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(
        sent,
        Some(Action::Submit(format!("look: {}", big.trim_end())))
    );
    // A small paste keeps its newlines in the draft itself.
    handle_paste(&mut store, "x\r\ny");
    assert_eq!(store.input.text(), "x\ny");
}

#[test]
fn new_output_while_scrolled_up_is_marked_and_end_follows_again() {
    let now = Instant::now();
    let mut store = idle();
    store.begin_turn("write a lot");
    store.apply(&EventKind::TurnStarted { turn: 1 }, now);
    for n in 0..60 {
        store.apply(
            &EventKind::AssistantDelta {
                text: format!("para {n}\n\n"),
            },
            now,
        );
    }
    prepare_frame(&mut store);
    press(&mut store, KeyCode::PageUp, KeyModifiers::NONE);
    let scrolled = store.transcript_scroll;
    assert!(scrolled > 0);
    let before = screen_text(&render(&store));
    store.apply(
        &EventKind::AssistantDelta {
            text: "more text arrives\n\n".into(),
        },
        now,
    );
    prepare_frame(&mut store);
    assert!(
        store.transcript_scroll > scrolled,
        "the view stays where it was"
    );
    let after = screen_text(&render(&store));
    assert!(after.contains("↓ new output"), "{after}");
    let top = |text: &str| text.lines().nth(2).unwrap_or_default().to_string();
    assert_eq!(top(&before), top(&after), "the same lines are shown");
    press(&mut store, KeyCode::End, KeyModifiers::NONE);
    assert_eq!(store.transcript_scroll, 0);
    let followed = screen_text(&render(&store));
    assert!(followed.contains("more text arrives") && !followed.contains("new output"));
}

#[test]
fn the_wheel_scrolls_a_few_lines_and_ctrl_o_expands_tool_output() {
    let now = Instant::now();
    let mut store = idle();
    for n in 0..80 {
        store.apply(
            &EventKind::AssistantText {
                text: format!("line {n}"),
            },
            now,
        );
    }
    prepare_frame(&mut store);
    wheel(&mut store, Direction::Up);
    assert_eq!(store.transcript_scroll, crate::ui::keys::WHEEL_LINES);
    wheel(&mut store, Direction::Down);
    assert_eq!(store.transcript_scroll, 0);
    assert!(!store.expanded);
    press(&mut store, KeyCode::Char('o'), KeyModifiers::CONTROL);
    assert!(store.expanded);
}

#[test]
fn the_status_line_names_the_turn_state_and_its_elapsed_time() {
    let start = Instant::now();
    let mut store = idle();
    assert!(screen_text(&render(&store)).contains(" idle "));
    store.now = start;
    store.begin_turn("go");
    store.apply(&EventKind::TurnStarted { turn: 1 }, start);
    store.tick(start + std::time::Duration::from_secs(3));
    assert!(screen_text(&render(&store)).contains("thinking · 3s"));
    store.apply(&tool_call("b", "bash_exec", "make"), start);
    assert!(screen_text(&render(&store)).contains("running bash_exec"));
    store.apply(&tool_result("b", "bash_exec", true, "ok"), start);
    store.apply(&EventKind::AssistantDelta { text: "Hi".into() }, start);
    assert!(screen_text(&render(&store)).contains("streaming"));
    store.apply(&subagent("starting", 0, ""), start);
    assert!(screen_text(&render(&store)).contains("waiting for 1 subagent"));
}

#[test]
fn a_finished_stream_keeps_its_rendered_lines_and_matches_a_fresh_render() {
    let now = Instant::now();
    let mut store = idle();
    let mut screen = Screen::default();
    store.begin_turn("stream");
    let text = "## Title\n\nfirst paragraph\n\n- a\n- b\n\n```sh\necho hi\n```\n\nlast words";
    for piece in text.as_bytes().chunks(3) {
        store.apply(
            &EventKind::AssistantDelta {
                text: String::from_utf8_lossy(piece).into(),
            },
            now,
        );
        render_with(&mut screen, &store);
    }
    // The transcript rows (the status line says streaming, then not).
    let body = |screen: &mut Screen, store: &Store| {
        let text = screen_text(&render_with(screen, store));
        text.lines().take(26).collect::<Vec<_>>().join("\n")
    };
    let streamed = body(&mut screen, &store);
    store.apply(&EventKind::AssistantText { text: text.into() }, now);
    let adopted = body(&mut screen, &store);
    assert_eq!(streamed, adopted, "the message looks the same once done");
    assert!(adopted.contains("last words") && !adopted.contains("```"));
    assert_eq!(
        body(&mut Screen::default(), &store),
        adopted,
        "a fresh render agrees"
    );
}
