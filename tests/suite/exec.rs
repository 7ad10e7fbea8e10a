//! `fido exec` end to end: the real binary against the fake model server.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::compaction;
use crate::common::process::wait_in;
use crate::common::sse::{self, TokenUsage};
use crate::common::{
    FakeServer, History, Reply, assert_conversation_invariants,
    assert_conversation_invariants_with, events_of, exec_cmd, parse_events, run_exec,
};

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

use crate::common::process::pids_with as processes_with;
use crate::common::turns::tool_result;

fn assert_gone(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes with {marker:?} are still alive: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn two_turn_session_runs_a_tool_and_answers() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])),
        Reply::sse(sse::text_turn("The file lists three words.")),
    ]);
    let output = run_exec(ws.path(), &server, "What is in notes.txt?", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert_conversation_invariants(&requests);
    let first = requests[0].body();
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["stream"], true);
    assert_eq!(first["messages"][0]["role"], "system");
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "What is in notes.txt?"})
    );
    assert_eq!(requests[0].header("authorization"), Some("Bearer test-key"));
    let result = tool_result(requests[1].body(), "call_1");
    assert!(
        result.contains("alpha") && result.contains("gamma"),
        "{result}"
    );

    let events = parse_events(&output.stdout);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "session_started",
            "turn_started",
            "usage",
            "tool_call",
            "tool_result",
            "usage",
            "assistant_text",
            "turn_completed"
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e["ts"].as_str().is_some_and(|t| t.ends_with('Z')))
    );
    assert_eq!(events_of(&events, "tool_call")[0]["name"], "read_file");
    assert_eq!(events_of(&events, "tool_call")[0]["summary"], "notes.txt");
    assert_eq!(events_of(&events, "tool_result")[0]["ok"], true);
    assert_eq!(
        events_of(&events, "assistant_text")[0]["text"],
        "The file lists three words."
    );
    let usage = events_of(&events, "usage")[0];
    assert_eq!(usage["identity"], "main");
    assert_eq!(usage["prompt_tokens"], TokenUsage::DEFAULT.prompt);
    assert_eq!(usage["cached_tokens"], TokenUsage::DEFAULT.cached);
    assert_eq!(usage["completion_tokens"], TokenUsage::DEFAULT.completion);
    let done = events_of(&events, "turn_completed")[0];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["usage"]["requests"], 2);
    assert_eq!(
        done["usage"]["prompt_tokens"],
        2 * TokenUsage::DEFAULT.prompt
    );
    assert_eq!(
        done["usage"]["cached_tokens"],
        2 * TokenUsage::DEFAULT.cached
    );
}

#[test]
fn plain_mode_prints_only_the_answer_and_reads_the_prompt_from_stdin() {
    let ws = workspace();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("Hello from the model."))]);
    let mut cmd = crate::common::fido_cmd();
    cmd.args(["exec", "-C"])
        .arg(ws.path())
        .arg("-")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "m")
        .stdin(Stdio::piped());
    let output = crate::common::process::run_in(
        ws.path(),
        cmd,
        Some(b"Say hello\n"),
        Duration::from_secs(60),
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Hello from the model.\n"
    );
    let requests = server.model_requests();
    assert_eq!(requests[0].body()["messages"][1]["content"], "Say hello\n");
    // A loopback server needs no key, and none is sent.
    assert_eq!(requests[0].header("authorization"), None);
}

#[test]
fn request_bodies_are_deterministic_across_sessions() {
    let ws = workspace();
    let mut bodies = Vec::new();
    for _ in 0..2 {
        let server = FakeServer::start(vec![
            Reply::sse(sse::tool_call_turn(&[("c1", "list_files", "{}")])),
            Reply::sse(sse::text_turn("done")),
        ]);
        let output = run_exec(ws.path(), &server, "list", &[]);
        assert!(output.status.success(), "stderr: {}", stderr(&output));
        bodies.push(
            server
                .model_requests()
                .into_iter()
                .map(|r| r.raw_body)
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(bodies[0], bodies[1]);
}

#[test]
fn unauthorized_is_one_clear_error_without_retry() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::error(401, r#"{"error":{"message":"Incorrect API key provided"}}"#),
        Reply::sse(sse::text_turn("never reached")),
    ]);
    let output = run_exec(ws.path(), &server, "hi", &[("FIDO_RETRY_BASE_MS", "1")]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 1, "401 must not be retried");
    let err = stderr(&output);
    assert!(err.contains("rejected the credentials (HTTP 401)"), "{err}");
    assert!(err.contains("Incorrect API key"), "{err}");
    let events = parse_events(&output.stdout);
    assert_eq!(events_of(&events, "turn_completed")[0]["status"], "failed");
    assert_eq!(events_of(&events, "error").len(), 1);
}

