use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Map, Value, json};

use super::*;

// ---- helpers -------------------------------------------------------

/// A valid raw item for `status`: open items carry a next action, done
/// items carry evidence.
fn raw(id: &str, status: &str) -> Value {
    let mut item = json!({"id": id, "title": format!("Do {id}"), "status": status});
    if status == "done" {
        item["evidence"] = json!(["cargo test: 3 passed"]);
    } else {
        item["next_action"] = json!(format!("start {id}"));
    }
    item
}

fn with(mut item: Value, key: &str, value: Value) -> Value {
    item[key] = value;
    item
}

fn without(mut item: Value, key: &str) -> Value {
    if let Some(object) = item.as_object_mut() {
        object.remove(key);
    }
    item
}

fn plan(items: Vec<Value>) -> Value {
    json!({"reason": "testing", "items": items})
}

fn accept(args: &Value) -> (String, Vec<PlanItem>) {
    match validate(args) {
        Ok(valid) => valid,
        Err(message) => panic!("expected {args} to be accepted, got: {message}"),
    }
}

fn reject(args: &Value) -> String {
    match validate(args) {
        Ok(valid) => panic!("expected {args} to be rejected, got {valid:?}"),
        Err(Rejected(message)) => {
            assert!(!message.trim().is_empty(), "empty error for {args}");
            message
        }
    }
}

/// Asserts the message names item `id` (quoted, as the model wrote it).
fn names(message: &str, id: &str) {
    assert!(
        message.contains(&format!("\"{id}\"")),
        "error does not name item {id:?}: {message}"
    );
}

fn mentions(message: &str, words: &[&str]) {
    for word in words {
        assert!(message.contains(word), "error lacks {word:?}: {message}");
    }
}

fn long(n: usize) -> String {
    "x".repeat(n)
}

fn item_with_status(id: &str, status: Status) -> PlanItem {
    PlanItem {
        id: id.into(),
        title: format!("Do {id}"),
        status,
        details: None,
        dependencies: Vec::new(),
        next_action: (status != Status::Done).then(|| "go".to_string()),
        evidence: if status == Status::Done {
            vec!["ok".into()]
        } else {
            Vec::new()
        },
    }
}

/// Parses "dependencies form a cycle: a → b → a; …" into its ids.
fn cycle_in(message: &str) -> Vec<String> {
    let after = message
        .split_once("cycle: ")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no cycle shown in: {message}"));
    let path = after.split(';').next().unwrap_or_default();
    path.split(" → ").map(|s| s.trim().to_string()).collect()
}

/// Checks that `cycle` is a closed walk along dependency edges of
/// `edges` (item → what it depends on).
fn assert_real_cycle(cycle: &[String], edges: &[(&str, &str)]) {
    assert!(
        cycle.len() >= 3,
        "a cycle needs two ids and the repeat: {cycle:?}"
    );
    assert_eq!(cycle.first(), cycle.last(), "cycle not closed: {cycle:?}");
    for pair in cycle.windows(2) {
        assert!(
            edges.contains(&(pair[0].as_str(), pair[1].as_str())),
            "{} → {} is not a dependency edge ({cycle:?})",
            pair[0],
            pair[1]
        );
    }
}

// ---- valid plans and normalisation ---------------------------------

#[test]
fn an_empty_plan_is_valid() {
    let (reason, items) = accept(&plan(vec![]));
    assert_eq!(reason, "testing");
    assert!(items.is_empty());
}

#[test]
fn a_first_plan_may_hold_done_and_in_progress_items() {
    let args = plan(vec![
        raw("inspect", "done"),
        raw("implement", "in_progress"),
        raw("wait-review", "blocked"),
        raw("verify", "pending"),
    ]);
    let (_, items) = accept(&args);
    let statuses: Vec<Status> = items.iter().map(|i| i.status).collect();
    assert_eq!(
        statuses,
        [
            Status::Done,
            Status::InProgress,
            Status::Blocked,
            Status::Pending
        ]
    );
    let state = PlanState::empty().successor("first".into(), items, "t".into());
    assert_eq!(state.version, 1);
    assert_eq!(
        state.changes.added,
        ["inspect", "implement", "wait-review", "verify"]
    );
    assert!(state.changes.dropped.is_empty());
    assert!(state.changes.status_changed.is_empty());
}

