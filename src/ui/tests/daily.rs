//! The transcript as a daily driver, snapshotted at 160×45, 100×30, 60×20
//! and 20×6: a streamed answer mid-stream, a rendered Markdown answer with
//! a code block (styles asserted on the buffer cells), a patch diff, a
//! multi-line draft, `/status`, and folded and expanded `bash_exec` output.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};

use super::*;
use crate::protocol::TurnStatus;
use crate::protocol::op::StatusInfo;
use crate::ui::state::{Entry, Store};
use crate::ui::{status_view, theme};

const SIZES: [(u16, u16); 4] = [(160, 45), (100, 30), (60, 20), (20, 6)];

fn snapshot(name: &str, terminal: &Terminal<TestBackend>) {
    let (w, h) = (
        terminal.backend().buffer().area.width,
        terminal.backend().buffer().area.height,
    );
    insta::with_settings!({
        snapshot_path => "../snapshots",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(format!("{name}_{w}x{h}"), terminal.backend().to_string());
    });
}

fn apply_all(store: &mut Store, events: Vec<EventKind>) {
    let now = std::time::Instant::now();
    for event in events {
        store.apply(&event, now);
    }
}

fn delta(text: &str) -> EventKind {
    EventKind::AssistantDelta { text: text.into() }
}

const ANSWER: &str = "## Summary\n\nThe parser had **two** bugs; both are fixed in `parse_expr`:\n\n1. precedence of `*` over `+`\n2. unary minus\n   - now binds tightest\n\n```rust\nfn parse_expr(p: &mut Parser) -> Expr {\n    // climb precedence\n    let lhs = p.unary();\n    p.binary(lhs, 0)\n}\n```\n\n| test | result |\n|------|-------:|\n| precedence | 4 passed |\n\nSee [the notes](https://example.org/notes) for more.";

fn turn(size: (u16, u16), prompt: &str) -> Store {
    let mut store = store_with(size, &[session()]);
    store.begin_turn(prompt);
    apply_all(&mut store, vec![EventKind::TurnStarted { turn: 1 }]);
    store
}

/// The cell showing the first char of `needle` (searching row by row).
fn cell_of<'a>(terminal: &'a Terminal<TestBackend>, needle: &str) -> &'a ratatui::buffer::Cell {
    let buffer = terminal.backend().buffer();
    let rows = rows(buffer);
    for (y, row) in rows.iter().enumerate() {
        if let Some(byte) = row.find(needle) {
            let x = row[..byte].chars().count();
            return &buffer[(x as u16, y as u16)];
        }
    }
    panic!("{needle:?} not on screen:\n{}", rows.join("\n"));
}

#[test]
fn a_streamed_answer_mid_stream() {
    for size in SIZES {
        let mut store = turn(size, "explain the parser fix");
        let half = &ANSWER[..ANSWER.find("```rust").unwrap() + 30];
        for piece in half.as_bytes().chunks(7) {
            apply_all(
                &mut store,
                vec![delta(std::str::from_utf8(piece).unwrap_or(""))],
            );
        }
        let terminal = render(&store);
        let text = screen_text(&terminal);
        if size.0 >= 40 {
            assert!(text.contains("streaming"), "{text}");
            assert!(!text.contains("```"), "{text}");
        }
        snapshot("streaming", &terminal);
    }
}

#[test]
fn deltas_become_one_entry_when_the_message_is_done() {
    let mut store = turn((100, 30), "hi");
    apply_all(
        &mut store,
        vec![delta("Hel"), delta("lo **wor"), delta("ld**")],
    );
    let text = screen_text(&render(&store));
    assert!(text.contains("Hello world"), "{text}");
    apply_all(
        &mut store,
        vec![
            EventKind::AssistantText {
                text: "Hello **world**".into(),
            },
            turn_completed(1, TurnStatus::Completed),
        ],
    );
    assert!(store.live.is_empty());
    assert_eq!(
        store.transcript.last(),
        Some(&Entry::Assistant("Hello **world**".into()))
    );
    let text = screen_text(&render(&store));
    assert_eq!(text.matches("Hello world").count(), 1, "{text}");
    // A retry drops what the abandoned attempt streamed.
    let mut store = turn((100, 30), "again");
    apply_all(
        &mut store,
        vec![
            delta("abandoned words"),
            EventKind::Retrying {
                attempt: 1,
                delay_ms: 500,
                reason: "stream broke".into(),
            },
        ],
    );
    assert!(!screen_text(&render(&store)).contains("abandoned words"));
}

