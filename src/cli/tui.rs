//! `fido [-C DIR]`: the interactive full-screen session.
//!
//! Wires the same [`Runtime`] as `fido exec` (provider, catalog, tool
//! environment, subagent supervisor, `AgentActor`) to the terminal UI
//! instead of the headless printer. Configuration and provider errors are
//! one sentence on stderr and exit 1, before the screen is touched. Logs
//! never go to the terminal the UI draws on: they go to
//! `.fido-state/logs/tui.log` in the workspace (or nowhere, when that
//! cannot be opened).

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use super::fail;
use super::preamble::{ConfigWarnings, block_on, load_config};
use crate::agent::asks::PendingAsks;
use crate::agent::ops::{self, FrontDesk, LocalCommands};
use crate::config::{Config, Overrides};
use crate::plan::todo::{self, TodoStore};
use crate::plan::{PlanFlavour, PlanSnapshot, PlanStore};
use crate::protocol::ApprovalPolicy;
use crate::protocol::op::{PlanCleared, StatusInfo};
use crate::runtime::{Interaction, ResumeFrom, Runtime};
use crate::store::journal::{self, Journal};
use crate::ui::{self, UiSetup};
use crate::workspace::LOGS_DIR;

pub fn run(overrides: &Overrides, resume: Option<ResumeFrom>) -> ExitCode {
    // The UI shows the warnings; logging starts in `session`, into a file.
    let config = match load_config(overrides, ConfigWarnings::Keep) {
        Ok(config) => config,
        Err(code) => return code,
    };
    block_on(session(config, resume)).unwrap_or_else(|message| fail(&message))
}

async fn session(config: Config, resume: Option<ResumeFrom>) -> ExitCode {
    // Before anything else can log (never into the terminal UI).
    if config.workspace.is_dir() {
        init_file_logging(&config.workspace);
    }
    let (sink, receiver) = crate::protocol::event_queue::channel();
    // Approvals and questions go to the UI as events with an id.
    let asks = PendingAsks::new(sink.clone());
    let interaction = Interaction {
        user: Some(asks.clone()),
        approver: Some(asks.clone()),
        default_approval: ApprovalPolicy::OnRequest,
    };
    let desk_events = sink.clone();
    let session = match Runtime::start(&config, interaction, sink, resume).await {
        Ok(session) => session,
        Err(message) => return fail(&message),
    };
    if let Err(err) = ui::terminal::check_interactive() {
        session.shutdown().await;
        return fail(&err.to_string());
    }
    let mut local_commands = CliLocalCommands::new(&config);
    local_commands.instruction_files = session.instructions.paths();
    local_commands.journal = session.journal();
    let local_commands = Arc::new(local_commands);
    let history = ui::PromptHistory::for_workspace(&config.workspace);
    let mut warnings = config.warnings.clone();
    warnings.extend(session.instructions.warnings.iter().cloned());
    warnings.extend(session.mcp.warnings().iter().cloned());
    let switcher = local_commands.clone();
    let desk = FrontDesk {
        events: desk_events,
        commands: local_commands,
        asks: Some(asks),
        switch_model: Some(Arc::new(move |model: &str| switcher.provider_for(model))),
    };
    let engine = ops::serve(session.actor.clone(), desk);
    let result = ui::run(UiSetup {
        engine,
        events: receiver,
        panic_is_caught: crate::agent::recover::panic_is_recoverable,
        warnings,
        history,
        resumed: resumed_note(&session),
    })
    .await;
    // Every subagent is gone and a running turn is cancelled before exit.
    session.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err.to_string()),
    }
}

/// Whether an older `/suspend` file (`NAME.json`) exists.
fn saved_exists(workspace: &Path, name: &str) -> bool {
    !name.contains('/')
        && crate::store::journal::dir(workspace)
            .join(format!("{name}.json"))
            .is_file()
}

/// A resumed session's messages and the line that says so.
fn resumed_note(session: &Runtime) -> Option<(Vec<crate::protocol::Message>, String)> {
    if session.resumed.is_empty() {
        return None;
    }
    let id = session.id.as_deref().unwrap_or("?");
    let note = format!(
        "resumed session {id}: {} messages restored; the workspace plan was re-delivered to the model",
        session.resumed.len()
    );
    Some((session.resumed.clone(), note))
}

/// Tracing into `<workspace>/.fido-state/logs/tui.log`; `RUST_LOG` is
/// honoured, the default is `info`. Without a writable log file, nowhere.
fn init_file_logging(workspace: &Path) {
    let dir = workspace.join(LOGS_DIR);
    let file = fs::create_dir_all(&dir).and_then(|()| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("tui.log"))
    });
    let Ok(file) = file else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init();
}