#[test]
fn text_is_trimmed_and_empty_optionals_become_none() {
    let args = json!({
        "reason": "  tidy up  ",
        "items": [
            {"id": "  a  ", "title": "  Title  ", "status": "pending",
             "details": "   ", "next_action": "  next  ",
             "dependencies": [" b "], "evidence": ["  seen  "]},
            {"id": "b", "title": "B", "status": "done", "details": null,
             "next_action": "", "evidence": ["ok"], "dependencies": null}
        ]
    });
    let (reason, items) = accept(&args);
    assert_eq!(reason, "tidy up");
    let a = &items[0];
    assert_eq!(a.id, "a");
    assert_eq!(a.title, "Title");
    assert_eq!(a.details, None);
    assert_eq!(a.next_action.as_deref(), Some("next"));
    assert_eq!(a.dependencies, ["b"]);
    assert_eq!(a.evidence, ["seen"]);
    let b = &items[1];
    assert_eq!(b.details, None);
    assert_eq!(b.next_action, None);
    assert!(b.dependencies.is_empty());
}

#[test]
fn every_field_is_present_in_the_json_with_null_or_empty_list() {
    let (reason, items) = accept(&plan(vec![raw("a", "pending")]));
    let state = PlanState::empty().successor(reason, items, "2025-01-01T00:00:00.000Z".into());
    let value: Value = serde_json::from_str(&state.to_json_text()).unwrap();
    for key in ["version", "updatedAt", "reason", "items", "changes"] {
        assert!(value.get(key).is_some(), "state lacks {key}: {value}");
    }
    let item = &value["items"][0];
    let keys: Vec<&str> = item
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "title",
            "status",
            "details",
            "dependencies",
            "next_action",
            "evidence"
        ]
    );
    assert_eq!(item["details"], Value::Null);
    assert_eq!(item["dependencies"], json!([]));
    assert_eq!(item["evidence"], json!([]));
    assert_eq!(item["status"], json!("pending"));
    assert_eq!(value["updatedAt"], json!("2025-01-01T00:00:00.000Z"));
}

#[test]
fn done_items_need_no_next_action_but_may_keep_one() {
    accept(&plan(vec![without(raw("a", "done"), "next_action")]));
    let (_, items) = accept(&plan(vec![with(
        raw("a", "done"),
        "next_action",
        json!("celebrate"),
    )]));
    assert_eq!(items[0].next_action.as_deref(), Some("celebrate"));
}

#[test]
fn limits_are_inclusive() {
    let items: Vec<Value> = (0..MAX_ITEMS)
        .map(|i| {
            let mut item = raw(&format!("s{i}"), "pending");
            item["title"] = json!(long(MAX_TITLE_CHARS));
            item["details"] = json!(long(MAX_DETAILS_CHARS));
            item["next_action"] = json!(long(MAX_NEXT_ACTION_CHARS));
            item["evidence"] = json!(vec![long(MAX_EVIDENCE_CHARS); MAX_EVIDENCE_ENTRIES]);
            item
        })
        .collect();
    let mut args = plan(items);
    args["reason"] = json!(long(MAX_REASON_CHARS));
    args["items"][0]["id"] = json!("i".repeat(MAX_ID_CHARS));
    let (_, items) = accept(&args);
    assert_eq!(items.len(), MAX_ITEMS);
}

#[test]
fn ids_may_use_letters_digits_dash_underscore_and_dot() {
    accept(&plan(vec![raw("Write_tests-2.b", "pending")]));
}

#[test]
fn dependencies_may_form_a_diamond() {
    let args = plan(vec![
        raw("d", "done"),
        with(raw("b", "pending"), "dependencies", json!(["d"])),
        with(raw("c", "pending"), "dependencies", json!(["d"])),
        with(raw("a", "pending"), "dependencies", json!(["b", "c"])),
    ]);
    let (_, items) = accept(&args);
    assert_eq!(items[3].dependencies, ["b", "c"]);
}

#[test]
fn status_is_deserialised_from_snake_case() {
    for status in [
        Status::Pending,
        Status::InProgress,
        Status::Blocked,
        Status::Done,
    ] {
        let text = serde_json::to_string(&status).unwrap();
        assert_eq!(text, format!("\"{}\"", status.as_str()));
        assert_eq!(Status::parse(status.as_str()), Some(status));
    }
    assert!(Status::Pending.is_open() && Status::InProgress.is_open());
    assert!(!Status::Blocked.is_open() && !Status::Done.is_open());
}

// ---- successor and diff --------------------------------------------

#[test]
fn successor_increments_the_version_and_reports_changes() {
    let first = PlanState::empty().successor(
        "start".into(),
        vec![
            item_with_status("a", Status::Pending),
            item_with_status("b", Status::Pending),
            item_with_status("c", Status::InProgress),
        ],
        "t1".into(),
    );
    let second = first.successor(
        "progress".into(),
        vec![
            item_with_status("c", Status::Done),
            item_with_status("a", Status::Pending),
            item_with_status("d", Status::InProgress),
        ],
        "t2".into(),
    );
    assert_eq!(second.version, first.version + 1);
    assert_eq!(second.updated_at.as_deref(), Some("t2"));
    assert_eq!(second.reason, "progress");
    assert_eq!(second.changes.added, ["d"]);
    assert_eq!(second.changes.dropped, ["b"]);
    assert_eq!(second.changes.status_changed.len(), 1);
    let changed = &second.changes.status_changed[0];
    mentions(changed, &["c", "in_progress", "done"]);
    assert!(
        changed.find("in_progress") < changed.find("done"),
        "old status should come first: {changed}"
    );
}

