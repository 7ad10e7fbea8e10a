//! The `plan_updated` events of both plan flavours, byte for byte, as the
//! turn loop and the plan restore emit them (the `--json` stream is a
//! contract). The expected lines were recorded from the events as they
//! were when the plan still travelled as an untyped JSON value.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{AgentDeps, Conversation};
use crate::plan::PlanFlavour;
use crate::protocol::EventKind;
use crate::provider::script::ScriptProvider;
use crate::tools::{InvocationContext, ToolCatalog};

/// Runs one turn of `script` with the `flavour` catalog, then restores the
/// plan as a new session would, and returns every `plan_updated` event as
/// its JSON line (the timestamps of `update_plan` states made fixed).
async fn plan_lines(flavour: PlanFlavour, script: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (events, mut received) = crate::protocol::event_queue::channel();
    let deps = AgentDeps {
        provider: Arc::new(ScriptProvider::from_json("s", "m", script).unwrap()),
        catalog: ToolCatalog::standard(flavour),
        tool_env: Arc::new(crate::tools::testing::env(dir.path())),
        ctx: InvocationContext::main(),
        settings: crate::agent::AgentSettings::for_tests(),
        events,
        journal: None,
    };
    let mut conversation = Conversation::new("system".into());
    let cancel = CancellationToken::new();
    super::run_turn(&mut conversation, &deps, "go".into(), 1, &cancel).await;
    let mut restored = Conversation::new("system".into());
    super::restore_plan(&mut restored, &deps.tool_env, flavour, &deps.events);
    drop(deps);
    let mut lines = Vec::new();
    while let Some(event) = received.try_recv() {
        if matches!(event.kind, EventKind::PlanUpdated { .. }) {
            lines.push(fixed_times(serde_json::to_string(&event.kind).unwrap()));
        }
    }
    lines
}

/// `"updatedAt":"<RFC 3339>"` becomes `"updatedAt":"T"`.
fn fixed_times(line: String) -> String {
    let key = "\"updatedAt\":\"";
    let Some(start) = line.find(key).map(|at| at + key.len()) else {
        return line;
    };
    let end = start + line[start..].find('"').unwrap();
    format!("{}T{}", &line[..start], &line[end..])
}

#[tokio::test]
async fn update_plan_events_keep_their_wire_format() {
    let script = r#"{"turns": [
        {"tool_calls": [{"name": "update_plan", "arguments": {"reason": "Start", "items": [
            {"id": "read", "title": "Read the parser", "status": "in_progress",
             "details": "tokens first", "next_action": "open src/parser.rs"},
            {"id": "fix", "title": "Fix it", "status": "pending", "dependencies": ["read"],
             "next_action": "edit"}
        ]}}]},
        {"tool_calls": [{"name": "update_plan", "arguments": {"reason": "Read", "items": [
            {"id": "read", "title": "Read the parser", "status": "done",
             "evidence": ["src/parser.rs:10"]},
            {"id": "fix", "title": "Fix it", "status": "in_progress", "dependencies": ["read"],
             "next_action": "edit"}
        ]}}]},
        {"text": "done"}
    ]}"#;
    let lines = plan_lines(PlanFlavour::UpdatePlan, script).await;
    assert_eq!(
        lines,
        [
            r#"{"type":"plan_updated","flavour":"update_plan","plan":{"version":1,"updatedAt":"T","reason":"Start","items":[{"id":"read","title":"Read the parser","status":"in_progress","details":"tokens first","dependencies":[],"next_action":"open src/parser.rs","evidence":[]},{"id":"fix","title":"Fix it","status":"pending","details":null,"dependencies":["read"],"next_action":"edit","evidence":[]}],"changes":{"added":["read","fix"],"dropped":[],"status_changed":[]}}}"#,
            r#"{"type":"plan_updated","flavour":"update_plan","plan":{"version":2,"updatedAt":"T","reason":"Read","items":[{"id":"read","title":"Read the parser","status":"done","details":null,"dependencies":[],"next_action":null,"evidence":["src/parser.rs:10"]},{"id":"fix","title":"Fix it","status":"in_progress","details":null,"dependencies":["read"],"next_action":"edit","evidence":[]}],"changes":{"added":[],"dropped":[],"status_changed":["read: in_progress → done","fix: pending → in_progress"]}}}"#,
            r#"{"type":"plan_updated","flavour":"update_plan","plan":{"version":2,"updatedAt":"T","reason":"Read","items":[{"id":"read","title":"Read the parser","status":"done","details":null,"dependencies":[],"next_action":null,"evidence":["src/parser.rs:10"]},{"id":"fix","title":"Fix it","status":"in_progress","details":null,"dependencies":["read"],"next_action":"edit","evidence":[]}],"changes":{"added":[],"dropped":[],"status_changed":["read: in_progress → done","fix: pending → in_progress"]}}}"#,
        ]
    );
}

