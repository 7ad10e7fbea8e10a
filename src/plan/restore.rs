//! How the plan reaches the model without touching the system prompt: after
//! a restart (or a recall) as a tool result with an internal matching call,
//! and at the end of a turn as the settle reminder.

use crate::protocol::{Message, ToolCall};

use super::model::{PlanState, Status};

/// Id of the internal call that answers a restored plan. Not made by the
/// model; it exists because every provider needs a call for each result.
pub const RESTORE_CALL_ID: &str = "fido_plan_restore";

/// The call/result pair that delivers a saved plan to the model, placed
/// right after the system message. Empty when no plan was ever saved.
pub fn restore_messages(tool_name: &str, state: &PlanState, content: String) -> Vec<Message> {
    if state.version == 0 {
        return Vec::new();
    }
    vec![
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: RESTORE_CALL_ID.into(),
                name: tool_name.into(),
                arguments: "{}".into(),
            }],
        },
        Message::Tool {
            tool_call_id: RESTORE_CALL_ID.into(),
            name: tool_name.into(),
            content,
            is_error: false,
        },
    ]
}

/// The one reminder of a user prompt when the turn would end with items
/// still `pending` or `in_progress`; `None` when nothing is open.
pub fn settle_reminder(state: &PlanState) -> Option<String> {
    let open: Vec<String> = state
        .open_items()
        .map(|item| {
            format!(
                "- {} ({}): {}{}",
                item.id,
                item.status.as_str(),
                item.title,
                item.next_action
                    .as_deref()
                    .map(|n| format!(" — next: {n}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    if open.is_empty() {
        return None;
    }
    let blocked: Vec<String> = state
        .items
        .iter()
        .filter(|i| i.status == Status::Blocked)
        .map(|item| {
            format!(
                "- {}: {}{}",
                item.id,
                item.title,
                item.next_action
                    .as_deref()
                    .map(|n| format!(" — next: {n}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    let mut text = format!(
        "[Fido: plan check] You are about to finish, but the plan (version {}) still has open items:\n{}",
        state.version,
        open.join("\n")
    );
    if !blocked.is_empty() {
        text.push_str(&format!("\nBlocked:\n{}", blocked.join("\n")));
    }
    text.push_str(
        "\nDo not report the work as done while items are open. Continue with them now, or call update_plan to record what really happened (done only with evidence; blocked with the next action), then give your final answer, saying plainly what is unfinished.",
    );
    Some(text)
}
