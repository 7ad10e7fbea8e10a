//! The approval prompt in the real TUI (tmux, the fake model server,
//! `approval_policy = "untrusted"`), tried as the hostile-input report
//! did: a command whose tail hid behind a newline or 300 spaces, typing
//! that answered a prompt appearing under it, and a long patch whose full
//! view did not open.

use std::time::Duration;

use serde_json::json;

use super::tui::{Tmux, start_fido};
use crate::common::sse;
use crate::common::{FakeServer, Reply};

fn untrusted(server: &FakeServer) -> Tmux {
    Tmux::for_model(
        &server.base_url(),
        &[("FIDO_APPROVAL_POLICY", "untrusted".into())],
    )
}

fn bash(id: &str, command: &str) -> Reply {
    let args = json!({ "command": command }).to_string();
    Reply::sse(sse::tool_call_turn(&[(id, "bash_exec", &args)]))
}

/// The content of the tool result for call `id` in the last request.
fn result_of(server: &FakeServer, id: &str) -> String {
    let requests = server.model_requests();
    let last = requests.last().expect("a request");
    last.messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id}"))
        .to_owned()
}

/// The prompt is ready: its keys show (they do only after the grace).
fn ready(screen: &str) -> bool {
    screen.contains("n deny (with a reason)")
}

/// The input line: the last row above the status line.
fn input_row(screen: &str) -> &str {
    let mut rows = screen.lines().rev().filter(|row| !row.trim().is_empty());
    rows.next();
    rows.next().unwrap_or_default().trim_end()
}

fn quit(tmux: &Tmux, ws: &std::path::Path, last: &str) {
    tmux.keys(&["C-c", "C-c"]);
    tmux.wait_for("the shell again", |s| !s.contains(last));
    tmux.assert_fido_gone(ws);
}

#[test]
fn a_command_hiding_its_tail_behind_a_newline_or_300_spaces_shows_it() {
    let ws = tempfile::tempdir().unwrap();
    let spaced = format!("echo a{}; echo b > tail-two.txt", " ".repeat(300));
    let server = FakeServer::start(vec![
        bash("c1", "echo one -- --reporter=dot\necho two > tail-one.txt"),
        bash("c2", &spaced),
        Reply::sse(sse::text_turn("Both asked.")),
    ]);
    let tmux = untrusted(&server);
    start_fido(&tmux, ws.path());
    tmux.type_line("run the tests");
    let screen = tmux.wait_for("the first prompt, ready", |s| {
        s.contains("Run this command?") && ready(s)
    });
    let rows: Vec<&str> = screen.lines().collect();
    let at = rows
        .iter()
        .position(|r| r.contains("$ echo one -- --reporter=dot⏎"))
        .unwrap_or_else(|| panic!("the first line, marked:\n{screen}"));
    assert!(
        rows[at + 1].contains("echo two > tail-one.txt"),
        "the second line on its own row:\n{screen}"
    );
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("the second prompt, ready", |s| {
        s.contains("·×300") && ready(s)
    });
    assert!(
        screen.contains("$ echo a·×300; echo b > tail-two.txt"),
        "{screen}"
    );
    tmux.keys(&["Escape"]);
    tmux.wait_for("the answer", |s| s.contains("Both asked."));
    assert!(!ws.path().join("tail-one.txt").exists());
    assert!(!ws.path().join("tail-two.txt").exists());
    quit(&tmux, ws.path(), "Both asked.");
}

#[test]
fn typing_and_more_while_the_prompt_appears_does_not_answer_it() {
    let ws = tempfile::tempdir().unwrap();
    // The call comes slowly, so the prompt appears in the middle of the
    // typing.
    let args = json!({ "command": "echo ran > ran.txt" }).to_string();
    let events = sse::tool_call_turn(&[("c1", "bash_exec", &args)]);
    let server = FakeServer::start(vec![
        Reply::sse_with_delay(events, Duration::from_millis(150)),
        Reply::sse(sse::text_turn("Not run, as you said.")),
    ]);
    let tmux = untrusted(&server);
    start_fido(&tmux, ws.path());
    tmux.type_line("run it");
    let typed = "and more ".repeat(4);
    let mut appeared_while_typing = false;
    for (i, c) in typed.chars().enumerate() {
        tmux.run(&["send-keys", "-t", "fido", "-l", &c.to_string()]);
        std::thread::sleep(Duration::from_millis(90));
        if i % 6 == 5 {
            let screen = tmux.screen();
            assert!(!ready(&screen), "ready while typing:\n{screen}");
            appeared_while_typing |= screen.contains("Run this command?");
        }
    }
    assert!(
        appeared_while_typing,
        "the prompt never appeared mid-typing"
    );
    let screen = tmux.wait_for("the prompt, ready after the typing", ready);
    let input = input_row(&screen);
    assert!(
        input.ends_with("and more and more and more and more"),
        "{screen}"
    );
    assert!(
        !screen.contains("Enter sends the denial"),
        "n was typing:\n{screen}"
    );
    assert!(
        !screen.contains("full view, rows"),
        "o was typing:\n{screen}"
    );
    assert!(!screen.contains("approved"), "{screen}");
    assert!(!ws.path().join("ran.txt").exists(), "the a approved it");
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("the answer", |s| s.contains("Not run, as you said."));
    let input = input_row(&screen);
    assert!(
        input.ends_with("and more and more and more and more"),
        "the draft stays:\n{screen}"
    );
    assert!(
        result_of(&server, "c1").contains("denied"),
        "{}",
        result_of(&server, "c1")
    );
    assert!(!ws.path().join("ran.txt").exists());
    quit(&tmux, ws.path(), "Not run, as you said.");
}

#[test]
fn o_opens_the_full_view_of_a_long_patch_and_y_waits_for_its_end() {
    let ws = tempfile::tempdir().unwrap();
    let old: String = (1..=60).map(|i| format!("old line {i}\n")).collect();
    let new: String = (1..=60).map(|i| format!("new line {i}\n")).collect();
    std::fs::write(ws.path().join("notes.txt"), &old).unwrap();
    let args = json!({"path": "notes.txt", "edits": [{"old_text": old, "new_text": new}]});
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "patch", &args.to_string())])),
        Reply::sse(sse::text_turn("Patched.")),
    ]);
    let tmux = untrusted(&server);
    start_fido(&tmux, ws.path());
    tmux.type_line("rewrite the notes");
    let screen = tmux.wait_for("the patch prompt, ready", |s| {
        s.contains("Make this change?") && ready(s)
    });
    assert!(screen.contains("more lines — o: full view"), "{screen}");
    assert!(!screen.contains("new line 60"), "{screen}");
    // y before the whole patch was on screen does nothing but say so.
    tmux.keys(&["y"]);
    tmux.wait_for("the refusal", |s| s.contains("o opens the full view"));
    tmux.keys(&["o"]);
    let screen = tmux.wait_for("the full view", |s| s.contains("full view, rows 1–"));
    assert!(
        screen.contains("End: read to the end before y/a"),
        "{screen}"
    );
    tmux.keys(&["End"]);
    tmux.wait_for("the end of the patch", |s| {
        s.contains("+new line 60") && s.contains("y approve once")
    });
    assert!(std::fs::read_to_string(ws.path().join("notes.txt")).unwrap() == old);
    tmux.keys(&["y"]);
    tmux.wait_for("the answer", |s| s.contains("Patched."));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        new
    );
    quit(&tmux, ws.path(), "Patched.");
}