#[test]
fn a_rendered_markdown_answer_with_a_code_block() {
    for size in SIZES {
        let mut store = turn(size, "explain the parser fix");
        apply_all(
            &mut store,
            vec![
                EventKind::AssistantText {
                    text: ANSWER.into(),
                },
                turn_completed(1, TurnStatus::Completed),
            ],
        );
        let terminal = render(&store);
        snapshot("markdown", &terminal);
        if size.0 < 100 {
            continue;
        }
        let text = screen_text(&terminal);
        assert!(
            !text.contains("**") && !text.contains("## ") && !text.contains("```"),
            "{text}"
        );
        let heading = cell_of(&terminal, "Summary");
        assert!(heading.modifier.contains(Modifier::BOLD));
        assert_eq!(heading.fg, Color::Cyan);
        assert!(cell_of(&terminal, "two").modifier.contains(Modifier::BOLD));
        assert!(!text.contains('`'), "no backticks shown:\n{text}");
        assert_eq!(
            cell_of(&terminal, "parse_expr:").fg,
            theme::inline_code().fg.unwrap()
        );
        let keyword = cell_of(&terminal, "fn parse_expr");
        assert_eq!(keyword.fg, theme::code_keyword().fg.unwrap());
        assert!(keyword.modifier.contains(Modifier::BOLD));
        assert_eq!(cell_of(&terminal, "// climb").fg, Color::DarkGray);
        assert!(
            cell_of(&terminal, "// climb")
                .modifier
                .contains(Modifier::ITALIC)
        );
        assert!(text.contains("(https://example.org/notes)"), "{text}");
        assert!(text.contains("precedence │ 4 passed"), "{text}");
    }
}

fn patched(size: (u16, u16)) -> Store {
    let mut store = turn(size, "rename the function");
    let args = serde_json::json!({
        "path": "src/parser.rs",
        "edits": [{
            "old_text": "fn parse(p: &mut Parser) -> Expr {\n    p.expr()\n}\n",
            "new_text": "fn parse_expr(p: &mut Parser) -> Expr {\n    let lhs = p.unary();\n    p.binary(lhs, 0)\n}\n"
        }]
    });
    apply_all(
        &mut store,
        vec![
            tool_call("p1", "patch", "src/parser.rs"),
            edited("p1", "src/parser.rs", &[12]),
            EventKind::ToolOutput {
                id: "p1".into(),
                name: "patch".into(),
                arguments: args.to_string(),
                content: String::new(),
            },
            turn_completed(1, TurnStatus::Completed),
        ],
    );
    store
}

#[test]
fn a_patch_shows_a_coloured_diff() {
    for size in SIZES {
        let store = patched(size);
        let terminal = render(&store);
        snapshot("patch_diff", &terminal);
        if size.0 < 60 {
            continue;
        }
        assert_eq!(cell_of(&terminal, "+fn parse_expr").fg, Color::Green);
        assert_eq!(cell_of(&terminal, "-fn parse(").fg, Color::Red);
        assert_eq!(cell_of(&terminal, "@@ -12,3 +12,4 @@").fg, Color::Cyan);
    }
}

#[test]
fn a_multi_line_draft() {
    for size in SIZES {
        let mut store = store_with(size, &[session()]);
        store
            .input
            .insert_str("first line of the prompt\nsecond line\nthird");
        store.input.up();
        let mut terminal = render(&store);
        if size.1 >= 20 {
            let rows = rows(terminal.backend().buffer());
            let input_top = usize::from(size.1) - 4;
            assert!(
                rows[input_top].contains("› first line"),
                "{}",
                rows.join("\n")
            );
            assert!(rows[input_top + 1].contains("second line"));
            let cursor = terminal.get_cursor_position().unwrap();
            assert_eq!(
                usize::from(cursor.y),
                input_top + 1,
                "the cursor is on the second line"
            );
        } else {
            // A small screen shows the draft's rows around the cursor.
            let rows = rows(terminal.backend().buffer());
            let cursor = terminal.get_cursor_position().unwrap();
            assert!(
                rows[usize::from(cursor.y)].contains("second line"),
                "{rows:?}"
            );
        }
        snapshot("multiline_draft", &terminal);
    }
}

#[test]
fn status_shows_the_model_the_settings_and_usage_per_identity() {
    for size in SIZES {
        let mut store = turn(size, "look around");
        let usage = |identity: &str, prompt, cached, completion| EventKind::Usage {
            identity: identity.into(),
            prompt_tokens: prompt,
            cached_tokens: cached,
            completion_tokens: completion,
        };
        apply_all(
            &mut store,
            vec![
                usage("main", 4000, 3000, 200),
                usage("subagent-7f3a", 2000, 1000, 100),
                turn_completed(1, TurnStatus::Completed),
            ],
        );
        let text = status_view::status(&store, &StatusInfo::default());
        assert!(text.contains("model           test-model"), "{text}");
        assert!(text.contains("approval policy not configured"), "{text}");
        assert!(
            text.contains("session usage   2 requests · 6.0k in (66% cached) · 300 out"),
            "{text}"
        );
        assert!(
            text.contains("subagent-7f3a 1 request · 2.0k in (50% cached) · 100 out"),
            "{text}"
        );
        store.push(Entry::Local(text));
        snapshot("status", &render(&store));
    }
}