/// `/plan` and `/plan clear` on the configured flavour's state: the same
/// text and the same change as `fido plan show` and `fido plan clear`.
struct CliLocalCommands {
    /// For `/model`: the session's provider settings with another model.
    config: Option<Config>,
    workspace: std::path::PathBuf,
    flavour: PlanFlavour,
    /// `update_plan` state.
    plans: PlanStore,
    /// `todo` state.
    todos: TodoStore,
    /// The AGENTS.md files in the system prompt, for `/status`.
    instruction_files: Vec<String>,
    /// This session's journal, where `/suspend` bookmarks go.
    journal: Option<Arc<Journal>>,
}

impl CliLocalCommands {
    fn new(config: &Config) -> Self {
        CliLocalCommands {
            instruction_files: Vec::new(),
            journal: None,
            config: Some(config.clone()),
            workspace: config.workspace.clone(),
            flavour: config.plan_tool,
            plans: PlanStore::new(config.plan_file.clone()),
            todos: TodoStore::in_workspace(&config.workspace),
        }
    }
}

impl LocalCommands for CliLocalCommands {
    fn show(&self) -> Result<String, String> {
        let (text, warning) = match self.flavour {
            PlanFlavour::UpdatePlan => {
                let loaded = self.plans.load().map_err(|err| err.to_string())?;
                (super::plan::render(&loaded.state), loaded.warning)
            }
            PlanFlavour::Todo => {
                let loaded = self.todos.load().map_err(|err| err.to_string())?;
                (todo::format::list_view(&loaded.state).0, loaded.warning)
            }
        };
        Ok(match warning {
            Some(warning) => format!("warning: {warning}\n{text}"),
            None => text,
        })
    }

    fn clear(&self) -> Result<PlanCleared, String> {
        match self.flavour {
            PlanFlavour::UpdatePlan => self.clear_update_plan(),
            PlanFlavour::Todo => {
                let output = todo::run_call(&self.todos, &serde_json::json!({"action": "clear"}))
                    .map_err(|err| err.to_string())?;
                if let Some(warning) = output.warning {
                    tracing::warn!("{warning}");
                }
                Ok(PlanCleared {
                    message: output.content,
                    plan: PlanSnapshot::Todo(output.details),
                })
            }
        }
    }

    fn undo(&self) -> Result<String, String> {
        let workspace =
            crate::workspace::Workspace::new(&self.workspace).map_err(|e| e.to_string())?;
        let undo = crate::store::undo::UndoLog::new(&workspace.root);
        match undo.undo_last(&workspace) {
            Ok(Some(entry)) => Ok(format!("undone: {} of {}", entry.kind, entry.path)),
            Ok(None) => Ok("nothing to undo".into()),
            Err(err) => Err(format!("cannot undo: {err}")),
        }
    }

    fn bookmark(&self, name: Option<&str>) -> Result<(Arc<Journal>, String), String> {
        let Some(journal) = &self.journal else {
            return Err("/suspend bookmarks the session journal, and this session has none (it could not be created; .fido-state/logs/tui.log says why)".into());
        };
        let name = journal::bookmark_name_for(journal.path(), name)?;
        Ok((journal.clone(), name))
    }

    fn recall(
        &self,
        name: Option<&str>,
    ) -> Result<(String, Vec<crate::protocol::Message>), String> {
        let Some(name) = name else {
            // The newest journaled session, else the newest conversation
            // saved by earlier versions.
            return journal::load_messages(&self.workspace, journal::Pick::Last)
                .or_else(|err| crate::store::saved::load(&self.workspace, None).map_err(|_| err));
        };
        // A bookmark first (newest session first), then a session id, then
        // a conversation saved by earlier versions (`NAME.json`).
        if let Some(found) = journal::find_bookmark(&self.workspace, name)? {
            let what = format!("bookmark {name} of session {}", found.session);
            return Ok((what, found.messages));
        }
        match journal::load_messages(&self.workspace, journal::Pick::Id(name)) {
            Ok(found) => Ok(found),
            Err(_) if saved_exists(&self.workspace, name) => {
                crate::store::saved::load(&self.workspace, Some(name))
            }
            Err(err) => Err(format!("no bookmark is named {name}, and {err}")),
        }
    }

    fn status(&self) -> StatusInfo {
        self.status_info()
    }

    fn sessions(&self) -> Result<String, String> {
        let journaled = journal::list(&self.workspace)
            .map_err(|err| format!("cannot list the sessions: {err}"))?;
        let saved = crate::store::saved::list(&self.workspace)
            .map_err(|err| format!("cannot list saved conversations: {err}"))?;
        let this_id = self.journal.as_ref().map(|j| j.id());
        let mut lines = Vec::new();
        for s in &journaled {
            let this = if this_id == Some(s.id.as_str()) {
                " (this one)"
            } else {
                ""
            };
            lines.push(format!("{}  {}{this}  {}", s.id, s.status, s.first_prompt));
            lines.extend(
                s.bookmarks
                    .iter()
                    .map(|b| format!("    bookmark {}  {}", b.name, b.at)),
            );
        }
        lines.extend(
            saved
                .iter()
                .map(|s| format!("{}  saved  {}", s.name, s.preview)),
        );
        if lines.is_empty() {
            return Ok("no sessions yet".into());
        }
        Ok(lines.join("\n"))
    }
}

