//! Every row of the reference's "Actions" and "Content strings" tables, and
//! the parameter rules (metadata merge, additive dependencies, filters).

use serde_json::json;

use super::*;
use crate::plan::todo::state::TodoState;

#[test]
fn content_strings_table() {
    // ids 1 and 2 first, so the row under test is #3 as in the reference.
    let base = with_tasks(&["one", "two"]);
    let created = ok(
        &base,
        json!({"action": "create", "subject": "Write the parser"}),
    );
    let s = created.state.clone();
    let progressing = ok(
        &s,
        json!({"action": "update", "id": 3, "status": "in_progress", "activeForm": "writing the parser"}),
    );
    let described = ok(
        &progressing.state,
        json!({"action": "update", "id": 3, "description": "the long story"}),
    );
    let again = ok(
        &progressing.state,
        json!({"action": "update", "id": 3, "status": "in_progress"}),
    );
    let deleted = ok(&s, json!({"action": "delete", "id": 3}));
    let seven = with_tasks(&["a", "b", "c", "d", "e", "f", "g"]);
    let cleared = ok(&seven, json!({"action": "clear"}));
    let rows: Vec<(&str, String, &str)> = vec![
        (
            "Created",
            created.text,
            "Created #3: Write the parser (pending)",
        ),
        (
            "Updated with a status change",
            progressing.text,
            "Updated #3 (pending → in_progress)",
        ),
        (
            "Updated without a status change",
            described.text,
            "Updated #3",
        ),
        (
            "Update that changed nothing",
            again.text,
            "No change: #3 already matches the requested values (status: in_progress)",
        ),
        ("Deleted", deleted.text, "Deleted #3: Write the parser"),
        ("Cleared", cleared.text, "Cleared 7 tasks"),
        (
            "list with nothing to show",
            ok(&TodoState::empty(), json!({"action": "list"})).text,
            "No tasks",
        ),
        (
            "Any rejection",
            call(&s, json!({"action": "get", "id": 99})).text,
            "Error: #99 not found",
        ),
    ];
    for (situation, actual, expected) in rows {
        assert_eq!(actual, expected, "{situation}");
    }
}

#[test]
fn list_row_shows_active_form_and_chain_mark() {
    let s = with_tasks(&["a", "b", "Write the parser"]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 3, "status": "in_progress", "activeForm": "writing the parser", "addBlockedBy": [1, 2]}),
    )
    .state;
    let list = ok(&s, json!({"action": "list", "status": "in_progress"})).text;
    assert_eq!(
        list,
        "[in_progress] #3 Write the parser (writing the parser) ⛓ #1,#2"
    );
    // The active form shows only while in progress.
    let s = ok(
        &s,
        json!({"action": "update", "id": 3, "status": "pending"}),
    )
    .state;
    let list = ok(&s, json!({"action": "list", "status": "pending"})).text;
    assert_eq!(
        list,
        "[pending] #1 a\n[pending] #2 b\n[pending] #3 Write the parser ⛓ #1,#2"
    );
}

#[test]
fn cleared_with_plan_items_keeps_them_and_says_so() {
    let s = with_plan(&with_tasks(&["x", "y"]));
    let cleared = ok(&s, json!({"action": "clear"}));
    assert_eq!(
        cleared.text,
        "Cleared 2 tasks; kept 3 plan items (complete them with evidence or defer them with a reason)"
    );
    assert_eq!(cleared.state.tasks.len(), 3);
    assert!(cleared.state.tasks.iter().all(|t| t.is_plan_item()));
    // The counter keeps counting when something is kept.
    assert_eq!(cleared.state.next_id, s.next_id);
    let created = ok(&cleared.state, json!({"action": "create", "subject": "z"}));
    assert_eq!(created.text, format!("Created #{}: z (pending)", s.next_id));
}

#[test]
fn create_adds_a_pending_task_with_the_next_id() {
    let s = ok(
        &TodoState::empty(),
        json!({"action": "create", "subject": "a", "description": "d", "activeForm": "doing a",
               "owner": "me", "metadata": {"k": 1}}),
    );
    assert_eq!(
        s.details["tasks"],
        json!([{"id": 1, "subject": "a", "description": "d", "activeForm": "doing a",
                "status": "pending", "owner": "me", "metadata": {"k": 1}}])
    );
    assert_eq!(s.details["nextId"], 2);
    assert_eq!(s.details["action"], "create");
    // Empty optional strings are not stored; the subject is kept verbatim.
    let s = ok(
        &s.state,
        json!({"action": "create", "subject": "  spaced  ", "description": "", "owner": ""}),
    );
    assert_eq!(
        s.details["tasks"][1],
        json!({"id": 2, "subject": "  spaced  ", "status": "pending"})
    );
}

