//! What the plan panel draws, read from the typed plan of a
//! `plan_updated` event (the very state the model got in its tool result).
//!
//! Both flavours are read: `update_plan` (`{version, updatedAt, reason,
//! items: [{id, title, status, details, dependencies, next_action,
//! evidence}]}`) and the rpiv `todo` envelope (`{tasks: [{id, subject,
//! description, activeForm, status, blockedBy, evidence, reason, …}]}`).
//! Every item and every present field is kept; only `todo` tombstones
//! (`deleted`) are left out, and they are counted so the panel can say so.
//! Text is sanitised here, once, so widgets never see escape sequences.

use crate::protocol::ipc::PlanFlavour;
use crate::protocol::plan::{
    PlanItem, PlanSnapshot, PlanState, Status, Task, TaskStatus, TodoSnapshot,
};
use crate::text::sanitize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    Pending,
    InProgress,
    Blocked,
    Done,
    /// `todo`: put off, with a reason.
    Deferred,
}

impl ItemStatus {
    /// The checkbox, as `fido plan show` prints it.
    pub fn mark(self) -> &'static str {
        match self {
            ItemStatus::Pending => "[ ]",
            ItemStatus::InProgress => "[>]",
            ItemStatus::Blocked => "[!]",
            ItemStatus::Done => "[x]",
            ItemStatus::Deferred => "[-]",
        }
    }
}

/// One field line under an item: a label and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub label: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemView {
    pub id: String,
    pub title: String,
    pub status: ItemStatus,
    /// The status as the plan spells it (`in_progress`, `completed`, …).
    pub status_text: String,
    /// Every present optional field, in the order of the plan contract:
    /// details, dependencies, next action, evidence, then flavour extras.
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanView {
    pub flavour: PlanFlavour,
    pub version: Option<u64>,
    pub reason: Option<String>,
    pub items: Vec<ItemView>,
    /// `todo` tombstones, not drawn but counted.
    pub deleted: usize,
}

impl PlanView {
    /// The view of a plan; `None` when there is no plan yet (version 0 of
    /// `update_plan`).
    pub fn from_event(plan: &PlanSnapshot) -> Option<PlanView> {
        match plan {
            PlanSnapshot::UpdatePlan(state) => PlanView::of_state(state),
            PlanSnapshot::Todo(envelope) => Some(PlanView::of_todo(envelope)),
        }
    }

    fn of_state(state: &PlanState) -> Option<PlanView> {
        if state.version == 0 && state.items.is_empty() {
            return None;
        }
        Some(PlanView {
            flavour: PlanFlavour::UpdatePlan,
            version: Some(state.version),
            reason: text_of(&state.reason),
            items: state.items.iter().map(plan_item).collect(),
            deleted: 0,
        })
    }

    fn of_todo(envelope: &TodoSnapshot) -> PlanView {
        let mut items = Vec::with_capacity(envelope.tasks.len());
        let mut deleted = 0;
        for task in &envelope.tasks {
            match task_status(task.status) {
                Some(status) => items.push(task_item(task, status)),
                None => deleted += 1,
            }
        }
        PlanView {
            flavour: PlanFlavour::Todo,
            version: None,
            reason: None,
            items,
            deleted,
        }
    }

    pub fn count(&self, status: ItemStatus) -> usize {
        self.items.iter().filter(|i| i.status == status).count()
    }

    /// `v3 · 1/3 done` (or `3 items` when there is no version).
    pub fn headline(&self) -> String {
        let done = self.count(ItemStatus::Done);
        let total = self.items.len();
        match self.version {
            Some(version) => format!("v{version} · {done}/{total} done"),
            None => format!("{done}/{total} done"),
        }
    }

    /// One line for the transcript: never the items themselves.
    pub fn summary(&self) -> String {
        let mut parts = vec![match self.items.len() {
            1 => "1 item".to_string(),
            n => format!("{n} items"),
        }];
        for (status, label) in [
            (ItemStatus::Done, "done"),
            (ItemStatus::InProgress, "in progress"),
            (ItemStatus::Blocked, "blocked"),
            (ItemStatus::Pending, "pending"),
            (ItemStatus::Deferred, "deferred"),
        ] {
            let n = self.count(status);
            if n > 0 {
                parts.push(format!("{n} {label}"));
            }
        }
        let version = self.version.map(|v| format!("v{v} · ")).unwrap_or_default();
        format!("{version}{}", parts.join(", "))
    }
}

/// An `update_plan` item: details, dependencies, next action, evidence.
fn plan_item(item: &PlanItem) -> ItemView {
    let mut fields = Fields::default();
    fields.push("details", item.details.as_deref());
    fields.push_list("depends on", item.dependencies.iter().map(String::as_str));
    fields.push("next", item.next_action.as_deref());
    for entry in &item.evidence {
        fields.push("evidence", Some(entry));
    }
    ItemView {
        id: text_of(&item.id).unwrap_or_else(|| "?".into()),
        title: text_of(&item.title).unwrap_or_default(),
        status: match item.status {
            Status::Pending => ItemStatus::Pending,
            Status::InProgress => ItemStatus::InProgress,
            Status::Blocked => ItemStatus::Blocked,
            Status::Done => ItemStatus::Done,
        },
        status_text: item.status.as_str().to_string(),
        fields: fields.0,
    }
}

