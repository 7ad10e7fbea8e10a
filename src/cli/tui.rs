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
use crate::agent::ops::{self, CommandError, FrontDesk, LocalCommands};
use crate::config::{Config, Overrides};
use crate::plan::todo::{self, TodoStore};
use crate::plan::{PlanFlavour, PlanSnapshot, PlanStore};
use crate::protocol::ApprovalPolicy;
use crate::protocol::op::{PlanCleared, StatusInfo};
use crate::provider::SwitchError;
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
        default_delegation: crate::protocol::changes::DelegationPolicy::INTERACTIVE,
    };
    let desk_events = sink.clone();
    let runtime = match Runtime::start(&config, interaction, sink, resume).await {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err.to_string()),
    };
    if let Err(err) = ui::terminal::check_interactive() {
        runtime.shutdown().await;
        return fail(&err.to_string());
    }
    let mut local_commands = CliLocalCommands::new(&config);
    local_commands.instruction_files = runtime.instructions.paths();
    local_commands.journal = runtime.journal();
    let local_commands = Arc::new(local_commands);
    let history = ui::PromptHistory::for_workspace(&config.workspace);
    let mut warnings = config.warnings.clone();
    warnings.extend(runtime.instructions.warnings.iter().cloned());
    warnings.extend(runtime.mcp.warnings().iter().cloned());
    warnings.extend(runtime.sandbox_warnings());
    let switcher = local_commands.clone();
    let desk = FrontDesk {
        events: desk_events,
        commands: local_commands,
        asks: Some(asks),
        switch_model: Some(Arc::new(move |model: &str| switcher.provider_for(model))),
    };
    let engine = ops::serve(runtime.actor.clone(), desk);
    let result = ui::run(UiSetup {
        engine,
        events: receiver,
        panic_is_caught: crate::agent::recover::panic_is_recoverable,
        warnings,
        history,
        resumed: resumed_note(&runtime),
    })
    .await;
    // Every subagent is gone and a running turn is cancelled before exit.
    runtime.shutdown().await;
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
fn resumed_note(runtime: &Runtime) -> Option<(Vec<crate::protocol::Message>, String)> {
    if runtime.resumed.is_empty() {
        return None;
    }
    let id = runtime.id.as_deref().unwrap_or("?");
    let note = format!(
        "resumed session {id}: {} messages restored; the workspace plan was re-delivered to the model",
        runtime.resumed.len()
    );
    Some((runtime.resumed.clone(), note))
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
        .fmt_fields(super::log_fields::escaped())
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
            plans: PlanStore::new(&config.workspace, config.plan_file.clone()),
            todos: TodoStore::in_workspace(&config.workspace),
        }
    }
}

impl LocalCommands for CliLocalCommands {
    fn changes(
        &self,
        verb: crate::protocol::op::ChangesVerb,
        id: Option<&str>,
    ) -> Result<(bool, String), CommandError> {
        let workspace =
            crate::workspace::Workspace::new(&self.workspace).map_err(|e| e.to_string())?;
        Ok(super::changes::for_tui(&workspace, verb, id)?)
    }

    fn show(&self) -> Result<String, CommandError> {
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

    fn clear(&self) -> Result<PlanCleared, CommandError> {
        match self.flavour {
            PlanFlavour::UpdatePlan => Ok(self.clear_update_plan()?),
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

    fn undo(&self) -> Result<String, CommandError> {
        Ok(super::undo::undo_last(&self.workspace)?)
    }

    fn bookmark(&self, name: Option<&str>) -> Result<(Arc<Journal>, String), CommandError> {
        let Some(journal) = &self.journal else {
            return Err("/suspend bookmarks the session journal, and this session has none (it could not be created; .fido-state/logs/tui.log says why)".to_string().into());
        };
        let name =
            journal::bookmark_name_for(journal.path(), name).map_err(|err| err.to_string())?;
        Ok((journal.clone(), name))
    }

    fn recall(
        &self,
        name: Option<&str>,
    ) -> Result<(String, Vec<crate::protocol::Message>), CommandError> {
        let Some(name) = name else {
            // The newest journaled session, else the newest conversation
            // saved by earlier versions.
            return Ok(journal::load_messages(&self.workspace, journal::Pick::Last)
                .map_err(|err| err.to_string())
                .or_else(|err| {
                    crate::store::saved::load(&self.workspace, None).map_err(|_| err)
                })?);
        };
        // A bookmark first (newest session first), then a session id, then
        // a conversation saved by earlier versions (`NAME.json`).
        if let Some(found) =
            journal::find_bookmark(&self.workspace, name).map_err(|err| err.to_string())?
        {
            let what = format!("bookmark {name} of session {}", found.session);
            return Ok((what, found.messages));
        }
        match journal::load_messages(&self.workspace, journal::Pick::Id(name)) {
            Ok(found) => Ok(found),
            Err(_) if saved_exists(&self.workspace, name) => {
                Ok(crate::store::saved::load(&self.workspace, Some(name))
                    .map_err(|err| err.to_string())?)
            }
            Err(err) => Err(format!("no bookmark is named {name}, and {err}").into()),
        }
    }

    fn status(&self) -> StatusInfo {
        self.status_info()
    }

    fn sessions(&self) -> Result<String, CommandError> {
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

    fn provider_for(&self, model: &str) -> Result<Arc<dyn crate::provider::Provider>, SwitchError> {
        let Some(config) = &self.config else {
            return Err(SwitchError::Unavailable);
        };
        let model = model.trim();
        if model.is_empty() || model.chars().any(char::is_control) {
            return Err(SwitchError::NoModelName);
        }
        let mut config = config.clone();
        config.model = model.to_string();
        crate::runtime::provider::build_provider(&config).map_err(|source| SwitchError::Build {
            model: model.to_string(),
            source,
        })
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
#[path = "tui_tests.rs"]
mod tests;
