//! Fido's subagents in an editor: child sessions for a client that
//! advertises `subagents` (announced, their tool calls under their own
//! session id, cancelled alone), one live `delegate` tool call for any
//! other, and a write subagent's change set as diffs. Same harness as
//! `acp.rs`: the real `fido acp`, the fake model server, the TypeScript
//! SDK client.

use serde_json::{Value, json};

use super::acp::{events, message_text, node_modules, patch_call, response, run_client, updates};
use crate::common::turns::call;
use crate::common::{FakeServer, Reply, sse};

/// A turn that thinks `thought`, says `text`, then calls `name`.
fn said_then_called(thought: &str, text: &str, (id, name): (&str, &str), args: &Value) -> Reply {
    let mut events = vec![
        sse::data(&sse::chunk(
            json!({"role": "assistant", "reasoning_content": thought}),
            None,
        )),
        sse::data(&sse::chunk(json!({"content": text}), None)),
    ];
    events.extend(sse::tool_call_turn(&[(id, name, &args.to_string())]));
    Reply::sse(events)
}

/// A parent that delegates one task, whose subagent says what it does and
/// reads `main.rs`, then waits on the model for good (until it is
/// cancelled); the parent then answers. The stall answers only the request
/// that carries what the subagent read, so the parent's next request can
/// never get it.
fn delegating_server() -> FakeServer {
    let delegate = json!({"task": "Find what main does"}).to_string();
    let read = json!({"path": "main.rs"});
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        said_then_called(
            "Which file?",
            "Reading main.rs first.",
            ("s1", "read_file"),
            &read,
        ),
        Reply::sse(sse::text_turn("The subagent was cancelled; carrying on.")),
    ]);
    server.push_keyed(
        "fn main() { /* the subagent read this */ }",
        Reply::stall_forever(vec![]),
    );
    server
}