#[test]
fn update_changes_fields_and_reports_no_change_for_identical_values() {
    let s = with_tasks(&["a"]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 1, "subject": "b", "owner": "o", "activeForm": "f"}),
    );
    assert_eq!(s.text, "Updated #1");
    let same = ok(
        &s.state,
        json!({"action": "update", "id": 1, "subject": "b", "owner": "o"}),
    );
    assert_eq!(
        same.text,
        "No change: #1 already matches the requested values (status: pending)"
    );
    assert_eq!(same.state, s.state);
}

#[test]
fn list_filters_by_status_and_hides_tombstones_unless_asked() {
    let s = with_tasks(&["a", "b", "c"]);
    let s = at_status(&s, 2, TaskStatus::Deleted);
    let s = at_status(&s, 3, TaskStatus::InProgress);
    assert_eq!(
        ok(&s, json!({"action": "list"})).text,
        "[pending] #1 a\n[in_progress] #3 c"
    );
    assert_eq!(
        ok(&s, json!({"action": "list", "includeDeleted": true})).text,
        "[pending] #1 a\n[deleted] #2 b\n[in_progress] #3 c"
    );
    assert_eq!(
        ok(&s, json!({"action": "list", "status": "deleted"})).text,
        "No tasks"
    );
    assert_eq!(
        ok(
            &s,
            json!({"action": "list", "status": "deleted", "includeDeleted": true})
        )
        .text,
        "[deleted] #2 b"
    );
}

#[test]
fn get_shows_fields_blocked_by_and_reverse_blocks() {
    let s = with_tasks(&["a", "b", "c"]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 2, "addBlockedBy": [1], "description": "the b",
               "activeForm": "doing b", "owner": "me"}),
    )
    .state;
    let s = ok(
        &s,
        json!({"action": "update", "id": 3, "addBlockedBy": [2, 1]}),
    )
    .state;
    assert_eq!(
        ok(&s, json!({"action": "get", "id": 2})).text,
        "#2 [pending] b\n  description: the b\n  activeForm: doing b\n  blockedBy: #1\n  blocks: #3\n  owner: me"
    );
    assert_eq!(
        ok(&s, json!({"action": "get", "id": 1})).text,
        "#1 [pending] a\n  blocks: #2, #3"
    );
    let s = at_status(&s, 1, TaskStatus::Completed);
    assert_eq!(
        ok(&s, json!({"action": "get", "id": 1})).text,
        "#1 [completed] a\n  blocks: #2, #3\n  evidence: cargo test: ok"
    );
}

#[test]
fn delete_tombstones_and_ids_are_never_reused() {
    let s = with_tasks(&["a", "b"]);
    let s = ok(&s, json!({"action": "delete", "id": 2})).state;
    assert_eq!(s.tasks[1].status, TaskStatus::Deleted);
    assert_eq!(s.tasks.len(), 2, "a tombstone is kept");
    let created = ok(&s, json!({"action": "create", "subject": "c"}));
    assert_eq!(created.text, "Created #3: c (pending)");
    // A tombstone still resolves as a historic dependency.
    assert_eq!(
        ok(&created.state, json!({"action": "get", "id": 2})).text,
        "#2 [deleted] b"
    );
}

#[test]
fn clear_resets_the_counter_only_when_nothing_is_kept() {
    let s = with_tasks(&["a", "b"]);
    let s = at_status(&s, 1, TaskStatus::Deleted);
    let cleared = ok(&s, json!({"action": "clear"}));
    assert_eq!(cleared.text, "Cleared 2 tasks", "tombstones count too");
    assert_eq!(cleared.state, TodoState::empty());
    assert_eq!(
        ok(
            &cleared.state,
            json!({"action": "create", "subject": "again"})
        )
        .text,
        "Created #1: again (pending)"
    );
}

#[test]
fn metadata_merges_key_by_key_and_null_deletes() {
    let s = ok(
        &TodoState::empty(),
        json!({"action": "create", "subject": "a", "metadata": {"x": 1, "y": {"deep": true}}}),
    )
    .state;
    let s = ok(
        &s,
        json!({"action": "update", "id": 1, "metadata": {"y": null, "z": "new"}}),
    );
    assert_eq!(s.text, "Updated #1");
    assert_eq!(
        s.details["tasks"][0]["metadata"],
        json!({"x": 1, "z": "new"})
    );
    let same = ok(
        &s.state,
        json!({"action": "update", "id": 1, "metadata": {"x": 1.0}}),
    );
    assert!(same.text.starts_with("No change"), "{}", same.text);
    let emptied = ok(
        &s.state,
        json!({"action": "update", "id": 1, "metadata": {"x": null, "z": null}}),
    );
    assert!(
        emptied.details["tasks"][0].get("metadata").is_none(),
        "an emptied record drops the field: {}",
        emptied.details
    );
}

