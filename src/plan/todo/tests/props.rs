//! Property tests over random call sequences: nothing panics, a rejected
//! call or batch never changes the state, the `blockedBy` graph never gains
//! a cycle, and accepted states keep every invariant.

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

use super::*;
use crate::plan::todo::approve::apply_plan_approval;
use crate::plan::todo::engine::apply_call;
use crate::plan::todo::state::TodoState;

const ESC: char = '\u{1b}';

const PLANS: [&str; 3] = [
    PLAN,
    "# Other\n## Work\n- Add the `alpha` module\n- new step\n  with detail\n",
    "# Prose\n## Only prose\nSome words.\n",
];

fn small_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => (0i64..9).prop_map(Value::from),
        1 => Just(json!("2")),
        1 => Just(json!(1.5)),
        1 => Just(json!(null)),
    ]
}

fn text() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("a")),
        Just(json!("b")),
        Just(json!("  ")),
        Just(json!("")),
        Just(json!("add the `ALPHA` module")),
        Just(json!("x\u{1b}[31my\n")),
        Just(json!(7)),
    ]
}

fn ids() -> impl Strategy<Value = Value> {
    prop::collection::vec(0i64..9, 0..4).prop_map(|v| json!(v))
}

fn status() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("pending")),
        Just(json!("in_progress")),
        Just(json!("completed")),
        Just(json!("deferred")),
        Just(json!("deleted")),
        Just(json!("done")),
    ]
}

fn metadata() -> impl Strategy<Value = Value> {
    prop::collection::vec(
        (
            prop_oneof![Just("k"), Just("l")],
            prop_oneof![Just(json!(null)), Just(json!(1)), Just(json!({"n": [1]}))],
        ),
        0..3,
    )
    .prop_map(|pairs| {
        let map: Map<String, Value> = pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        Value::Object(map)
    })
}

/// One operation object, valid or not.
fn op() -> impl Strategy<Value = Value> {
    let action = prop_oneof![
        4 => Just(json!("create")),
        6 => Just(json!("update")),
        1 => Just(json!("list")),
        1 => Just(json!("get")),
        2 => Just(json!("delete")),
        1 => Just(json!("clear")),
        1 => Just(json!("nope")),
        1 => Just(json!(null)),
    ];
    let fields = (
        prop::option::of(small_id()),
        prop::option::of(text()),
        prop::option::of(status()),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::option::of(ids()),
        prop::option::of(ids()),
        prop::option::of(ids()),
        prop::option::of(metadata()),
        prop::option::of(text()),
        prop::option::of(any::<bool>()),
    );
    (action, fields).prop_map(
        |(
            action,
            (id, subject, status, evidence, reason, blocked, add, remove, meta, owner, del),
        )| {
            let mut op = Map::new();
            op.insert("action".into(), action);
            let mut put = |key: &str, value: Option<Value>| {
                if let Some(value) = value {
                    op.insert(key.into(), value);
                }
            };
            put("id", id);
            put("subject", subject);
            put("status", status);
            put("evidence", evidence);
            put("reason", reason);
            put("blockedBy", blocked);
            put("addBlockedBy", add);
            put("removeBlockedBy", remove);
            put("metadata", meta);
            put("owner", owner);
            put("includeDeleted", del.map(Value::from));
            Value::Object(op)
        },
    )
}

/// One call: flat, a batch (sometimes malformed), or a plan approval.
#[derive(Debug, Clone)]
enum Step {
    Call(Value),
    Approve(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => op().prop_map(Step::Call),
        3 => prop::collection::vec(op(), 0..5).prop_map(|ops| Step::Call(json!({"ops": ops}))),
        1 => (op(), op()).prop_map(|(mut flat, inner)| {
            flat["ops"] = json!([inner]);
            Step::Call(flat)
        }),
        1 => (0usize..PLANS.len()).prop_map(Step::Approve),
    ]
}

/// The invariants every reachable state keeps.
fn check_invariants(state: &TodoState) -> Result<(), TestCaseError> {
    prop_assert!(state.check().is_ok(), "{:?}: {state:?}", state.check());
    prop_assert!(!state.has_cycle(), "cycle in {state:?}");
    for task in &state.tasks {
        prop_assert!(
            !(task.is_plan_item() && task.status == TaskStatus::Deleted),
            "a plan item was deleted: {task:?}"
        );
        if task.status == TaskStatus::Completed {
            prop_assert!(
                task.evidence
                    .as_deref()
                    .is_some_and(|e| !e.trim().is_empty())
            );
        }
        if task.status == TaskStatus::Deferred {
            prop_assert!(task.reason.as_deref().is_some_and(|r| !r.trim().is_empty()));
        } else {
            prop_assert!(task.reason.is_none());
        }
    }
    if state.plan.is_none() {
        prop_assert!(state.tasks.iter().all(|t| !t.is_plan_item()));
    }
    Ok(())
}

