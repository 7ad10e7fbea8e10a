//! Self-tests of the conversation invariant checker, on hand-made requests.

use serde_json::{Value, json};

use crate::common::{History, RecordedRequest, check_conversation};

const CHAT: &str = "/v1/chat/completions";

fn recorded(path: &str, body: Value) -> RecordedRequest {
    RecordedRequest::new(
        "POST".to_owned(),
        path.to_owned(),
        Vec::new(),
        body.to_string().into_bytes(),
    )
}

fn chat(messages: &[Value], tools: &Value) -> RecordedRequest {
    recorded(
        CHAT,
        json!({"model": "test-model", "messages": messages, "tools": tools, "stream": true}),
    )
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "read_file", "description": "Reads.", "parameters": {"type": "object"}}}])
}

fn system() -> Value {
    json!({"role": "system", "content": "You are fido."})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn calls(ids: &[&str]) -> Value {
    let calls: Vec<Value> = ids
        .iter()
        .map(|id| json!({"id": id, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}))
        .collect();
    json!({"role": "assistant", "tool_calls": calls})
}

fn result(id: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": "text"})
}

fn answer(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// A valid 3-request session: two tool calls answered, then a final answer,
/// then a second prompt.
fn valid_session() -> Vec<Vec<Value>> {
    let first = vec![system(), user("read it")];
    let mut second = first.clone();
    second.extend([
        calls(&["call_1", "call_2"]),
        result("call_1"),
        result("call_2"),
    ]);
    let mut third = second.clone();
    third.extend([answer("done"), user("thanks")]);
    vec![first, second, third]
}

fn session(histories: &[Vec<Value>]) -> Vec<RecordedRequest> {
    histories.iter().map(|m| chat(m, &tools())).collect()
}

fn problems(requests: &[RecordedRequest], history: History) -> String {
    match check_conversation(requests, history) {
        Ok(()) => panic!("the checker accepted a broken conversation"),
        Err(problems) => problems.join("\n"),
    }
}

#[test]
fn checker_accepts_a_valid_conversation() {
    let requests = session(&valid_session());
    for history in [History::AppendOnly, History::Forking, History::Compacting] {
        assert_eq!(check_conversation(&requests, history), Ok(()));
    }
    crate::common::assert_conversation_invariants(&requests);
}

#[test]
fn checker_ignores_non_model_requests_but_wants_at_least_one() {
    let mut requests = session(&valid_session());
    requests.insert(1, recorded("/v1/models", Value::Null));
    assert_eq!(check_conversation(&requests, History::AppendOnly), Ok(()));
    assert!(problems(&[], History::AppendOnly).contains("no model requests"));
}

#[test]
fn checker_rejects_an_unanswered_tool_call() {
    let mut histories = valid_session();
    histories[1].pop();
    histories[2].remove(4);
    let text = problems(&session(&histories), History::Compacting);
    assert!(
        text.contains("call_2") && text.contains("unanswered"),
        "{text}"
    );
}

#[test]
fn checker_rejects_a_result_for_a_call_nobody_made() {
    let mut histories = valid_session();
    histories[2].push(result("call_9"));
    let text = problems(&session(&histories), History::AppendOnly);
    assert!(text.contains("call_9"), "{text}");
}

#[test]
fn checker_rejects_a_tool_call_answered_twice() {
    let histories = vec![vec![
        system(),
        user("x"),
        calls(&["call_1"]),
        result("call_1"),
        result("call_1"),
    ]];
    let text = problems(&session(&histories), History::AppendOnly);
    assert!(text.contains("second time"), "{text}");
}

#[test]
fn checker_rejects_a_changed_tools_array() {
    let mut requests = session(&valid_session());
    let mut changed = tools();
    changed[0]["function"]["description"] = json!("Reads a file.");
    requests[2] = chat(&valid_session()[2], &changed);
    let text = problems(&requests, History::Compacting);
    assert!(text.contains("request 2: `tools` differs"), "{text}");
}

#[test]
fn checker_rejects_a_changed_first_message() {
    let mut histories = valid_session();
    histories[1][0] = json!({"role": "system", "content": "You are fido. Plan: step 1."});
    let text = problems(&session(&histories), History::Compacting);
    assert!(text.contains("request 1: messages[0] differs"), "{text}");
}

#[test]
fn checker_rejects_a_rewritten_history_when_append_only() {
    let mut histories = valid_session();
    histories[2][4] = json!({"role": "tool", "tool_call_id": "call_2", "content": "(elided)"});
    let requests = session(&histories);
    let text = problems(&requests, History::AppendOnly);
    assert!(
        text.contains("request 2 does not extend request 1"),
        "{text}"
    );
    assert!(text.contains("messages[4] changed"), "{text}");
    assert_eq!(check_conversation(&requests, History::Compacting), Ok(()));
}

#[test]
fn checker_rejects_a_shorter_history() {
    let mut histories = valid_session();
    histories.push(histories[0].clone());
    let requests = session(&histories);
    let text = problems(&requests, History::AppendOnly);
    assert!(
        text.contains("request 3 does not extend request 2"),
        "{text}"
    );
    // A restart from an earlier point looks like a fork.
    assert_eq!(check_conversation(&requests, History::Forking), Ok(()));
}

#[test]
fn forking_accepts_a_subagent_branch_and_the_parent_going_on() {
    let parent = vec![system(), user("look into it")];
    let mut fork = parent.clone();
    fork.extend([
        calls(&["call_d"]),
        result("call_d"),
        user("subagent instructions"),
    ]);
    let mut fork_next = fork.clone();
    fork_next.push(answer("found it"));
    let mut parent_next = parent.clone();
    parent_next.extend([calls(&["call_d"]), result("call_d")]);
    let requests = session(&[parent, fork, fork_next, parent_next]);
    assert_eq!(check_conversation(&requests, History::Forking), Ok(()));
    assert!(
        problems(&requests, History::AppendOnly).contains("request 3 does not extend request 2")
    );
}

#[test]
fn checker_understands_anthropic_requests() {
    let system =
        json!([{"type": "text", "text": "You are fido.", "cache_control": {"type": "ephemeral"}}]);
    let tool_use = json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}]});
    let tool_result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "text"}]});
    let anthropic = |messages: Vec<Value>| {
        recorded(
            "/v1/messages",
            json!({"model": "m", "system": system, "tools": tools(), "messages": messages}),
        )
    };
    let first = vec![user("read it")];
    let mut second = first.clone();
    second.extend([tool_use.clone(), tool_result]);
    let good = vec![anthropic(first.clone()), anthropic(second)];
    assert_eq!(check_conversation(&good, History::AppendOnly), Ok(()));

    let mut unanswered = first;
    unanswered.extend([tool_use, user("never mind")]);
    let bad = vec![good[0].clone(), anthropic(unanswered)];
    let text = problems(&bad, History::AppendOnly);
    assert!(
        text.contains("toolu_1") && text.contains("unanswered"),
        "{text}"
    );
}
