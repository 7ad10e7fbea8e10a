//! The TUI as a daily driver, end to end in tmux against a slow-streaming
//! fake model server: text shows while the message is still streaming,
//! Markdown is rendered (bold without asterisks, in bold), a patch shows
//! coloured `+`/`-` lines, Alt+Enter makes a two-line prompt whose newline
//! reaches the model, and a multi-line bracketed paste is kept.
//! `/suspend NAME` bookmarks the session's journal and `/recall NAME`
//! sends the model the conversation of that bookmark.
//!
//! Styles are read with `capture-pane -e`, which keeps the SGR sequences
//! tmux would draw.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::tui::{Tmux, quoted};
use crate::common::process::fido_bin;
use crate::common::sse;
use crate::common::{FakeServer, Reply, assert_conversation_invariants};

/// Starts fido in a fresh tmux server against `server`, in `workspace`.
fn launch(server: &FakeServer, workspace: &Path) -> Tmux {
    let tmux = Tmux::for_model(&server.base_url(), &[]);
    tmux.type_line(&format!(
        "{} -C {}",
        quoted(Path::new(fido_bin())),
        quoted(workspace)
    ));
    tmux.wait_for("the UI", |s| {
        s.contains("No plan yet.") && s.contains("test-model")
    });
    tmux
}

/// The screen with its SGR escape sequences.
fn styled_screen(tmux: &Tmux) -> String {
    String::from_utf8_lossy(&tmux.run(&["capture-pane", "-p", "-e", "-t", "fido"]).stdout)
        .into_owned()
}

/// Quits fido and checks that nothing it started is left.
fn quit(tmux: &Tmux, workspace: &Path) {
    tmux.type_line("/quit");
    tmux.assert_fido_gone(workspace);
}

/// The text of the last user message of a recorded request.
fn last_user_text(request: &crate::common::server::RecordedRequest) -> String {
    request
        .messages()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn streamed_text_shows_before_the_message_is_complete_and_markdown_is_rendered() {
    let ws = tempfile::tempdir().unwrap();
    let words: String = (1..=30).map(|n| format!("word{n} ")).collect();
    let answer = format!("Streaming starts here with a **bold** claim. {words}THE-END");
    let server = FakeServer::start(vec![Reply::sse_with_delay(
        sse::text_turn(&answer),
        Duration::from_millis(60),
    )]);
    let tmux = launch(&server, ws.path());
    tmux.type_line("tell me something");
    let early = tmux.wait_for("the first streamed words", |s| {
        s.contains("Streaming starts")
    });
    assert!(
        !early.contains("THE-END"),
        "the whole message was already there:\n{early}"
    );
    assert!(
        early.contains("streaming"),
        "the status line says so:\n{early}"
    );
    let screen = tmux.wait_for("the end of the message", |s| {
        s.contains("THE-END") && s.contains("idle")
    });
    assert!(!screen.contains("**"), "no asterisks:\n{screen}");
    let styled = styled_screen(&tmux);
    let line = styled
        .lines()
        .find(|line| line.contains("bold"))
        .expect("the bold word is on screen");
    assert!(
        line.contains("\u{1b}[1mbold"),
        "bold is drawn bold: {line:?}"
    );
    quit(&tmux, ws.path());
    assert_conversation_invariants(&server.model_requests());
}

#[test]
fn a_patch_shows_its_removed_and_added_lines_in_colour() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let args =
        json!({"path": "notes.txt", "edits": [{"old_text": "beta\n", "new_text": "BETA\n"}]});
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("p1", "patch", &args.to_string())])),
        Reply::sse(sse::text_turn("Patched notes.txt.")),
    ]);
    let tmux = launch(&server, ws.path());
    tmux.type_line("capitalise beta");
    tmux.wait_for("the diff and the answer", |s| {
        s.contains("+BETA") && s.contains("-beta") && s.contains("Patched notes.txt.")
    });
    // The hunk is numbered with the file's own line: beta is line 2.
    assert!(tmux.screen().contains("@@ -2 +2 @@"), "{}", tmux.screen());
    let styled = styled_screen(&tmux);
    // tmux writes ANSI colour n as `38;5;n` (or `3n`).
    let coloured = |n: u8, text: &str| {
        styled.contains(&format!("\u{1b}[38;5;{n}m{text}"))
            || styled.contains(&format!("\u{1b}[3{n}m{text}"))
    };
    assert!(coloured(2, "+BETA"), "green +: {styled}");
    assert!(coloured(1, "-beta"), "red -: {styled}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
    quit(&tmux, ws.path());
}

