//! A long session: the transcript's rendered lines stay within their
//! budget however long it gets, and past the byte cap the oldest entries
//! go with a line that says so.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;
use crate::ui::keys::handle_key;
use crate::ui::state::{Entry, Store};
use crate::ui::widgets::transcript::LINE_BUDGET;

/// One frame as the actor draws it, with the lines `screen` kept.
fn frame(screen: &mut Screen, store: &mut Store) -> String {
    let (width, height) = store.size;
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| screen.draw(frame, store)).unwrap();
    screen_text(&terminal)
}

/// An entry of ten lines, each naming its entry and line.
fn ten_lines(n: usize) -> Entry {
    let text: String = (0..10)
        .map(|line| format!("entry {n} line {line}\n"))
        .collect();
    Entry::Local(text)
}

#[test]
fn a_100k_line_transcript_holds_no_more_rendered_lines_than_its_budget() {
    let mut store = store_with((100, 30), &[session()]);
    let mut screen = Screen::default();
    for n in 0..10_000 {
        store.push(ten_lines(n));
        if n % 100 == 99 {
            let text = frame(&mut screen, &mut store);
            assert!(text.contains(&format!("entry {n} line 9")), "{text}");
            let held = screen.held_transcript_lines();
            assert!(held <= LINE_BUDGET, "{held} lines held after {n} entries");
        }
    }
    assert!(store.seen_lines >= 100_000, "{}", store.seen_lines);
    // Back at the top: the first entry is rendered again, within budget.
    store.transcript_scroll = usize::MAX / 2;
    let top = frame(&mut screen, &mut store);
    assert!(top.contains("entry 0 line 0"), "{top}");
    assert!(screen.held_transcript_lines() <= LINE_BUDGET);
    // Paging down from there shows the next lines, in order.
    let page = KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE);
    handle_key(&mut store, page, Instant::now());
    let next = frame(&mut screen, &mut store);
    assert!(next.contains("entry 2 line 9"), "{next}");
    assert!(!next.contains("entry 0 line 0"), "{next}");
}

#[test]
fn past_the_byte_cap_the_oldest_entries_go_and_the_top_says_so() {
    let mut store = store_with((100, 30), &[session()]);
    store.transcript.cap_bytes = 40_000;
    let mut screen = Screen::default();
    for n in 0..1_000 {
        store.push(ten_lines(n));
        if n % 50 == 0 {
            frame(&mut screen, &mut store);
        }
    }
    let dropped = store.transcript.dropped();
    assert!(
        dropped > 500 && store.transcript.bytes() <= 40_000,
        "{dropped}"
    );
    let bottom = frame(&mut screen, &mut store);
    assert!(bottom.contains("entry 999 line 9"), "{bottom}");
    store.transcript_scroll = usize::MAX / 2;
    let top = frame(&mut screen, &mut store);
    let note = format!("… {dropped} earlier entries not kept in memory; see the session");
    assert!(top.contains(&note), "{top}");
    assert!(top.contains(&format!("entry {dropped} line 0")), "{top}");
    assert!(
        !top.contains(&format!("entry {} line", dropped - 1)),
        "{top}"
    );
}

#[test]
fn a_scrolled_view_stays_still_while_old_entries_go_and_new_ones_come() {
    let mut store = store_with((100, 30), &[session()]);
    store.transcript.cap_bytes = 40_000;
    let mut screen = Screen::default();
    for n in 0..300 {
        store.push(ten_lines(n));
    }
    frame(&mut screen, &mut store);
    let page = KeyEvent::new(KeyCode::PageUp, KeyModifiers::NONE);
    handle_key(&mut store, page, Instant::now());
    let body = |text: &str| text.lines().skip(1).take(20).collect::<Vec<_>>().join("\n");
    let before = frame(&mut screen, &mut store);
    let dropped = store.transcript.dropped();
    for n in 300..340 {
        store.push(ten_lines(n));
    }
    assert!(store.transcript.dropped() > dropped, "entries went");
    let after = frame(&mut screen, &mut store);
    assert_eq!(body(&before), body(&after));
    assert!(after.contains("↓ new output"), "{after}");
}