#[test]
fn server_error_is_retried_then_succeeds() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::error(500, "upstream exploded"),
        Reply::error(503, "busy"),
        Reply::sse(sse::text_turn("recovered")),
    ]);
    let output = run_exec(ws.path(), &server, "hi", &[("FIDO_RETRY_BASE_MS", "1")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(server.model_requests().len(), 3);
    let events = parse_events(&output.stdout);
    let retries = events_of(&events, "retrying");
    assert_eq!(retries.len(), 2);
    assert!(retries[0]["reason"].as_str().unwrap().contains("HTTP 500"));
    assert_eq!(events_of(&events, "assistant_text")[0]["text"], "recovered");
    // The failed attempts left no trace in the conversation.
    assert_conversation_invariants(&server.model_requests());
}

#[test]
fn rate_limit_honours_retry_after() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::rate_limited(1),
        Reply::sse(sse::text_turn("after the wait")),
    ]);
    let started = Instant::now();
    let output = run_exec(ws.path(), &server, "hi", &[("FIDO_RETRY_BASE_MS", "1")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "Retry-After: 1 was not honoured ({:?})",
        started.elapsed()
    );
    let events = parse_events(&output.stdout);
    assert_eq!(events_of(&events, "retrying")[0]["delay_ms"], 1000);
}