#[test]
fn alt_enter_and_a_bracketed_paste_keep_their_newlines_up_to_the_request() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("Two lines received.")),
        Reply::sse(sse::text_turn("Paste received.")),
    ]);
    let tmux = launch(&server, ws.path());
    tmux.run(&["send-keys", "-t", "fido", "-l", "first line"]);
    tmux.keys(&["M-Enter"]);
    tmux.run(&["send-keys", "-t", "fido", "-l", "second line"]);
    tmux.wait_for("a two-line draft", |s| {
        s.lines().any(|l| l.starts_with("› first line"))
            && s.lines().any(|l| l.starts_with("  second line"))
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the first answer", |s| s.contains("Two lines received."));

    tmux.run(&["set-buffer", "-b", "fido-paste", "one\ntwo\nthree"]);
    tmux.run(&["paste-buffer", "-p", "-b", "fido-paste", "-t", "fido"]);
    tmux.wait_for("a three-line draft", |s| {
        s.lines().any(|l| l.starts_with("› one"))
            && s.lines().any(|l| l.starts_with("  two"))
            && s.lines().any(|l| l.starts_with("  three"))
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the second answer", |s| s.contains("Paste received."));
    quit(&tmux, ws.path());

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(last_user_text(&requests[0]), "first line\nsecond line");
    assert_eq!(last_user_text(&requests[1]), "one\ntwo\nthree");
    assert_conversation_invariants(&requests);
    // The prompts were saved for the next session, newlines included.
    let history = std::fs::read_to_string(ws.path().join(".fido-state/history.jsonl")).unwrap();
    let saved: Vec<Value> = history
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        saved,
        [
            json!("first line\nsecond line"),
            json!("one\ntwo\nthree"),
            json!("/quit")
        ]
    );
    // The next session gets them from its engine: Up walks back from the
    // newest, a multi-line prompt whole.
    let tmux = launch(&server, ws.path());
    tmux.keys(&["Up"]);
    tmux.wait_for("the newest line recalled", |s| {
        s.lines().any(|l| l.starts_with("› /quit"))
    });
    tmux.keys(&["Up"]);
    tmux.wait_for("the pasted prompt recalled", |s| {
        s.lines().any(|l| l.starts_with("› one")) && s.lines().any(|l| l.starts_with("  three"))
    });
    // Down past the newest is an empty line again.
    tmux.keys(&["Down", "Down"]);
    tmux.wait_for("an empty input line", |s| {
        !s.lines()
            .any(|l| l.starts_with("› one") || l.starts_with("› /quit"))
    });
    quit(&tmux, ws.path());
}

/// Shift+Enter as a terminal with the kitty keyboard protocol sends it
/// (`CSI 13;2u`, which Fido asks for at start), and Ctrl+J, which every
/// terminal sends as a line feed, both make new lines.
#[test]
fn shift_enter_in_the_kitty_protocol_and_ctrl_j_make_new_lines() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("Three lines."))]);
    let tmux = launch(&server, ws.path());
    tmux.run(&["send-keys", "-t", "fido", "-l", "one"]);
    // ESC [ 1 3 ; 2 u
    tmux.run(&[
        "send-keys",
        "-t",
        "fido",
        "-H",
        "1b",
        "5b",
        "31",
        "33",
        "3b",
        "32",
        "75",
    ]);
    tmux.run(&["send-keys", "-t", "fido", "-l", "two"]);
    tmux.keys(&["C-j"]);
    tmux.run(&["send-keys", "-t", "fido", "-l", "three"]);
    tmux.wait_for("a three-line draft", |s| {
        s.lines().any(|l| l.starts_with("› one"))
            && s.lines().any(|l| l.starts_with("  two"))
            && s.lines().any(|l| l.starts_with("  three"))
    });
    tmux.keys(&["Enter"]);
    tmux.wait_for("the answer", |s| s.contains("Three lines."));
    quit(&tmux, ws.path());
    let requests = server.model_requests();
    assert_eq!(last_user_text(&requests[0]), "one\ntwo\nthree");
    assert_conversation_invariants(&requests);
}

