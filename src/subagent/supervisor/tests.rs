//! The supervisor's own tests: a panicking run or actor, and time limits.

use super::*;

use crate::agent::recover::fault;
use crate::protocol::EventKind;
use crate::provider::script::ScriptProvider;

/// A supervisor of one slot for `workspace` whose child program does
/// not exist (so a run that gets that far fails at once), and its events.
async fn supervisor(workspace: &std::path::Path) -> (Supervisor, crate::agent::EventReceiver) {
    let mut settings =
        DelegationSettings::defaults(workspace.to_path_buf(), "/nonexistent/fido".into());
    settings.limits.concurrency = 1;
    let provider = ScriptProvider::from_json("s", "m", r#"{"turns": [{"text": "x"}]}"#).unwrap();
    let (sink, events) = crate::protocol::event_queue::channel();
    let supervisor = Supervisor::start(
        settings,
        Gateway::new(Arc::new(provider), 1),
        ToolCatalog::standard(PlanFlavour::UpdatePlan),
        sink,
    )
    .await
    .unwrap();
    (supervisor, events)
}

async fn delegate(supervisor: &Supervisor) -> DelegateResult {
    let cancel = CancellationToken::new();
    let request = DelegationRequest {
        call_id: "call-1",
        args: DelegateArgs::for_task("look around"),
        parent_messages: &[Message::System {
            content: "s".into(),
        }],
        cancel: &cancel,
        tools: None,
    };
    tokio::time::timeout(Duration::from_secs(60), supervisor.delegate(request))
        .await
        .expect("the delegation never returned")
}

/// Waits for an `error` event that contains `wanted`.
async fn error_event(events: &mut crate::agent::EventReceiver, wanted: &str) -> String {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(event) = events.recv().await {
            if let EventKind::Error { message } = event.kind
                && message.contains(wanted)
            {
                return message;
            }
        }
        panic!("the events ended without an error naming {wanted:?}")
    });
    found.await.expect("no such error event")
}

/// A panic inside a run (its task is watched): that call alone fails
/// with `subagent_crashed`, an `error` event says so, and the slot is
/// free again: with one slot, the next delegation still runs.
#[tokio::test]
async fn a_panic_in_a_run_fails_that_call_and_frees_its_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, mut events) = supervisor(dir.path()).await;
    fault::arm(dir.path(), "subagent run");
    let crashed = delegate(&supervisor).await;
    assert_eq!(
        crashed.error.unwrap().code,
        DelegateErrorCode::SubagentCrashed
    );
    let message = error_event(&mut events, "injected panic at subagent run").await;
    assert!(
        message.contains("internal error in the parent's supervisor"),
        "{message}"
    );
    assert!(supervisor.running_agents().is_empty());
    let next = delegate(&supervisor).await;
    let code = next.error.map(|e| e.code);
    assert_ne!(code, Some(DelegateErrorCode::SubagentCrashed));
    assert_ne!(code, Some(DelegateErrorCode::Unavailable));
}

/// A panic in the supervisor actor's handler fails the actor: the
/// call it was handling gets a failed result, the restarter restarts the
/// actor and says so, and delegation works again.
#[tokio::test]
async fn a_failed_supervisor_actor_is_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, mut events) = supervisor(dir.path()).await;
    fault::arm(dir.path(), "supervisor handler");
    let lost = delegate(&supervisor).await;
    assert_eq!(lost.error.unwrap().code, DelegateErrorCode::Unavailable);
    let message = error_event(&mut events, "injected panic at supervisor handler").await;
    assert!(message.contains("it was restarted"), "{message}");
    let next = delegate(&supervisor).await;
    let code = next.error.map(|e| e.code);
    assert_ne!(code, Some(DelegateErrorCode::Unavailable));
    supervisor.shutdown(Duration::from_secs(5)).await;
}

