//! What a weak local model does to an agent, played by the fake server:
//! loops, invalid tool-call arguments, context overflow, malformed-request
//! errors, a server that reports its window (llama.cpp `/props`), and tool
//! calls written into the text. Every test runs the real binary.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common::sse::{self, chunk, data};
use crate::common::{
    FakeServer, RecordedRequest, Reply, assert_conversation_invariants, events_of, parse_events,
    run_exec,
};

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    dir
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn read_call(id: &str, path: &str) -> Reply {
    let args = format!(r#"{{"path": "{path}"}}"#);
    Reply::sse(sse::tool_call_turn(&[(id, "read_file", &args)]))
}

/// The text of the last message a request carried (a note Fido added).
fn last_message_text(request: &RecordedRequest) -> String {
    let last = request.messages().last().cloned().unwrap_or_default();
    last["content"].as_str().unwrap_or_default().to_string()
}

/// One text answer per entry.
fn text_turns(texts: &[&str]) -> Vec<Reply> {
    texts
        .iter()
        .map(|t| Reply::sse(sse::text_turn(t)))
        .collect()
}

/// `times` identical reads of `path`, with the call ids c1, c2, ….
fn reads(path: &str, times: usize) -> Vec<Reply> {
    (1..=times)
        .map(|i| read_call(&format!("c{i}"), path))
        .collect()
}

/// The messages of the `error` events.
fn errors(events: &[Value]) -> Vec<&str> {
    events_of(events, "error")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect()
}

/// The tool result answering `id` in a recorded request.
fn tool_result(request: &RecordedRequest, id: &str) -> String {
    request
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {:#}", request.body()))
        .to_string()
}

/// Three files of about 1,500 estimated tokens each.
fn write_medium_files(dir: &Path) {
    for name in ["a.txt", "b.txt", "c.txt"] {
        let text = format!("{} {name}\n", "lorem ipsum dolor sit amet ".repeat(3)).repeat(70);
        std::fs::write(dir.join(name), text).unwrap();
    }
}

#[test]
fn a_model_repeating_one_call_is_warned_then_stopped_cleanly() {
    let ws = workspace();
    let replies = reads("notes.txt", 10);
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let requests = server.model_requests();
    assert!(requests.len() <= 5, "{} requests", requests.len());
    assert_eq!(requests.len(), 4);

    // The third identical call's result carries the note; earlier ones not.
    let third = tool_result(&requests[3], "c3");
    assert!(third.contains("alpha"), "{third}");
    assert!(
        third.contains("the result has not changed since the last identical call"),
        "{third}"
    );
    assert!(!tool_result(&requests[3], "c2").contains("[Fido:"));
    // The call worked, so the fourth request asked for text; this server
    // ignores that (as some do), and the fourth identical call stops.
    assert_eq!(requests[3].body()["tool_choice"], json!("none"));

    let events = parse_events(&output.stdout);
    let messages = errors(&events);
    assert!(
        messages.contains(&"stopped: the model repeated the same call to read_file 4 times"),
        "{messages:?}"
    );
    // Every started call got its result, the fourth (not run) included.
    let calls = events_of(&events, "tool_call").len();
    let results = events_of(&events, "tool_result");
    assert_eq!(calls, 4);
    assert_eq!(results.len(), 4);
    assert_eq!(results[3]["ok"], json!(false));
    let completed = events_of(&events, "turn_completed");
    assert_eq!(completed[0]["status"], json!("failed"));
}

/// The requests' `tool_choice`, in order.
fn tool_choices(requests: &[RecordedRequest]) -> Vec<Value> {
    requests
        .iter()
        .map(|r| r.body()["tool_choice"].clone())
        .collect()
}

#[test]
fn after_a_repeated_call_that_worked_the_model_is_asked_for_its_answer_in_text() {
    let ws = workspace();
    let mut replies = reads("notes.txt", 3);
    replies.push(Reply::sse(sse::text_turn(
        "notes.txt lists alpha, beta and gamma.",
    )));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("alpha, beta and gamma"),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let requests = server.model_requests();
    assert_eq!(
        tool_choices(&requests),
        [json!("auto"), json!("auto"), json!("auto"), json!("none")]
    );
    // The tools are still sent, byte for byte, so the cached prefix holds.
    assert_eq!(requests[3].body()["tools"], requests[0].body()["tools"]);
    let note = tool_result(&requests[3], "c3");
    assert!(note.contains("your next reply cannot call tools"), "{note}");
    assert_conversation_invariants(&requests);
}

/// What the 0.5B Qwen does on a real llama.cpp server that honours
/// `tool_choice: "none"`: it writes the same call as a fenced block.
#[test]
fn the_same_call_written_as_text_when_asked_for_text_is_the_repeat_that_stops() {
    let ws = workspace();
    let mut replies = reads("notes.txt", 3);
    let fenced =
        "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";
    replies.push(Reply::sse(sse::text_turn(fenced)));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(server.model_requests().len(), 4);
    let events = parse_events(&output.stdout);
    assert_eq!(
        errors(&events),
        ["stopped: the model repeated the same call to read_file 4 times"]
    );
    // Written, not run: three reads.
    assert_eq!(events_of(&events, "tool_result").len(), 3);
    assert_eq!(events_of(&events, "turn_completed")[0]["status"], "failed");
}

#[test]
fn a_repeated_call_that_keeps_failing_keeps_its_tools() {
    let ws = workspace();
    let mut replies = reads("missing.txt", 3);
    replies.push(Reply::sse(sse::text_turn("there is no missing.txt")));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in missing.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(tool_choices(&requests), vec![json!("auto"); 4]);
    let note = tool_result(&requests[3], "c3");
    assert!(note.contains("try something different"), "{note}");
}

#[test]
fn invalid_arguments_are_replayed_as_valid_json() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "bad",
            "read_file",
            r#"{"path": "notes.txt", "offset"#,
        )])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(ws.path(), &server, "read notes.txt", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let assistant = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    for call in assistant["tool_calls"].as_array().unwrap() {
        let arguments = call["function"]["arguments"].as_str().unwrap();
        serde_json::from_str::<Value>(arguments)
            .unwrap_or_else(|e| panic!("replayed arguments {arguments:?} do not parse: {e}"));
    }
    let result = tool_result(&requests[1], "bad");
    assert!(result.contains("not valid JSON"), "{result}");
    assert_conversation_invariants(&requests);
}