#[test]
fn a_subagent_is_a_child_session_whose_cancel_stops_it_alone() {
    let Some(modules) = node_modules("a_subagent_is_a_child_session") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("main.rs"),
        "fn main() { /* the subagent read this */ }\n",
    )
    .unwrap();
    let server = delegating_server();
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "args": ["-c", "delegate_grace_ms=300", "acp"],
            "subagents": "cancel",
            "steps": [{"do": "new"}, {"do": "prompt", "text": "what does main do?"}],
        }),
    );
    let parent = response(&report, "session/new")[0]["result"]["sessionId"].clone();
    // Announced on the parent's session, before anything of the child's.
    let announced: Vec<_> = events(&report, "update")
        .into_iter()
        .filter(|e| e["update"]["sessionUpdate"] == "subagent_update")
        .collect();
    let first = announced.first().expect("a subagent_update");
    assert_eq!(first["sessionId"], parent, "{report:#}");
    let child = first["update"]["sessionId"].as_str().unwrap().to_string();
    assert_ne!(json!(child), parent);
    assert_eq!(first["update"]["title"], "Find what main does");
    assert_eq!(first["update"]["state"]["state"], "running");
    assert!(first["update"]["capabilities"]["cancel"].is_object());
    // The child's tool call streams under the child's id, not the parent's.
    let child_updates: Vec<_> = events(&report, "update")
        .into_iter()
        .filter(|e| e["sessionId"] == child.as_str())
        .collect();
    let read = child_updates
        .iter()
        .find(|e| e["update"]["sessionUpdate"] == "tool_call")
        .unwrap_or_else(|| panic!("no tool call in the child session: {report:#}"));
    assert_eq!(read["update"]["title"], "read_file main.rs");
    // What the subagent's model said and thought, in its session only.
    let said: String = child_updates
        .iter()
        .filter(|e| e["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|e| e["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(said, "Reading main.rs first.", "{report:#}");
    assert!(
        child_updates
            .iter()
            .any(|e| e["update"]["sessionUpdate"] == "agent_thought_chunk"
                && e["update"]["content"]["text"] == "Which file?"),
        "{report:#}"
    );
    assert_eq!(read["update"]["kind"], "read");
    // It ended when the subagent asked the model again.
    let read_id = &read["update"]["toolCallId"];
    assert!(
        child_updates
            .iter()
            .any(|e| e["update"]["toolCallId"] == *read_id && e["update"]["status"] == "completed"),
        "{report:#}"
    );
    let shown = updates(&report, "tool_call")
        .into_iter()
        .filter(|u| u["title"] == "read_file main.rs")
        .count();
    assert_eq!(
        shown, 1,
        "the child's call is shown once, in its own session"
    );
    // The cancel on the child's id stopped the subagent alone: it went
    // idle as cancelled with its usage, and the parent's turn finished
    // with the partial result.
    assert_eq!(events(&report, "cancel_child_sent")[0]["sessionId"], child);
    let last = announced.last().unwrap();
    assert_eq!(last["update"]["state"]["state"], "idle", "{report:#}");
    assert_eq!(last["update"]["state"]["stopReason"], "cancelled");
    assert_eq!(
        last["update"]["state"]["_meta"]["fido"]["usage"]["requests"], 1,
        "the child's one answered request"
    );
    let prompt = response(&report, "session/prompt");
    assert_eq!(prompt[0]["result"]["stopReason"], "end_turn", "{report:#}");
    let parent_text: String = events(&report, "update")
        .into_iter()
        .filter(|e| {
            e["sessionId"] == parent && e["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .map(|e| e["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(parent_text, "The subagent was cancelled; carrying on.");
    // The parent's last request carries the delegate's result (whether the
    // stalled child request reached the server first or not).
    let requests = server.model_requests();
    let result = requests.last().unwrap().body().to_string();
    assert!(result.contains("delegate_result"), "{result}");
    assert!(result.contains("cancelled"), "{result}");
}

/// With `tool_call_fallback`, a subagent runs the calls its model writes
/// into its text, as the parent does: here a fenced `update_plan`, which
/// keeps the subagent's own plan. The child session gets that plan as a
/// `plan` update and the words around the call, never the call's JSON; the
/// session's plan file stays the parent's (none was made).
#[test]
fn a_subagents_own_plan_streams_under_its_session_and_its_written_call_is_held_back() {
    let Some(modules) = node_modules("a_subagents_own_plan_streams_under_its_session") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").unwrap();
    let delegate = json!({"task": "Find what main does"}).to_string();
    let plan = json!({"name": "update_plan", "arguments": {"reason": "two steps", "items": [
        {"id": "read", "title": "Read main.rs", "status": "in_progress", "next_action": "read it"},
        {"id": "report", "title": "Report", "status": "pending", "next_action": "answer"},
    ]}})
    .to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        Reply::sse(sse::text_pieces_turn(
            &["Planning first.\n`", &format!("``json\n{plan}"), "\n```"],
            sse::TokenUsage::DEFAULT,
        )),
        Reply::sse(sse::text_turn(
            r#"{"summary": "main does nothing", "findings": []}"#,
        )),
        Reply::sse(sse::text_turn("It does nothing.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({
            "args": ["-c", "tool_call_fallback=true", "acp"],
            "subagents": "watch",
            "steps": [{"do": "new"}, {"do": "prompt", "text": "what does main do?"}],
        }),
    );
    let announced = events(&report, "update")
        .into_iter()
        .find(|e| e["update"]["sessionUpdate"] == "subagent_update")
        .unwrap_or_else(|| panic!("no subagent_update: {report:#}"));
    let child = announced["update"]["sessionId"].clone();
    let child_updates: Vec<_> = events(&report, "update")
        .into_iter()
        .filter(|e| e["sessionId"] == child)
        .collect();
    let plans: Vec<_> = child_updates
        .iter()
        .filter(|e| e["update"]["sessionUpdate"] == "plan")
        .collect();
    assert_eq!(plans.len(), 1, "{report:#}");
    let entries: Vec<_> = plans[0]["update"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["content"].clone(), e["status"].clone()))
        .collect();
    assert_eq!(
        entries,
        [
            (json!("Read main.rs"), json!("in_progress")),
            (json!("Report"), json!("pending"))
        ]
    );
    let said: String = child_updates
        .iter()
        .filter(|e| e["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|e| e["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert!(said.starts_with("Planning first."), "{report:#}");
    assert!(
        !said.contains("update_plan") && !said.contains("```"),
        "{said}"
    );
    // The parent's session shows no plan: the subagent's is its own.
    assert!(
        events(&report, "update")
            .iter()
            .filter(|e| e["update"]["sessionUpdate"] == "plan")
            .all(|e| e["sessionId"] == child),
        "{report:#}"
    );
    assert!(!ws.path().join(".fido-plan.json").exists());
    // The subagent's model got its plan as the tool result.
    let requests = server.model_requests();
    assert!(
        requests[2]
            .body()
            .to_string()
            .contains(r#"\"reason\":\"two steps\""#),
        "{}",
        requests[2].body()
    );
    let parent = announced["sessionId"].clone();
    let parent_text: String = events(&report, "update")
        .into_iter()
        .filter(|e| {
            e["sessionId"] == parent && e["update"]["sessionUpdate"] == "agent_message_chunk"
        })
        .map(|e| e["update"]["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(parent_text, "It does nothing.");
}

#[test]
fn without_the_capability_a_subagent_is_its_delegate_call_with_live_status() {
    let Some(modules) = node_modules("without_the_capability_a_subagent_is_its_delegate_call")
    else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").unwrap();
    let delegate = json!({"task": "Find what main does"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &delegate)])),
        call("s1", "read_file", json!({"path": "main.rs"})),
        Reply::sse(sse::text_turn(
            r#"{"summary": "main does nothing", "findings": []}"#,
        )),
        Reply::sse(sse::text_turn("It does nothing.")),
    ]);
    let report = run_client(
        &modules,
        ws.path(),
        &server,
        json!({"steps": [{"do": "new"}, {"do": "prompt", "text": "what does main do?"}]}),
    );
    let session = response(&report, "session/new")[0]["result"]["sessionId"].clone();
    assert!(
        events(&report, "update")
            .iter()
            .all(|e| e["sessionId"] == session),
        "no other session's updates: {report:#}"
    );
    let calls = updates(&report, "tool_call");
    assert_eq!(calls.len(), 1, "the subagent is one tool call: {report:#}");
    assert_eq!(calls[0]["toolCallId"], "d1");
    let live: Vec<_> = updates(&report, "tool_call_update")
        .into_iter()
        .filter(|u| u["toolCallId"] == "d1" && u["rawOutput"]["phase"].is_string())
        .collect();
    let phases: Vec<_> = live
        .iter()
        .map(|u| u["rawOutput"]["phase"].clone())
        .collect();
    assert!(phases.contains(&json!("read_file")), "{phases:?}");
    let status = live
        .iter()
        .find(|u| u["rawOutput"]["phase"] == "read_file")
        .unwrap();
    assert!(
        status["content"][0]["content"]["text"]
            .as_str()
            .is_some_and(|text| text.ends_with("read_file main.rs")),
        "{status}"
    );
    let last = updates(&report, "tool_call_update").pop().unwrap().clone();
    assert_eq!(last["toolCallId"], "d1");
    assert_eq!(last["status"], "completed", "{report:#}");
    assert_eq!(message_text(&report), "It does nothing.");
}

/// A git repository at `root` holding `a.rs`, and a model whose parent
/// delegates a write of it: the subagent changes its `println!("a")` to
/// `println!("hello")` and answers, then the parent says `last`.
fn a_write_delegation(root: &std::path::Path, last: &str) -> FakeServer {
    crate::common::git(root, &["init", "-q", "-b", "main"]);
    std::fs::write(root.join("a.rs"), "fn a() {\n    println!(\"a\");\n}\n").unwrap();
    crate::common::git(root, &["add", "-A"]);
    crate::common::git(root, &["commit", "-q", "-m", "first"]);
    let delegate =
        json!({"task": "Make a print hello", "mode": "write", "scope": {"paths": ["a.rs"]}});
    let done = r#"{"summary": "changed it", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;
    FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[(
            "d1",
            "delegate",
            &delegate.to_string(),
        )])),
        patch_call("p1", "a.rs", "println!(\"a\")", "println!(\"hello\")"),
        Reply::sse(sse::text_turn(done)),
        Reply::sse(sse::text_turn(last)),
    ])
}