#[test]
fn a_rename_shows_as_one_added_and_one_dropped() {
    let first = PlanState::empty().successor(
        "start".into(),
        vec![item_with_status("inspect", Status::Pending)],
        "t1".into(),
    );
    let second = first.successor(
        "oops".into(),
        vec![item_with_status("inspection", Status::Pending)],
        "t2".into(),
    );
    assert_eq!(second.changes.added, ["inspection"]);
    assert_eq!(second.changes.dropped, ["inspect"]);
    assert!(second.changes.status_changed.is_empty());
}

#[test]
fn an_unchanged_plan_reports_no_changes() {
    let items = vec![
        item_with_status("a", Status::Done),
        item_with_status("b", Status::Pending),
    ];
    let first = PlanState::empty().successor("x".into(), items.clone(), "t1".into());
    let second = first.successor("y".into(), items, "t2".into());
    assert_eq!(second.changes, PlanChanges::default());
    assert_eq!(second.version, 2);
}

#[test]
fn successor_never_overflows_the_version() {
    let mut state = PlanState::empty();
    state.version = u64::MAX;
    let next = state.successor("x".into(), Vec::new(), "t".into());
    assert_eq!(next.version, u64::MAX);
}

#[test]
fn open_items_are_pending_and_in_progress() {
    let state = PlanState::empty().successor(
        "x".into(),
        vec![
            item_with_status("a", Status::Done),
            item_with_status("b", Status::Pending),
            item_with_status("c", Status::Blocked),
            item_with_status("d", Status::InProgress),
        ],
        "t".into(),
    );
    let open: Vec<&str> = state.open_items().map(|i| i.id.as_str()).collect();
    assert_eq!(open, ["b", "d"]);
}

#[test]
fn a_file_in_the_seed_shape_deserialises() {
    let text = r#"{"version": 1, "updatedAt": "2025-01-01T00:00:00.000Z",
        "reason": "Current task plan",
        "items": [{"id": "a", "title": "A", "status": "pending", "next_action": "go"}]}"#;
    let state: PlanState = serde_json::from_str(text).unwrap();
    assert_eq!(state.version, 1);
    assert_eq!(state.changes, PlanChanges::default());
    assert_eq!(state.items[0].details, None);
    assert!(state.items[0].dependencies.is_empty());
    assert!(state.items[0].evidence.is_empty());
}

// ---- item-level rules ----------------------------------------------

#[test]
fn duplicate_ids_are_rejected_naming_the_id() {
    let message = reject(&plan(vec![
        raw("a", "pending"),
        raw("b", "pending"),
        raw("a", "done"),
    ]));
    names(&message, "a");
    mentions(&message, &["unique"]);
}

#[test]
fn ids_differing_only_in_surrounding_space_are_duplicates() {
    let message = reject(&plan(vec![raw("a", "pending"), raw(" a ", "pending")]));
    names(&message, "a");
}

#[test]
fn bad_id_characters_are_rejected_naming_the_position() {
    for bad in ["has space", "slash/id", "ünïcode", "semi;colon", "quote\"d"] {
        let message = reject(&plan(vec![raw("ok", "pending"), raw(bad, "pending")]));
        mentions(&message, &["items[1]", "letters, digits"]);
    }
}

#[test]
fn empty_and_overlong_ids_are_rejected_naming_the_position() {
    for bad in [String::new(), "   ".into(), "i".repeat(MAX_ID_CHARS + 1)] {
        let message = reject(&plan(vec![raw(&bad, "pending")]));
        mentions(&message, &["items[0]", "`id`", &MAX_ID_CHARS.to_string()]);
    }
}

#[test]
fn missing_or_non_string_ids_are_rejected_naming_the_position() {
    let message = reject(&plan(vec![
        raw("a", "pending"),
        without(raw("x", "pending"), "id"),
    ]));
    mentions(&message, &["items[1]", "`id`", "required"]);
    for bad in [
        json!(3),
        json!(null),
        json!(["a"]),
        json!({"a": 1}),
        json!(true),
    ] {
        let message = reject(&plan(vec![with(raw("x", "pending"), "id", bad)]));
        mentions(&message, &["items[0]", "`id` must be a string"]);
    }
}

