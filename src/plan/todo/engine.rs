//! The reducer of the `todo` flavour: `(state, call) → (state, outcome)`.
//!
//! Pure: no I/O, no clock. Validation runs before any mutation, so a
//! rejected call (or batch) returns the input state untouched. Formatting
//! of the outcome lives in [`super::format`]; persistence in
//! [`super::file`].

use serde_json::{Map, Value};

use super::params::{Action, CallParams, OpParams, parse_call};
use super::state::{Task, TaskId, TaskStatus, TodoState};
use crate::protocol::plan::TodoAction;

/// The reference's message for a completion without proof.
pub const ERR_EVIDENCE_REQUIRED: &str = "evidence required to mark a task completed: pass evidence with the check that proves it (command + result, commit, or test name). If it isn't done, leave it open";
/// The reference's message for a deferral without a reason.
pub const ERR_REASON_REQUIRED: &str =
    "reason required to defer a task: pass reason saying why it is descoped; the user is told";
/// An `update` with nothing to change.
pub const ERR_NO_MUTABLE_FIELD: &str = "update requires at least one mutable field: subject, description, activeForm, status, evidence, reason, owner, metadata, addBlockedBy, or removeBlockedBy";

fn plan_item_undeletable(id: TaskId) -> String {
    format!(
        "#{id} is a plan item from the approved plan and can't be deleted: complete it with evidence, or set status deferred with a reason"
    )
}

fn plan_item_verbatim(id: TaskId) -> String {
    format!(
        "#{id} is a plan item; its subject and description are the approved plan's text and can't be edited"
    )
}

/// What one operation did. Mutations carry a snapshot of the task as the
/// operation left it, so a batch describes each operation at its own point.
#[derive(Debug, Clone, PartialEq)]
pub enum TodoChange {
    Create {
        task: Task,
    },
    Update {
        id: TaskId,
        from: TaskStatus,
        to: TaskStatus,
        /// False for an update that matched the task already.
        changed: bool,
        task: Task,
    },
    Delete {
        id: TaskId,
        subject: String,
    },
    List {
        status: Option<TaskStatus>,
        include_deleted: bool,
    },
    Get {
        id: TaskId,
    },
    Clear {
        count: usize,
        kept: usize,
    },
    Batch {
        results: Vec<TodoChange>,
    },
    Error {
        message: String,
    },
}

/// The outcome of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub state: TodoState,
    pub op: TodoChange,
    /// `details.action`: the action, or `batch` for an `ops` call.
    pub action: TodoAction,
}

impl CallResult {
    pub fn error(&self) -> Option<&str> {
        match &self.op {
            TodoChange::Error { message } => Some(message),
            _ => None,
        }
    }
}

fn error(state: &TodoState, message: impl Into<String>) -> (TodoState, TodoChange) {
    (
        state.clone(),
        TodoChange::Error {
            message: message.into(),
        },
    )
}

/// Runs one `todo` call on `state`: the raw arguments as the model sent them.
pub fn apply_call(state: &TodoState, args: &Value) -> CallResult {
    let params = match parse_call(args) {
        Ok(params) => params,
        Err(message) => {
            return CallResult {
                state: state.clone(),
                op: TodoChange::Error { message },
                action: super::params::requested_action(args),
            };
        }
    };
    apply_params(state, &params)
}