impl CliLocalCommands {
    fn status_info(&self) -> StatusInfo {
        let safety = self.config.as_ref().map(|config| &config.safety);
        StatusInfo {
            sandbox_mode: safety.map(|s| s.sandbox_mode),
            // The TUI's default when the configuration names none.
            approval_policy: safety.map(|s| s.approval_policy.unwrap_or(ApprovalPolicy::OnRequest)),
            instruction_files: self.instruction_files.clone(),
        }
    }

    fn provider_for(&self, model: &str) -> Result<Arc<dyn crate::provider::Provider>, String> {
        let Some(config) = &self.config else {
            return Err("/model is not available here".into());
        };
        let model = model.trim();
        if model.is_empty() || model.chars().any(char::is_control) {
            return Err("/model needs a model name, e.g. /model gpt-4.1".into());
        }
        let mut config = config.clone();
        config.model = model.to_string();
        crate::runtime::provider::build_provider(&config)
            .map_err(|err| format!("cannot switch to {model}: {err}"))
    }

    fn clear_update_plan(&self) -> Result<PlanCleared, String> {
        let (state, warning) = self.plans.clear().map_err(|err| err.to_string())?;
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        Ok(PlanCleared {
            message: format!("Plan cleared (version {}).", state.version),
            plan: PlanSnapshot::UpdatePlan(state),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
    use ractor::ActorRef;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use tokio::sync::oneshot;

    use ractor::Actor;

    use super::*;
    use crate::agent::AgentMessage;
    use crate::plan::{PlanItem, PlanState, Status};
    use crate::protocol::{Event, EventKind};
    use crate::ui::store::Entry;
    use crate::ui::{UiActor, UiArguments, UiMessage};

    /// Longest wait for an actor's answer: a hung test fails instead.
    const CALL_MS: u64 = 30_000;

    /// The real agent on `env` (its model says "hello back"), served with
    /// `commands` to a UI on a test backend; the engine's events reach the
    /// UI through the terminal's forwarder.
    async fn ui_with_agent(
        env: crate::tools::ToolEnv,
        commands: Arc<CliLocalCommands>,
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
            journal: None,
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
            history: Default::default(),
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
            Ok::<_, ()>(current.successor(
                "two steps".into(),
                items,
                "2025-01-01T00:00:00.000Z".into(),
            ))
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
        let store = PlanStore::new(path.clone());
        let before = saved_plan(&store);
        let commands = Arc::new(CliLocalCommands {
            instruction_files: Vec::new(),
            journal: None,
            config: None,
            workspace: dir.path().to_path_buf(),
            flavour: PlanFlavour::UpdatePlan,
            plans: PlanStore::new(path.clone()),
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
        let rendered = Entry::Local(super::super::plan::render(&before));
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
        let commands = CliLocalCommands {
            instruction_files: Vec::new(),
            journal: None,
            config: None,
            workspace: dir.path().to_path_buf(),
            flavour: PlanFlavour::Todo,
            plans: PlanStore::new(dir.path().join(".fido-plan.json")),
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
        assert_eq!(shown, expected);
        let view =
            crate::ui::plan_view::PlanView::from_event(&PlanSnapshot::Todo(envelope)).unwrap();
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

        let commands = Arc::new(CliLocalCommands {
            instruction_files: Vec::new(),
            journal: None,
            config: None,
            workspace: dir.path().to_path_buf(),
            flavour: PlanFlavour::UpdatePlan,
            plans: PlanStore::new(dir.path().join(".fido-plan.json")),
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
            if !store.turn.is_busy() && store.transcript.iter().any(|e| matches!(e, Entry::User(_)))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        type_line(&ui, "/suspend");
        let saved = wait_for_entry(
            &ui,
            |e| matches!(e, Entry::Info(t) if t.starts_with("conversation saved")),
        )
        .await;
        let Entry::Info(saved) = saved else {
            unreachable!()
        };
        let name = saved
            .split_whitespace()
            .nth(3)
            .unwrap()
            .trim_end_matches(';')
            .to_string();

        // Replace the agent's history, then recall the saved one by name.
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
            matches!(&recalled, Entry::Info(t) if t.contains("recalled 2 messages")),
            "{recalled:?}"
        );
        let conversation = ractor::call_t!(agent, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        assert_eq!(conversation.messages()[1], Message::user("say hello"));

        type_line(&ui, "/sessions");
        wait_for_entry(
            &ui,
            |e| matches!(e, Entry::Local(t) if t.contains(&name) && t.contains("say hello")),
        )
        .await;
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
        let commands = CliLocalCommands::new(&config);
        let provider = commands.provider_for("second-model").unwrap();
        assert_eq!(provider.model(), "second-model");
        assert_eq!(provider.name(), "openai");
        assert!(commands.provider_for("  ").is_err());
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
}