#[test]
fn more_than_twenty_items_are_rejected() {
    let items: Vec<Value> = (0..=MAX_ITEMS)
        .map(|i| raw(&format!("s{i}"), "pending"))
        .collect();
    let message = reject(&plan(items));
    mentions(
        &message,
        &[&(MAX_ITEMS + 1).to_string(), &MAX_ITEMS.to_string()],
    );
}

#[test]
fn more_than_one_in_progress_item_is_rejected_naming_them() {
    let message = reject(&plan(vec![
        raw("a", "in_progress"),
        raw("b", "pending"),
        raw("c", "in_progress"),
    ]));
    names(&message, "a");
    names(&message, "c");
    assert!(!message.contains("\"b\""), "names a bystander: {message}");
    mentions(&message, &["in_progress", "at most one"]);
}

#[test]
fn next_action_is_required_for_pending_in_progress_and_blocked() {
    for status in ["pending", "in_progress", "blocked"] {
        for missing in [None, Some(json!(null)), Some(json!("  "))] {
            let item = match &missing {
                None => without(raw("a", status), "next_action"),
                Some(value) => with(raw("a", status), "next_action", value.clone()),
            };
            let message = reject(&plan(vec![raw("ok", "done"), item]));
            names(&message, "a");
            mentions(&message, &["next_action", status]);
        }
    }
}

#[test]
fn done_needs_non_empty_evidence() {
    for evidence in [None, Some(json!(null)), Some(json!([]))] {
        let item = match &evidence {
            None => without(raw("a", "done"), "evidence"),
            Some(value) => with(raw("a", "done"), "evidence", value.clone()),
        };
        let message = reject(&plan(vec![item]));
        names(&message, "a");
        mentions(&message, &["evidence", "done"]);
    }
    for blank in [json!([""]), json!(["ok", "   "])] {
        let message = reject(&plan(vec![with(raw("a", "done"), "evidence", blank)]));
        names(&message, "a");
        mentions(&message, &["evidence", "empty"]);
    }
}

#[test]
fn unknown_dependency_ids_are_rejected_naming_item_and_dependency() {
    let message = reject(&plan(vec![
        raw("a", "pending"),
        with(raw("b", "pending"), "dependencies", json!(["a", "ghost"])),
    ]));
    names(&message, "b");
    names(&message, "ghost");
    mentions(&message, &["unknown"]);
}

#[test]
fn self_dependencies_are_rejected() {
    let message = reject(&plan(vec![
        raw("a", "pending"),
        with(raw("b", "pending"), "dependencies", json!(["b"])),
    ]));
    names(&message, "b");
    mentions(&message, &["itself"]);
}

#[test]
fn duplicate_dependencies_are_rejected() {
    let message = reject(&plan(vec![
        raw("a", "pending"),
        with(raw("b", "pending"), "dependencies", json!(["a", " a"])),
    ]));
    names(&message, "b");
    names(&message, "a");
    mentions(&message, &["twice"]);
}

#[test]
fn a_two_cycle_is_rejected_and_shown() {
    let message = reject(&plan(vec![
        with(raw("a", "pending"), "dependencies", json!(["b"])),
        with(raw("b", "pending"), "dependencies", json!(["a"])),
    ]));
    mentions(&message, &["cycle"]);
    let cycle = cycle_in(&message);
    assert_real_cycle(&cycle, &[("a", "b"), ("b", "a")]);
    assert_eq!(cycle.len(), 3);
}

#[test]
fn a_three_cycle_is_rejected_and_shown() {
    let edges = [("b", "c"), ("c", "d"), ("d", "b"), ("a", "b")];
    let message = reject(&plan(vec![
        with(raw("a", "pending"), "dependencies", json!(["b"])),
        with(raw("b", "pending"), "dependencies", json!(["c"])),
        with(raw("c", "pending"), "dependencies", json!(["d"])),
        with(raw("d", "pending"), "dependencies", json!(["b"])),
    ]));
    let cycle = cycle_in(&message);
    assert_real_cycle(&cycle, &edges);
    let ids: BTreeSet<&str> = cycle.iter().map(String::as_str).collect();
    assert_eq!(ids, BTreeSet::from(["b", "c", "d"]), "{message}");
}

#[test]
fn find_cycle_finds_nothing_in_an_acyclic_graph() {
    let mut items: Vec<PlanItem> = (0..6)
        .map(|i| item_with_status(&format!("s{i}"), Status::Pending))
        .collect();
    for (i, item) in items.iter_mut().enumerate() {
        item.dependencies = (0..i).map(|j| format!("s{j}")).collect();
    }
    assert_eq!(find_cycle(&items), None);
    items[0].dependencies = vec!["s5".into()];
    assert!(find_cycle(&items).is_some());
}