/// [`apply_call`] on arguments already checked for shape.
pub fn apply_params(state: &TodoState, params: &CallParams) -> CallResult {
    let batch = |(state, op)| CallResult {
        state,
        op,
        action: TodoAction::Batch,
    };
    let Some(ops) = &params.ops else {
        let Some(action) = params.flat.action else {
            return batch(error(state, "action required (or pass ops)"));
        };
        let (state, op) = apply_op(state, action, &params.flat);
        return CallResult {
            state,
            op,
            action: action.into(),
        };
    };
    if params.flat.action.is_some() || params.has_other_fields {
        return batch(error(
            state,
            "ops can't be combined with a top-level action or fields: put them inside each op",
        ));
    }
    if ops.is_empty() {
        return batch(error(state, "ops must not be empty"));
    }
    // Mutations in order against a running state; the first failure
    // discards everything. Reads are answered afterwards, from the final
    // state, whatever their position.
    let mut running = state.clone();
    let mut results: Vec<Option<TodoChange>> = vec![None; ops.len()];
    for (index, op) in ops.iter().enumerate() {
        let Some(action) = op.action else {
            return batch(error(state, format!("ops[{index}]: action required")));
        };
        if op.nested_ops {
            return batch(error(state, format!("ops[{index}]: ops can't be nested")));
        }
        if action.is_read() {
            continue;
        }
        let (next, result) = apply_op(&running, action, op);
        if let TodoChange::Error { message } = result {
            return batch(error(state, format!("ops[{index}]: {message}")));
        }
        running = next;
        results[index] = Some(result);
    }
    for (index, op) in ops.iter().enumerate() {
        let Some(action) = op.action.filter(|a| a.is_read()) else {
            continue;
        };
        let (_, result) = apply_op(&running, action, op);
        if let TodoChange::Error { message } = result {
            return batch(error(state, format!("ops[{index}]: {message}")));
        }
        results[index] = Some(result);
    }
    let results = results.into_iter().flatten().collect();
    batch((running, TodoChange::Batch { results }))
}

/// One operation on `state`.
pub fn apply_op(state: &TodoState, action: Action, params: &OpParams) -> (TodoState, TodoChange) {
    match action {
        Action::Create => create(state, params),
        Action::Update => update(state, params),
        Action::List => (
            state.clone(),
            TodoChange::List {
                status: params.status,
                include_deleted: params.include_deleted == Some(true),
            },
        ),
        Action::Get => {
            let Some(id) = params.id else {
                return error(state, "id required for get");
            };
            match state.task(id) {
                Some(_) => (state.clone(), TodoChange::Get { id }),
                None => error(state, format!("#{id} not found")),
            }
        }
        Action::Delete => delete(state, params),
        Action::Clear => clear(state),
    }
}

