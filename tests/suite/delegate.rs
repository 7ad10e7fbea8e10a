//! Delegation end to end: the real binary spawns real sandboxed subagent
//! processes, against the fake model server (parent and child requests
//! arrive at the same server, in order, because delegation is synchronous).

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::catalog::{advertised_fingerprint, child_catalogs};
use crate::common::process::{ProcessFilter, processes, send_signal, subagents_of, wait_in};
use crate::common::sse;
use crate::common::{
    FakeServer, Reply, assert_conversation_invariants, events_of, exec_cmd, parse_events, run_exec,
};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    dir
}

fn delegate_call(id: &str, args: Value) -> Reply {
    Reply::sse(sse::tool_call_turn(&[(id, "delegate", &args.to_string())]))
}

const FINAL_JSON: &str = r#"{"summary": "main prints hi", "findings": [{"file": "main.rs", "line": 2, "claim": "println!(\"hi\")", "confidence": "high"}], "recommended_next_steps": ["none"], "tests_to_run": ["cargo run"], "uncertainties": []}"#;

fn tool_message<'a>(request: &'a Value, call_id: &str) -> &'a Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {request:#}"))
}

fn tool_json(request: &Value, call_id: &str) -> Value {
    serde_json::from_str(tool_message(request, call_id)["content"].as_str().unwrap()).unwrap()
}