fn bash_store(size: (u16, u16), expanded: bool) -> Store {
    let mut store = turn(size, "run the tests");
    let output: String = (1..=9)
        .map(|n| format!("test case_{n} ... ok\n"))
        .chain(["test result: FAILED. 8 passed; 1 failed".to_string()])
        .collect();
    let mut events = vec![tool_call("b1", "bash_exec", "cargo test")];
    events.extend(command_ran("b1", "cargo test", &output, 101));
    events.push(turn_completed(1, TurnStatus::Completed));
    apply_all(&mut store, events);
    if expanded {
        store.toggle_expanded();
    }
    store
}

#[test]
fn bash_output_folded_and_expanded() {
    for size in SIZES {
        let folded = render(&bash_store(size, false));
        let expanded = render(&bash_store(size, true));
        snapshot("bash_folded", &folded);
        snapshot("bash_expanded", &expanded);
        if size.0 < 60 {
            continue;
        }
        let (folded, expanded) = (screen_text(&folded), screen_text(&expanded));
        assert!(folded.contains("→ bash_exec cargo test"), "{folded}");
        assert!(folded.contains("exit code: 101"));
        assert!(folded.contains("test result: FAILED"));
        assert!(
            folded.contains("earlier lines · Ctrl+O expands"),
            "{folded}"
        );
        assert!(!folded.contains("case_1 "), "{folded}");
        assert!(
            expanded.contains("case_1 ") && expanded.contains("case_9 "),
            "{expanded}"
        );
    }
}

/// A command that prints `exit code: 0` and then exits 3, run by the real
/// tool and sent as the turn loop sends it: the transcript says 3, in red,
/// and the line it printed stays a line of its output.
#[tokio::test]
async fn a_command_printing_an_exit_line_shows_its_true_exit() {
    let dir = tempfile::tempdir().unwrap();
    let arguments = serde_json::json!({"command": "echo 'exit code: 0'; exit 3"});
    let env = crate::tools::testing::env(dir.path());
    let out =
        crate::tools::testing::call(&crate::tools::bash_exec::BashExec, &env, arguments.clone())
            .await;
    let call = crate::protocol::ToolCall {
        id: "b1".into(),
        name: "bash_exec".into(),
        arguments: arguments.to_string(),
    };
    let mut store = turn((100, 30), "check");
    let mut events = vec![tool_call("b1", "bash_exec", "./check")];
    events.extend(crate::agent::live::result_events(&call, &out));
    apply_all(&mut store, events);
    let terminal = render(&store);
    let text = screen_text(&terminal);
    // The exit line, then the output under `│`.
    assert!(text.contains("   exit code: 3"), "{text}");
    assert!(!text.contains("│ exit code: 3"), "{text}");
    assert_eq!(cell_of(&terminal, "exit code: 3").fg, Color::Red);
    assert!(text.contains("   │ exit code: 0"), "{text}");
    assert_eq!(text.matches("exit code").count(), 2, "{text}");
}

#[test]
fn no_color_keeps_the_styles_but_drops_every_colour() {
    let mut store = patched((100, 30));
    store.no_color = true;
    let terminal = render(&store);
    let buffer = terminal.backend().buffer();
    assert!(
        buffer
            .content
            .iter()
            .all(|c| c.fg == Color::Reset && c.bg == Color::Reset)
    );
    assert!(cell_of(&terminal, "Fido").modifier.contains(Modifier::BOLD));
}

#[test]
fn no_size_panics_with_every_kind_of_entry_on_screen() {
    let mut store = bash_store((0, 0), false);
    store.begin_turn("more");
    apply_all(
        &mut store,
        vec![
            EventKind::TurnStarted { turn: 2 },
            EventKind::AssistantText {
                text: ANSWER.into(),
            },
            tool_call("p1", "patch", "x"),
            tool_result("p1", "patch", true, "Edited x"),
            EventKind::ToolOutput {
                id: "p1".into(),
                name: "patch".into(),
                arguments: r#"{"path":"x","edits":[{"old_text":"a\nb","new_text":"日本\n👩‍👩‍👧"}]}"#
                    .into(),
                content: String::new(),
            },
            delta("| a | b |\n|---|---|\n| 1 | 2 |\n\n> quote\n\n```py\nx = '"),
        ],
    );
    store.push(Entry::Diff(crate::ui::diff::from_git(
        "@@ -1 +1 @@\n-a\n+b",
    )));
    store
        .input
        .insert_str("line one\nline two with e\u{301} and 日本語\nthree");
    for expanded in [false, true] {
        if store.expanded != expanded {
            store.toggle_expanded();
        }
        for width in 0..70 {
            for height in 0..18 {
                store.size = (width, height);
                prepare_frame(&mut store);
                render(&store);
            }
        }
    }
}