/// Subjects compared case- and whitespace-insensitively.
pub fn normalize_subject(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn create(state: &TodoState, params: &OpParams) -> (TodoState, TodoChange) {
    let Some(subject) = params.subject.as_ref().filter(|s| !s.trim().is_empty()) else {
        return error(state, "subject required for create");
    };
    if state.plan.is_some() {
        let key = normalize_subject(subject);
        if let Some(duplicate) = state.tasks.iter().find(|t| {
            t.is_plan_item()
                && t.status != TaskStatus::Deleted
                && normalize_subject(&t.subject) == key
        }) {
            return error(
                state,
                format!("#{} is already a plan item; update it", duplicate.id),
            );
        }
    }
    let blocked_by = params.blocked_by.clone().unwrap_or_default();
    for dep in &blocked_by {
        match state.task(*dep) {
            None => return error(state, format!("blockedBy: #{dep} not found")),
            Some(t) if t.status == TaskStatus::Deleted => {
                return error(state, format!("blockedBy: #{dep} is deleted"));
            }
            Some(_) => {}
        }
    }
    let Some(next_id) = state.next_id.checked_add(1) else {
        return error(state, "task ids are exhausted; clear the list first");
    };
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let mut task = Task::new(state.next_id, subject.clone());
    task.description = non_empty(&params.description);
    task.active_form = non_empty(&params.active_form);
    task.blocked_by = blocked_by;
    task.owner = non_empty(&params.owner);
    task.metadata = params.metadata.clone();
    let mut next = state.clone();
    next.tasks.push(task.clone());
    next.next_id = next_id;
    (next, TodoChange::Create { task })
}

fn update(state: &TodoState, params: &OpParams) -> (TodoState, TodoChange) {
    let Some(id) = params.id else {
        return error(state, "id required for update");
    };
    let Some(index) = state.position(id) else {
        return error(state, format!("#{id} not found"));
    };
    let current = &state.tasks[index];
    let updated = match updated_task(state, current, params) {
        Ok(updated) => updated,
        Err(message) => return error(state, message),
    };
    let changed = task_changed(current, &updated);
    let mut next = state.clone();
    next.tasks[index] = updated.clone();
    (
        next,
        TodoChange::Update {
            id,
            from: current.status,
            to: updated.status,
            changed,
            task: updated,
        },
    )
}

/// `current` as `params` leave it, or the first reason the update is
/// refused (the checks run in the order the messages are pinned in).
fn updated_task(state: &TodoState, current: &Task, params: &OpParams) -> Result<Task, String> {
    if !has_mutation(params) {
        return Err(ERR_NO_MUTABLE_FIELD.to_owned());
    }
    let rewords = params
        .subject
        .as_ref()
        .is_some_and(|s| *s != current.subject)
        || (params.description.is_some() && params.description != current.description);
    if current.is_plan_item() && rewords {
        return Err(plan_item_verbatim(current.id));
    }
    let status = new_status(current, params.status)?;
    let (evidence, reason) = proof(current, params, status)?;
    let blocked_by = new_blocked_by(state, current, params)?;
    let mut updated = current.clone();
    updated.status = status;
    if let Some(subject) = &params.subject {
        updated.subject = subject.clone();
    }
    if params.description.is_some() {
        updated.description = params.description.clone();
    }
    if params.active_form.is_some() {
        updated.active_form = params.active_form.clone();
    }
    if params.owner.is_some() {
        updated.owner = params.owner.clone();
    }
    updated.evidence = evidence.or(updated.evidence);
    updated.reason = if status == TaskStatus::Deferred {
        reason.or(updated.reason)
    } else {
        None
    };
    updated.blocked_by = blocked_by;
    updated.metadata = merged_metadata(current.metadata.as_ref(), params.metadata.as_ref());
    Ok(updated)
}

/// Whether `params` set any field an update can change (an empty
/// `addBlockedBy`/`removeBlockedBy` changes nothing).
fn has_mutation(params: &OpParams) -> bool {
    let non_empty = |ids: &Option<Vec<TaskId>>| ids.as_ref().is_some_and(|v| !v.is_empty());
    params.subject.is_some()
        || params.description.is_some()
        || params.active_form.is_some()
        || params.status.is_some()
        || params.owner.is_some()
        || params.metadata.is_some()
        || params.evidence.is_some()
        || params.reason.is_some()
        || non_empty(&params.add_blocked_by)
        || non_empty(&params.remove_blocked_by)
}

/// The status after the update: a legal transition, and never the deletion
/// of a plan item.
fn new_status(current: &Task, to: Option<TaskStatus>) -> Result<TaskStatus, String> {
    let Some(to) = to else {
        return Ok(current.status);
    };
    if !current.status.can_become(to) {
        return Err(format!(
            "illegal transition {} → {}",
            current.status.as_str(),
            to.as_str()
        ));
    }
    if to == TaskStatus::Deleted && current.is_plan_item() {
        return Err(plan_item_undeletable(current.id));
    }
    Ok(to)
}

/// The evidence and the reason to store (trimmed, `None` when blank).
/// Completion costs proof; deferral costs a reason. Both are checked on
/// the resulting status so a stray field can't ride along unnoticed.
fn proof(
    current: &Task,
    params: &OpParams,
    status: TaskStatus,
) -> Result<(Option<String>, Option<String>), String> {
    let evidence = params.evidence.as_deref().map(str::trim);
    let reason = params.reason.as_deref().map(str::trim);
    if params.evidence.is_some() && status != TaskStatus::Completed {
        return Err("evidence only applies to a completed task (status: completed)".to_owned());
    }
    if params.reason.is_some() && status != TaskStatus::Deferred {
        return Err("reason only applies to a deferred task (status: deferred)".to_owned());
    }
    let completing = status == TaskStatus::Completed
        && (current.status != TaskStatus::Completed || params.evidence.is_some());
    if completing && evidence.is_none_or(str::is_empty) {
        return Err(ERR_EVIDENCE_REQUIRED.to_owned());
    }
    let deferring = status == TaskStatus::Deferred
        && (current.status != TaskStatus::Deferred || params.reason.is_some());
    if deferring && reason.is_none_or(str::is_empty) {
        return Err(ERR_REASON_REQUIRED.to_owned());
    }
    let kept = |text: Option<&str>| text.filter(|t| !t.is_empty()).map(str::to_owned);
    Ok((kept(evidence), kept(reason)))
}

/// `blockedBy` after `removeBlockedBy`, then `addBlockedBy`: every added
/// task exists, is not deleted, is not the task itself, and closes no cycle.
fn new_blocked_by(
    state: &TodoState,
    current: &Task,
    params: &OpParams,
) -> Result<Vec<TaskId>, String> {
    let mut blocked_by = current.blocked_by.clone();
    if let Some(remove) = params.remove_blocked_by.as_ref().filter(|v| !v.is_empty()) {
        blocked_by.retain(|dep| !remove.contains(dep));
    }
    let Some(add) = params.add_blocked_by.as_ref().filter(|v| !v.is_empty()) else {
        return Ok(blocked_by);
    };
    for dep in add {
        if *dep == current.id {
            return Err(format!("cannot block #{} on itself", current.id));
        }
        match state.task(*dep) {
            None => return Err(format!("addBlockedBy: #{dep} not found")),
            Some(t) if t.status == TaskStatus::Deleted => {
                return Err(format!("addBlockedBy: #{dep} is deleted"));
            }
            Some(_) => {}
        }
        if !blocked_by.contains(dep) {
            blocked_by.push(*dep);
        }
    }
    if state.would_cycle(current.id, &blocked_by) {
        return Err("addBlockedBy would create a cycle in the blockedBy graph".to_owned());
    }
    Ok(blocked_by)
}

/// The metadata after merging `changes` key by key (`null` removes a key);
/// `None` once empty.
fn merged_metadata(
    current: Option<&Map<String, Value>>,
    changes: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let Some(changes) = changes else {
        return current.cloned();
    };
    let mut merged = current.cloned().unwrap_or_default();
    for (key, value) in changes {
        if value.is_null() {
            merged.shift_remove(key);
        } else {
            merged.insert(key.clone(), value.clone());
        }
    }
    (!merged.is_empty()).then_some(merged)
}

/// Whether an update changed anything the model can set. `blockedBy` is
/// order-sensitive; metadata compares as its JSON text would.
fn task_changed(before: &Task, after: &Task) -> bool {
    before.subject != after.subject
        || before.status != after.status
        || before.description != after.description
        || before.active_form != after.active_form
        || before.owner != after.owner
        || before.evidence != after.evidence
        || before.reason != after.reason
        || before.blocked_by != after.blocked_by
        || !same_metadata(before.metadata.as_ref(), after.metadata.as_ref())
}

fn same_metadata(a: Option<&Map<String, Value>>, b: Option<&Map<String, Value>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => same_json_object(a, b),
        (None, Some(_)) | (Some(_), None) => false,
    }
}