#[test]
fn suspend_bookmarks_the_journal_and_recall_brings_that_point_back_to_the_model() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("First answer ALPHA.")),
        Reply::sse(sse::text_turn("Second answer BETA.")),
        Reply::sse(sse::text_turn("Third answer GAMMA.")),
    ]);
    let tmux = launch(&server, ws.path());
    tmux.type_line("first question");
    tmux.wait_for("the first answer", |s| s.contains("First answer ALPHA."));
    tmux.type_line("/suspend checkpoint");
    tmux.wait_for("the bookmark", |s| s.contains("bookmarked as checkpoint"));
    tmux.type_line("second question");
    tmux.wait_for("the second answer", |s| s.contains("Second answer BETA."));
    tmux.type_line("/suspend checkpoint");
    tmux.wait_for("the refused duplicate", |s| {
        s.contains("already has a bookmark named checkpoint")
    });
    tmux.type_line("/recall checkpoint");
    tmux.wait_for("the recall", |s| {
        s.contains("from bookmark checkpoint of session")
    });
    tmux.type_line("third question");
    tmux.wait_for("the third answer", |s| s.contains("Third answer GAMMA."));
    tmux.type_line("/sessions");
    tmux.wait_for("the bookmark in the list", |s| {
        s.contains("bookmark checkpoint")
    });
    quit(&tmux, ws.path());

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    let sent = requests[2].body()["messages"].to_string();
    assert!(sent.contains("First answer ALPHA."), "{sent}");
    assert!(
        !sent.contains("second question") && !sent.contains("Second answer BETA."),
        "what came after the bookmark is gone: {sent}"
    );
    assert_eq!(last_user_text(&requests[2]), "third question");
    // One journal, with the bookmark in it: no copy of the conversation.
    let journals: Vec<_> = std::fs::read_dir(ws.path().join(".fido-state/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(journals.len(), 1, "{journals:?}");
    let journal = std::fs::read_to_string(&journals[0]).unwrap();
    assert_eq!(
        journal
            .matches(r#"{"type":"bookmark","name":"checkpoint","#)
            .count(),
        1,
        "{journal}"
    );
}

/// Every user message of a recorded request, in order.
fn user_texts(request: &crate::common::server::RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .map(String::from)
        .collect()
}

/// Type-ahead: a message entered while the answer streams is queued (the
/// prompt clears) and sent when the turn ends; one entered as the next
/// answer appears goes after it. Each reaches the model once, unchanged,
/// never glued to the next one.
#[test]
fn messages_entered_during_a_turn_are_queued_and_each_sent_once_unchanged() {
    let ws = tempfile::tempdir().unwrap();
    let words: String = (1..=30).map(|n| format!("word{n} ")).collect();
    let slow = |text: &str| Reply::sse_with_delay(sse::text_turn(text), Duration::from_millis(60));
    let server = FakeServer::start(vec![
        slow(&format!("Streaming starts here. {words}THE-END")),
        slow(&format!("Markdown it is. {words}SECOND-END")),
        Reply::sse(sse::text_turn("Patched as asked.")),
    ]);
    let tmux = launch(&server, ws.path());
    tmux.type_line("first question");
    tmux.wait_for("the first streamed words", |s| {
        s.contains("Streaming starts")
    });
    tmux.type_line("markdown please");
    let screen = tmux.wait_for("the queued message", |s| {
        s.contains("↳ markdown please") && s.contains("1 queued")
    });
    assert!(!screen.contains("THE-END"), "the turn was over:\n{screen}");
    assert!(
        screen.contains("Fido is working: Enter queues your message"),
        "the prompt cleared:\n{screen}"
    );
    // Entered as the second answer appears: the turn may still be closing.
    tmux.wait_for("the second answer", |s| s.contains("SECOND-END"));
    tmux.type_line("patch it");
    tmux.wait_for("the third answer", |s| {
        s.contains("Patched as asked.") && s.contains("idle") && !s.contains("queued")
    });
    quit(&tmux, ws.path());

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3, "one request per message");
    assert_eq!(user_texts(&requests[0]), ["first question"]);
    assert_eq!(
        user_texts(&requests[1]),
        ["first question", "markdown please"]
    );
    assert_eq!(
        user_texts(&requests[2]),
        ["first question", "markdown please", "patch it"]
    );
    assert_conversation_invariants(&requests);
}