/// The pid of the subagent process of `parent`, waiting for it to appear.
fn subagent_pid(parent: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(child) = subagents_of(parent).into_iter().next() {
            return child.pid;
        }
        assert!(Instant::now() < deadline, "no subagent process appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn assert_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes(ProcessFilter::Pid(pid)).is_empty() {
        assert!(Instant::now() < deadline, "process {pid} is still alive");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn spawn_exec(ws: &std::path::Path, server: &FakeServer, env: &[(&str, &str)]) -> Child {
    exec_cmd(ws, server, "investigate", env).spawn().unwrap()
}

#[test]
fn a_delegated_investigation_returns_the_normalised_result() {
    delegated_investigation(&[], "update_plan");
}

#[test]
fn delegation_works_under_the_todo_flavour() {
    delegated_investigation(&[("FIDO_PLAN_TOOL", "todo")], "todo");
}

/// One delegation end to end with `env`, whose catalog advertises
/// `plan_tool`. The child process logs the fingerprint of the catalog it
/// built, and the test compares it with the tools the parent advertised.
fn delegated_investigation(env: &[(&str, &str)], plan_tool: &str) {
    let env: Vec<(&str, &str)> = env.iter().copied().chain([("RUST_LOG", "info")]).collect();
    let env = env.as_slice();
    let ws = workspace();
    // Project instructions land in the system message, which the child
    // shares byte for byte.
    std::fs::write(ws.path().join("AGENTS.md"), "Always cite file:line.\n").unwrap();
    let server = FakeServer::start(vec![
        delegate_call(
            "d1",
            json!({"task": "Find what main prints", "context": "parallel check", "scope": {"paths": ["main.rs"]}}),
        ),
        Reply::sse(sse::tool_call_turn(&[(
            "s1",
            "read_file",
            r#"{"path": "main.rs"}"#,
        )])),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn(
            "main prints hi, says the subagent; verified.",
        )),
    ]);
    let output = run_exec(ws.path(), &server, "what does main print?", env);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "stderr: {}", stderr(&output));
    let (parent, child): (Vec<_>, Vec<_>) = requests
        .iter()
        .cloned()
        .enumerate()
        .partition(|(i, _)| *i == 0 || *i == 3);
    let parent: Vec<_> = parent.into_iter().map(|(_, r)| r).collect();
    let child: Vec<_> = child.into_iter().map(|(_, r)| r).collect();
    assert_conversation_invariants(&parent);
    assert_conversation_invariants(&child);

    // The child process built the catalog the parent advertises, byte for
    // byte: the fingerprint it computed of its own is the parent's.
    let tools = requests[0].body()["tools"].to_string();
    assert!(tools.contains("\"delegate\""));
    assert!(tools.contains(&format!("\"name\":\"{plan_tool}\"")));
    assert_eq!(
        child_catalogs(&stderr(&output)),
        [advertised_fingerprint(requests[0].body())],
        "stderr: {}",
        stderr(&output)
    );

    // The child's first request: the parent's prefix unchanged, the
    // delegating call, the bootstrap result, then the instructions.
    let parent_first = requests[0].messages();
    let child_first = requests[1].messages();
    assert_eq!(
        &child_first[..parent_first.len()],
        parent_first,
        "prefix must be byte-identical"
    );
    assert_eq!(child_first[parent_first.len()]["tool_calls"][0]["id"], "d1");
    let bootstrap = tool_json(requests[1].body(), "d1");
    assert_eq!(bootstrap["type"], "subagent_bootstrap");
    assert_eq!(bootstrap["identity"]["role"], "subagent");
    assert_eq!(bootstrap["identity"]["parent_role"], "main");
    assert_eq!(bootstrap["context_mode"], "forked_parent_messages");
    assert_eq!(bootstrap["forked_message_count"], parent_first.len() + 1);
    assert_eq!(bootstrap["task"], "Find what main prints");
    let agent_id = bootstrap["identity"]["agent_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(agent_id.starts_with("subagent-"));
    let instructions = child_first.last().unwrap();
    assert_eq!(instructions["role"], "user");
    let text = instructions["content"].as_str().unwrap();
    for needle in [
        "Find what main prints",
        "parallel check",
        "main.rs",
        "read-only",
        "Inspect, do not implement",
        "\"findings\"",
    ] {
        assert!(text.contains(needle), "instructions miss {needle:?}");
    }
    assert_eq!(
        requests[0].messages()[0],
        child_first[0],
        "same system message"
    );
    let system = requests[0].messages()[0]["content"].as_str().unwrap();
    assert!(system.contains("Always cite file:line."), "{system}");
    assert!(
        requests
            .iter()
            .all(|r| r.messages()[0] == requests[0].messages()[0]),
        "messages[0] changed"
    );

    // The parent gets exactly one new message pair: its call and the result.
    let parent_next = requests[3].messages();
    assert_eq!(parent_next.len(), parent_first.len() + 2);
    let result = tool_json(requests[3].body(), "d1");
    assert_eq!(result["type"], "delegate_result");
    assert_eq!(result["identity"]["agent_id"], agent_id);
    assert_eq!(result["status"], "completed");
    assert_eq!(result["summary"], "main prints hi");
    assert_eq!(result["findings"][0]["line"], 2);
    assert_eq!(result["tests_to_run"], json!(["cargo run"]));
    assert_eq!(result["usage"]["requests"], 2);
    let serialized = serde_json::to_string(parent_next).unwrap();
    assert!(
        !serialized.contains("\"s1\""),
        "the child's private tool call leaked to the parent"
    );
    assert!(
        !serialized.contains("subagent instructions"),
        "the child's instructions leaked"
    );

    let events = parse_events(&output.stdout);
    let phases: Vec<&str> = events_of(&events, "subagent")
        .iter()
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases.first(), Some(&"starting"));
    assert!(
        phases.contains(&"reasoning") && phases.contains(&"read_file"),
        "{phases:?}"
    );
    assert_eq!(phases.last(), Some(&"completed"));
    // The activity bar's last word on the child: its one finding.
    let last = events_of(&events, "subagent").pop().unwrap().clone();
    assert_eq!(last["detail"], "1 finding", "{last}");
    let pid = events_of(&events, "subagent")
        .iter()
        .find_map(|e| e["pid"].as_u64())
        .unwrap() as u32;
    assert_gone(pid);
    let child_usage: Vec<_> = events_of(&events, "usage")
        .into_iter()
        .filter(|u| u["identity"] == agent_id.as_str())
        .collect();
    assert_eq!(child_usage.len(), 2);
    // The session's totals are every request's, the subagent's included:
    // the sum of the usage events is the turn's usage.
    let usage = events_of(&events, "usage");
    let sum = |field: &str| {
        usage
            .iter()
            .map(|u| u[field].as_u64().unwrap())
            .sum::<u64>()
    };
    let turn = &events_of(&events, "turn_completed")[0]["usage"];
    assert_eq!(turn["requests"], usage.len() as u64, "{turn}");
    assert_eq!(turn["requests"], 4);
    for field in ["prompt_tokens", "cached_tokens", "completion_tokens"] {
        assert_eq!(turn[field].as_u64().unwrap(), sum(field), "{field}");
    }
    // Sanitised: no message content in the subagent events.
    for event in events_of(&events, "subagent") {
        assert!(!event.to_string().contains("main prints hi"), "{event}");
    }
}

