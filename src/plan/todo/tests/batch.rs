//! The `ops` batch rules.

use serde_json::{Value, json};

use super::*;
use crate::plan::todo::state::TodoState;

#[test]
fn creates_many_in_one_call_and_reports_each_op() {
    let called = ok(
        &TodoState::empty(),
        json!({"ops": [
            {"action": "create", "subject": "a"},
            {"action": "create", "subject": "b"},
            {"action": "create", "subject": "c"},
        ]}),
    );
    assert_eq!(called.details["action"], "batch");
    assert_eq!(
        called.text,
        "Applied 3 ops\n[0] Created #1: a (pending)\n[1] Created #2: b (pending)\n[2] Created #3: c (pending)"
    );
    assert_eq!(called.state.next_id, 4);
}

#[test]
fn closes_many_at_once_each_with_its_own_evidence() {
    let n = 24;
    let creates: Vec<Value> = (1..=n)
        .map(|i| json!({"action": "create", "subject": format!("t{i}")}))
        .collect();
    let s = ok(&TodoState::empty(), json!({"ops": creates})).state;
    let closes: Vec<Value> = (1..=n)
        .map(|i| json!({"action": "update", "id": i, "status": "completed", "evidence": format!("proof {i}")}))
        .collect();
    let s = ok(&s, json!({"ops": closes})).state;
    assert!(s.tasks.iter().all(|t| t.status == TaskStatus::Completed));
    assert_eq!(s.tasks[4].evidence.as_deref(), Some("proof 5"));
}

#[test]
fn is_atomic_and_names_the_failing_op() {
    let s = with_tasks(&["a", "b"]);
    let error = rejected(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "ok"},
            {"action": "create", "subject": "c"},
            {"action": "update", "id": 2, "status": "completed"},
        ]}),
    );
    assert_eq!(
        error,
        format!(
            "ops[2]: {}",
            crate::plan::todo::engine::ERR_EVIDENCE_REQUIRED
        )
    );
    let called = call(
        &s,
        json!({"ops": [{"action": "create", "subject": "c"}, {"action": "delete", "id": 9}]}),
    );
    assert_eq!(called.details["action"], "batch");
    assert_eq!(called.details["nextId"], 3);
    assert_eq!(called.details["error"], "ops[1]: #9 not found");
}

#[test]
fn mutations_apply_in_order_so_a_later_op_sees_an_earlier_one() {
    let called = ok(
        &TodoState::empty(),
        json!({"ops": [
            {"action": "create", "subject": "a"},
            {"action": "update", "id": 1, "status": "in_progress"},
            {"action": "update", "id": 1, "status": "completed", "evidence": "ok"},
        ]}),
    );
    assert_eq!(called.state.tasks[0].status, TaskStatus::Completed);
    assert_eq!(
        called.text,
        "Applied 3 ops\n[0] Created #1: a (pending)\n[1] Updated #1 (pending → in_progress)\n[2] Updated #1 (in_progress → completed)"
    );
}

#[test]
fn list_and_get_are_answered_from_the_final_state() {
    let called = ok(
        &TodoState::empty(),
        json!({"ops": [{"action": "list"}, {"action": "create", "subject": "fresh"}, {"action": "get", "id": 1}]}),
    );
    assert_eq!(
        called.text,
        "Applied 3 ops\n[0] [pending] #1 fresh\n[1] Created #1: fresh (pending)\n[2] #1 [pending] fresh"
    );
    // A read that fails against the final state fails the batch.
    let error = rejected(
        &TodoState::empty(),
        json!({"ops": [{"action": "get", "id": 1}, {"action": "create", "subject": "x"}, {"action": "get", "id": 2}]}),
    );
    assert_eq!(error, "ops[2]: #2 not found");
}

#[test]
fn mutation_errors_are_found_before_read_errors() {
    let error = rejected(
        &TodoState::empty(),
        json!({"ops": [{"action": "get"}, {"action": "delete", "id": 5}]}),
    );
    assert_eq!(error, "ops[1]: #5 not found");
}