/// The same panic seen from the parent's turn: the `delegate` call
/// gets its failed result, the turn goes on to its answer, and the
/// next prompt works.
#[tokio::test]
async fn a_turn_whose_run_panics_gets_its_result_and_the_next_prompt_works() {
    use crate::agent::AgentMessage;
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, mut supervisor_events) = supervisor(dir.path()).await;
    let script = r#"{"turns": [
        {"tool_calls": [{"name": "delegate", "arguments": {"task": "look around"}}]},
        {"text": "went on without it"},
        {"text": "second answer"}
    ]}"#;
    let (sink, mut events) = crate::protocol::event_queue::channel();
    let agent = delegating_agent(dir.path(), supervisor, script, sink).await;
    fault::arm(dir.path(), "subagent run");
    let ask = |prompt: &'static str| {
        let agent = agent.clone();
        async move {
            ractor::call_t!(
                agent,
                |reply| AgentMessage::SubmitPrompt {
                    prompt: prompt.into(),
                    reply
                },
                60_000
            )
            .unwrap()
        }
    };
    let first = ask("first").await;
    assert_eq!(first.final_text(), Some("went on without it"));
    let mut delegate_result = None;
    while let Some(event) = events.try_recv() {
        if let EventKind::ToolResult { name, ok, .. } = event.kind
            && name == "delegate"
        {
            delegate_result = Some(ok);
        }
    }
    assert_eq!(
        delegate_result,
        Some(false),
        "the call got its failed result"
    );
    error_event(&mut supervisor_events, "injected panic at subagent run").await;
    let conversation = ractor::call_t!(agent, AgentMessage::Snapshot, 60_000)
        .unwrap()
        .unwrap();
    assert!(conversation.unanswered_tool_calls().is_empty());
    assert!(conversation.messages().iter().any(|m| matches!(m,
            Message::Tool { content, .. } if content.contains("subagent_crashed"))),);
    let second = ask("second").await;
    assert_eq!(second.final_text(), Some("second answer"));
}

/// `/agents` through the real engine: the agent's front desk answers
/// `Op::ListSubagents` from the supervisor's record, which keeps every
/// subagent of the session after it ended, in start order, with how it
/// ended (here a run that panicked and one whose program is missing).
#[tokio::test]
async fn slash_agents_lists_the_sessions_ended_subagents_from_the_record() {
    use crate::agent::ops;
    use crate::protocol::op::{Op, OpReply};
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, _supervisor_events) = supervisor(dir.path()).await;
    let script = r#"{"turns": [
        {"tool_calls": [
            {"name": "delegate", "arguments": {"task": "look", "plan_item": "lexer"}},
            {"name": "delegate", "arguments": {"task": "look again"}}
        ]},
        {"text": "went on without them"}
    ]}"#;
    let (sink, mut events) = crate::protocol::event_queue::channel();
    let agent = delegating_agent(dir.path(), supervisor, script, sink.clone()).await;
    let engine = ops::serve(agent, ops::FrontDesk::detached(sink));
    let mut reply_to = async |id| loop {
        let event = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("an event within 60 s")
            .expect("an open queue");
        if let EventKind::OpReplied { id: of, reply } = event.kind
            && of == id
        {
            return reply;
        }
    };
    let before = engine.send(Op::ListSubagents).unwrap();
    assert_eq!(
        reply_to(before).await,
        OpReply::Subagents {
            subagents: Vec::new()
        }
    );
    fault::arm(dir.path(), "subagent run");
    let prompt = "delegate twice".to_string();
    let turn = engine.send(Op::SubmitPrompt { prompt }).unwrap();
    let ended = reply_to(turn).await;
    assert!(
        matches!(
            ended,
            OpReply::TurnEnded {
                outcome: crate::protocol::outcome::TurnOutcome::Completed { .. }
            }
        ),
        "{ended:?}"
    );
    let list = engine.send(Op::ListSubagents).unwrap();
    let OpReply::Subagents { subagents } = reply_to(list).await else {
        panic!("/agents answers with the record")
    };
    let text = crate::ui::replies::subagents_text(&subagents);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0], "2 subagents this session, 0 running");
    for line in &lines[1..] {
        assert!(line.starts_with("  subagent-"), "{text}");
        assert!(line.contains(" failed · "), "{text}");
    }
    assert!(
        lines[1].ends_with(" · 0 tok · plan: lexer · subagent_crashed"),
        "{text}"
    );
    assert!(lines[2].contains(" · 0 tok · spawn_failed: "), "{text}");
}