#[test]
fn a_write_subagents_change_set_comes_back_as_diffs() {
    let Some(modules) = node_modules("a_write_subagents_change_set_comes_back_as_diffs") else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let server = a_write_delegation(root, "Applied.");
    let report = run_client(
        &modules,
        root,
        &server,
        json!({
            "args": ["-c", "delegate_write=allow", "-c", "delegate_merge=auto", "acp"],
            "steps": [{"do": "new"}, {"do": "prompt", "text": "go"}],
        }),
    );
    let file = root.canonicalize().unwrap().join("a.rs");
    let diff = updates(&report, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "d1" && u["content"][0]["type"] == "diff")
        .unwrap_or_else(|| panic!("no diff on the delegate call: {report:#}"));
    let content = &diff["content"][0];
    assert_eq!(content["path"], json!(file));
    assert!(
        content["oldText"]
            .as_str()
            .unwrap()
            .contains("println!(\"a\");"),
        "{content}"
    );
    assert!(
        content["newText"]
            .as_str()
            .unwrap()
            .contains("println!(\"hello\");"),
        "{content}"
    );
    assert_eq!(diff["locations"][0]["line"], 1);
    assert_eq!(
        std::fs::read_to_string(root.join("a.rs")).unwrap(),
        "fn a() {\n    println!(\"hello\");\n}\n"
    );
}

