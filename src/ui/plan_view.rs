//! What the plan panel draws, read from the normalised plan object of a
//! `plan_updated` event (the very object the model got in its tool result).
//!
//! Both flavours are read: `update_plan` (`{version, updatedAt, reason,
//! items: [{id, title, status, details, dependencies, next_action,
//! evidence}]}`) and the rpiv `todo` envelope (`{tasks: [{id, subject,
//! description, activeForm, status, blockedBy, evidence, reason, …}]}`).
//! Every item and every present field is kept; only `todo` tombstones
//! (`deleted`) are left out, and they are counted so the panel can say so.
//! Text is sanitised here, once, so widgets never see escape sequences.

use serde_json::Value;

use crate::protocol::ipc::PlanFlavour;
use crate::text::sanitize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    Pending,
    InProgress,
    Blocked,
    Done,
    /// `todo`: put off, with a reason.
    Deferred,
    /// A status this UI does not know; shown verbatim.
    Other,
}

impl ItemStatus {
    fn parse(text: &str) -> ItemStatus {
        match text {
            "pending" => ItemStatus::Pending,
            "in_progress" => ItemStatus::InProgress,
            "blocked" => ItemStatus::Blocked,
            "done" | "completed" => ItemStatus::Done,
            "deferred" => ItemStatus::Deferred,
            _ => ItemStatus::Other,
        }
    }

    /// The checkbox, as `fido plan show` prints it.
    pub fn mark(self) -> &'static str {
        match self {
            ItemStatus::Pending => "[ ]",
            ItemStatus::InProgress => "[>]",
            ItemStatus::Blocked => "[!]",
            ItemStatus::Done => "[x]",
            ItemStatus::Deferred => "[-]",
            ItemStatus::Other => "[?]",
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
    /// Reads a plan object; `None` when there is no plan yet (version 0 of
    /// `update_plan`) or the value is not a plan at all.
    pub fn from_event(flavour: PlanFlavour, plan: &Value) -> Option<PlanView> {
        let object = plan.as_object()?;
        let version = object.get("version").and_then(Value::as_u64);
        let raw_items = object
            .get("items")
            .or_else(|| object.get("tasks"))
            .and_then(Value::as_array)?;
        if version == Some(0) && raw_items.is_empty() {
            return None;
        }
        let mut items = Vec::with_capacity(raw_items.len());
        let mut deleted = 0;
        for raw in raw_items {
            let status_text = text_of(raw.get("status")).unwrap_or_else(|| "unknown".into());
            if status_text == "deleted" {
                deleted += 1;
                continue;
            }
            items.push(item(raw, status_text));
        }
        Some(PlanView {
            flavour,
            version,
            reason: text_of(object.get("reason")),
            items,
            deleted,
        })
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

fn item(raw: &Value, status_text: String) -> ItemView {
    let id = match raw.get("id") {
        Some(Value::Number(n)) => format!("#{n}"),
        other => text_of(other).unwrap_or_else(|| "?".into()),
    };
    let title = ["title", "subject", "content"]
        .iter()
        .find_map(|key| text_of(raw.get(*key)))
        .unwrap_or_default();
    let mut fields = Vec::new();
    let mut push = |label: &'static str, text: Option<String>| {
        if let Some(text) = text {
            fields.push(Field { label, text });
        }
    };
    push("details", text_of(raw.get("details")));
    push("details", text_of(raw.get("description")));
    push("plan", text_of(raw.get("planText")));
    let deps = list_of(raw.get("dependencies").or_else(|| raw.get("blockedBy")));
    push("depends on", (!deps.is_empty()).then(|| deps.join(", ")));
    push(
        "next",
        text_of(raw.get("next_action").or_else(|| raw.get("nextAction"))),
    );
    let evidence: Vec<String> = list_of(raw.get("evidence"));
    for entry in evidence {
        push("evidence", Some(entry));
    }
    push("doing", text_of(raw.get("activeForm")));
    push("reason", text_of(raw.get("reason")));
    push("group", text_of(raw.get("planGroup")));
    push("owner", text_of(raw.get("owner")));
    ItemView {
        id,
        title,
        status: ItemStatus::parse(&status_text),
        status_text,
        fields,
    }
}

/// A non-empty string (sanitised, trimmed); numbers are written out.
fn text_of(value: Option<&Value>) -> Option<String> {
    let text = match value? {
        Value::String(s) => sanitize(s, false).trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// A list of strings or ids (`#N` for numbers); one string is a list of one.
fn list_of(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(values)) => values
            .iter()
            .filter_map(|v| match v {
                Value::Number(n) => Some(format!("#{n}")),
                other => text_of(Some(other)),
            })
            .collect(),
        Some(single) => text_of(Some(single)).into_iter().collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let view =
            PlanView::from_event(crate::protocol::ipc::PlanFlavour::UpdatePlan, &plan).unwrap();
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
        assert_eq!(
            PlanView::from_event(crate::protocol::ipc::PlanFlavour::UpdatePlan, &none),
            None
        );
        let cleared = json!({"version": 4, "reason": "Plan cleared by the user.", "items": []});
        let view =
            PlanView::from_event(crate::protocol::ipc::PlanFlavour::UpdatePlan, &cleared).unwrap();
        assert!(view.items.is_empty());
        assert_eq!(
            PlanView::from_event(
                crate::protocol::ipc::PlanFlavour::UpdatePlan,
                &json!("nope")
            ),
            None
        );
    }

    #[test]
    fn a_todo_envelope_is_read_and_tombstones_are_counted() {
        let plan = json!({"action": "list", "params": {}, "nextId": 4, "tasks": [
            {"id": 1, "subject": "Write", "status": "completed", "evidence": "cargo test"},
            {"id": 2, "subject": "Gone", "status": "deleted"},
            {"id": 3, "subject": "Later", "status": "deferred", "reason": "waiting",
             "blockedBy": [1], "description": "more"},
        ]});
        let view = PlanView::from_event(crate::protocol::ipc::PlanFlavour::Todo, &plan).unwrap();
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
        let view =
            PlanView::from_event(crate::protocol::ipc::PlanFlavour::UpdatePlan, &plan).unwrap();
        assert_eq!(view.items[0].title, "wipe");
        assert_eq!(view.items[0].fields[0].text, "x");
    }
}