/// The real agent in `workspace`, delegating to `supervisor`, its model
/// playing `script`, its events going to `events`.
async fn delegating_agent(
    workspace: &std::path::Path,
    supervisor: Supervisor,
    script: &str,
    events: crate::agent::EventSink,
) -> ActorRef<crate::agent::AgentMessage> {
    use crate::agent::{AgentActor, AgentArguments, AgentDeps, Conversation};
    let mut env = crate::tools::testing::env(workspace);
    env.delegator = Some(Arc::new(supervisor));
    let deps = Arc::new(AgentDeps {
        provider: Arc::new(ScriptProvider::from_json("a", "m", script).unwrap()),
        catalog: ToolCatalog::standard(PlanFlavour::UpdatePlan),
        tool_env: Arc::new(env),
        ctx: crate::tools::InvocationContext::main(),
        settings: crate::agent::AgentSettings::for_tests(),
        events,
        journal: None,
    });
    let arguments = AgentArguments {
        deps,
        conversation: Conversation::new("system".into()),
        turns: 0,
    };
    let (agent, _) = Actor::spawn(None, AgentActor, arguments).await.unwrap();
    agent
}

#[test]
fn a_time_limit_is_kept_between_a_second_and_the_maximum() {
    let mut settings = DelegationSettings::defaults(std::env::temp_dir(), "fido".into());
    settings.limits.max_timeout = Duration::from_secs(60);
    settings.limits.default_timeout = Duration::from_secs(30);
    let args = |timeout_ms: Option<u64>| DelegateArgs {
        timeout_ms,
        ..serde_json::from_value(serde_json::json!({"task": "t"})).unwrap()
    };
    assert_eq!(timeout_for(&args(Some(120)), None, &settings), MIN_TIMEOUT);
    assert_eq!(
        timeout_for(&args(Some(5_000)), None, &settings),
        Duration::from_secs(5)
    );
    assert_eq!(
        timeout_for(&args(Some(600_000)), None, &settings),
        Duration::from_secs(60)
    );
    assert_eq!(
        timeout_for(&args(None), None, &settings),
        Duration::from_secs(30)
    );
}

/// A call's own budget below the fork's estimated cost is refused as
/// invalid arguments naming the smallest budget, before anything starts;
/// that smallest budget itself passes the check (and the run then fails
/// for the missing child program, which only a started run can).
#[tokio::test]
async fn a_budget_below_the_fork_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let (supervisor, mut events) = supervisor(dir.path()).await;
    let cancel = CancellationToken::new();
    let parent = [Message::System {
        content: "s".repeat(4000),
    }];
    let with_budget = |budget: u64| DelegationRequest {
        call_id: "call-1",
        args: DelegateArgs {
            budget_tokens: Some(budget),
            ..DelegateArgs::for_task("look around")
        },
        parent_messages: &parent,
        cancel: &cancel,
        tools: None,
    };
    let refused = supervisor.delegate(with_budget(10)).await;
    let error = refused.error.clone().unwrap();
    assert_eq!(
        error.code,
        DelegateErrorCode::InvalidArguments,
        "{refused:#?}"
    );
    let smallest: u64 = error
        .message
        .split("at least ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    // The 4,000-byte system message alone is about 1,000 tokens.
    assert!(
        smallest > 1000 + super::super::fork::MIN_ANSWER_TOKENS,
        "{smallest}"
    );
    let event = events.try_recv();
    assert!(event.is_none(), "a refused call started nothing: {event:?}");

    let refused = supervisor.delegate(with_budget(smallest - 1)).await;
    assert_eq!(
        refused.error.unwrap().code,
        DelegateErrorCode::InvalidArguments
    );
    let started = supervisor.delegate(with_budget(smallest)).await;
    let code = started.error.unwrap().code;
    assert_ne!(code, DelegateErrorCode::InvalidArguments);
    assert!(
        events.try_recv().is_some(),
        "the run with enough budget started"
    );
}
