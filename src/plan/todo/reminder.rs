//! How the todo state reaches the model outside its own tool calls: after a
//! restart as a restored `list` result with an internal matching call, and
//! at the end of a turn as the settle reminder; plus the user notices of
//! plan deferrals.

use super::file::{Loaded, TodoStore};
use super::format::list_view;
use super::sanitize::display;
use super::state::{Task, TaskStatus, TodoState};
use crate::protocol::RESTORE_CALL_ID;
use crate::protocol::plan::TodoSnapshot;
use crate::protocol::{Message, ToolCall};

/// The arguments of the internal call that answers a restored state: a
/// real `list`, so the restored result is exactly what that call returns.
pub const RESTORE_ARGUMENTS: &str = r#"{"action":"list"}"#;

/// What a new session gets from a saved todo state.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    /// The call/result pair to place right after the system message; empty
    /// when no state was ever saved.
    pub messages: Vec<Message>,
    /// The `list` envelope, for the UI (`plan_updated`).
    pub details: Option<TodoSnapshot>,
    /// A corrupt file that was moved aside.
    pub warning: Option<String>,
}

/// The restore of `loaded` (see [`Restored`]).
pub fn restore(loaded: &Loaded) -> Restored {
    if !loaded.saved {
        return Restored {
            messages: Vec::new(),
            details: None,
            warning: loaded.warning.clone(),
        };
    }
    let (content, details) = list_view(&loaded.state);
    let name = super::TOOL_NAME;
    Restored {
        messages: vec![
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: RESTORE_CALL_ID.into(),
                    name: name.into(),
                    arguments: RESTORE_ARGUMENTS.into(),
                }],
            },
            Message::Tool {
                tool_call_id: RESTORE_CALL_ID.into(),
                name: name.into(),
                content,
                is_error: false,
            },
        ],
        details: Some(details),
        warning: loaded.warning.clone(),
    }
}

fn item_line(task: &Task) -> String {
    let group = task
        .plan_group
        .as_deref()
        .filter(|g| !g.is_empty())
        .map(|g| format!(" [{}]", display(g)))
        .unwrap_or_default();
    format!("- #{}{group} {}", task.id, display(&task.subject))
}

/// The one reminder of a user prompt when the turn would end with plan
/// items still `pending` or `in_progress`: the open items verbatim and the
/// deferred ones with their reasons. `None` without open plan items.
pub fn settle_reminder(state: &TodoState) -> Option<String> {
    let open: Vec<&Task> = state.open_plan_items().collect();
    if open.is_empty() {
        return None;
    }
    let total = state.plan_progress().map_or(open.len(), |p| p.total);
    let title = display(state.plan.as_ref().map_or("plan", |p| p.title.as_str()));
    let mut lines = vec![
        format!(
            "[Fido: plan check] Plan check: the approved plan \"{title}\" still has {}/{total} items open. Do not tell the user the work is done.",
            open.len()
        ),
        "Open plan items:".to_string(),
    ];
    lines.extend(open.iter().map(|t| item_line(t)));
    lines.push("Keep working on them now. For any item you can't finish in this run: if it is actually done, complete it with evidence; otherwise set status deferred with a reason. Then tell the user exactly which plan items are still open or deferred, and why.".to_string());
    let deferred: Vec<&Task> = state.deferred_plan_items().collect();
    if !deferred.is_empty() {
        lines.push("Deferred plan items (tell the user):".to_string());
        for task in deferred {
            lines.push(format!(
                "{} -- {}",
                item_line(task),
                display(task.reason.as_deref().unwrap_or_default())
            ));
        }
    }
    Some(lines.join("\n"))
}

/// The settle reminder for the workspace at `root`; a state that cannot be
/// read gives none (and a log line).
pub fn settle_reminder_in(root: &std::path::Path) -> Option<String> {
    match TodoStore::in_workspace(root).load() {
        Ok(loaded) => settle_reminder(&loaded.state),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the todo state for the settle reminder");
            None
        }
    }
}

/// The user notices of one call: net plan deferrals only. A plan item that
/// was not deferred before and is deferred after gets one notice with its
/// final reason; defer-then-reopen inside a batch gives none.
pub fn deferral_notices(before: &TodoState, after: &TodoState) -> Vec<String> {
    after
        .deferred_plan_items()
        .filter(|t| {
            before
                .task(t.id)
                .is_none_or(|b| b.status != TaskStatus::Deferred)
        })
        .map(|t| {
            format!(
                "Plan item deferred: #{} {} -- {}",
                t.id,
                display(&t.subject),
                display(t.reason.as_deref().unwrap_or_default())
            )
        })
        .collect()
}