#[test]
fn length_limits_name_the_item_and_the_field() {
    let cases = [
        ("title", json!(long(MAX_TITLE_CHARS + 1)), MAX_TITLE_CHARS),
        (
            "details",
            json!(long(MAX_DETAILS_CHARS + 1)),
            MAX_DETAILS_CHARS,
        ),
        (
            "next_action",
            json!(long(MAX_NEXT_ACTION_CHARS + 1)),
            MAX_NEXT_ACTION_CHARS,
        ),
        (
            "evidence",
            json!(["ok", long(MAX_EVIDENCE_CHARS + 1)]),
            MAX_EVIDENCE_CHARS,
        ),
        (
            "evidence",
            json!(vec!["ok"; MAX_EVIDENCE_ENTRIES + 1]),
            MAX_EVIDENCE_ENTRIES,
        ),
        (
            "dependencies",
            json!((0..=MAX_ITEMS).map(|i| format!("s{i}")).collect::<Vec<_>>()),
            MAX_ITEMS,
        ),
    ];
    for (field, value, max) in cases {
        let message = reject(&plan(vec![with(raw("a", "done"), field, value)]));
        names(&message, "a");
        mentions(&message, &[&format!("`{field}`"), &max.to_string()]);
    }
}

#[test]
fn an_overlong_reason_is_rejected() {
    let mut args = plan(vec![]);
    args["reason"] = json!(long(MAX_REASON_CHARS + 1));
    let message = reject(&args);
    mentions(&message, &["reason", &MAX_REASON_CHARS.to_string()]);
}

#[test]
fn lengths_count_characters_not_bytes() {
    let title = "é".repeat(MAX_TITLE_CHARS);
    assert!(title.len() > MAX_TITLE_CHARS);
    accept(&plan(vec![with(
        raw("a", "pending"),
        "title",
        json!(title),
    )]));
}

#[test]
fn missing_or_blank_titles_are_rejected() {
    for item in [
        without(raw("a", "pending"), "title"),
        with(raw("a", "pending"), "title", json!("  ")),
    ] {
        let message = reject(&plan(vec![item]));
        names(&message, "a");
        mentions(&message, &["`title`", "required"]);
    }
}

// ---- shapes ----------------------------------------------------------

#[test]
fn arguments_that_are_not_an_object_get_the_expected_shape() {
    for args in [json!(null), json!([]), json!("plan"), json!(1), json!(true)] {
        let message = reject(&args);
        mentions(&message, &[EXPECTED_SHAPE]);
    }
}

#[test]
fn items_not_an_array_get_the_expected_shape() {
    for items in [json!({}), json!("a, b"), json!(1), json!(null)] {
        let message = reject(&json!({"reason": "r", "items": items}));
        mentions(&message, &["`items`", "array", EXPECTED_SHAPE]);
    }
    let message = reject(&json!({"reason": "r"}));
    mentions(&message, &["`items`", EXPECTED_SHAPE]);
}

#[test]
fn an_item_that_is_not_an_object_gets_the_expected_shape() {
    for bad in [json!("a"), json!(1), json!(null), json!([])] {
        let message = reject(&plan(vec![raw("a", "pending"), bad]));
        mentions(&message, &["items[1]", "object", EXPECTED_SHAPE]);
    }
}

#[test]
fn unknown_status_lists_the_allowed_ones() {
    for bad in ["complete", "DONE", "", "in-progress"] {
        let message = reject(&plan(vec![with(raw("a", "pending"), "status", json!(bad))]));
        names(&message, "a");
        mentions(&message, &["pending", "in_progress", "blocked", "done"]);
    }
}

#[test]
fn status_that_is_not_a_string_lists_the_allowed_ones() {
    for bad in [json!(1), json!(null), json!(["done"]), json!({"s": "done"})] {
        let message = reject(&plan(vec![with(raw("a", "pending"), "status", bad)]));
        names(&message, "a");
        mentions(
            &message,
            &["`status`", "pending", "in_progress", "blocked", "done"],
        );
    }
    let message = reject(&plan(vec![without(raw("a", "pending"), "status")]));
    names(&message, "a");
    mentions(&message, &["`status`", "required", "in_progress"]);
}

#[test]
fn unknown_top_level_fields_are_rejected() {
    let mut args = plan(vec![]);
    args["priority"] = json!("high");
    let message = reject(&args);
    mentions(&message, &["priority", "reason", "items", EXPECTED_SHAPE]);
}

#[test]
fn unknown_item_fields_are_rejected_naming_the_item() {
    let message = reject(&plan(vec![with(raw("a", "pending"), "owner", json!("me"))]));
    names(&message, "a");
    mentions(&message, &["owner", "title", "next_action", "evidence"]);
}

