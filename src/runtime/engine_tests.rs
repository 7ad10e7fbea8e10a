//! The engine through its front door only: a real session (script
//! provider, real tools, journal, supervisor, control socket) driven by
//! ops, its answers read as typed replies and events.

use std::time::Duration;

use super::*;
use crate::config::Overrides;
use crate::protocol::EventKind;
use crate::protocol::control::{ControlReply, ControlRequest};
use crate::protocol::outcome::TurnOutcome;

/// Longest wait for one reply or event: a hung engine fails the test.
const WAIT: Duration = Duration::from_secs(30);

/// A configuration for `dir` whose model plays `script`.
fn config_playing(dir: &std::path::Path, script: &str) -> Config {
    let path = dir.join(".fido-test-script.json");
    std::fs::write(&path, script).unwrap();
    let overrides = Overrides {
        workspace: Some(dir.to_path_buf()),
        values: Vec::new(),
    };
    let env = [
        ("FIDO_PROVIDER".to_string(), "script".to_string()),
        ("FIDO_SCRIPT".to_string(), path.display().to_string()),
    ];
    Config::load_from(&overrides, &env).unwrap()
}

async fn call(caller: &EngineCaller, op: Op) -> OpReply {
    tokio::time::timeout(WAIT, caller.call(op))
        .await
        .expect("a reply in time")
        .expect("a reply")
}

/// A prompt goes in as an op and comes back as `TurnEnded` with the final
/// text and the turn's usage; the tool it ran shows in the events, its
/// reply does not (it went to the caller), and `/plan` answers with the
/// plan object the turn made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_ends_with_its_final_text_usage_and_a_typed_plan() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{"turns": [
        {"tool_calls": [{"name": "update_plan", "arguments": {"reason": "start",
            "items": [{"id": "look", "title": "Look around", "status": "done",
                "evidence": ["looked"]}]}}]},
        {"text": "all done"}
    ]}"#;
    let config = config_playing(dir.path(), script);
    let (engine, mut events) = Engine::start(&config, FrontEnd::Headless, None)
        .await
        .unwrap();
    let caller = engine.caller();
    let prompt = "plan it".to_string();
    let ended = call(&caller, Op::SubmitPrompt { prompt }).await;
    let OpReply::TurnEnded {
        outcome: TurnOutcome::Completed { final_text, usage },
    } = ended
    else {
        panic!("{ended:?}")
    };
    assert_eq!(final_text.as_deref(), Some("all done"));
    assert_eq!(usage.requests, 2, "{usage:?}");

    let OpReply::Plan(shown) = call(&caller, Op::ShowPlan).await else {
        panic!("/plan answers with the plan")
    };
    let crate::plan::PlanSnapshot::UpdatePlan(state) = &shown.plan else {
        panic!("{shown:?}")
    };
    assert_eq!(state.items[0].id, "look");
    assert!(
        shown.text.contains("[x] look — Look around"),
        "{}",
        shown.text
    );
    engine.shutdown().await;

    let mut kinds = Vec::new();
    // Every event of the turn is queued by now; a sender may outlive it.
    let quiet = Duration::from_millis(300);
    while let Ok(Some(event)) = tokio::time::timeout(quiet, events.recv()).await {
        kinds.push(event.kind);
    }
    assert!(
        kinds
            .iter()
            .any(|k| matches!(k, EventKind::ToolCall { name, .. } if name == "update_plan"))
    );
    assert!(
        !kinds
            .iter()
            .any(|k| matches!(k, EventKind::OpReplied { .. })),
        "a called op's reply is the caller's alone: {kinds:?}"
    );
}

/// A turn waiting for the person (an `ask_user` question, interactive
/// front end) is ended by `Op::Interrupt`: its reply says `interrupted`;
/// the engine takes the next op.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_op_ends_a_waiting_turn() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"{"turns": [
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which one?"}}]},
        {"text": "never"}
    ]}"#;
    let config = config_playing(dir.path(), script);
    let (engine, mut events) = Engine::start(&config, FrontEnd::Interactive, None)
        .await
        .unwrap();
    let caller = engine.caller();
    let prompt = "ask me".to_string();
    let turn = tokio::spawn({
        let caller = caller.clone();
        async move { caller.call(Op::SubmitPrompt { prompt }).await }
    });
    loop {
        let event = tokio::time::timeout(WAIT, events.recv()).await.unwrap();
        if let Some(EventKind::QuestionAsked { .. }) = event.map(|e| e.kind) {
            break;
        }
    }
    assert_eq!(caller.call(Op::Interrupt).await, Err(CallError::NoReply));
    engine.send(Op::Interrupt).unwrap();
    let ended = tokio::time::timeout(WAIT, turn).await.unwrap().unwrap();
    assert!(
        matches!(
            ended,
            Ok(OpReply::TurnEnded {
                outcome: TurnOutcome::Interrupted { .. }
            })
        ),
        "{ended:?}"
    );
    assert!(matches!(
        call(&caller, Op::ListSubagents).await,
        OpReply::Subagents { subagents } if subagents.is_empty()
    ));
    engine.shutdown().await;
}

/// `fido agents` and `fido cancel` reach the session through its control
/// socket, which asks the engine with ops: the same record and the same
/// cancel as `/agents` and `/cancel`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_control_socket_is_answered_through_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let config = config_playing(dir.path(), r#"{"turns": [{"text": "hi"}]}"#);
    let (engine, _events) = Engine::start(&config, FrontEnd::Headless, None)
        .await
        .unwrap();
    let ask = |request| crate::subagent::control::ask_all(dir.path(), request);
    let listed = ask(&ControlRequest::ListSubagents).await;
    assert_eq!(listed.len(), 1);
    let Ok(ControlReply::Subagents {
        agents, parent_pid, ..
    }) = &listed[0].reply
    else {
        panic!("an agents reply")
    };
    assert!(agents.is_empty());
    assert_eq!(*parent_pid, std::process::id());
    let cancel = ControlRequest::Cancel { agent_id: None };
    let cancelled = ask(&cancel).await;
    assert!(matches!(
        &cancelled[0].reply,
        Ok(ControlReply::Cancelled { agent_ids, .. }) if agent_ids.is_empty()
    ));
    engine.shutdown().await;
}