/// `delegate_merge = "ask"` in an editor: the write subagent's change set
/// is put to the person through `session/request_permission`, titled with
/// its task and carrying its diff. Allowed, it lands in the checkout;
/// rejected, it is discarded and the checkout is left byte for byte as it
/// was.
#[test]
fn a_change_set_merge_is_asked_through_the_editors_permission_dialog() {
    let Some(modules) = node_modules("a_change_set_merge_is_asked_through_the_editors") else {
        return;
    };
    for (answer, expected) in [
        ("reject_once", "fn a() {\n    println!(\"a\");\n}\n"),
        ("allow_once", "fn a() {\n    println!(\"hello\");\n}\n"),
    ] {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        let server = a_write_delegation(root, "Done.");
        let report = run_client(
            &modules,
            root,
            &server,
            json!({
                "args": ["-c", "delegate_write=allow", "-c", "delegate_merge=ask", "acp"],
                "permission": answer,
                "steps": [{"do": "new"}, {"do": "prompt", "text": "go"}],
            }),
        );
        let asked = events(&report, "permission");
        assert_eq!(asked.len(), 1, "{answer}: {report:#}");
        let call = &asked[0]["params"]["toolCall"];
        assert_eq!(
            call["title"]
                .as_str()
                .map(|t| t.starts_with("Apply the change set of \"Make a print hello\"")),
            Some(true),
            "{call}"
        );
        assert!(
            call.to_string().contains("println!(\\\"hello\\\")"),
            "{call}"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.rs")).unwrap(),
            expected,
            "{answer}"
        );
        let merge = if answer == "allow_once" {
            "applied"
        } else {
            "discarded"
        };
        let result = server.model_requests()[3].body().to_string();
        assert!(
            result.contains(&format!(r#"\"merge\": \"{merge}\""#)),
            "{result}"
        );
    }
}