#[test]
fn wrongly_typed_optional_fields_say_what_is_expected() {
    let cases = [
        ("details", json!(3), "string"),
        ("next_action", json!(["x"]), "string"),
        ("title", json!(7), "string"),
        ("evidence", json!("cargo test ok"), "array of strings"),
        ("evidence", json!([1, 2]), "strings"),
        ("evidence", json!({"test": "ok"}), "array of strings"),
        ("dependencies", json!("a"), "array of strings"),
        ("dependencies", json!([null]), "strings"),
    ];
    for (field, value, expected) in cases {
        let message = reject(&plan(vec![with(raw("a", "done"), field, value)]));
        names(&message, "a");
        mentions(&message, &[&format!("`{field}`"), expected]);
    }
}

#[test]
fn reason_is_required_and_must_be_a_string() {
    for args in [
        json!({"items": []}),
        json!({"reason": "", "items": []}),
        json!({"reason": "   ", "items": []}),
    ] {
        let message = reject(&args);
        mentions(&message, &["`reason`", "required"]);
    }
    for bad in [json!(1), json!(null), json!(["why"])] {
        let message = reject(&json!({"reason": bad, "items": []}));
        mentions(&message, &["`reason`", "string"]);
    }
}

#[test]
fn overlong_names_in_errors_are_cut_short() {
    let key = "k".repeat(500);
    let mut args = plan(vec![]);
    args[key.as_str()] = json!(1);
    let message = reject(&args);
    assert!(!message.contains(&key), "echoes the whole key");
    let message = reject(&plan(vec![with(raw("a", "pending"), "status", json!(key))]));
    assert!(!message.contains(&key), "echoes the whole status");
}

// ---- property tests --------------------------------------------------

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Arbitrary JSON: nested objects and arrays of strings, numbers, …
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        prop::sample::select(vec![
            "id",
            "title",
            "status",
            "details",
            "dependencies",
            "next_action",
            "evidence",
            "reason",
            "items",
        ])
        .prop_map(String::from),
        "[a-z_]{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|n| json!(n)),
        prop::sample::select(vec!["pending", "in_progress", "blocked", "done"])
            .prop_map(|s| json!(s)),
        any::<String>().prop_map(Value::String),
        "[ a-z.-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..8)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Top-level objects whose `items` hold item-like objects with
/// arbitrary values, so every branch of the item parser gets hit.
fn plan_like_json() -> impl Strategy<Value = Value> {
    let field = prop::sample::select(vec![
        "id",
        "title",
        "status",
        "details",
        "dependencies",
        "next_action",
        "evidence",
        "extra",
    ]);
    let item = prop::collection::vec((field, any_json()), 0..8).prop_map(|pairs| {
        Value::Object(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Map<_, _>>(),
        )
    });
    (
        prop::option::of(any_json()),
        prop::collection::vec(prop_oneof![3 => item, 1 => any_json()], 0..24),
    )
        .prop_map(|(reason, items)| {
            let mut object = Map::new();
            object.insert("reason".into(), reason.unwrap_or_else(|| json!("why")));
            object.insert("items".into(), Value::Array(items));
            Value::Object(object)
        })
}

/// Parameters of one "almost valid" item.
#[derive(Debug, Clone)]
struct ItemParams {
    id: Option<String>,
    title: String,
    status: Value,
    details: Option<String>,
    dependencies: Vec<usize>,
    next_action: Option<String>,
    evidence: Option<Vec<String>>,
    extra_field: bool,
    /// Keep a repeated dependency instead of dropping it.
    duplicate_dependency: bool,
}

fn item_params() -> impl Strategy<Value = ItemParams> {
    // Mostly valid values, each field now and then wrong in one way.
    let id = prop_oneof![
        40 => Just(None),
        1 => "s[0-9]".prop_map(Some),
        1 => "[ a-zA-Z0-9_.-]{0,42}".prop_map(Some),
        1 => any::<String>().prop_map(Some),
    ];
    let title = prop_oneof![
        40 => "[A-Za-z][A-Za-z ]{0,30}",
        1 => Just(" ".to_string()),
        1 => "[a-z]{118,122}",
    ];
    let status = prop_oneof![
        40 => prop::sample::select(vec![
            "pending",
            "pending",
            "blocked",
            "done",
            "done",
            "in_progress",
        ])
        .prop_map(|s| json!(s)),
        1 => "[a-z_]{0,12}".prop_map(Value::String),
        1 => Just(Value::Null),
        1 => any::<u8>().prop_map(|n| json!(n)),
    ];
    let text = "[ a-zA-Z0-9:./]{0,30}";
    let solid = "[a-zA-Z0-9:./][ a-zA-Z0-9:./]{0,29}";
    let next_action = prop_oneof![
        30 => solid.prop_map(Some),
        1 => prop::option::of(text),
    ];
    let evidence = prop_oneof![
        30 => prop::collection::vec(solid, 1..4).prop_map(Some),
        1 => prop::collection::vec(text, 0..10).prop_map(Some),
        1 => Just(None),
    ];
    (
        id,
        title,
        status,
        prop::option::of(text),
        prop::collection::vec(0usize..10, 0..3),
        next_action,
        evidence,
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.03),
    )
        .prop_map(
            |(
                id,
                title,
                status,
                details,
                dependencies,
                next_action,
                evidence,
                extra_field,
                duplicate_dependency,
            )| {
                ItemParams {
                    id,
                    title,
                    status,
                    details,
                    dependencies,
                    next_action,
                    evidence,
                    extra_field,
                    duplicate_dependency,
                }
            },
        )
}

