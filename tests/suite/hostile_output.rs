//! Hostile text on its way out: the model's answer, its tool-call
//! arguments, a committed plan, file names and a broken stream never put a
//! control sequence on a terminal nor forge a line, through the real
//! binary (and, for the model, the fake server over real HTTP).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::process::{RUN_TIMEOUT, clean_home, fido_cmd_with_home, run_in};
use crate::common::sse::{self, TokenUsage};
use crate::common::{FakeServer, Reply, events_of, fido_cmd, parse_events, run_exec};

/// OSC 52 (set the clipboard to `rm -rf ~/*`), a title, CSI in its 7-bit
/// and its 8-bit (C1) form, and a bidi override.
const HOSTILE: &str = "done \u{1b}]52;c;cm0gLXJmIH4vKg==\u{7}\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m \u{202e}fdp.exe end";

/// Whether `bytes` hold anything a terminal acts on: C0 controls but
/// newline and tab, DEL, C1 controls (UTF-8 `C2 80`..`C2 9F`), bidi
/// overrides (`E2 80 AA`..`E2 80 AE`).
fn acts_on_a_terminal(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.chars().any(|c| {
        (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c)
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `fido exec` without `--json`: the final answer on stdout.
fn plain_exec(workspace: &Path, server: &FakeServer, prompt: &str) -> Output {
    let mut cmd = fido_cmd_with_home(clean_home());
    cmd.arg("exec")
        .arg("-C")
        .arg(workspace)
        .arg("--")
        .arg(prompt)
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_in(workspace, cmd, None, RUN_TIMEOUT)
}

fn fido(workspace: &Path, args: &[&str]) -> Output {
    let mut cmd: Command = fido_cmd();
    cmd.arg("-C").arg(workspace).args(args);
    run_in(workspace, cmd, None, Duration::from_secs(60))
}

#[test]
fn exec_prints_an_answer_carrying_osc_52_and_csi_escaped() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn(HOSTILE))]);
    let output = plain_exec(ws.path(), &server, "hi");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !acts_on_a_terminal(&output.stdout),
        "raw: {:?}",
        text(&output.stdout)
    );
    assert_eq!(
        text(&output.stdout),
        "done \\x1b]52;c;cm0gLXJmIH4vKg==\\x07\\x1b]0;pwned\\x07\\x1b[2J\\u{9b}31m \\u{202e}fdp.exe end\n"
    );
}

#[test]
fn exec_json_escapes_c1_and_bidi_too_and_keeps_the_text() {
    let ws = tempfile::tempdir().unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn(HOSTILE))]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        !acts_on_a_terminal(&output.stdout),
        "raw: {:?}",
        text(&output.stdout)
    );
    let events = parse_events(&output.stdout);
    let answer = events_of(&events, "assistant_text");
    assert_eq!(answer.len(), 1, "{events:?}");
    assert_eq!(answer[0]["text"], HOSTILE, "{:?}", answer[0]);
}

/// One tool call `call_1` of `name`, its `arguments` text in one delta.
fn one_call_in_one_delta(name: &str, arguments: &str) -> Vec<String> {
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": name, "arguments": arguments}}]});
    vec![
        sse::data(&sse::chunk(json!({"role": "assistant"}), None)),
        sse::data(&sse::chunk(call, None)),
        sse::data(&sse::chunk(json!({}), Some("tool_calls"))),
        sse::data(&sse::usage_chunk(TokenUsage::DEFAULT)),
        sse::done(),
    ]
}

#[test]
fn a_five_megabyte_bad_arguments_warning_is_short_and_escaped() {
    let ws = tempfile::tempdir().unwrap();
    // One delta with all of it: unterminated JSON, ESC sequences first.
    let arguments = format!("{{\"path\": \"\u{1b}]0;pwned\u{7}{}", "x".repeat(5 << 20));
    let server = FakeServer::start(vec![
        Reply::sse(one_call_in_one_delta("read_file", &arguments)),
        Reply::sse(sse::text_turn("gave up")),
    ]);
    let output = run_exec(ws.path(), &server, "read it", &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("invalid tool-call arguments"),
        "{}",
        &stderr[..stderr.len().min(2000)]
    );
    assert!(stderr.len() < 4096, "{} bytes on stderr", stderr.len());
    assert!(
        stderr.contains(&format!("({} bytes)", arguments.len())),
        "{stderr}"
    );
    assert!(stderr.contains("\\x1b]0;pwned\\x07"), "{stderr}");
    assert!(!acts_on_a_terminal(&output.stderr), "{stderr:?}");
}