fn run_steps(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let mut state = TodoState::empty();
    for step in steps {
        let before = serde_json::to_string(&state).unwrap();
        match step {
            Step::Approve(plan) => {
                let ids_before: Vec<i64> = state.tasks.iter().map(|t| t.id).collect();
                let approval = apply_plan_approval(&state, &format!("plan-{plan}"), PLANS[plan]);
                if approval.changed {
                    // New plan items never reuse an id.
                    for task in approval.state.tasks.iter().filter(|t| t.is_plan_item()) {
                        prop_assert!(!ids_before.contains(&task.id));
                    }
                } else {
                    prop_assert_eq!(&approval.state, &state);
                }
                state = approval.state;
            }
            Step::Call(args) => {
                let result = apply_call(&state, &args);
                let text = crate::plan::todo::format::content(&result.op, &result.state);
                let details = crate::plan::todo::format::details(&result, &args);
                if let Some(error) = result.error() {
                    // A rejection never changes the state, byte for byte.
                    prop_assert_eq!(serde_json::to_string(&result.state).unwrap(), before);
                    prop_assert_eq!(&text, &format!("Error: {error}"));
                    prop_assert_eq!(details.error.as_deref(), Some(error));
                } else {
                    prop_assert!(!text.starts_with("Error: "));
                    prop_assert!(details.error.is_none());
                    // Ids are never reused and the counter never goes
                    // back, except by a clear that kept nothing.
                    let is_batch =
                        matches!(&result.op, crate::plan::todo::TodoChange::Batch { .. });
                    let monotonic = result.state.next_id >= state.next_id
                        || result.state == TodoState::empty()
                        || is_batch;
                    prop_assert!(monotonic, "the counter went back: {args}");
                }
                prop_assert_eq!(&details.tasks, &result.state.tasks);
                prop_assert!(!text.contains(ESC), "an escape reached the text: {text:?}");
                state = result.state;
            }
        }
        check_invariants(&state)?;
    }
    Ok(())
}

/// Random call sequences, run on a thread with a large stack: the
/// strategy's value trees are deep, more than a test thread's default stack
/// holds in a debug build.
#[test]
fn random_call_sequences_keep_every_invariant() {
    let runner = std::thread::Builder::new()
        .stack_size(64 * 1024 * 1024)
        .spawn(|| {
            let mut runner = proptest::test_runner::TestRunner::new(Config {
                cases: 96,
                failure_persistence: None,
                ..Config::default()
            });
            runner
                .run(&prop::collection::vec(step(), 1..40), run_steps)
                .map_err(|e| e.to_string())
        })
        .unwrap();
    if let Err(failure) = runner.join().unwrap() {
        panic!("{failure}");
    }
}

proptest! {
    #![proptest_config(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    })]

    /// Any JSON at all is answered without a panic, and a rejection leaves
    /// the state as it was.
    #[test]
    fn arbitrary_json_never_panics(args in arbitrary_json(3)) {
        let state = with_plan(&with_tasks(&["a", "b"]));
        let result = apply_call(&state, &args);
        if result.error().is_some() {
            prop_assert_eq!(&result.state, &state);
        }
        let _ = crate::plan::todo::format::content(&result.op, &result.state);
        check_invariants(&result.state)?;
    }

    #[test]
    fn the_plan_parser_never_panics(lines in prop::collection::vec(markdown_line(), 0..30)) {
        let markdown = lines.join("\n");
        let items = crate::plan::todo::markdown::parse_plan_items(&markdown);
        let title = crate::plan::todo::markdown::plan_title(&markdown);
        prop_assert!(!title.is_empty());
        for item in items {
            prop_assert!(item.detail.as_deref().is_none_or(|d| !d.trim_end().is_empty()));
        }
    }
}

fn markdown_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("# Title".to_string()),
        Just("## Work".to_string()),
        Just("### Summary".to_string()),
        Just("## ##".to_string()),
        Just("##   ".to_string()),
        Just("- item".to_string()),
        Just("  - nested".to_string()),
        Just("1. numbered".to_string()),
        Just("```".to_string()),
        Just("Not adopted:".to_string()),
        Just("prose".to_string()),
        "[ -~\u{a0}\u{2028}é#*`]{0,12}",
    ]
}

fn arbitrary_json(depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,8}".prop_map(Value::from),
        prop_oneof![
            Just("create"),
            Just("update"),
            Just("list"),
            Just("get"),
            Just("delete"),
            Just("clear"),
            Just("completed"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(depth, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::from),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("action".to_string()),
                        Just("ops".to_string()),
                        Just("id".to_string()),
                        Just("subject".to_string()),
                        Just("status".to_string()),
                        Just("evidence".to_string()),
                        Just("addBlockedBy".to_string()),
                        Just("metadata".to_string()),
                        "[a-z]{1,6}",
                    ],
                    inner,
                ),
                0..5,
            )
            .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}