/// How the panel shows a task's status; `None` for a tombstone.
fn task_status(status: TaskStatus) -> Option<ItemStatus> {
    match status {
        TaskStatus::Pending => Some(ItemStatus::Pending),
        TaskStatus::InProgress => Some(ItemStatus::InProgress),
        TaskStatus::Completed => Some(ItemStatus::Done),
        TaskStatus::Deferred => Some(ItemStatus::Deferred),
        TaskStatus::Deleted => None,
    }
}

/// A `todo` task (not a tombstone): its fields in the contract's order.
fn task_item(task: &Task, status: ItemStatus) -> ItemView {
    let mut fields = Fields::default();
    fields.push("details", task.description.as_deref());
    fields.push("plan", task.plan_text.as_deref());
    let blocked_by: Vec<String> = task.blocked_by.iter().map(|id| format!("#{id}")).collect();
    fields.push_list("depends on", blocked_by.iter().map(String::as_str));
    fields.push("evidence", task.evidence.as_deref());
    fields.push("doing", task.active_form.as_deref());
    fields.push("reason", task.reason.as_deref());
    fields.push("group", task.plan_group.as_deref());
    fields.push("owner", task.owner.as_deref());
    ItemView {
        id: format!("#{}", task.id),
        title: text_of(&task.subject).unwrap_or_default(),
        status,
        status_text: task.status.as_str().to_string(),
        fields: fields.0,
    }
}

/// The present fields of an item, in order; empty text is left out.
#[derive(Default)]
struct Fields(Vec<Field>);

impl Fields {
    fn push(&mut self, label: &'static str, text: Option<&str>) {
        if let Some(text) = text.and_then(text_of) {
            self.0.push(Field { label, text });
        }
    }

    /// One line of the non-empty entries, comma-separated (none: no line).
    fn push_list<'a>(&mut self, label: &'static str, entries: impl Iterator<Item = &'a str>) {
        let kept: Vec<String> = entries.filter_map(text_of).collect();
        if !kept.is_empty() {
            self.0.push(Field {
                label,
                text: kept.join(", "),
            });
        }
    }
}

/// A non-empty string, sanitised and trimmed.
fn text_of(text: &str) -> Option<String> {
    let text = sanitize(text, false).trim().to_string();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn update_plan(state: Value) -> PlanSnapshot {
        PlanSnapshot::UpdatePlan(serde_json::from_value(state).unwrap())
    }

    fn todo(envelope: Value) -> PlanSnapshot {
        PlanSnapshot::Todo(serde_json::from_value(envelope).unwrap())
    }

    #[test]
    fn an_update_plan_state_keeps_every_item_and_field() {
        let plan = json!({
            "version": 3, "updatedAt": "2025-01-01T00:00:00.000Z", "reason": "Tests pass",
            "items": [
                {"id": "inspect", "title": "Read it", "status": "done", "details": "d",
                 "dependencies": [], "next_action": null, "evidence": ["e1", "e2"]},
                {"id": "fix", "title": "Fix it", "status": "in_progress", "details": null,
                 "dependencies": ["inspect"], "next_action": "edit", "evidence": []},
            ],
            "changes": {"added": [], "dropped": [], "status_changed": []}
        });
        let view = PlanView::from_event(&update_plan(plan)).unwrap();
        assert_eq!(view.version, Some(3));
        assert_eq!(view.reason.as_deref(), Some("Tests pass"));
        assert_eq!(view.items.len(), 2);
        let labels: Vec<_> = view.items[0].fields.iter().map(|f| f.label).collect();
        assert_eq!(labels, ["details", "evidence", "evidence"]);
        let labels: Vec<_> = view.items[1].fields.iter().map(|f| f.label).collect();
        assert_eq!(labels, ["depends on", "next"]);
        assert_eq!(view.headline(), "v3 · 1/2 done");
        assert_eq!(view.summary(), "v3 · 2 items, 1 done, 1 in progress");
    }

    #[test]
    fn version_zero_is_no_plan_but_a_cleared_plan_is_an_empty_one() {
        let none = json!({"version": 0, "updatedAt": null, "reason": "", "items": []});
        assert_eq!(PlanView::from_event(&update_plan(none)), None);
        let cleared = json!({"version": 4, "reason": "Plan cleared by the user.", "items": []});
        let view = PlanView::from_event(&update_plan(cleared)).unwrap();
        assert!(view.items.is_empty());
    }

    #[test]
    fn a_todo_envelope_is_read_and_tombstones_are_counted() {
        let plan = json!({"action": "list", "params": {}, "nextId": 4, "tasks": [
            {"id": 1, "subject": "Write", "status": "completed", "evidence": "cargo test"},
            {"id": 2, "subject": "Gone", "status": "deleted"},
            {"id": 3, "subject": "Later", "status": "deferred", "reason": "waiting",
             "blockedBy": [1], "description": "more"},
        ]});
        let view = PlanView::from_event(&todo(plan)).unwrap();
        assert_eq!(view.deleted, 1);
        assert_eq!(view.items[0].id, "#1");
        assert_eq!(view.items[0].status, ItemStatus::Done);
        assert_eq!(view.items[1].fields[1].text, "#1");
        assert_eq!(view.headline(), "1/2 done");
    }

    #[test]
    fn escape_sequences_never_reach_the_panel() {
        let plan = json!({"version": 1, "reason": "r", "items": [
            {"id": "a", "title": "\u{1b}[2Jwipe", "status": "pending", "next_action": "x\u{7}"}
        ]});
        let view = PlanView::from_event(&update_plan(plan)).unwrap();
        assert_eq!(view.items[0].title, "wipe");
        assert_eq!(view.items[0].fields[0].text, "x");
    }
}
