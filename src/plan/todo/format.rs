//! What a `todo` call returns: `content[0].text` (the reference's content
//! strings, byte for byte) and the `details` envelope (`action`, `params`,
//! `tasks`, `nextId`, `error` on rejection, `plan` when one is approved).
//!
//! Every piece of task text shown here goes through [`display`]; the
//! envelope keeps the raw strings.

use serde_json::{Value, json};

use super::engine::{CallResult, TodoChange};
use super::sanitize::display;
use super::state::{Task, TaskStatus, TodoState};
use crate::protocol::plan::{TodoAction, TodoSnapshot};

/// `Plan: <title> -- N/M plan items open`; `None` without a plan or without
/// (live) plan items.
pub fn plan_header(state: &TodoState) -> Option<String> {
    let plan = state.plan.as_ref()?;
    let progress = state.plan_progress()?;
    Some(format!(
        "Plan: {} -- {}/{} plan items open",
        display(&plan.title),
        progress.open,
        progress.total
    ))
}

/// One `list` row: `[status] #id subject [(activeForm)] [⛓ #a,#b] [plan…]`,
/// then an open plan item's plan text, the evidence and the deferral
/// reason, each indented four spaces.
pub fn list_row(task: &Task) -> String {
    let mut row = format!(
        "[{}] #{} {}",
        task.status.as_str(),
        task.id,
        display(&task.subject)
    );
    if task.status == TaskStatus::InProgress
        && let Some(form) = task.active_form.as_deref().filter(|f| !f.is_empty())
    {
        row.push_str(&format!(" ({})", display(form)));
    }
    if !task.blocked_by.is_empty() {
        let deps: Vec<String> = task.blocked_by.iter().map(|id| format!("#{id}")).collect();
        row.push_str(&format!(" ⛓ {}", deps.join(",")));
    }
    if task.is_plan_item() {
        match task.plan_group.as_deref().filter(|g| !g.is_empty()) {
            Some(group) => row.push_str(&format!(" [plan: {}]", display(group))),
            None => row.push_str(" [plan]"),
        }
    }
    let mut lines = vec![row];
    // Open plan items carry their verbatim plan text, so the model works
    // from the plan, not from a paraphrase of it.
    if task.status.is_open()
        && let Some(text) = task.plan_text.as_deref().filter(|t| !t.is_empty())
    {
        lines.extend(indented(text));
    }
    if let Some(evidence) = task.evidence.as_deref().filter(|e| !e.is_empty()) {
        lines.push(format!("    evidence: {}", display(evidence)));
    }
    if let Some(reason) = task.reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(format!("    deferred: {}", display(reason)));
    }
    lines.join("\n")
}

fn indented(text: &str) -> Vec<String> {
    text.split('\n')
        .map(|line| format!("    {}", display(line)))
        .collect()
}

/// The `list` text: the plan header when a plan is active, then the rows
/// (tombstones only with `include_deleted`), or `No tasks`.
pub fn list_text(state: &TodoState, status: Option<TaskStatus>, include_deleted: bool) -> String {
    let rows: Vec<String> = state
        .tasks
        .iter()
        .filter(|t| include_deleted || t.status != TaskStatus::Deleted)
        .filter(|t| status.is_none_or(|s| t.status == s))
        .map(list_row)
        .collect();
    let body = if rows.is_empty() {
        "No tasks".to_string()
    } else {
        rows.join("\n")
    };
    match plan_header(state) {
        Some(header) => format!("{header}\n{body}"),
        None => body,
    }
}

