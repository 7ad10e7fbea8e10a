use std::time::Duration;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use ractor::ActorRef;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::oneshot;

use ractor::Actor;

use std::sync::Arc;

use super::*;
use crate::agent::AgentMessage;
use crate::agent::ops::{self, FrontDesk, LocalCommands};
use crate::plan::todo::{self, TodoStore};
use crate::plan::{PlanFlavour, PlanSnapshot, PlanStore};
use crate::plan::{PlanItem, PlanState, Status};
use crate::protocol::ApprovalPolicy;
use crate::protocol::{Event, EventKind};
use crate::provider::SwitchError;
use crate::runtime::local::EngineCommands;
use crate::store::journal::{self, Journal};
use crate::ui::state::Entry;
use crate::ui::{UiActor, UiArguments, UiMessage};

/// Longest wait for an actor's answer: a hung test fails instead.
const CALL_MS: u64 = 30_000;

/// The real agent on `env` (its model says "hello back"), served with
/// `commands` to a UI on a test backend; the engine's events reach the
/// UI through the terminal's forwarder. The agent journals its steps
/// into the commands' journal, as in a session.
async fn ui_with_agent(
    env: crate::tools::ToolEnv,
    commands: Arc<EngineCommands>,
) -> (ActorRef<UiMessage>, ActorRef<AgentMessage>) {
    use crate::agent::{AgentActor, AgentArguments, AgentDeps, Conversation};
    use crate::provider::script::ScriptProvider;
    use crate::tools::{InvocationContext, ToolCatalog};
    let script = r#"{"turns": [{"text": "hello back"}]}"#;
    let (events, receiver) = crate::protocol::event_queue::channel();
    let deps = Arc::new(AgentDeps {
        provider: Arc::new(ScriptProvider::from_json("t", "t", script).unwrap()),
        tool_env: Arc::new(env),
        ctx: InvocationContext::main(),
        settings: crate::agent::AgentSettings::for_tests(),
        events: events.clone(),
        journal: commands.journal.clone(),
        catalog: ToolCatalog::standard(PlanFlavour::UpdatePlan),
    });
    let arguments = AgentArguments {
        deps,
        conversation: Conversation::new("system".into()),
        turns: 0,
    };
    let (agent, _) = Actor::spawn(None, AgentActor, arguments).await.unwrap();
    let desk = FrontDesk {
        commands,
        ..FrontDesk::detached(events)
    };
    let (exit, _exited) = oneshot::channel();
    let arguments = UiArguments {
        terminal: Terminal::new(TestBackend::new(120, 30)).unwrap(),
        engine: ops::serve(agent.clone(), desk),
        exit,
    };
    let (ui, _) = Actor::spawn(None, UiActor::new(), arguments).await.unwrap();
    tokio::spawn(crate::ui::terminal::forward_events(receiver, ui.clone()));
    (ui, agent)
}
fn saved_plan(store: &PlanStore) -> PlanState {
    let item = |id: &str, status| PlanItem {
        id: id.into(),
        title: format!("Do {id}"),
        status,
        details: None,
        dependencies: Vec::new(),
        next_action: Some("go".into()),
        evidence: Vec::new(),
    };
    let items = vec![item("a", Status::InProgress), item("b", Status::Pending)];
    let saved = store.update(|current| {
        Ok::<_, ()>(current.successor("two steps".into(), items, "2025-01-01T00:00:00.000Z".into()))
    });
    saved.unwrap().unwrap().0
}

fn type_line(ui: &ActorRef<UiMessage>, text: &str) {
    let keys = text
        .chars()
        .map(KeyCode::Char)
        .chain([KeyCode::Enter])
        .map(|code| KeyEvent::new(code, KeyModifiers::NONE));
    for key in keys {
        ui.cast(UiMessage::Terminal(TermEvent::Key(key))).unwrap();
    }
}

