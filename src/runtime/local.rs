//! The local commands (`/plan`, `/plan clear`, `/undo`, `/suspend`,
//! `/recall`, `/sessions`, `/changes`, `/status`, `/model`) on the
//! session's stores, answered inside the engine with data: the same data
//! and the same changes as the command line's `fido plan`, `fido undo`,
//! `fido sessions` and `fido changes`. Each front end lays the answers out
//! its own way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agent::ops::{CommandError, LocalCommands};
use crate::config::Config;
use crate::plan::todo::{self, TodoStore};
use crate::plan::{PlanFlavour, PlanSnapshot, PlanState, PlanStore, Status};
use crate::protocol::ApprovalPolicy;
use crate::protocol::op::{
    BookmarkEntry, ChangesOp, PlanCleared, PlanShown, SessionEntry, SessionStatus, StatusInfo,
    UndoneChange,
};
use crate::provider::SwitchError;
use crate::store::journal::{self, Journal};
use crate::store::prompt_history;
use crate::store::state_file::StateFileError;
use crate::store::undo::{UndoError, UndoLog};
use crate::text::escape_line;
use crate::tools::approval::SettingsCell;
use crate::workspace::Workspace;

/// The engine's local commands on the configured flavour's state.
pub struct EngineCommands {
    /// For `/model`: the session's provider settings with another model.
    pub(crate) config: Option<Config>,
    pub(crate) workspace: PathBuf,
    pub(crate) flavour: PlanFlavour,
    /// `update_plan` state.
    pub(crate) plans: PlanStore,
    /// `todo` state.
    pub(crate) todos: TodoStore,
    /// The AGENTS.md files in the system prompt, for `/status`.
    pub(crate) instruction_files: Vec<String>,
    /// This session's journal, where `/suspend` bookmarks go.
    pub(crate) journal: Option<Arc<Journal>>,
    /// The approval policy when the configuration names none (the front
    /// end's default), for `/status`.
    pub(crate) default_approval: ApprovalPolicy,
    /// The session's settings as they are now (a mode switch changes
    /// them), for `/status`; `None`: the configuration's.
    pub(crate) safety: Option<SettingsCell>,
}

impl EngineCommands {
    pub fn new(config: &Config, default_approval: ApprovalPolicy) -> Self {
        EngineCommands {
            instruction_files: Vec::new(),
            journal: None,
            config: Some(config.clone()),
            workspace: config.workspace.clone(),
            flavour: config.plan_tool,
            plans: PlanStore::new(&config.workspace, config.plan_file.clone()),
            todos: TodoStore::in_workspace(&config.workspace),
            default_approval,
            safety: None,
        }
    }

    /// `/model NAME`: the session's provider with another model.
    pub fn provider_for(
        &self,
        model: &str,
    ) -> Result<Arc<dyn crate::provider::Provider>, SwitchError> {
        let Some(config) = &self.config else {
            return Err(SwitchError::Unavailable);
        };
        let model = model.trim();
        if model.is_empty() || model.chars().any(char::is_control) {
            return Err(SwitchError::NoModelName);
        }
        let mut config = config.clone();
        config.model = model.to_string();
        super::provider::build_provider(&config).map_err(|source| SwitchError::Build {
            model: model.to_string(),
            source,
        })
    }

    fn clear_update_plan(&self) -> Result<PlanCleared, StateFileError> {
        let (state, warning) = self.plans.clear()?;
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        Ok(PlanCleared {
            message: format!("Plan cleared (version {}).", state.version),
            plan: PlanSnapshot::UpdatePlan(state),
        })
    }
}

impl LocalCommands for EngineCommands {
    fn changes(&self, request: &ChangesOp) -> Result<(bool, String), CommandError> {
        let workspace = Workspace::new(&self.workspace).map_err(|e| e.to_string())?;
        Ok(crate::changes::view::for_tui(&workspace, request)?)
    }

    fn show(&self) -> Result<PlanShown, CommandError> {
        Ok(match self.flavour {
            PlanFlavour::UpdatePlan => {
                let loaded = self.plans.load().map_err(|err| err.to_string())?;
                PlanShown {
                    text: plan_text(&loaded.state),
                    plan: PlanSnapshot::UpdatePlan(loaded.state),
                    warning: loaded.warning,
                }
            }
            PlanFlavour::Todo => {
                let loaded = self.todos.load().map_err(|err| err.to_string())?;
                let (text, envelope) = todo::format::list_view(&loaded.state);
                PlanShown {
                    text,
                    plan: PlanSnapshot::Todo(envelope),
                    warning: loaded.warning,
                }
            }
        })
    }