#[test]
fn each_mutation_is_described_at_its_own_point() {
    let s = with_plan(&TodoState::empty());
    let called = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "deferred", "reason": "first"},
            {"action": "update", "id": 1, "status": "pending"},
            {"action": "update", "id": 1, "status": "deferred", "reason": "second"},
            {"action": "create", "subject": "old name"},
            {"action": "update", "id": 4, "subject": "new name"},
        ]}),
    );
    assert_eq!(
        called.text,
        "Applied 5 ops\n\
         [0] Updated #1 (pending → deferred). Tell the user this plan item is descoped and why: first\n\
         [1] Updated #1 (deferred → pending)\n\
         [2] Updated #1 (pending → deferred). Tell the user this plan item is descoped and why: second\n\
         [3] Created #4: old name (pending)\n\
         [4] Updated #4\n\
         Plan: Add widgets -- 2/3 plan items open"
    );
}

#[test]
fn supports_delete_and_clear() {
    let s = with_tasks(&["a", "b"]);
    let called = ok(
        &s,
        json!({"ops": [{"action": "delete", "id": 1}, {"action": "clear"}]}),
    );
    assert_eq!(called.state, TodoState::empty());
    assert_eq!(
        called.text,
        "Applied 2 ops\n[0] Deleted #1: a\n[1] Cleared 2 tasks"
    );
}

#[test]
fn malformed_calls() {
    let s = with_tasks(&["a"]);
    let rows: Vec<(Value, &str)> = vec![
        (json!({"ops": []}), "ops must not be empty"),
        (
            json!({"action": "list", "ops": [{"action": "list"}]}),
            "ops can't be combined with a top-level action or fields: put them inside each op",
        ),
        (
            json!({"subject": "x", "ops": [{"action": "list"}]}),
            "ops can't be combined with a top-level action or fields: put them inside each op",
        ),
        (
            json!({"frobs": 1, "ops": [{"action": "list"}]}),
            "ops can't be combined with a top-level action or fields: put them inside each op",
        ),
        (
            json!({"ops": [{"subject": "x"}]}),
            "ops[0]: action required",
        ),
        (
            json!({"ops": [{"action": "list"}, {"action": "list", "ops": []}]}),
            "ops[1]: ops can't be nested",
        ),
        (json!({}), "action required (or pass ops)"),
    ];
    for (args, expected) in rows {
        let called = call(&s, args.clone());
        assert_eq!(called.details["error"], expected, "{args}");
        assert_eq!(called.details["action"], "batch", "{args}");
        assert_eq!(called.state, s, "{args}");
    }
    // `null` next to ops is absent, not a field.
    ok(
        &s,
        json!({"action": null, "subject": null, "ops": [{"action": "list"}]}),
    );
}

#[test]
fn the_flat_form_keeps_working() {
    let called = ok(
        &TodoState::empty(),
        json!({"action": "create", "subject": "solo"}),
    );
    assert_eq!(called.details["action"], "create");
}

#[test]
fn plan_item_rules_hold_inside_a_batch() {
    let s = with_plan(&TodoState::empty());
    assert_eq!(
        rejected(
            &s,
            json!({"ops": [{"action": "create", "subject": "ADD THE `alpha` MODULE"}]})
        ),
        "ops[0]: #1 is already a plan item; update it"
    );
    let deleted = rejected(
        &s,
        json!({"ops": [{"action": "update", "id": 1, "status": "deleted"}]}),
    );
    assert!(deleted.starts_with("ops[0]: ") && deleted.contains("can't be deleted"));
    let done = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "a"},
            {"action": "update", "id": 2, "status": "completed", "evidence": "b"},
            {"action": "update", "id": 3, "status": "deferred", "reason": "later"},
        ]}),
    );
    let statuses: Vec<TaskStatus> = done.state.tasks.iter().map(|t| t.status).collect();
    assert_eq!(
        statuses,
        [
            TaskStatus::Completed,
            TaskStatus::Completed,
            TaskStatus::Deferred
        ]
    );
    assert!(
        done.text
            .ends_with("\nPlan: Add widgets -- 0/3 plan items open")
    );
    assert_eq!(
        done.details["plan"],
        json!({"id": "p1", "title": "Add widgets"})
    );
}

#[test]
fn a_no_op_batch_leaves_the_state_equal() {
    let s = at_status(&with_tasks(&["a"]), 1, TaskStatus::InProgress);
    let called = ok(
        &s,
        json!({"ops": [{"action": "update", "id": 1, "status": "in_progress"}, {"action": "list"}]}),
    );
    assert_eq!(called.state, s);
    assert_eq!(
        called.text,
        "Applied 2 ops\n[0] No change: #1 already matches the requested values (status: in_progress)\n[1] [in_progress] #1 a"
    );
}
