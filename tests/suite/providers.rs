//! Provider wire formats end to end: Anthropic Messages through the real
//! binary against the fake server.

use std::time::Duration;

use crate::common::sse::{self, TokenUsage};
use crate::common::{
    FakeServer, Reply, assert_conversation_invariants, events_of, fido_cmd, parse_events,
};

#[test]
fn anthropic_session_with_a_tool_call_and_cache_breakpoints() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "anthropic content\n").unwrap();
    let server = FakeServer::start(vec![
        Reply::sse(sse::anthropic_tool_use_turn(&[(
            "toolu_1",
            "read_file",
            r#"{"path": "a.txt"}"#,
        )])),
        Reply::sse(sse::anthropic_text_turn("It says anthropic content.")),
    ]);
    let mut cmd = fido_cmd();
    cmd.args(["exec", "--json", "-C"])
        .arg(ws.path())
        .arg("read a.txt")
        .env("FIDO_PROVIDER", "anthropic")
        .env("FIDO_BASE_URL", server.url())
        .env("FIDO_API_KEY", "anthropic-test-key")
        .env("FIDO_MODEL", "claude-test");
    let output = crate::common::process::run_in(ws.path(), cmd, None, Duration::from_secs(60));
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == "/v1/messages"));
    assert_conversation_invariants(&requests);
    let first = &requests[0];
    assert_eq!(first.header("x-api-key"), Some("anthropic-test-key"));
    assert!(first.header("anthropic-version").is_some());
    let body = first.body();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
    let tools = body["tools"].as_array().unwrap();
    assert_eq!(tools.last().unwrap()["cache_control"]["type"], "ephemeral");
    assert!(
        tools[..tools.len() - 1]
            .iter()
            .all(|t| t.get("cache_control").is_none())
    );
    // The tool result goes back as a tool_result block answering toolu_1.
    let second = requests[1].messages();
    let result_block = second
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .unwrap();
    assert_eq!(result_block["tool_use_id"], "toolu_1");
    assert!(
        result_block["content"]
            .to_string()
            .contains("anthropic content")
    );

    let events = parse_events(&output.stdout);
    let usage = events_of(&events, "usage")[0];
    assert_eq!(usage["prompt_tokens"], TokenUsage::DEFAULT.prompt);
    assert_eq!(usage["cached_tokens"], TokenUsage::DEFAULT.cached);
    assert_eq!(
        events_of(&events, "assistant_text")[0]["text"],
        "It says anthropic content."
    );
}