/// Builds a plan from random items; with `acyclic`, dependencies point
/// only at earlier items, so most plans are accepted.
pub(in crate::plan) fn almost_valid_plan() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            6 => prop::collection::vec(item_params(), 0..8),
            1 => prop::collection::vec(item_params(), 8..23),
        ],
        prop::bool::weighted(0.8),
        prop_oneof![8 => "[a-zA-Z ]{1,40}", 1 => Just(String::new())],
    )
        .prop_map(|(params, acyclic, reason)| {
            let ids: Vec<String> = params
                .iter()
                .enumerate()
                .map(|(i, p)| p.id.clone().unwrap_or_else(|| format!("s{i}")))
                .collect();
            let items: Vec<Value> = params
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let mut item = Map::new();
                    item.insert("id".into(), json!(ids[i]));
                    item.insert("title".into(), json!(p.title));
                    item.insert("status".into(), p.status.clone());
                    if let Some(details) = &p.details {
                        item.insert("details".into(), json!(details));
                    }
                    let mut deps: Vec<String> = p
                        .dependencies
                        .iter()
                        .filter_map(|&d| {
                            if acyclic {
                                (i > 0).then(|| ids[d % i].clone())
                            } else {
                                Some(ids.get(d).cloned().unwrap_or_else(|| format!("s{d}")))
                            }
                        })
                        .collect();
                    if !p.duplicate_dependency {
                        let mut seen = BTreeSet::new();
                        deps.retain(|d| seen.insert(d.clone()));
                    }
                    if !deps.is_empty() {
                        item.insert("dependencies".into(), json!(deps));
                    }
                    if let Some(next) = &p.next_action {
                        item.insert("next_action".into(), json!(next));
                    }
                    if let Some(evidence) = &p.evidence {
                        item.insert("evidence".into(), json!(evidence));
                    }
                    if p.extra_field {
                        item.insert("priority".into(), json!(1));
                    }
                    Value::Object(item)
                })
                .collect();
            json!({"reason": reason, "items": items})
        })
}

/// Kahn's algorithm: true when the dependency graph has a cycle.
fn has_cycle(items: &[PlanItem]) -> bool {
    let mut remaining: BTreeMap<&str, BTreeSet<&str>> = items
        .iter()
        .map(|i| {
            (
                i.id.as_str(),
                i.dependencies.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    loop {
        let ready: Vec<&str> = remaining
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !remaining.contains_key(d)))
            .map(|(id, _)| *id)
            .collect();
        if ready.is_empty() {
            return !remaining.is_empty();
        }
        for id in ready {
            remaining.remove(id);
        }
    }
}

/// Every rule, checked independently of `validate`.
fn assert_rules_hold(reason: &str, items: &[PlanItem]) {
    assert!(!reason.is_empty() && reason.chars().count() <= MAX_REASON_CHARS);
    assert!(items.len() <= MAX_ITEMS);
    let ids: BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids.len(), items.len(), "duplicate ids accepted");
    assert!(
        items
            .iter()
            .filter(|i| i.status == Status::InProgress)
            .count()
            <= 1
    );
    for item in items {
        assert!(!item.id.is_empty() && item.id.chars().count() <= MAX_ID_CHARS);
        assert!(
            item.id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        );
        assert!(!item.title.is_empty() && item.title.chars().count() <= MAX_TITLE_CHARS);
        assert_eq!(item.title.trim(), item.title);
        if item.status == Status::Done {
            assert!(!item.evidence.is_empty(), "done without evidence");
        } else {
            assert!(item.next_action.is_some(), "open item without next_action");
        }
        for text in item.details.iter().chain(&item.next_action) {
            assert!(!text.is_empty() && text.trim() == text);
        }
        let deps: BTreeSet<&str> = item.dependencies.iter().map(String::as_str).collect();
        assert_eq!(deps.len(), item.dependencies.len(), "duplicate dependency");
        assert!(!deps.contains(item.id.as_str()), "self-dependency");
        assert!(deps.is_subset(&ids), "unknown dependency");
        assert!(item.evidence.len() <= MAX_EVIDENCE_ENTRIES);
        assert!(
            item.evidence
                .iter()
                .all(|e| !e.is_empty() && e.chars().count() <= MAX_EVIDENCE_CHARS)
        );
    }
    assert!(!has_cycle(items), "accepted a dependency cycle");
}