#[tokio::test]
async fn plan_clear_typed_in_the_ui_empties_the_file_and_the_panel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".fido-plan.json");
    let store = PlanStore::new(dir.path(), path.clone());
    let before = saved_plan(&store);
    let commands = Arc::new(EngineCommands {
        default_approval: ApprovalPolicy::OnRequest,
        safety: None,
        instruction_files: Vec::new(),
        journal: None,
        config: None,
        workspace: dir.path().to_path_buf(),
        flavour: PlanFlavour::UpdatePlan,
        plans: PlanStore::new(dir.path(), path.clone()),
        todos: TodoStore::in_workspace(dir.path()),
    });
    let env = crate::tools::testing::env(dir.path());
    let (ui, _agent) = ui_with_agent(env, commands).await;
    // As at start-up: the loaded plan arrives as an event.
    ui.cast(UiMessage::Agent(Event::now(EventKind::PlanUpdated {
        plan: PlanSnapshot::UpdatePlan(before.clone()),
    })))
    .unwrap();

    type_line(&ui, "/plan");
    let rendered = Entry::Local(crate::runtime::local::plan_text(&before));
    wait_for_entry(&ui, |e| *e == rendered).await;
    let shown = ractor::call_t!(ui, UiMessage::Snapshot, CALL_MS).unwrap();
    assert_eq!(shown.plan.as_ref().unwrap().items.len(), 2);
    assert_eq!(shown.transcript.last(), Some(&rendered));

    type_line(&ui, "/plan clear");
    wait_for_entry(
        &ui,
        |e| matches!(e, Entry::Info(t) if t.starts_with("Plan cleared")),
    )
    .await;
    let cleared = ractor::call_t!(ui, UiMessage::Snapshot, CALL_MS).unwrap();
    let panel = cleared.plan.expect("an empty plan, not none");
    assert!(panel.items.is_empty());
    assert_eq!(panel.version, Some(before.version + 1));
    let file = store.load().unwrap().state;
    assert_eq!(file.version, before.version + 1);
    assert!(file.items.is_empty());
    assert_eq!(file.reason, "Plan cleared by the user.");
    assert!(cleared.transcript.contains(&Entry::Info(format!(
        "Plan cleared (version {}).",
        file.version
    ))));
}

#[test]
fn the_todo_flavour_shows_and_clears_its_own_state() {
    let dir = tempfile::tempdir().unwrap();
    let commands = EngineCommands {
        default_approval: ApprovalPolicy::OnRequest,
        safety: None,
        instruction_files: Vec::new(),
        journal: None,
        config: None,
        workspace: dir.path().to_path_buf(),
        flavour: PlanFlavour::Todo,
        plans: PlanStore::new(dir.path(), dir.path().join(".fido-plan.json")),
        todos: TodoStore::in_workspace(dir.path()),
    };
    for subject in ["Write the lexer", "Test the lexer"] {
        let created = todo::run_call(
            &commands.todos,
            &serde_json::json!({"action": "create", "subject": subject}),
        )
        .unwrap();
        assert!(created.ok, "{}", created.content);
    }
    let shown = commands.show().unwrap();
    let (expected, envelope) = todo::format::list_view(&commands.todos.load().unwrap().state);
    assert_eq!(shown.text, expected);
    assert_eq!(shown.plan, PlanSnapshot::Todo(envelope.clone()));
    let view = crate::ui::plan_view::PlanView::from_event(&PlanSnapshot::Todo(envelope)).unwrap();
    assert_eq!(view.items.len(), 2);

    let cleared = commands.clear().unwrap();
    assert_eq!(cleared.message, "Cleared 2 tasks");
    let view = crate::ui::plan_view::PlanView::from_event(&cleared.plan).unwrap();
    assert!(view.items.is_empty());
    assert_eq!(cleared.plan.flavour(), PlanFlavour::Todo);
    assert!(
        !dir.path().join(".fido-plan.json").exists(),
        "the other flavour is untouched"
    );
}