#[test]
fn blocked_by_is_additive() {
    let s = with_tasks(&["a", "b", "c", "d"]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 4, "addBlockedBy": [1, 2]}),
    )
    .state;
    let s = ok(
        &s,
        json!({"action": "update", "id": 4, "addBlockedBy": [3, 1]}),
    )
    .state;
    assert_eq!(s.tasks[3].blocked_by, vec![1, 2, 3]);
    let s = ok(
        &s,
        json!({"action": "update", "id": 4, "removeBlockedBy": [2, 9]}),
    )
    .state;
    assert_eq!(s.tasks[3].blocked_by, vec![1, 3]);
    let emptied = ok(
        &s,
        json!({"action": "update", "id": 4, "removeBlockedBy": [1, 3]}),
    );
    assert!(emptied.details["tasks"][3].get("blockedBy").is_none());
    // Removing an edge that is not there changes nothing.
    let none = ok(
        &emptied.state,
        json!({"action": "update", "id": 4, "removeBlockedBy": [1]}),
    );
    assert!(none.text.starts_with("No change"), "{}", none.text);
}

#[test]
fn create_with_blocked_by_sets_the_initial_edges() {
    let s = with_tasks(&["a", "b"]);
    let s = ok(
        &s,
        json!({"action": "create", "subject": "c", "blockedBy": [2, 1]}),
    );
    assert_eq!(s.details["tasks"][2]["blockedBy"], json!([2, 1]));
    assert_eq!(
        ok(&s.state, json!({"action": "list"})).text,
        "[pending] #1 a\n[pending] #2 b\n[pending] #3 c ⛓ #2,#1"
    );
}

#[test]
fn evidence_is_stored_trimmed_and_shown() {
    let s = with_tasks(&["a"]);
    let done = ok(
        &s,
        json!({"action": "update", "id": 1, "status": "completed", "evidence": "  npm test: 42 passed  "}),
    );
    assert_eq!(done.text, "Updated #1 (pending → completed)");
    assert_eq!(
        done.state.tasks[0].evidence.as_deref(),
        Some("npm test: 42 passed")
    );
    assert_eq!(
        ok(&done.state, json!({"action": "list"})).text,
        "[completed] #1 a\n    evidence: npm test: 42 passed"
    );
    // New evidence on a completed task replaces the old one.
    let again = ok(
        &done.state,
        json!({"action": "update", "id": 1, "evidence": "cargo test: 3 passed"}),
    );
    assert_eq!(again.text, "Updated #1");
    assert_eq!(
        again.state.tasks[0].evidence.as_deref(),
        Some("cargo test: 3 passed")
    );
}

#[test]
fn reopening_a_deferred_task_drops_its_reason() {
    let s = at_status(&with_tasks(&["a"]), 1, TaskStatus::Deferred);
    assert_eq!(
        ok(&s, json!({"action": "list"})).text,
        "[deferred] #1 a\n    deferred: out of scope"
    );
    let reopened = ok(
        &s,
        json!({"action": "update", "id": 1, "status": "pending"}),
    );
    assert_eq!(reopened.text, "Updated #1 (deferred → pending)");
    assert_eq!(reopened.state.tasks[0].reason, None);
    // Agent todos are deferred without the plan notice.
    let deferred = ok(
        &with_tasks(&["b"]),
        json!({"action": "update", "id": 1, "status": "deferred", "reason": "later"}),
    );
    assert_eq!(deferred.text, "Updated #1 (pending → deferred)");
}

#[test]
fn the_envelope_has_the_reference_shape() {
    let s = with_plan(&TodoState::empty());
    let args = json!({"action": "create", "subject": "x"});
    let called = ok(&s, args.clone());
    let keys: Vec<&str> = called
        .details
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["action", "params", "tasks", "nextId", "plan"]);
    assert_eq!(called.details["params"], args);
    assert_eq!(
        called.details["plan"],
        json!({"id": "p1", "title": "Add widgets"})
    );
    let failed = call(&s, json!({"action": "get"}));
    let keys: Vec<&str> = failed
        .details
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["action", "params", "tasks", "nextId", "error", "plan"]
    );
    assert_eq!(failed.details["error"], "id required for get");
    assert_eq!(failed.details["action"], "get");
}