fn same_json_object(a: &Map<String, Value>, b: &Map<String, Value>) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
}

/// JSON equality as `JSON.stringify` sees it: key order matters, numbers
/// compare by value (`1` and `1.0` are the same).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => same_json_object(x, y),
        _ => a == b,
    }
}

fn delete(state: &TodoState, params: &OpParams) -> (TodoState, TodoChange) {
    let Some(id) = params.id else {
        return error(state, "id required for delete");
    };
    let Some(index) = state.position(id) else {
        return error(state, format!("#{id} not found"));
    };
    let current = &state.tasks[index];
    if current.status == TaskStatus::Deleted {
        return error(state, format!("#{id} is already deleted"));
    }
    if current.is_plan_item() {
        return error(state, plan_item_undeletable(id));
    }
    let mut next = state.clone();
    next.tasks[index].status = TaskStatus::Deleted;
    (
        next,
        TodoChange::Delete {
            id,
            subject: current.subject.clone(),
        },
    )
}

/// Drops every agent-created task. Plan items stay (they leave only by a
/// re-approved plan); ids restart at 1 only when nothing is kept.
fn clear(state: &TodoState) -> (TodoState, TodoChange) {
    let kept: Vec<&Task> = state.tasks.iter().filter(|t| t.is_plan_item()).collect();
    let count = state.tasks.len() - kept.len();
    if kept.is_empty() {
        return (TodoState::empty(), TodoChange::Clear { count, kept: 0 });
    }
    let kept_ids: Vec<TaskId> = kept.iter().map(|t| t.id).collect();
    let tasks = kept
        .into_iter()
        .map(|t| {
            let mut t = t.clone();
            t.blocked_by.retain(|id| kept_ids.contains(id));
            t
        })
        .collect::<Vec<_>>();
    let kept = tasks.len();
    let next = TodoState {
        tasks,
        next_id: state.next_id,
        plan: state.plan.clone(),
    };
    (next, TodoChange::Clear { count, kept })
}
