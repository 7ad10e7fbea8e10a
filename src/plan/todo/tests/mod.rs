//! Unit tests of the `todo` flavour: table-driven over every row of the
//! reference's tables (actions, transitions, content strings, error
//! messages), the batch rules, plan items, persistence, and property tests.

mod actions;
mod batch;
mod errors;
mod file;
mod plan;
mod props;
mod sanitize;
mod transitions;

use serde_json::{Value, json};

use super::engine::apply_call;
use super::format;
use super::state::{TaskStatus, TodoState};

/// The result of one call: the text, the envelope (as JSON) and the new
/// state.
pub(super) struct Called {
    pub text: String,
    pub details: Value,
    pub state: TodoState,
}

pub(super) fn call(state: &TodoState, args: Value) -> Called {
    let result = apply_call(state, &args);
    Called {
        text: format::content(&result.op, &result.state),
        details: serde_json::to_value(format::details(&result, &args)).unwrap(),
        state: result.state,
    }
}

/// Runs `args` and insists that it succeeds.
pub(super) fn ok(state: &TodoState, args: Value) -> Called {
    let called = call(state, args.clone());
    assert!(
        called.details.get("error").is_none(),
        "{args} failed: {}",
        called.text
    );
    called
}

/// Runs `args`, insists that it fails without changing the state, and
/// returns the bare message.
pub(super) fn rejected(state: &TodoState, args: Value) -> String {
    let called = call(state, args.clone());
    let error = called.details["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{args} was accepted: {}", called.text))
        .to_string();
    assert_eq!(called.text, format!("Error: {error}"), "{args}");
    assert_eq!(&called.state, state, "{args} changed the state");
    error
}

/// A state with tasks `subjects`, created in order (ids 1..).
pub(super) fn with_tasks(subjects: &[&str]) -> TodoState {
    let mut state = TodoState::empty();
    for subject in subjects {
        state = ok(&state, json!({"action": "create", "subject": subject})).state;
    }
    state
}

/// Moves task `id` of `state` to `status` along legal transitions.
pub(super) fn at_status(state: &TodoState, id: i64, status: TaskStatus) -> TodoState {
    let args = match status {
        TaskStatus::Pending => return state.clone(),
        TaskStatus::InProgress => json!({"action": "update", "id": id, "status": "in_progress"}),
        TaskStatus::Completed => {
            json!({"action": "update", "id": id, "status": "completed", "evidence": "cargo test: ok"})
        }
        TaskStatus::Deferred => {
            json!({"action": "update", "id": id, "status": "deferred", "reason": "out of scope"})
        }
        TaskStatus::Deleted => json!({"action": "delete", "id": id}),
    };
    ok(state, args).state
}

/// The approved-plan fixture of the reference's own tests.
pub(super) const PLAN: &str = "# Add widgets\n\n## Work\n- Add the `alpha` module\n- Wire `beta` into the CLI\n\n## Verification\n- `make test` passes\n";

/// `state` with [`PLAN`] approved under id `p1`.
pub(super) fn with_plan(state: &TodoState) -> TodoState {
    super::approve::apply_plan_approval(state, "p1", PLAN).state
}
