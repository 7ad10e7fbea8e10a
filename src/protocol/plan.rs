//! The plan as it crosses a boundary: the normalised state of each plan
//! flavour, and [`PlanSnapshot`], what a `plan_updated` event carries.
//!
//! The validation, the transitions and the stores are the plan module's;
//! here are the shapes only (contracts: `.fido-plan.json`, the `todo`
//! flavour's `details` envelope and `.fido-todo.json`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The plan of either flavour as the model last got it in a tool result:
/// on the wire `{"flavour": …, "plan": {…}}`, the flavour being its tool's
/// name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "flavour", content = "plan")]
pub enum PlanSnapshot {
    #[serde(rename = "update_plan")]
    UpdatePlan(PlanState),
    #[serde(rename = "todo")]
    Todo(TodoSnapshot),
}

impl PlanSnapshot {
    pub fn flavour(&self) -> PlanFlavour {
        match self {
            PlanSnapshot::UpdatePlan(_) => PlanFlavour::UpdatePlan,
            PlanSnapshot::Todo(_) => PlanFlavour::Todo,
        }
    }

    /// The plan object alone (what `fido tool call` prints as `details`).
    pub fn to_json(&self) -> Value {
        let plan = match self {
            PlanSnapshot::UpdatePlan(state) => serde_json::to_value(state),
            PlanSnapshot::Todo(envelope) => serde_json::to_value(envelope),
        };
        // Plain structs of strings, numbers and JSON values: cannot fail.
        plan.unwrap_or_default()
    }
}

/// Which plan tool a session advertises (exactly one, so the catalog stays
/// stable for the whole session); on the wire, the tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PlanFlavour {
    /// `update_plan`: atomic replacement, full normalised state.
    #[serde(rename = "update_plan")]
    UpdatePlan,
    /// `todo`: the rpiv-todo contract.
    #[serde(rename = "todo")]
    Todo,
}

impl PlanFlavour {
    pub fn tool_name(self) -> &'static str {
        match self {
            PlanFlavour::UpdatePlan => "update_plan",
            PlanFlavour::Todo => "todo",
        }
    }

    /// The flavour whose tool is called `name`, if any.
    pub fn of_tool(name: &str) -> Option<PlanFlavour> {
        [PlanFlavour::UpdatePlan, PlanFlavour::Todo]
            .into_iter()
            .find(|flavour| flavour.tool_name() == name)
    }
}

// ---- `update_plan` ----

/// Where an `update_plan` item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Blocked,
    Done,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Done => "done",
        }
    }

    pub fn parse(text: &str) -> Option<Status> {
        match text {
            "pending" => Some(Status::Pending),
            "in_progress" => Some(Status::InProgress),
            "blocked" => Some(Status::Blocked),
            "done" => Some(Status::Done),
            _ => None,
        }
    }
}

/// One normalised item: every field is present (empty optional text is
/// `null`, empty lists are `[]`), in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub id: String,
    pub title: String,
    pub status: Status,
    pub details: Option<String>,
    // Optional in the plan file's shape (README, "The plan"): a file that omits them still loads.
    #[serde(default)]
    pub dependencies: Vec<String>,
    pub next_action: Option<String>,
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// What changed since the previous version, so the model notices an
/// accidental rename or a dropped item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanChanges {
    pub added: Vec<String>,
    pub dropped: Vec<String>,
    /// `id: old → new` for each item whose status changed.
    pub status_changed: Vec<String>,
}

/// The complete plan state (contract: the shape of `.fido-plan.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanState {
    pub version: u64,
    /// RFC 3339 UTC with milliseconds; `null` before the first update.
    pub updated_at: Option<String>,
    pub reason: String,
    pub items: Vec<PlanItem>,
    /// Changes made by the update that produced this version. Not part of
    /// the plan file's `{version, updatedAt, reason, items}` shape, so a file
    /// without it still loads (instead of being set aside as corrupt).
    #[serde(default)]
    pub changes: PlanChanges,
}

impl PlanState {
    /// The state before any plan exists.
    pub fn empty() -> Self {
        PlanState {
            version: 0,
            updated_at: None,
            reason: String::new(),
            items: Vec::new(),
            changes: PlanChanges::default(),
        }
    }

    /// The exact JSON text the model receives and the file holds.
    pub fn to_json_text(&self) -> String {
        // Serialising plain structs of strings cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

// ---- `todo` ----

super::schema::string_enum! {
    /// `details.action` of a `todo` call: the action it ran, or `batch`
    /// for an `ops` call (or one rejected before it had a usable action).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum TodoAction {
        Create = "create",
        Update = "update",
        List = "list",
        Get = "get",
        Delete = "delete",
        Clear = "clear",
        Batch = "batch",
    }
}

/// The `details` envelope of a `todo` call: what it did, with what
/// arguments, and the whole state after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TodoSnapshot {
    pub action: TodoAction,
    /// The call's arguments as the model sent them.
    pub params: Value,
    pub tasks: Vec<Task>,
    pub next_id: TaskId,
    /// The in-band error of a rejected call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanRef>,
}

/// A task id. JSON numbers; the counter starts at 1 and ids are never reused
/// (a tombstone keeps its id).
pub type TaskId = i64;

/// Where a `todo` task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Pending,
    InProgress,
    Completed,
    Deferred,
    Deleted,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Pending,
        TaskStatus::InProgress,
        TaskStatus::Completed,
        TaskStatus::Deferred,
        TaskStatus::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Deferred => "deferred",
            TaskStatus::Deleted => "deleted",
        }
    }

    pub fn parse(text: &str) -> Option<TaskStatus> {
        TaskStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// Where a task came from: only plan items are tagged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Plan,
}

/// One task, in the reference's field order. Absent optional fields are
/// omitted from JSON, as in the reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: TaskId,
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    pub status: TaskStatus,
    /// Never stored empty: an emptied list drops the field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<TaskId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Task {
    /// A fresh `pending` task with only an id and a subject.
    pub fn new(id: TaskId, subject: impl Into<String>) -> Task {
        Task {
            id,
            subject: subject.into(),
            description: None,
            active_form: None,
            status: TaskStatus::Pending,
            blocked_by: Vec::new(),
            owner: None,
            metadata: None,
            source: None,
            plan_group: None,
            plan_text: None,
            evidence: None,
            reason: None,
        }
    }

    pub fn is_plan_item(&self) -> bool {
        self.source == Some(Source::Plan)
    }
}

/// The approved plan a state was seeded from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRef {
    pub id: String,
    pub title: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `details.action` keeps the words of the reference `todo`; an
    /// action Fido does not know is refused where a snapshot is read.
    #[test]
    fn every_todo_action_keeps_its_word() {
        let words = [
            "create", "update", "list", "get", "delete", "clear", "batch",
        ];
        assert_eq!(TodoAction::ALL.len(), words.len());
        for (action, word) in TodoAction::ALL.iter().zip(words) {
            assert_eq!(serde_json::to_value(action).unwrap(), word);
        }
        let snapshot = TodoSnapshot {
            action: TodoAction::Batch,
            params: serde_json::json!({}),
            tasks: Vec::new(),
            next_id: 1,
            error: None,
            plan: None,
        };
        let line = serde_json::to_string(&snapshot).unwrap();
        assert_eq!(
            line,
            r#"{"action":"batch","params":{},"tasks":[],"nextId":1}"#
        );
        let unknown = line.replace("batch", "merge");
        let err = serde_json::from_str::<TodoSnapshot>(&unknown).unwrap_err();
        assert!(err.to_string().contains("merge"), "{err}");
    }
}