#[test]
fn a_call_cut_off_at_the_output_limit_gets_its_error_and_a_clean_replay() {
    let ws = workspace();
    let mut cut = sse::tool_call_turn(&[("cut", "read_file", r#"{"path": "notes"#)]);
    let finish = cut.len() - 3;
    cut[finish] = data(&chunk(json!({}), Some("length")));
    let server = FakeServer::start(vec![Reply::sse(cut), Reply::sse(sse::text_turn("done"))]);
    let output = run_exec(ws.path(), &server, "read notes.txt", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    let result = tool_result(&requests[1], "cut");
    assert!(result.contains("cut off at the output limit"), "{result}");
    let replayed = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .map(|m| m["tool_calls"][0]["function"]["arguments"].clone());
    assert_eq!(replayed, Some(json!("{}")));
}

#[test]
fn a_context_overflow_is_compacted_and_retried_once() {
    let ws = workspace();
    write_medium_files(ws.path());
    let overflow = r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":4096}}"#;
    let server = FakeServer::start(vec![
        read_call("c1", "a.txt"),
        read_call("c2", "b.txt"),
        read_call("c3", "c.txt"),
        Reply::error(400, overflow),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(
        ws.path(),
        &server,
        "summarise the three files",
        &[("FIDO_MAX_RETRIES", "0")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("done"));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 5);
    let (refused, retried) = (&requests[3], &requests[4]);
    assert!(
        retried.raw_body.len() < refused.raw_body.len(),
        "the retried request ({} bytes) is not smaller than the refused one ({} bytes)",
        retried.raw_body.len(),
        refused.raw_body.len()
    );
    // The window named in the refusal now caps the output.
    let cap = retried.body()["max_tokens"].as_u64().unwrap();
    assert!(cap < 4096, "max_tokens {cap}");
    // The user's request survives compaction word for word.
    let text = retried.body().to_string();
    assert!(text.contains("summarise the three files"));
    let events = parse_events(&output.stdout);
    assert_eq!(events_of(&events, "compacted").len(), 1);
}

#[test]
fn a_malformed_request_500_is_tried_twice_then_named() {
    let ws = workspace();
    let body = r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] syntax error","type":"server_error"}}"#;
    let server = FakeServer::start(vec![
        Reply::error(500, body),
        Reply::error(500, body),
        Reply::error(500, body),
        Reply::sse(sse::text_turn("never")),
    ]);
    let output = run_exec(
        ws.path(),
        &server,
        "hi",
        &[("FIDO_RETRY_BASE_MS", "1"), ("FIDO_MAX_RETRIES", "4")],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(server.model_requests().len(), 2);
    let events = parse_events(&output.stdout);
    let error = events_of(&events, "error")
        .last()
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("Failed to parse tool call arguments")
            && error.contains("messages[].tool_calls[].function.arguments"),
        "{error}"
    );
}

/// Reads the three medium files, then answers; with `props`, the server
/// reports an 8k window at `GET /props`.
fn three_reads(props: bool) -> (FakeServer, Output) {
    let ws = workspace();
    write_medium_files(ws.path());
    let server = FakeServer::start(vec![
        read_call("c1", "a.txt"),
        read_call("c2", "b.txt"),
        read_call("c3", "c.txt"),
        Reply::sse(sse::text_turn("done")),
    ]);
    if props {
        server.route(
            "GET",
            "/props",
            r#"{"default_generation_settings":{"n_ctx":8192},"total_slots":1}"#,
        );
    }
    let output = run_exec(
        ws.path(),
        &server,
        "read a, b and c",
        &[("FIDO_COMPACT_STRATEGY", "elide"), ("RUST_LOG", "info")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    (server, output)
}

#[test]
fn the_threshold_follows_n_ctx_from_props() {
    let (server, output) = three_reads(true);
    let log = stderr(&output);
    assert!(log.contains("window=Some(8192)"), "{log}");
    let threshold: usize = log
        .split("threshold=")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no threshold in the log: {log}"));
    // 75% of the window, less what the tool specs take on every request.
    assert!(
        threshold < 6144 && threshold > 2000,
        "threshold {threshold}"
    );
    let events = parse_events(&output.stdout);
    assert!(!events_of(&events, "compacted").is_empty());
    let caps: Vec<u64> = server
        .model_requests()
        .iter()
        .map(|r| r.body()["max_tokens"].as_u64().unwrap())
        .collect();
    // Never more than the default, and less once the conversation leaves
    // less than that of the 8k window.
    assert!(caps.iter().all(|cap| *cap <= 4096), "{caps:?}");
    assert!(caps.iter().any(|cap| *cap < 4096), "{caps:?}");
    assert!(server.requests().iter().any(|r| r.path == "/props"));

    // The same session without /props: the default threshold, no compaction.
    let (server, output) = three_reads(false);
    let events = parse_events(&output.stdout);
    assert!(events_of(&events, "compacted").is_empty());
    assert!(
        server
            .model_requests()
            .iter()
            .all(|r| r.body()["max_tokens"] == json!(4096))
    );
}

#[test]
fn tool_calls_in_the_text_are_taken_only_when_opted_in() {
    let text = "I will read it.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";
    let script = || text_turns(&[text, "the file says alpha"]);
    let ws = workspace();
    let server = FakeServer::start(script());
    let output = run_exec(ws.path(), &server, "read notes.txt", &[]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(server.model_requests().len(), 1, "off by default");

    let server = FakeServer::start(script());
    let output = run_exec(
        ws.path(),
        &server,
        "read notes.txt",
        &[("FIDO_TOOL_CALL_FALLBACK", "true")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let assistant = requests[1]
        .messages()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(assistant["tool_calls"][0]["function"]["name"], "read_file");
    let id = assistant["tool_calls"][0]["id"].as_str().unwrap();
    assert!(tool_result(&requests[1], id).contains("alpha"));
    assert_conversation_invariants(&requests);
}

/// What Qwen2.5-Coder 0.5B wrote on llama.cpp: `delegate` as a bare
/// object, with an object where `context` takes a string.
#[test]
fn a_call_written_as_text_with_misfit_arguments_is_sent_back_not_answered() {
    let misfit = r#"{"name": "delegate", "arguments": {"task": "read notes.txt", "context": {"paths": ["notes.txt"]}}}"#;
    let script = || text_turns(&[misfit, "notes.txt lists alpha"]);
    let ws = workspace();
    let server = FakeServer::start(script());
    let fallback = [("FIDO_TOOL_CALL_FALLBACK", "true")];
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &fallback);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events = parse_events(&output.stdout);
    let texts: Vec<&Value> = events_of(&events, "assistant_text")
        .into_iter()
        .map(|e| &e["text"])
        .collect();
    assert_eq!(
        texts.last().unwrap().as_str(),
        Some("notes.txt lists alpha")
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let note = last_message_text(&requests[1]);
    assert!(
        note.contains("a call to delegate written as text")
            && note.contains("`context` must be of type string"),
        "{note}"
    );
    assert_conversation_invariants(&requests);

    // Off, the text is the answer, as a server that parsed no call meant.
    let server = FakeServer::start(script());
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(server.model_requests().len(), 1);
}

#[test]
fn the_same_call_written_as_text_twice_gets_two_ids() {
    let text = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn(text)),
        Reply::sse(sse::text_turn(text)),
        Reply::sse(sse::text_turn("the file says alpha")),
    ]);
    let output = run_exec(
        ws.path(),
        &server,
        "read notes.txt",
        &[("FIDO_TOOL_CALL_FALLBACK", "true")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    let ids: Vec<&str> = requests[2]
        .messages()
        .iter()
        .filter_map(|m| m["tool_calls"][0]["id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_conversation_invariants(&requests);
}

#[test]
fn an_answer_cut_off_at_the_limit_is_reported_and_finished() {
    let ws = workspace();
    let mut cut = sse::text_turn("The file holds alpha, beta and");
    let finish = cut.len() - 3;
    cut[finish] = data(&chunk(json!({}), Some("length")));
    let server = FakeServer::start(vec![Reply::sse(cut), Reply::sse(sse::text_turn("gamma."))]);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "a cut-off answer is not a complete one");
    let note = last_message_text(&requests[1]);
    assert!(note.contains("cut off at the output limit"), "{note}");
    let events = parse_events(&output.stdout);
    assert!(
        events_of(&events, "error").iter().any(|e| e["message"]
            .as_str()
            .unwrap()
            .contains("max_output_tokens 4096")),
        "{events:?}"
    );
}

/// The 0.5B model delegated the same task again and again: a repeated
/// delegation gets the note too, and the answer after it is asked in text.
#[test]
fn a_repeated_delegation_is_warned_like_any_call() {
    let ws = workspace();
    let report = r#"{"summary": "alpha beta gamma", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;
    let mut replies = Vec::new();
    for id in ["d1", "d2", "d3"] {
        replies.push(Reply::sse(sse::tool_call_turn(&[(
            id,
            "delegate",
            r#"{"task": "Say what notes.txt holds"}"#,
        )])));
        replies.push(Reply::sse(sse::text_turn(report)));
    }
    replies.push(Reply::sse(sse::text_turn("it holds alpha, beta and gamma")));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    let last = requests.last().unwrap();
    assert!(!tool_result(last, "d2").contains("[Fido:"));
    let third = tool_result(last, "d3");
    assert!(third.contains("alpha beta gamma"), "{third}");
    assert!(
        third.contains("this is call 3 in a row to delegate"),
        "{third}"
    );
    assert_eq!(last.body()["tool_choice"], json!("none"));
}

/// A subagent's loop guard is its own, and the parent hears it by name,
/// not as a provider failure.
#[test]
fn a_subagent_whose_model_loops_fails_as_model_loop() {
    let ws = workspace();
    let mut replies = vec![Reply::sse(sse::tool_call_turn(&[(
        "d1",
        "delegate",
        r#"{"task": "Say what notes.txt holds"}"#,
    )]))];
    replies.extend((1..=4).map(|n| read_call(&format!("s{n}"), "notes.txt")));
    replies.push(Reply::sse(sse::text_turn("the subagent looped")));
    let server = FakeServer::start(replies);
    let output = run_exec(ws.path(), &server, "what is in notes.txt?", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 6, "1 parent, 4 subagent, 1 parent");
    let result: Value = serde_json::from_str(&tool_result(&requests[5], "d1")).unwrap();
    assert_eq!(result["status"], "failed", "{result}");
    assert_eq!(result["error"]["code"], "model_loop", "{result}");
    assert_eq!(
        result["error"]["message"],
        "stopped: the model repeated the same call to read_file 4 times"
    );
}

#[test]
fn a_subagent_compacts_by_the_window_the_parent_learned() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "d1",
            "delegate",
            r#"{"task": "Read notes.txt and say what it holds"}"#,
        )])),
        read_call("s1", "notes.txt"),
        Reply::sse(sse::text_turn(
            r#"{"summary": "alpha beta gamma", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#,
        )),
        Reply::sse(sse::text_turn("it holds alpha, beta and gamma")),
    ]);
    server.route(
        "GET",
        "/props",
        r#"{"default_generation_settings":{"n_ctx":8192}}"#,
    );
    let output = run_exec(
        ws.path(),
        &server,
        "what is in notes.txt?",
        &[("RUST_LOG", "info")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let log = stderr(&output);
    let child_window = log
        .lines()
        .find(|l| l.contains("subagent stderr") && l.contains("context window"))
        .unwrap_or_else(|| panic!("no window line from the subagent: {log}"));
    assert!(child_window.contains("window=Some(8192)"), "{child_window}");
    // The parent asked the server once; the subagent did not ask again.
    let probes = server
        .requests()
        .iter()
        .filter(|r| r.path == "/props")
        .count();
    assert_eq!(probes, 1);
}

/// What the system prompt and the tools cost on every request, as the first
/// request carries them: about 2,300 tokens on Qwen2.5's tokenizer (before
/// browse_url joined the catalog), leaving
/// half of a 4k window for work. Bytes / 3.5 overestimates that tokenizer
/// (measured 3.8 bytes per token on this text; see src/agent/prompt.rs).
#[test]
fn the_prompt_and_the_tools_on_the_wire_fit_a_small_window() {
    let ws = workspace();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("ok"))]);
    let output = run_exec(ws.path(), &server, "hi", &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let request = &server.model_requests()[0];
    let system = request.messages()[0]["content"].as_str().unwrap();
    let tools = request.body()["tools"].to_string();
    assert_eq!(request.body()["tools"].as_array().map(Vec::len), Some(12));
    let tokens = (system.len() + tools.len()) * 10 / 35;
    assert!(
        // 2,500 until browse_url joined the catalog (about 120 tokens).
        tokens <= 2_650,
        "about {tokens} tokens: system prompt {} bytes, tools {} bytes",
        system.len(),
        tools.len()
    );
}