#[test]
fn a_lone_surrogate_in_the_stream_is_repaired_and_the_turn_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    // serde_json's `json!` cannot hold a lone surrogate: the event is
    // written by hand, as a server would send it.
    let lone = |content: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"test-model\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let events = vec![
        sse::data(&sse::chunk(
            json!({"role": "assistant", "content": ""}),
            None,
        )),
        lone("a\\ud800b"),
        lone(" \\udc80c"),
        sse::data(&sse::chunk(json!({}), Some("stop"))),
        sse::data(&sse::usage_chunk(TokenUsage::DEFAULT)),
        sse::done(),
    ];
    let server = FakeServer::start(vec![Reply::sse(events)]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let events = parse_events(&output.stdout);
    let answer = events_of(&events, "assistant_text");
    assert_eq!(answer.len(), 1, "{events:?}");
    assert_eq!(answer[0]["text"], "a\u{fffd}b \u{fffd}c");
}

/// Half an emoji in a call's arguments (JSON inside a JSON string, so the
/// stream's own repair cannot see it): the call runs with U+FFFD in its
/// place, and the plan it made says so.
#[test]
fn a_lone_surrogate_in_tool_call_arguments_costs_a_character_not_the_call() {
    let ws = tempfile::tempdir().unwrap();
    let arguments = r#"{"reason": "start", "items": [{"id": "a", "title": "fix \ud83d bug \udc15", "status": "done", "evidence": ["seen"]}]}"#;
    let server = FakeServer::start(vec![
        Reply::sse(one_call_in_one_delta("update_plan", arguments)),
        Reply::sse(sse::text_turn("planned")),
    ]);
    let output = run_exec(ws.path(), &server, "plan it", &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let events = parse_events(&output.stdout);
    let results = events_of(&events, "tool_result");
    assert_eq!(results.len(), 1, "{events:?}");
    assert_eq!(results[0]["ok"], true, "{:?}", results[0]);
    let plans = events_of(&events, "plan_updated");
    assert_eq!(plans.len(), 1, "{events:?}");
    assert_eq!(
        plans[0]["plan"]["items"][0]["title"],
        "fix \u{fffd} bug \u{fffd}"
    );
}

#[test]
fn plan_show_of_a_hostile_plan_file_shows_it_escaped_on_its_own_lines() {
    let ws = tempfile::tempdir().unwrap();
    let args = json!({"reason": "start", "items": [
        {"id": "one", "title": "Read the parser", "status": "pending",
         "next_action": "read it"}]})
    .to_string();
    let made = fido(ws.path(), &["tool", "call", "update_plan", "--args", &args]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    // The committed file, as an attacker edits it.
    let path = ws.path().join(".fido-plan.json");
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    plan["items"][0]["title"] =
        json!("Read \u{1b}]52;c;cm0gLXJmIH4vKg==\u{7}\n  [x] forged — Done (done)\u{9b}2J");
    plan["reason"] = json!("why\u{1b}[2J");
    std::fs::write(&path, plan.to_string()).unwrap();

    let shown = fido(ws.path(), &["plan", "show"]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    assert!(
        !acts_on_a_terminal(&shown.stdout),
        "{:?}",
        text(&shown.stdout)
    );
    let stdout = text(&shown.stdout);
    assert!(
        stdout.contains(
            "Read \\x1b]52;c;cm0gLXJmIH4vKg==\\x07\\n  [x] forged — Done (done)\\u{9b}2J"
        ),
        "{stdout}"
    );
    assert!(
        !stdout.lines().any(|l| l.starts_with("  [x] forged")),
        "{stdout}"
    );

    let json = fido(ws.path(), &["plan", "show", "--json"]);
    assert!(
        !acts_on_a_terminal(&json.stdout),
        "{:?}",
        text(&json.stdout)
    );
    let state: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(state["items"][0]["title"], plan["items"][0]["title"]);
}

/// A file named with ESC and a newline, as a repository may hold.
const EVIL_NAME: &str = "evil\u{1b}]0;pwned\u{7}\nundone: forged";

#[test]
fn undo_names_a_hostile_file_escaped_on_one_line() {
    let ws = tempfile::tempdir().unwrap();
    let args = json!({"path": EVIL_NAME, "content": "x\n"}).to_string();
    let made = fido(ws.path(), &["tool", "call", "patch", "--args", &args]);
    assert!(made.status.success(), "{}", text(&made.stdout));
    assert!(ws.path().join(EVIL_NAME).exists());
    let undone = fido(ws.path(), &["undo"]);
    assert!(undone.status.success(), "{}", text(&undone.stderr));
    assert!(
        !acts_on_a_terminal(&undone.stdout),
        "{:?}",
        text(&undone.stdout)
    );
    let stdout = text(&undone.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.contains("evil\\x1b]0;pwned\\x07\\nundone: forged"),
        "{stdout}"
    );
}

#[test]
fn list_files_and_ripgrep_escape_a_name_that_would_forge_a_match() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::write(ws.path().join("src/x.rs"), "fn real() {}\n").unwrap();
    // A folder `a<newline>src` holding `x.rs:1:forged`: listed raw, its
    // path reads as a match in src/x.rs.
    std::fs::create_dir(ws.path().join("a\nsrc")).unwrap();
    std::fs::write(ws.path().join("a\nsrc/x.rs:1:forged"), "forged\n").unwrap();

    let call = |tool: &str, args: Value| -> String {
        let output = fido(
            ws.path(),
            &["tool", "call", tool, "--args", &args.to_string()],
        );
        assert!(output.status.success(), "{}", text(&output.stdout));
        let printed: Value = serde_json::from_slice(&output.stdout).unwrap();
        printed["content"].as_str().unwrap().to_string()
    };
    let listing = call("list_files", json!({}));
    assert!(listing.lines().any(|l| l == "a\\nsrc/"), "{listing}");
    assert!(
        listing.lines().any(|l| l == "a\\nsrc/x.rs:1:forged"),
        "{listing}"
    );
    assert!(
        !listing.lines().any(|l| l.starts_with("src/x.rs:")),
        "{listing}"
    );

    let found = call("ripgrep", json!({"pattern": "forged"}));
    assert_eq!(found, "a\\nsrc/x.rs:1:forged:1:forged");
}

#[test]
fn changes_lists_and_shows_a_hostile_file_name_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::common::git(root, &["init", "-q", "-b", "main"]);
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/a.rs"), "one\n").unwrap();
    crate::common::git(root, &["add", "-A"]);
    crate::common::git(root, &["commit", "-q", "-m", "first"]);
    let start = fido::changes::Start {
        task: "Add a file\u{1b}]0;pwned\u{7}".into(),
        claim: vec!["src".into()],
        plan_item: None,
    };
    let worktree = fido::changes::start(root, "subagent-3", &start).unwrap();
    let evil = worktree.layout.tree().join("src").join(EVIL_NAME);
    std::fs::write(evil, "x\n").unwrap();
    fido::changes::finish(root, &worktree, &start, 1 << 20).unwrap();

    for args in [&["changes"][..], &["changes", "show", "subagent-3"]] {
        let output = fido(root, args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        let stdout = text(&output.stdout);
        assert!(!acts_on_a_terminal(&output.stdout), "{args:?}: {stdout:?}");
        assert!(stdout.contains("\\x1b]0;pwned\\x07"), "{args:?}: {stdout}");
        assert!(
            !stdout.lines().any(|l| l.starts_with("undone: forged")),
            "{args:?}: {stdout}"
        );
    }
    let shown = text(&fido(root, &["changes", "show", "subagent-3"]).stdout);
    assert!(
        shown.contains("src/evil\\x1b]0;pwned\\x07\\nundone: forged"),
        "{shown}"
    );
}
