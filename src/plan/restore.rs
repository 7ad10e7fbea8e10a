//! How the plan reaches the model without touching the system prompt: after
//! a restart (or a recall) as a tool result with an internal matching call,
//! and at the end of a turn as the settle reminder.

use crate::protocol::{Message, RESTORE_CALL_ID, ToolCall};

use super::model::{PlanState, Status};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::model::PlanItem;

    fn item(id: &str, status: Status, next: Option<&str>) -> PlanItem {
        PlanItem {
            id: id.into(),
            title: format!("Title of {id}"),
            status,
            details: None,
            dependencies: Vec::new(),
            next_action: next.map(String::from),
            evidence: if status == Status::Done {
                vec!["cargo test: 1 passed".into()]
            } else {
                Vec::new()
            },
        }
    }

    fn state(items: Vec<PlanItem>) -> PlanState {
        PlanState::empty().successor("testing".into(), items, "2025-01-01T00:00:00.000Z".into())
    }

    #[test]
    fn nothing_is_restored_before_the_first_update() {
        let empty = PlanState::empty();
        assert!(restore_messages("update_plan", &empty, empty.to_json_text()).is_empty());
    }

    #[test]
    fn a_saved_plan_is_restored_as_a_matching_call_and_tool_result() {
        let plan = state(vec![item("a", Status::Pending, Some("start"))]);
        let text = plan.to_json_text();
        let messages = restore_messages("update_plan", &plan, text.clone());
        let [
            Message::Assistant {
                content: None,
                tool_calls,
            },
            Message::Tool {
                tool_call_id,
                name,
                content,
                is_error,
            },
        ] = messages.as_slice()
        else {
            panic!("expected an assistant call then a tool result: {messages:?}");
        };
        let [call] = tool_calls.as_slice() else {
            panic!("expected exactly one call: {tool_calls:?}");
        };
        assert_eq!(&call.id, tool_call_id, "call and result ids differ");
        assert_eq!(call.name, "update_plan");
        assert_eq!(name, "update_plan");
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(arguments.is_object(), "arguments must be a JSON object");
        assert_eq!(content, &text, "the result must be the full plan text");
        assert!(!is_error);
    }

    #[test]
    fn an_empty_plan_after_a_clear_is_still_restored() {
        // `fido plan clear` keeps counting versions: the model must learn
        // that the plan is now empty.
        let mut cleared = state(Vec::new());
        cleared.version = 4;
        let messages = restore_messages("update_plan", &cleared, cleared.to_json_text());
        assert_eq!(messages.len(), 2);
    }

    #[test]
    fn the_restore_uses_the_given_tool_name() {
        let plan = state(vec![item("a", Status::Pending, Some("go"))]);
        let messages = restore_messages("todo", &plan, "{}".into());
        match messages.as_slice() {
            [
                Message::Assistant { tool_calls, .. },
                Message::Tool { name, .. },
            ] => {
                assert_eq!(tool_calls[0].name, "todo");
                assert_eq!(name, "todo");
            }
            other => panic!("unexpected messages: {other:?}"),
        }
    }

    #[test]
    fn no_reminder_without_items() {
        assert_eq!(settle_reminder(&PlanState::empty()), None);
        assert_eq!(settle_reminder(&state(Vec::new())), None);
    }

    #[test]
    fn no_reminder_once_every_item_is_done_or_blocked() {
        let plan = state(vec![
            item("a", Status::Done, None),
            item("b", Status::Blocked, Some("wait for review")),
            item("c", Status::Done, Some("nothing")),
        ]);
        assert_eq!(settle_reminder(&plan), None);
    }

    #[test]
    fn the_reminder_lists_every_open_item_with_its_next_action() {
        let plan = state(vec![
            item("inspect", Status::Done, None),
            item("implement", Status::InProgress, Some("finish the parser")),
            item("verify", Status::Pending, Some("run cargo test")),
            item("review", Status::Blocked, Some("wait for the maintainer")),
        ]);
        let text = settle_reminder(&plan).expect("open items need a reminder");
        for expected in [
            "implement",
            "in_progress",
            "finish the parser",
            "verify",
            "pending",
            "run cargo test",
            "review",
            "wait for the maintainer",
        ] {
            assert!(
                text.contains(expected),
                "reminder lacks {expected:?}:\n{text}"
            );
        }
        assert!(
            !text.contains("inspect"),
            "done items do not belong in the reminder:\n{text}"
        );
        assert!(
            text.contains("Do not report the work as done"),
            "the reminder must forbid reporting done:\n{text}"
        );
        // Each open item's next action sits on that item's line.
        for (id, next) in [
            ("implement", "finish the parser"),
            ("verify", "run cargo test"),
            ("review", "wait for the maintainer"),
        ] {
            assert!(
                text.lines().any(|l| l.contains(id) && l.contains(next)),
                "{id} and its next action are not on one line:\n{text}"
            );
        }
    }

    #[test]
    fn the_reminder_marks_blocked_items_apart_from_open_ones() {
        let plan = state(vec![
            item("work", Status::Pending, Some("do it")),
            item("ask", Status::Blocked, Some("ask the user")),
        ]);
        let text = settle_reminder(&plan).unwrap_or_default();
        let blocked_at = text.find("Blocked").expect("blocked section missing");
        let ask_at = text.find("ask the user").unwrap_or(0);
        let work_at = text.find("do it").unwrap_or(usize::MAX);
        assert!(work_at < blocked_at && blocked_at < ask_at, "{text}");
    }

    #[test]
    fn without_blocked_items_there_is_no_blocked_section() {
        let plan = state(vec![item("work", Status::Pending, Some("do it"))]);
        let text = settle_reminder(&plan).unwrap_or_default();
        assert!(text.contains("work"));
        assert!(!text.contains("Blocked"), "{text}");
    }

    #[test]
    fn a_single_in_progress_item_is_enough_for_a_reminder() {
        let plan = state(vec![
            item("a", Status::Done, None),
            item("b", Status::InProgress, Some("keep going")),
        ]);
        assert!(settle_reminder(&plan).is_some_and(|t| t.contains("keep going")));
    }

    #[test]
    fn restore_messages_are_recognised_and_nothing_else_is() {
        let state = crate::plan::PlanState::empty().successor(
            "r".into(),
            Vec::new(),
            "2026-01-01T00:00:00.000Z".into(),
        );
        let pair = restore_messages("update_plan", &state, "{}".into());
        assert!(pair.iter().all(Message::is_plan_restore));
        let other = Message::Tool {
            tool_call_id: "c1".into(),
            name: "update_plan".into(),
            content: "{}".into(),
            is_error: false,
        };
        assert!(!other.is_plan_restore());
        assert!(!Message::user("x").is_plan_restore());
        let text = Message::Assistant {
            content: Some("t".into()),
            tool_calls: vec![],
        };
        assert!(!text.is_plan_restore());
    }
}