/// The properties every accepted plan must have.
fn check_accepted(args: &Value, previous: &PlanState) -> Result<(), TestCaseError> {
    let Ok((reason, items)) = validate(args) else {
        return Ok(());
    };
    assert_rules_hold(&reason, &items);
    let state = previous.successor(
        reason.clone(),
        items.clone(),
        "2025-01-01T00:00:00.000Z".into(),
    );
    prop_assert_eq!(state.version, previous.version + 1);

    // Round trip through the file text.
    let text = state.to_json_text();
    let back: PlanState =
        serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
    prop_assert_eq!(&back, &state);

    // The normalised items, sent back as arguments, validate to themselves.
    let again =
        json!({"reason": state.reason, "items": serde_json::to_value(&state.items).unwrap()});
    prop_assert_eq!(validate(&again), Ok((reason, items)));

    // The reported changes match the two id sets.
    let old: BTreeSet<&str> = previous.items.iter().map(|i| i.id.as_str()).collect();
    let new: BTreeSet<&str> = state.items.iter().map(|i| i.id.as_str()).collect();
    let added: BTreeSet<&str> = state.changes.added.iter().map(String::as_str).collect();
    let dropped: BTreeSet<&str> = state.changes.dropped.iter().map(String::as_str).collect();
    prop_assert_eq!(
        added,
        new.difference(&old).copied().collect::<BTreeSet<_>>()
    );
    prop_assert_eq!(
        dropped,
        old.difference(&new).copied().collect::<BTreeSet<_>>()
    );
    let changed = state
        .items
        .iter()
        .filter(|i| {
            previous
                .items
                .iter()
                .any(|p| p.id == i.id && p.status != i.status)
        })
        .count();
    prop_assert_eq!(state.changes.status_changed.len(), changed);
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn validate_never_panics_on_arbitrary_json(args in any_json()) {
        let _ = validate(&args);
    }

    #[test]
    fn validate_never_panics_on_plan_like_json(args in plan_like_json()) {
        check_accepted(&args, &PlanState::empty())?;
    }

    #[test]
    fn accepted_plans_keep_every_rule_and_round_trip(
        first in almost_valid_plan(),
        second in almost_valid_plan(),
    ) {
        let mut previous = PlanState::empty();
        if let Ok((reason, items)) = validate(&first) {
            previous = previous.successor(reason, items, "t".into());
        }
        check_accepted(&second, &previous)?;
    }
}

#[test]
fn the_plan_generator_yields_both_accepted_and_rejected_plans() {
    // Guards the property tests above against a generator that only
    // ever produces rejected (or only accepted) plans.
    let mut runner = TestRunner::deterministic();
    let strategy = almost_valid_plan();
    let (mut accepted, mut rejected, mut with_deps) = (0, 0, 0);
    for _ in 0..256 {
        let args = strategy.new_tree(&mut runner).unwrap().current();
        match validate(&args) {
            Ok((_, items)) => {
                accepted += 1;
                if items.iter().any(|i| !i.dependencies.is_empty()) {
                    with_deps += 1;
                }
            }
            Err(_) => rejected += 1,
        }
    }
    assert!(accepted >= 50, "only {accepted} of 256 plans accepted");
    assert!(rejected >= 50, "only {rejected} of 256 plans rejected");
    assert!(
        with_deps >= 20,
        "only {with_deps} accepted plans with dependencies"
    );
}

/// The exact sentences where a present `null`, an absent field and the
/// order of unknown keys must not be confused.
#[test]
fn null_absent_and_unknown_fields_get_their_exact_sentences() {
    let cases = [
        (
            json!({"title": "T", "status": "pending"}),
            "items[0]: `id` is required (short and readable, e.g. \"inspect\")",
        ),
        (
            json!({"id": null}),
            "items[0]: `id` must be a string, not null",
        ),
        (
            without(raw("a", "pending"), "title"),
            "item \"a\" (items[0]): `title` is required",
        ),
        (
            with(raw("a", "pending"), "title", json!(null)),
            "item \"a\" (items[0]): `title` must be a string, not null",
        ),
        (
            with(raw("a", "pending"), "status", json!(null)),
            "item \"a\" (items[0]): `status` must be one of the strings \"pending\", \"in_progress\", \"blocked\", \"done\", not null",
        ),
        (
            json!({"id": "a", "zeta": 1, "title": "T", "alpha": 2}),
            "item \"a\" (items[0]): unknown field `zeta`; items have id, title, status, details, dependencies, next_action, evidence",
        ),
    ];
    for (item, expected) in cases {
        assert_eq!(reject(&plan(vec![item])), expected);
    }
}