#[test]
fn retries_are_bounded() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::error(502, "a"),
        Reply::error(502, "b"),
        Reply::error(502, "c"),
        Reply::sse(sse::text_turn("not reached")),
    ]);
    let output = run_exec(
        ws.path(),
        &server,
        "hi",
        &[("FIDO_RETRY_BASE_MS", "1"), ("FIDO_MAX_RETRIES", "2")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 3);
    assert!(
        stderr(&output).contains("gave up after 3 attempts"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_stalled_stream_times_out_instead_of_hanging() {
    let ws = workspace();
    let first = sse::text_turn("never finished");
    let server = FakeServer::start(vec![
        Reply::stall_forever(first[..1].to_vec()),
        Reply::stall_forever(first[..1].to_vec()),
    ]);
    // The server never finishes: any exit, with the idle timeout's message,
    // proves the timeout ended the wait.
    let output = run_exec(
        ws.path(),
        &server,
        "hi",
        &[
            ("FIDO_IDLE_TIMEOUT_MS", "300"),
            ("FIDO_MAX_RETRIES", "1"),
            ("FIDO_RETRY_BASE_MS", "1"),
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 2, "a stall is retried once");
    assert!(
        stderr(&output).contains("sent nothing for 0.3 s"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_dropped_connection_is_retried() {
    let ws = workspace();
    let full = sse::text_turn("complete answer");
    let server = FakeServer::start(vec![
        Reply::disconnect(full[..2].to_vec()),
        Reply::sse(full.clone()),
    ]);
    let output = run_exec(ws.path(), &server, "hi", &[("FIDO_RETRY_BASE_MS", "1")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let events = parse_events(&output.stdout);
    assert_eq!(
        events_of(&events, "assistant_text")[0]["text"],
        "complete answer"
    );
    assert_eq!(events_of(&events, "assistant_text").len(), 1);
}

#[test]
fn a_dropped_connection_without_retries_is_an_error() {
    let ws = workspace();
    let full = sse::text_turn("complete answer");
    let server = FakeServer::start(vec![Reply::disconnect(full[..2].to_vec())]);
    let output = run_exec(ws.path(), &server, "hi", &[("FIDO_MAX_RETRIES", "0")]);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("stream"), "{err}");
}

#[test]
fn malformed_sse_is_a_clear_error() {
    let ws = workspace();
    let server = FakeServer::start(vec![Reply::malformed_event()]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("malformed"), "{}", stderr(&output));
    assert_eq!(server.model_requests().len(), 1);
}

#[test]
fn utf8_split_across_network_chunks_arrives_whole() {
    let ws = workspace();
    let text = "héllo wörld — ✓ 🦀";
    let server = FakeServer::start(vec![Reply::sse_split(
        &sse::text_turn(text),
        1,
        Duration::from_millis(0),
    )]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let events = parse_events(&output.stdout);
    assert_eq!(events_of(&events, "assistant_text")[0]["text"], text);
}

#[test]
fn an_unreachable_provider_is_one_sentence() {
    let ws = workspace();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut cmd = crate::common::fido_cmd();
    cmd.args(["exec", "-C"])
        .arg(ws.path())
        .arg("hi")
        .env("FIDO_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .env("FIDO_MAX_RETRIES", "0");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.contains("cannot reach the model server"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_tool_calls_get_error_results_and_the_loop_goes_on() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("c1", "launch_rockets", "{}"),
            ("c2", "read_file", "{\"path\": \"notes.txt\""),
            ("c3", "read_file", "{}"),
            ("c4", "read_file", r#"{"path": "../../etc/passwd"}"#),
        ])),
        Reply::sse(sse::text_turn("I will do better.")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_conversation_invariants(&requests);
    let second = requests[1].body();
    let unknown = tool_result(second, "c1");
    assert!(
        unknown.starts_with("Error: unknown tool `launch_rockets`"),
        "{unknown}"
    );
    assert!(unknown.contains("read_file"), "{unknown}");
    let bad_json = tool_result(second, "c2");
    assert!(bad_json.contains("not valid JSON"), "{bad_json}");
    let missing = tool_result(second, "c3");
    assert!(
        missing.starts_with("Error:") && missing.contains("path"),
        "{missing}"
    );
    let outside = tool_result(second, "c4");
    assert!(
        outside.starts_with("Error:") && outside.contains("outside"),
        "{outside}"
    );
    let events = parse_events(&output.stdout);
    let oks: Vec<bool> = events_of(&events, "tool_result")
        .iter()
        .map(|e| e["ok"].as_bool().unwrap())
        .collect();
    assert_eq!(oks, [false, false, false, false]);
}

#[test]
fn huge_and_binary_files_are_handled() {
    let ws = workspace();
    let line = "x".repeat(99) + "\n";
    std::fs::write(ws.path().join("huge.txt"), line.repeat(200_000)).unwrap();
    std::fs::write(ws.path().join("blob.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("c1", "read_file", r#"{"path": "huge.txt"}"#),
            ("c2", "read_file", r#"{"path": "blob.bin"}"#),
        ])),
        Reply::sse(sse::text_turn("ok")),
    ]);
    let output = run_exec(ws.path(), &server, "read", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let model_requests = server.model_requests();
    let second = model_requests[1].body();
    let huge = tool_result(second, "c1");
    assert!(
        huge.len() <= 70 * 1024,
        "read_file returned {} bytes",
        huge.len()
    );
    assert!(
        huge.contains("offset"),
        "the cut must say how to go on: …{}",
        &huge[huge.len() - 300..]
    );
    let binary = tool_result(second, "c2");
    assert!(binary.contains("binary file (6 bytes)"), "{binary}");
    assert!(
        !binary.contains('\u{fffd}') && !binary.contains('\0'),
        "{binary}"
    );
}

#[test]
fn a_command_that_never_ends_is_killed_at_its_timeout() {
    let ws = workspace();
    let marker = "424242.5";
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "c1",
            "bash_exec",
            &json!({"command": format!("echo started; sleep {marker}"), "timeout_ms": 500})
                .to_string(),
        )])),
        Reply::sse(sse::text_turn("it hung")),
    ]);
    // The command sleeps for days: the run ending at all, with the
    // timeout's message, proves the timeout ended it.
    let output = run_exec(ws.path(), &server, "run it", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let result = tool_result(server.model_requests()[1].body(), "c1").to_string();
    assert!(result.contains("timed out"), "{result}");
    assert!(result.contains("started"), "{result}");
    assert_gone(marker);
}

#[test]
fn sigint_cancels_the_turn_kills_commands_and_exits_130() {
    let ws = workspace();
    let marker = "434343.5";
    let server = FakeServer::start(vec![Reply::sse(sse::tool_call_turn(&[(
        "c1",
        "bash_exec",
        &json!({"command": format!("sleep {marker}")}).to_string(),
    )]))]);
    let child = exec_cmd(ws.path(), &server, "run", &[]).spawn().unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    while processes_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    crate::common::process::send_signal(pid, libc::SIGINT);
    let output = wait_in(ws.path(), child, Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(130),
        "stderr: {}",
        stderr(&output)
    );
    assert_gone(marker);
    let events = parse_events(&output.stdout);
    assert_eq!(
        events_of(&events, "turn_completed")[0]["status"],
        "interrupted"
    );
    let result = events_of(&events, "tool_result");
    assert_eq!(result.len(), 1, "the started call still gets its result");
    assert_eq!(result[0]["ok"], false);
}

#[test]
fn sigterm_during_a_model_request_exits_130_at_once() {
    let ws = workspace();
    let server = FakeServer::start(vec![Reply::stall_forever(vec![])]);
    let child = exec_cmd(ws.path(), &server, "hi", &[]).spawn().unwrap();
    server.wait_for_requests(1, Duration::from_secs(20));
    // The answer never comes: an exit at all proves SIGTERM ended the wait.
    crate::common::process::send_signal(child.id(), libc::SIGTERM);
    let output = wait_in(ws.path(), child, Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(130),
        "stderr: {}",
        stderr(&output)
    );
}

#[test]
fn max_steps_ends_a_runaway_loop_with_a_clear_message() {
    let ws = workspace();
    let call = |id: &str| Reply::sse(sse::tool_call_turn(&[(id, "list_files", "{}")]));
    let server = FakeServer::start(vec![call("a"), call("b"), call("c"), call("d")]);
    let output = run_exec(ws.path(), &server, "loop", &[("FIDO_MAX_STEPS", "3")]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 3);
    assert!(stderr(&output).contains("max_steps"), "{}", stderr(&output));
    let events = parse_events(&output.stdout);
    assert_eq!(
        events_of(&events, "turn_completed")[0]["status"],
        "max_steps"
    );
    assert_eq!(events_of(&events, "tool_result").len(), 3);
}

#[test]
fn compaction_summarises_old_turns_and_keeps_the_system_message() {
    let ws = workspace();
    let big = compaction::write_big_file(ws.path());
    // The third reply answers the summary request.
    let server = FakeServer::start(compaction::read_big_then_small(
        "notes.txt",
        "SUMMARY: read big.txt, it is repetitive.",
    ));
    let output = run_exec(
        ws.path(),
        &server,
        "read things",
        &compaction::SMALL_CONTEXT,
    );
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    assert_conversation_invariants_with(&requests, History::Compacting);
    // The summary request shares the cached prefix: the whole conversation
    // plus one question.
    let summary_request = requests[2].messages();
    let before = requests[1].messages();
    assert_eq!(&summary_request[..before.len()], before);
    // It sends the same tools, but asks for text: a summary is no place
    // for a tool call.
    assert_eq!(requests[2].body()["tools"], requests[1].body()["tools"]);
    assert_eq!(requests[2].body()["tool_choice"], "none");
    assert_eq!(requests[1].body()["tool_choice"], "auto");
    assert!(
        summary_request.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("compaction")
    );
    let after = requests[3].messages();
    assert_eq!(after[0], before[0]);
    assert!(
        after[1]["content"]
            .as_str()
            .unwrap()
            .contains("SUMMARY: read big.txt")
    );
    assert!(
        !after.iter().any(|m| m["content"]
            .as_str()
            .is_some_and(|c| c.contains(&big[..300]))),
        "the big tool result should be gone"
    );
    let events = parse_events(&output.stdout);
    let compacted = events_of(&events, "compacted");
    assert_eq!(compacted.len(), 1);
    assert_eq!(compacted[0]["strategy"], "summarize");
}

#[test]
fn bad_configuration_is_one_sentence_naming_the_source() {
    let ws = workspace();
    let mut cmd = crate::common::fido_cmd();
    cmd.args(["exec", "-C"])
        .arg(ws.path())
        .arg("hi")
        .env("FIDO_MAX_STEPS", "lots");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("FIDO_MAX_STEPS") && err.contains("lots"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn no_key_for_a_hosted_api_is_one_sentence() {
    let ws = workspace();
    let mut cmd = crate::common::fido_cmd();
    cmd.args(["exec", "-C"]).arg(ws.path()).arg("hi");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(err.starts_with("fido: no API key"), "{err}");
}

#[test]
fn a_script_file_plays_its_turns_and_a_broken_one_is_one_sentence() {
    let ws = workspace();
    let script = ws.path().join("my.script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}, {"text": "Read it."}]}"#,
    )
    .unwrap();
    let run = |script: &Path| {
        let mut cmd = crate::common::fido_cmd();
        cmd.args(["exec", "-C"])
            .arg(ws.path())
            .arg("go")
            .env("FIDO_PROVIDER", "script")
            .env("FIDO_SCRIPT", script);
        crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60))
    };
    let output = run(&script);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "Read it.\n");

    std::fs::write(&script, r#"{"turns": [{"text": "a"},"#).unwrap();
    let output = run(&script);
    assert_eq!(output.status.code(), Some(1));
    let err = stderr(&output);
    assert!(
        err.contains("my.script.json") && err.contains("not valid JSON"),
        "{err}"
    );
}

#[test]
fn the_json_stream_leaves_out_the_live_display_events() {
    let ws = workspace();
    let command = json!({"command": "echo from-bash"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("b1", "bash_exec", &command)])),
        // Many small content deltas: the UI streams them, --json must not.
        Reply::sse(sse::text_turn("A streamed answer in many small pieces.")),
    ]);
    let output = run_exec(ws.path(), &server, "run it", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let events = parse_events(&output.stdout);
    let contract = [
        "session_started",
        "turn_started",
        "assistant_text",
        "tool_call",
        "tool_result",
        "plan_updated",
        "subagent",
        "usage",
        "compacted",
        "retrying",
        "turn_completed",
        "error",
    ];
    for event in &events {
        let kind = event["type"].as_str().unwrap_or_default();
        assert!(contract.contains(&kind), "not a --json event: {event}");
    }
    assert_eq!(events_of(&events, "assistant_text").len(), 1);
}
