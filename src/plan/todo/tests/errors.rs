//! Every row of the reference's "Error messages" table, byte for byte, and
//! the rule that a rejection leaves the state unchanged.

use serde_json::{Value, json};

use super::*;
use crate::plan::todo::engine::{ERR_EVIDENCE_REQUIRED, ERR_REASON_REQUIRED};
use crate::plan::todo::state::TodoState;

/// Tasks #1 a, #2 b (deleted), #3 c, #4 d (completed), #5 e (blocked by #3),
/// and the plan items #6..#8.
fn fixture() -> TodoState {
    let s = with_tasks(&["a", "b", "c", "d"]);
    let s = at_status(&s, 2, TaskStatus::Deleted);
    let s = at_status(&s, 4, TaskStatus::Completed);
    let s = ok(
        &s,
        json!({"action": "create", "subject": "e", "blockedBy": [3]}),
    )
    .state;
    with_plan(&s)
}

#[test]
fn error_messages_table() {
    let s = fixture();
    let rows: Vec<(Value, &str)> = vec![
        (json!({"action": "create"}), "subject required for create"),
        (
            json!({"action": "create", "subject": "   "}),
            "subject required for create",
        ),
        (
            json!({"action": "create", "subject": "x", "blockedBy": [42]}),
            "blockedBy: #42 not found",
        ),
        (
            json!({"action": "create", "subject": "x", "blockedBy": [1, 2]}),
            "blockedBy: #2 is deleted",
        ),
        (
            json!({"action": "update", "status": "pending"}),
            "id required for update",
        ),
        (json!({"action": "get"}), "id required for get"),
        (json!({"action": "delete"}), "id required for delete"),
        (
            json!({"action": "update", "id": 42, "status": "pending"}),
            "#42 not found",
        ),
        (json!({"action": "get", "id": 42}), "#42 not found"),
        (json!({"action": "delete", "id": 42}), "#42 not found"),
        (
            json!({"action": "update", "id": 1}),
            "update requires at least one mutable field: subject, description, activeForm, status, evidence, reason, owner, metadata, addBlockedBy, or removeBlockedBy",
        ),
        (
            json!({"action": "update", "id": 1, "addBlockedBy": [], "removeBlockedBy": []}),
            "update requires at least one mutable field: subject, description, activeForm, status, evidence, reason, owner, metadata, addBlockedBy, or removeBlockedBy",
        ),
        (
            json!({"action": "update", "id": 1, "status": "completed"}),
            ERR_EVIDENCE_REQUIRED,
        ),
        (
            json!({"action": "update", "id": 1, "status": "completed", "evidence": " \n "}),
            ERR_EVIDENCE_REQUIRED,
        ),
        (
            json!({"action": "update", "id": 4, "evidence": ""}),
            ERR_EVIDENCE_REQUIRED,
        ),
        (
            json!({"action": "update", "id": 1, "status": "deferred"}),
            ERR_REASON_REQUIRED,
        ),
        (
            json!({"action": "update", "id": 1, "status": "deferred", "reason": ""}),
            ERR_REASON_REQUIRED,
        ),
        (
            json!({"action": "update", "id": 1, "evidence": "ran it"}),
            "evidence only applies to a completed task (status: completed)",
        ),
        (
            json!({"action": "update", "id": 1, "status": "in_progress", "evidence": "ran it"}),
            "evidence only applies to a completed task (status: completed)",
        ),
        (
            json!({"action": "update", "id": 1, "reason": "why"}),
            "reason only applies to a deferred task (status: deferred)",
        ),
        (
            json!({"action": "update", "id": 4, "status": "deleted", "reason": "why"}),
            "reason only applies to a deferred task (status: deferred)",
        ),
        (
            json!({"action": "delete", "id": 6}),
            "#6 is a plan item from the approved plan and can't be deleted: complete it with evidence, or set status deferred with a reason",
        ),
        (
            json!({"action": "update", "id": 7, "status": "deleted"}),
            "#7 is a plan item from the approved plan and can't be deleted: complete it with evidence, or set status deferred with a reason",
        ),
        (
            json!({"action": "update", "id": 6, "subject": "Something else"}),
            "#6 is a plan item; its subject and description are the approved plan's text and can't be edited",
        ),
        (
            json!({"action": "update", "id": 6, "description": "more"}),
            "#6 is a plan item; its subject and description are the approved plan's text and can't be edited",
        ),
        (
            json!({"action": "update", "id": 4, "status": "in_progress"}),
            "illegal transition completed → in_progress",
        ),
        (
            json!({"action": "update", "id": 2, "status": "pending"}),
            "illegal transition deleted → pending",
        ),
        (
            json!({"action": "update", "id": 1, "addBlockedBy": [1]}),
            "cannot block #1 on itself",
        ),
        (
            json!({"action": "update", "id": 1, "addBlockedBy": [42]}),
            "addBlockedBy: #42 not found",
        ),
        (
            json!({"action": "update", "id": 1, "addBlockedBy": [2]}),
            "addBlockedBy: #2 is deleted",
        ),
        (
            json!({"action": "update", "id": 3, "addBlockedBy": [5]}),
            "addBlockedBy would create a cycle in the blockedBy graph",
        ),
        (
            json!({"action": "delete", "id": 2}),
            "#2 is already deleted",
        ),
        (
            json!({"action": "create", "subject": "  wire `BETA`   into the cli "}),
            "#7 is already a plan item; update it",
        ),
    ];
    for (args, expected) in rows {
        assert_eq!(rejected(&s, args.clone()), expected, "{args}");
    }
}