#[test]
fn the_subagent_is_read_only_and_cannot_delegate() {
    let ws = workspace();
    std::fs::create_dir(ws.path().join("empty")).unwrap();
    let before = std::fs::read(ws.path().join("main.rs")).unwrap();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "try everything"})),
        Reply::sse(sse::tool_call_turn(&[
            ("m1", "patch", r#"{"path": "main.rs", "content": "hacked"}"#),
            ("m2", "patch", r#"{"path": "new.rs", "content": "new"}"#),
            ("m3", "mkdir", r#"{"path": "made"}"#),
            ("m4", "rm", r#"{"path": "main.rs"}"#),
            ("m5", "rmdir", r#"{"path": "empty"}"#),
            ("m6", "bash_exec", r#"{"command": "touch pwned"}"#),
            ("m7", "ask_user", r#"{"question": "may I?"}"#),
            ("m8", "update_plan", r#"{"reason": "x", "items": []}"#),
            ("m9", "delegate", r#"{"task": "nested"}"#),
        ])),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        4,
        "the nested call made no provider request; stdout: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let child_second = requests[2].body();
    for id in ["m1", "m2", "m3", "m4", "m5", "m7"] {
        let result = tool_json(child_second, id);
        assert_eq!(result["status"], "failed", "{id}");
        assert_eq!(
            result["error"]["code"], "permission_denied",
            "{id}: {result}"
        );
    }
    // Its plan tool keeps a plan of its own (in its memory): the workspace
    // plan file is never made (checked below).
    let own_plan = tool_message(child_second, "m8")["content"]
        .as_str()
        .unwrap();
    assert!(own_plan.contains(r#""reason": "x""#), "{own_plan}");
    // The subagent's shell runs, inside its sandbox: the write is refused
    // by the sandbox, not by the guard.
    let shell = tool_message(child_second, "m6")["content"]
        .as_str()
        .unwrap();
    assert!(shell.contains("Permission denied"), "{shell}");
    let nested = tool_json(child_second, "m9");
    assert_eq!(nested["type"], "delegate_result");
    assert_eq!(nested["status"], "failed");
    assert_eq!(nested["error"]["code"], "nested_delegation_forbidden");
    assert_eq!(nested["summary"], "Nested delegation is not allowed.");
    assert_eq!(nested["identity"]["role"], "subagent");
    assert_eq!(
        nested["recommended_next_steps"],
        json!(["Continue the assigned task without calling delegate."])
    );
    // No side effect happened.
    assert_eq!(std::fs::read(ws.path().join("main.rs")).unwrap(), before);
    for path in ["new.rs", "made", "pwned", ".fido-plan.json"] {
        assert!(!ws.path().join(path).exists(), "{path} was created");
    }
    assert!(ws.path().join("empty").is_dir());
    let events = parse_events(&output.stdout);
    assert!(
        events_of(&events, "subagent")
            .iter()
            .any(|e| e["phase"] == "nested_delegation_rejected")
    );
}

#[test]
fn the_child_has_no_keys_and_no_new_privileges_and_times_out_cleanly() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "hang", "timeout_ms": 1500})),
        Reply::stall_forever(vec![]),
        Reply::sse(sse::text_turn("carrying on without it")),
    ]);
    let child = spawn_exec(
        ws.path(),
        &server,
        &[
            ("OPENAI_API_KEY", "sk-secret-openai"),
            ("FIDO_DELEGATE_GRACE_MS", "300"),
        ],
    );
    let parent = child.id();
    let pid = subagent_pid(parent);
    server.wait_for_requests(2, Duration::from_secs(20));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    for secret in [
        "test-key",
        "sk-secret-openai",
        "FIDO_API_KEY",
        "OPENAI_API_KEY",
    ] {
        assert!(
            !environ.contains(secret),
            "the child's environment holds {secret}"
        );
    }
    let cmdline = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap())
        .into_owned();
    assert!(!cmdline.contains("test-key"));
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");

    let output = wait_in(ws.path(), child, Duration::from_secs(30));
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_gone(pid);
    let requests = server.model_requests();
    let result = tool_json(requests[2].body(), "d1");
    assert_eq!(result["error"]["code"], "timeout", "{result}");
    assert!(result["status"] == "partial" || result["status"] == "failed");
    let events = parse_events(&output.stdout);
    assert_eq!(
        events_of(&events, "assistant_text").last().unwrap()["text"],
        "carrying on without it"
    );
}

#[test]
fn sigint_during_a_delegation_kills_the_subagent_and_exits_130() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "hang"})),
        Reply::stall_forever(vec![]),
    ]);
    let child = spawn_exec(ws.path(), &server, &[]);
    let parent = child.id();
    let pid = subagent_pid(parent);
    server.wait_for_requests(2, Duration::from_secs(20));
    send_signal(parent, libc::SIGINT);
    let output = wait_in(ws.path(), child, Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(130),
        "stderr: {}",
        stderr(&output)
    );
    assert_gone(pid);
}