/// The `get` text: the task with its fields, its `blockedBy` and the
/// reverse `blocks` edges.
pub fn get_text(task: &Task, state: &TodoState) -> String {
    let blocks = state.blocks().remove(&task.id).unwrap_or_default();
    let ids = |ids: &[i64]| {
        ids.iter()
            .map(|id| format!("#{id}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = vec![format!(
        "#{} [{}] {}",
        task.id,
        task.status.as_str(),
        display(&task.subject)
    )];
    let mut field = |name: &str, value: &Option<String>| {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            lines.push(format!("  {name}: {}", display(value)));
        }
    };
    field("description", &task.description);
    field("activeForm", &task.active_form);
    if !task.blocked_by.is_empty() {
        lines.push(format!("  blockedBy: {}", ids(&task.blocked_by)));
    }
    if !blocks.is_empty() {
        lines.push(format!("  blocks: {}", ids(&blocks)));
    }
    if let Some(owner) = task.owner.as_deref().filter(|o| !o.is_empty()) {
        lines.push(format!("  owner: {}", display(owner)));
    }
    if task.is_plan_item() {
        match task.plan_group.as_deref().filter(|g| !g.is_empty()) {
            Some(group) => lines.push(format!("  plan item: {}", display(group))),
            None => lines.push("  plan item".to_string()),
        }
        if let Some(text) = task.plan_text.as_deref().filter(|t| !t.is_empty()) {
            lines.extend(indented(text));
        }
    }
    if let Some(evidence) = task.evidence.as_deref().filter(|e| !e.is_empty()) {
        lines.push(format!("  evidence: {}", display(evidence)));
    }
    if let Some(reason) = task.reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(format!("  deferred: {}", display(reason)));
    }
    lines.join("\n")
}

/// `content[0].text` for `op`; reads use `state` (the final state).
pub fn content(op: &TodoChange, state: &TodoState) -> String {
    match op {
        TodoChange::Create { task } => {
            format!("Created #{}: {} (pending)", task.id, display(&task.subject))
        }
        TodoChange::Update {
            id,
            from,
            to,
            changed,
            task,
        } => {
            if !changed {
                return format!(
                    "No change: #{id} already matches the requested values (status: {})",
                    to.as_str()
                );
            }
            let transition = if from != to {
                format!(" ({} → {})", from.as_str(), to.as_str())
            } else {
                String::new()
            };
            if task.is_plan_item() && *to == TaskStatus::Deferred && *from != TaskStatus::Deferred {
                return format!(
                    "Updated #{id}{transition}. Tell the user this plan item is descoped and why: {}",
                    display(task.reason.as_deref().unwrap_or_default())
                );
            }
            format!("Updated #{id}{transition}")
        }
        TodoChange::Delete { id, subject } => format!("Deleted #{id}: {}", display(subject)),
        TodoChange::Clear { count, kept } => {
            if *kept > 0 {
                format!(
                    "Cleared {count} tasks; kept {kept} plan items (complete them with evidence or defer them with a reason)"
                )
            } else {
                format!("Cleared {count} tasks")
            }
        }
        TodoChange::List {
            status,
            include_deleted,
        } => list_text(state, *status, *include_deleted),
        TodoChange::Get { id } => match state.task(*id) {
            Some(task) => get_text(task, state),
            None => format!("#{id} not found"),
        },
        TodoChange::Batch { results } => {
            let mut lines = vec![format!("Applied {} ops", results.len())];
            for (index, result) in results.iter().enumerate() {
                lines.push(format!("[{index}] {}", content(result, state)));
            }
            if let Some(header) = plan_header(state) {
                lines.push(header);
            }
            lines.join("\n")
        }
        TodoChange::Error { message } => format!("Error: {message}"),
    }
}

/// The `details` envelope of a call with arguments `params`.
pub fn details(result: &CallResult, params: &Value) -> TodoSnapshot {
    envelope(result.action, params, &result.state, result.error())
}

/// The envelope for any state: `{action, params, tasks, nextId, error?, plan?}`.
pub fn envelope(
    action: TodoAction,
    params: &Value,
    state: &TodoState,
    error: Option<&str>,
) -> TodoSnapshot {
    TodoSnapshot {
        action,
        params: params.clone(),
        tasks: state.tasks.clone(),
        next_id: state.next_id,
        error: error.map(String::from),
        plan: state.plan.clone(),
    }
}

/// `list` as a call would answer it: the text and the envelope. Used for
/// the restore after a restart, `fido plan show` and the UI.
pub fn list_view(state: &TodoState) -> (String, TodoSnapshot) {
    let params = json!({"action": "list"});
    (
        list_text(state, None, false),
        envelope(TodoAction::List, &params, state, None),
    )
}
