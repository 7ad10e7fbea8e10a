//! The arguments of one `todo` call, checked for shape before anything runs
//! (the reference's schema validation). A field that is `null` counts as
//! absent. Unknown fields are ignored, except that next to `ops` any other
//! field is an error (the two forms are exclusive).
//!
//! Ids are JSON integers; an integer-valued number (`3.0`) or a decimal
//! string (`"3"`) is accepted too, since models send both.

use serde_json::{Map, Value};

use super::state::{TaskId, TaskStatus};
use crate::protocol::plan::TodoAction;

/// One operation: what a flat call or one entry of `ops` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Create,
    Update,
    List,
    Get,
    Delete,
    Clear,
}

impl Action {
    pub const ALL: [Action; 6] = [
        Action::Create,
        Action::Update,
        Action::List,
        Action::Get,
        Action::Delete,
        Action::Clear,
    ];

    pub fn as_str(self) -> &'static str {
        TodoAction::from(self).as_str()
    }

    fn parse(text: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == text)
    }

    /// `list` and `get` read; the others may change the state.
    pub fn is_read(self) -> bool {
        match self {
            Action::List | Action::Get => true,
            Action::Create | Action::Update | Action::Delete | Action::Clear => false,
        }
    }
}

/// The action as `details.action` names it.
impl From<Action> for TodoAction {
    fn from(action: Action) -> TodoAction {
        match action {
            Action::Create => TodoAction::Create,
            Action::Update => TodoAction::Update,
            Action::List => TodoAction::List,
            Action::Get => TodoAction::Get,
            Action::Delete => TodoAction::Delete,
            Action::Clear => TodoAction::Clear,
        }
    }
}

/// The fields of one operation, typed. `None` means absent (or `null`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpParams {
    pub action: Option<Action>,
    pub subject: Option<String>,
    pub description: Option<String>,
    pub active_form: Option<String>,
    pub owner: Option<String>,
    pub metadata: Option<Map<String, Value>>,
    pub evidence: Option<String>,
    pub reason: Option<String>,
    pub blocked_by: Option<Vec<TaskId>>,
    pub add_blocked_by: Option<Vec<TaskId>>,
    pub remove_blocked_by: Option<Vec<TaskId>>,
    pub id: Option<TaskId>,
    pub status: Option<TaskStatus>,
    pub include_deleted: Option<bool>,
    /// An `ops` field inside an op (nesting is rejected later, by position).
    pub nested_ops: bool,
}

/// A whole call: flat fields, or `ops`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallParams {
    pub flat: OpParams,
    /// Whether a field other than `action` and `ops` is set (not `null`).
    pub has_other_fields: bool,
    pub ops: Option<Vec<OpParams>>,
}

/// What `details.action` names when parsing fails: the requested action if
/// it can be read, `batch` for an `ops` call or a call without one.
pub fn requested_action(args: &Value) -> TodoAction {
    let object = args.as_object();
    let ops = object
        .and_then(|o| o.get("ops"))
        .is_some_and(|v| !v.is_null());
    match object
        .and_then(|o| o.get("action"))
        .and_then(Value::as_str)
        .and_then(Action::parse)
    {
        Some(action) if !ops => action.into(),
        _ => TodoAction::Batch,
    }
}

/// Checks the shape of `args` (the tool's raw JSON object).
pub fn parse_call(args: &Value) -> Result<CallParams, String> {
    let Some(object) = args.as_object() else {
        return Err("the arguments must be a JSON object".into());
    };
    let flat = parse_op(object)?;
    let has_other_fields = object
        .iter()
        .any(|(key, value)| key != "action" && key != "ops" && !value.is_null());
    let ops = match object.get("ops") {
        None | Some(Value::Null) => None,
        Some(Value::Array(raw)) => {
            let mut ops = Vec::with_capacity(raw.len());
            for (index, op) in raw.iter().enumerate() {
                let Some(op) = op.as_object() else {
                    return Err(format!("ops[{index}]: each op must be an object"));
                };
                ops.push(parse_op(op).map_err(|e| format!("ops[{index}]: {e}"))?);
            }
            Some(ops)
        }
        Some(_) => return Err("ops must be an array of operations".into()),
    };
    Ok(CallParams {
        flat,
        has_other_fields,
        ops,
    })
}

fn parse_op(object: &Map<String, Value>) -> Result<OpParams, String> {
    let field = |key: &str| object.get(key).filter(|v| !v.is_null());
    let action = match field("action") {
        None => None,
        Some(Value::String(text)) => Some(Action::parse(text).ok_or_else(|| {
            format!(
                "unknown action \"{}\": use create, update, list, get, delete or clear",
                crate::text::summary(text, 40)
            )
        })?),
        Some(_) => {
            return Err(
                "action must be a string: create, update, list, get, delete or clear".into(),
            );
        }
    };
    let status = match field("status") {
        None => None,
        Some(Value::String(text)) => Some(TaskStatus::parse(text).ok_or_else(status_error)?),
        Some(_) => return Err(status_error()),
    };
    let include_deleted = match field("includeDeleted") {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => return Err("includeDeleted must be true or false".into()),
    };
    let metadata = match field("metadata") {
        None => None,
        Some(Value::Object(map)) => Some(map.clone()),
        Some(_) => return Err("metadata must be an object".into()),
    };
    Ok(OpParams {
        action,
        subject: text(field("subject"), "subject")?,
        description: text(field("description"), "description")?,
        active_form: text(field("activeForm"), "activeForm")?,
        owner: text(field("owner"), "owner")?,
        metadata,
        evidence: text(field("evidence"), "evidence")?,
        reason: text(field("reason"), "reason")?,
        blocked_by: ids(field("blockedBy"), "blockedBy")?,
        add_blocked_by: ids(field("addBlockedBy"), "addBlockedBy")?,
        remove_blocked_by: ids(field("removeBlockedBy"), "removeBlockedBy")?,
        id: field("id").map(|v| id(v, "id")).transpose()?,
        status,
        include_deleted,
        nested_ops: field("ops").is_some(),
    })
}

fn status_error() -> String {
    "status must be one of pending, in_progress, completed, deferred, deleted".into()
}

fn text(value: Option<&Value>, name: &str) -> Result<Option<String>, String> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("{name} must be a string")),
    }
}

fn ids(value: Option<&Value>, name: &str) -> Result<Option<Vec<TaskId>>, String> {
    match value {
        None => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| id(v, name).map_err(|_| format!("{name} must be an array of task ids")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(format!("{name} must be an array of task ids")),
    }
}

fn id(value: &Value, name: &str) -> Result<TaskId, String> {
    let wrong = || format!("{name} must be a task id (an integer)");
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Ok(i);
            }
            match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(f as TaskId),
                _ => Err(wrong()),
            }
        }
        Value::String(s) => s.trim().parse::<TaskId>().map_err(|_| wrong()),
        _ => Err(wrong()),
    }
}