#[test]
fn a_killed_subagent_is_reported_and_the_parent_goes_on() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "hang"})),
        Reply::stall_forever(vec![]),
        Reply::sse(sse::text_turn("the subagent crashed; I checked myself")),
    ]);
    let child = spawn_exec(ws.path(), &server, &[]);
    let pid = subagent_pid(child.id());
    server.wait_for_requests(2, Duration::from_secs(20));
    send_signal(pid, libc::SIGKILL);
    let output = wait_in(ws.path(), child, Duration::from_secs(30));
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    let result = tool_json(requests[2].body(), "d1");
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"]["code"], "subagent_crashed");
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("signal 9"),
        "{result}"
    );
    assert_gone(pid);
}

#[test]
fn killing_the_parent_leaves_no_subagent_behind() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "hang"})),
        Reply::stall_forever(vec![]),
    ]);
    let mut child = spawn_exec(ws.path(), &server, &[]);
    let pid = subagent_pid(child.id());
    server.wait_for_requests(2, Duration::from_secs(20));
    send_signal(child.id(), libc::SIGKILL);
    let _ = child.wait();
    assert_gone(pid);
}

#[test]
fn a_provider_failure_in_the_subagent_is_a_failed_result_and_the_parent_goes_on() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "look"})),
        Reply::error(401, r#"{"error":{"message":"key revoked"}}"#),
        Reply::sse(sse::text_turn("I will look myself.")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    let result = tool_json(requests[2].body(), "d1");
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"]["code"], "provider_error");
    assert!(
        result["error"]["message"].as_str().unwrap().contains("401"),
        "{result}"
    );
}

#[test]
fn prose_instead_of_json_is_a_partial_result() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call("d1", json!({"task": "look"})),
        Reply::sse(sse::text_turn(
            "I think main prints hi, see main.rs line 2.",
        )),
        Reply::sse(sse::text_turn("ok")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let result = tool_json(server.model_requests()[2].body(), "d1");
    assert_eq!(result["status"], "partial");
    assert_eq!(
        result["summary"],
        "I think main prints hi, see main.rs line 2."
    );
    assert!(result.get("error").is_none());
}

/// A `delegate` call whose `budget_tokens` cannot even pay for the fork
/// (a small model asked for 10) is refused as invalid arguments naming the
/// smallest budget that could work, and no subagent process is spawned: the
/// model server sees only the parent's two requests and no `subagent`
/// event is ever emitted.
#[test]
fn a_budget_below_the_forks_own_cost_is_refused_before_any_spawn() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        delegate_call(
            "d1",
            json!({"task": "Find what main prints", "budget_tokens": 10}),
        ),
        Reply::sse(sse::text_turn("I will look myself.")),
    ]);
    let output = run_exec(ws.path(), &server, "what does main print?", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "a child asked the model: {requests:#?}");
    let result = tool_json(requests[1].body(), "d1");
    assert_eq!(result["status"], "failed", "{result:#}");
    assert_eq!(result["error"]["code"], "invalid_arguments", "{result:#}");
    let message = result["error"]["message"].as_str().unwrap();
    assert!(message.contains("No subagent was started"), "{message}");
    let smallest: u64 = message
        .split("at least ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no smallest budget named: {message}"));
    // The fork is the parent's first request and more: its estimate (4
    // bytes a token) is at least the messages and tools that request sent.
    let first = requests[0].body();
    let sent = (first["messages"].to_string().len() + first["tools"].to_string().len()) / 4;
    assert!(
        smallest > sent as u64 / 2,
        "{smallest} vs {sent}: {message}"
    );
    let events = parse_events(&output.stdout);
    assert!(events_of(&events, "subagent").is_empty(), "a subagent ran");
}