    fn clear(&self) -> Result<PlanCleared, CommandError> {
        match self.flavour {
            PlanFlavour::UpdatePlan => Ok(self.clear_update_plan().map_err(|e| e.to_string())?),
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

    fn undo(&self) -> Result<Option<UndoneChange>, CommandError> {
        Ok(undo_last(&self.workspace).map_err(|e| e.to_string())?)
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
        if let Some(live) = &self.safety {
            let live = live.get();
            return StatusInfo {
                sandbox_mode: Some(live.sandbox_mode),
                approval_policy: Some(live.approval_policy),
                instruction_files: self.instruction_files.clone(),
            };
        }
        let config = self.config.as_ref();
        StatusInfo {
            sandbox_mode: config.map(|c| c.sandbox.mode),
            approval_policy: config.map(|c| c.approvals.policy_or(self.default_approval)),
            instruction_files: self.instruction_files.clone(),
        }
    }

    fn sessions(&self) -> Result<Vec<SessionEntry>, CommandError> {
        let journaled = journal::list(&self.workspace)
            .map_err(|err| format!("cannot list the sessions: {err}"))?;
        let saved = crate::store::saved::list(&self.workspace)
            .map_err(|err| format!("cannot list saved conversations: {err}"))?;
        let this_id = self.journal.as_ref().map(|j| j.id());
        let mut sessions: Vec<SessionEntry> = journaled
            .into_iter()
            .map(|s| SessionEntry {
                current: this_id == Some(s.id.as_str()),
                id: s.id,
                status: s.status,
                preview: s.first_prompt,
                bookmarks: s
                    .bookmarks
                    .into_iter()
                    .map(|b| BookmarkEntry {
                        name: b.name,
                        at: b.at,
                    })
                    .collect(),
            })
            .collect();
        sessions.extend(saved.into_iter().map(|s| SessionEntry {
            id: s.name,
            status: SessionStatus::Saved,
            preview: s.preview,
            current: false,
            bookmarks: Vec::new(),
        }));
        Ok(sessions)
    }

    fn prompt_history(&self) -> Vec<String> {
        prompt_history::load(&prompt_history::path_in(&self.workspace))
    }

    fn remember_prompt(&self, line: &str) {
        let path = prompt_history::path_in(&self.workspace);
        if let Err(err) = prompt_history::append(&path, line) {
            tracing::warn!(error = %err, "cannot save the prompt history");
        }
    }
}

/// Whether an older `/suspend` file (`NAME.json`) exists.
fn saved_exists(workspace: &Path, name: &str) -> bool {
    !name.contains('/')
        && crate::store::journal::dir(workspace)
            .join(format!("{name}.json"))
            .is_file()
}

/// Why `/undo` and `fido undo` changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum UndoFailed {
    #[error("workspace {}: {source}", .root.display())]
    Workspace {
        root: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot undo: {0}")]
    Undo(#[source] UndoError),
}

/// Reverts the latest undoable change of the workspace at `root` (`None`:
/// there was none); `/undo` and `fido undo` both go through it.
pub fn undo_last(root: &Path) -> Result<Option<UndoneChange>, UndoFailed> {
    let workspace = Workspace::new(root).map_err(|source| UndoFailed::Workspace {
        root: root.to_path_buf(),
        source,
    })?;
    let undo = UndoLog::new(&workspace.root);
    match undo.undo_last(&workspace) {
        Ok(entry) => Ok(entry.map(|entry| UndoneChange {
            kind: entry.kind.into(),
            path: entry.path,
        })),
        Err(err) => Err(UndoFailed::Undo(err)),
    }
}

/// The plan as text for a person (`fido plan show`, `/plan`): every item
/// with every field, each on its own line (a field's newlines and control
/// characters shown escaped: the plan file is the repository's, a title
/// cannot forge an item).
pub fn plan_text(state: &PlanState) -> String {
    if state.version == 0 {
        return "No plan yet.\n".into();
    }
    let mut out = format!(
        "Plan v{} · {} · {}\n",
        state.version,
        escape_line(state.updated_at.as_deref().unwrap_or("never updated")),
        escape_line(&state.reason)
    );
    if state.items.is_empty() {
        out.push_str("  (empty)\n");
    }
    for item in &state.items {
        let mark = match item.status {
            Status::Pending => "[ ]",
            Status::InProgress => "[>]",
            Status::Blocked => "[!]",
            Status::Done => "[x]",
        };
        out.push_str(&format!(
            "  {mark} {} — {} ({})\n",
            escape_line(&item.id),
            escape_line(&item.title),
            item.status.as_str()
        ));
        if let Some(details) = &item.details {
            out.push_str(&format!("      details: {}\n", escape_line(details)));
        }
        if !item.dependencies.is_empty() {
            out.push_str(&format!(
                "      depends on: {}\n",
                escape_line(&item.dependencies.join(", "))
            ));
        }
        if let Some(next) = &item.next_action {
            out.push_str(&format!("      next: {}\n", escape_line(next)));
        }
        for evidence in &item.evidence {
            out.push_str(&format!("      evidence: {}\n", escape_line(evidence)));
        }
    }
    out
}