#[tokio::test]
async fn todo_events_keep_their_wire_format() {
    let script = r#"{"turns": [
        {"tool_calls": [
            {"name": "todo", "arguments": {"action": "create", "subject": "Write tests",
             "description": "unit first", "activeForm": "Writing tests",
             "metadata": {"area": "parser", "weight": 2}}},
            {"name": "todo", "arguments": {"action": "create", "subject": "Ship",
             "blockedBy": [1], "owner": "me"}}
        ]},
        {"tool_calls": [
            {"name": "todo", "arguments": {"action": "update", "id": 1, "status": "completed",
             "evidence": "cargo test: 3 passed"}},
            {"name": "todo", "arguments": {"action": "update", "id": 2, "status": "deferred",
             "reason": "after review"}},
            {"name": "todo", "arguments": {"action": "get", "id": 99}}
        ]},
        {"text": "done"}
    ]}"#;
    let lines = plan_lines(PlanFlavour::Todo, script).await;
    assert_eq!(
        lines,
        [
            r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"create","params":{"action":"create","subject":"Write tests","description":"unit first","activeForm":"Writing tests","metadata":{"area":"parser","weight":2}},"tasks":[{"id":1,"subject":"Write tests","description":"unit first","activeForm":"Writing tests","status":"pending","metadata":{"area":"parser","weight":2}}],"nextId":2}}"#,
            r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"create","params":{"action":"create","subject":"Ship","blockedBy":[1],"owner":"me"},"tasks":[{"id":1,"subject":"Write tests","description":"unit first","activeForm":"Writing tests","status":"pending","metadata":{"area":"parser","weight":2}},{"id":2,"subject":"Ship","status":"pending","blockedBy":[1],"owner":"me"}],"nextId":3}}"#,
            r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"update","params":{"action":"update","id":1,"status":"completed","evidence":"cargo test: 3 passed"},"tasks":[{"id":1,"subject":"Write tests","description":"unit first","activeForm":"Writing tests","status":"completed","metadata":{"area":"parser","weight":2},"evidence":"cargo test: 3 passed"},{"id":2,"subject":"Ship","status":"pending","blockedBy":[1],"owner":"me"}],"nextId":3}}"#,
            r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"update","params":{"action":"update","id":2,"status":"deferred","reason":"after review"},"tasks":[{"id":1,"subject":"Write tests","description":"unit first","activeForm":"Writing tests","status":"completed","metadata":{"area":"parser","weight":2},"evidence":"cargo test: 3 passed"},{"id":2,"subject":"Ship","status":"deferred","blockedBy":[1],"owner":"me","reason":"after review"}],"nextId":3}}"#,
            r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"list","params":{"action":"list"},"tasks":[{"id":1,"subject":"Write tests","description":"unit first","activeForm":"Writing tests","status":"completed","metadata":{"area":"parser","weight":2},"evidence":"cargo test: 3 passed"},{"id":2,"subject":"Ship","status":"deferred","blockedBy":[1],"owner":"me","reason":"after review"}],"nextId":3}}"#,
        ]
    );
}