#[test]
fn a_longer_cycle_is_rejected_too() {
    let s = with_tasks(&["a", "b", "c"]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 2, "addBlockedBy": [1]}),
    )
    .state;
    let s = ok(
        &s,
        json!({"action": "update", "id": 3, "addBlockedBy": [2]}),
    )
    .state;
    assert_eq!(
        rejected(
            &s,
            json!({"action": "update", "id": 1, "addBlockedBy": [3]})
        ),
        "addBlockedBy would create a cycle in the blockedBy graph"
    );
    // Removing the closing edge in the same call makes it legal.
    let s = ok(
        &s,
        json!({"action": "update", "id": 3, "removeBlockedBy": [2], "addBlockedBy": [1]}),
    )
    .state;
    assert_eq!(s.tasks[2].blocked_by, vec![1]);
}

#[test]
fn validation_precedes_every_mutation() {
    // The first bad dependency rejects the call even though the status and
    // the other fields were fine.
    let s = with_tasks(&["a", "b"]);
    assert_eq!(
        rejected(
            &s,
            json!({"action": "update", "id": 1, "status": "in_progress", "owner": "x", "addBlockedBy": [2, 99]})
        ),
        "addBlockedBy: #99 not found"
    );
}

#[test]
fn the_duplicate_guard_applies_only_with_a_plan_and_to_plan_items() {
    let s = with_tasks(&["Add the `alpha` module"]);
    // No plan: duplicates are fine.
    ok(
        &s,
        json!({"action": "create", "subject": "add the `alpha` module"}),
    );
    let s = with_plan(&s);
    // An agent todo with the same subject does not block either.
    assert_eq!(
        rejected(
            &s,
            json!({"action": "create", "subject": "ADD THE `ALPHA` MODULE"})
        ),
        "#2 is already a plan item; update it"
    );
    ok(
        &s,
        json!({"action": "create", "subject": "Add the alpha module"}),
    );
}

#[test]
fn shape_errors_are_in_band_and_change_nothing() {
    let s = fixture();
    let rows: Vec<(Value, &str, &str)> = vec![
        (
            json!({"action": "frobnicate"}),
            "unknown action \"frobnicate\": use create, update, list, get, delete or clear",
            "batch",
        ),
        (
            json!({"action": 3}),
            "action must be a string: create, update, list, get, delete or clear",
            "batch",
        ),
        (
            json!({"action": "get", "id": "three"}),
            "id must be a task id (an integer)",
            "get",
        ),
        (
            json!({"action": "get", "id": 1.5}),
            "id must be a task id (an integer)",
            "get",
        ),
        (
            json!({"action": "update", "id": 1, "status": "done"}),
            "status must be one of pending, in_progress, completed, deferred, deleted",
            "update",
        ),
        (
            json!({"action": "create", "subject": 7}),
            "subject must be a string",
            "create",
        ),
        (
            json!({"action": "update", "id": 1, "metadata": [1]}),
            "metadata must be an object",
            "update",
        ),
        (
            json!({"action": "update", "id": 1, "addBlockedBy": 3}),
            "addBlockedBy must be an array of task ids",
            "update",
        ),
        (
            json!({"action": "list", "includeDeleted": "yes"}),
            "includeDeleted must be true or false",
            "list",
        ),
        (
            json!({"ops": "create"}),
            "ops must be an array of operations",
            "batch",
        ),
        (
            json!({"ops": [1]}),
            "ops[0]: each op must be an object",
            "batch",
        ),
        (
            json!({"ops": [{"action": "list"}, {"action": "get", "id": []}]}),
            "ops[1]: id must be a task id (an integer)",
            "batch",
        ),
    ];
    for (args, expected, action) in rows {
        let called = call(&s, args.clone());
        assert_eq!(called.details["error"], expected, "{args}");
        assert_eq!(called.text, format!("Error: {expected}"), "{args}");
        assert_eq!(called.details["action"], action, "{args}");
        assert_eq!(called.state, s, "{args}");
    }
}

#[test]
fn null_fields_count_as_absent_and_ids_may_be_numeric_text() {
    let s = with_tasks(&["a"]);
    let called = ok(
        &s,
        json!({"action": "update", "id": "1", "status": "in_progress", "owner": null, "evidence": null}),
    );
    assert_eq!(called.text, "Updated #1 (pending → in_progress)");
    assert_eq!(
        ok(&s, json!({"action": "get", "id": 1.0})).text,
        "#1 [pending] a"
    );
}