/// Polls the UI until its transcript holds an entry matching `wanted`.
async fn wait_for_entry(ui: &ActorRef<UiMessage>, wanted: impl Fn(&Entry) -> bool) -> Entry {
    for _ in 0..500 {
        let store = ractor::call_t!(ui, UiMessage::Snapshot, CALL_MS).unwrap();
        if let Some(entry) = store.transcript.iter().rev().find(|e| wanted(e)) {
            return entry.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the expected transcript entry never appeared");
}

#[tokio::test]
async fn undo_suspend_and_recall_from_the_ui_with_the_real_agent() {
    use crate::protocol::{Message, ToolCall};
    use crate::tools::{InvocationContext, ToolCatalog};

    let dir = tempfile::tempdir().unwrap();
    let env = crate::tools::testing::env(dir.path());
    // A file change the journal can undo.
    std::fs::write(dir.path().join("a.txt"), "before\n").unwrap();
    let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
    let patch = ToolCall {
        id: "p".into(),
        name: "patch".into(),
        arguments: r#"{"path": "a.txt", "content": "after\n"}"#.into(),
    };
    let out = catalog
        .invoke(
            &patch,
            &env,
            &InvocationContext::main(),
            &[],
            &Default::default(),
        )
        .await;
    assert!(out.ok, "{}", out.content);

    let info = journal::SessionInfo {
        workspace: dir.path().display().to_string(),
        provider: "t".into(),
        model: "t".into(),
    };
    let session = Arc::new(journal::create(dir.path(), &info, None).unwrap());
    let commands = Arc::new(EngineCommands {
        default_approval: ApprovalPolicy::OnRequest,
        safety: None,
        instruction_files: Vec::new(),
        journal: Some(session.clone()),
        config: None,
        workspace: dir.path().to_path_buf(),
        flavour: PlanFlavour::UpdatePlan,
        plans: PlanStore::new(dir.path(), dir.path().join(".fido-plan.json")),
        todos: TodoStore::in_workspace(dir.path()),
    });
    let (ui, agent) = ui_with_agent(env, commands).await;

    type_line(&ui, "/undo");
    let undone = wait_for_entry(
        &ui,
        |e| matches!(e, Entry::Info(t) if t.starts_with("undone")),
    )
    .await;
    assert!(
        matches!(&undone, Entry::Info(t) if t.contains("a.txt")),
        "{undone:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "before\n"
    );

    type_line(&ui, "say hello");
    for _ in 0..500 {
        let store = ractor::call_t!(ui, UiMessage::Snapshot, CALL_MS).unwrap();
        if !store.turn.is_busy() && store.transcript.iter().any(|e| matches!(e, Entry::User(_))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    type_line(&ui, "/suspend");
    let saved = wait_for_entry(
        &ui,
        |e| matches!(e, Entry::Info(t) if t.starts_with("bookmarked as")),
    )
    .await;
    let Entry::Info(saved) = saved else {
        unreachable!()
    };
    let name = saved
        .split_whitespace()
        .nth(2)
        .unwrap()
        .trim_end_matches(';')
        .to_string();
    assert!(
        saved.ends_with(&format!(
            "/recall {name} brings the conversation back to this point"
        )),
        "{saved}"
    );
    // The same name twice in a session is refused.
    type_line(&ui, &format!("/suspend {name}"));
    wait_for_entry(
        &ui,
        |e| matches!(e, Entry::Error(t) if t.contains("already has a bookmark")),
    )
    .await;

    // Replace the agent's history, then recall the bookmark by name.
    let empty = vec![Message::System {
        content: "system".into(),
    }];
    ractor::call_t!(
        agent,
        |reply| AgentMessage::ReplaceHistory {
            history: empty,
            reply
        },
        CALL_MS
    )
    .unwrap()
    .unwrap();
    type_line(&ui, &format!("/recall {name}"));
    let recalled = wait_for_entry(
        &ui,
        |e| matches!(e, Entry::Info(t) if t.starts_with("recalled")),
    )
    .await;
    assert!(
        matches!(&recalled, Entry::Info(t) if t.contains("recalled 2 messages from bookmark")),
        "{recalled:?}"
    );
    let conversation = ractor::call_t!(agent, AgentMessage::Snapshot, CALL_MS)
        .unwrap()
        .unwrap();
    assert_eq!(conversation.messages()[1], Message::user("say hello"));

    // The bookmark is in this session's journal: no copy was written.
    let journals: Vec<_> = std::fs::read_dir(journal::dir(dir.path()))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(journals, [session.path().to_path_buf()]);
    type_line(&ui, "/sessions");
    let bookmark_line = format!("\n    bookmark {name}  ");
    wait_for_entry(&ui, |e| {
        matches!(e, Entry::Local(t) if t.contains("(this one)  say hello") && t.contains(&bookmark_line))
    })
    .await;
}

/// The commands of a session in `dir` whose journal is `journal`.
fn commands_in(dir: &std::path::Path, journal: Option<Arc<Journal>>) -> EngineCommands {
    EngineCommands {
        default_approval: ApprovalPolicy::OnRequest,
        safety: None,
        instruction_files: Vec::new(),
        journal,
        config: None,
        workspace: dir.to_path_buf(),
        flavour: PlanFlavour::UpdatePlan,
        plans: PlanStore::new(dir, dir.join(".fido-plan.json")),
        todos: TodoStore::in_workspace(dir),
    }
}

#[test]
fn suspend_without_a_session_journal_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let commands = commands_in(dir.path(), None);
    let Err(refused) = commands.bookmark(Some("x")) else {
        panic!("a bookmark without a journal");
    };
    assert!(
        refused.to_string().contains("this session has none"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn recall_takes_a_bookmark_then_a_session_id_then_an_older_saved_file() {
    use crate::protocol::Message;

    let dir = tempfile::tempdir().unwrap();
    let info = journal::SessionInfo {
        workspace: dir.path().display().to_string(),
        provider: "t".into(),
        model: "t".into(),
    };
    let session =
        Arc::new(tokio::task::block_in_place(|| journal::create(dir.path(), &info, None)).unwrap());
    let system = Message::System {
        content: "system".into(),
    };
    let marked = vec![system.clone(), Message::user("kept")];
    session.bookmark(0, &marked, "b1").await.unwrap();
    let mut later = marked.clone();
    later.push(Message::user("after"));
    session.record(0, &later).await;
    // A conversation the `/suspend` of an earlier version saved.
    let old = serde_json::json!({
        "savedAt": "2025-01-01T00:00:00.000Z",
        "messages": [system, Message::user("legacy")],
    });
    let old_path = journal::dir(dir.path()).join("old.json");
    std::fs::write(old_path, old.to_string()).unwrap();
    let commands = commands_in(dir.path(), Some(session.clone()));
    let recall = |name| tokio::task::block_in_place(|| commands.recall(Some(name)));

    let (what, messages) = recall("b1").unwrap();
    assert_eq!(what, format!("bookmark b1 of session {}", session.id()));
    assert_eq!(messages, marked);
    let (what, messages) = recall(session.id()).unwrap();
    assert_eq!(what, session.id());
    assert_eq!(messages, later);
    let (what, messages) = recall("old").unwrap();
    assert_eq!(what, "old");
    assert_eq!(messages[1], Message::user("legacy"));
    let missing = recall("nothing").unwrap_err().to_string();
    assert!(
        missing.starts_with("no bookmark is named nothing, and no session nothing"),
        "{missing}"
    );
    let listed = tokio::task::block_in_place(|| commands.sessions()).unwrap();
    assert!(listed[0].current && listed[0].bookmarks[0].name == "b1");
    let listed = crate::ui::replies::sessions_text(&listed);
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].contains("(this one)  kept"), "{listed}");
    assert!(lines[1].starts_with("    bookmark b1  "), "{listed}");
    assert!(lines[2].starts_with("old  saved  legacy"), "{listed}");
}

#[test]
fn model_builds_the_same_provider_with_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = Overrides {
        workspace: Some(dir.path().to_path_buf()),
        values: Vec::new(),
    };
    let env = [
        ("FIDO_PROVIDER".to_string(), "openai".to_string()),
        (
            "FIDO_BASE_URL".to_string(),
            "http://127.0.0.1:9/v1".to_string(),
        ),
        ("FIDO_MODEL".to_string(), "first-model".to_string()),
    ];
    let config = Config::load_from(&overrides, &env).unwrap();
    let commands = EngineCommands::new(&config, ApprovalPolicy::OnRequest);
    let provider = commands.provider_for("second-model").unwrap();
    assert_eq!(provider.model(), "second-model");
    assert_eq!(provider.name(), "openai");
    assert!(matches!(
        commands.provider_for("  "),
        Err(SwitchError::NoModelName)
    ));
    let status = commands.status();
    assert_eq!(
        status.sandbox_mode.map(|m| m.to_string()).as_deref(),
        Some("workspace-write")
    );
    assert_eq!(
        status.approval_policy.map(|p| p.to_string()).as_deref(),
        Some("on-request")
    );
}
