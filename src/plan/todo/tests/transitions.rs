//! The reference's "Status transitions" table, every (from, to) pair.

use serde_json::{Value, json};

use super::*;
use crate::plan::todo::state::TaskStatus::{self, *};

/// The table, row by row, exactly as the reference prints it.
const TABLE: &[(TaskStatus, &[TaskStatus])] = &[
    (Pending, &[InProgress, Completed, Deferred, Deleted]),
    (InProgress, &[Pending, Completed, Deferred, Deleted]),
    (Completed, &[Deleted]),
    (Deferred, &[Pending, InProgress, Deleted]),
    (Deleted, &[]),
];

fn update_to(to: TaskStatus) -> Value {
    let mut args = json!({"action": "update", "id": 1, "status": to.as_str()});
    match to {
        Completed => args["evidence"] = json!("cargo test: 1 passed"),
        Deferred => args["reason"] = json!("descoped"),
        Pending | InProgress | Deleted => {}
    }
    args
}

#[test]
fn the_table_is_the_transition_function() {
    for (from, targets) in TABLE {
        for to in TaskStatus::ALL {
            let expected = *from == to || targets.contains(&to);
            assert_eq!(from.can_become(to), expected, "{from:?} → {to:?}");
        }
    }
}

#[test]
fn every_pair_through_the_tool() {
    for (from, targets) in TABLE {
        for to in TaskStatus::ALL {
            let state = at_status(&with_tasks(&["a"]), 1, *from);
            let (f, t) = (from.as_str(), to.as_str());
            if *from == to {
                let same = json!({"action": "update", "id": 1, "status": t});
                assert_eq!(
                    ok(&state, same).text,
                    format!("No change: #1 already matches the requested values (status: {t})"),
                    "{f} → {t} is a no-op"
                );
            } else if targets.contains(&to) {
                let called = ok(&state, update_to(to));
                assert_eq!(called.text, format!("Updated #1 ({f} → {t})"));
                assert_eq!(called.state.tasks[0].status, to);
            } else {
                assert_eq!(
                    rejected(&state, update_to(to)),
                    format!("illegal transition {f} → {t}"),
                );
            }
        }
    }
}

#[test]
fn plan_items_can_reach_every_target_but_deleted() {
    for (from, targets) in TABLE {
        if *from == Deleted {
            continue;
        }
        for to in targets.iter().copied() {
            let state = with_plan(&crate::plan::todo::TodoState::empty());
            let state = at_status(&state, 1, *from);
            if to == Deleted {
                assert_eq!(
                    rejected(&state, update_to(to)),
                    "#1 is a plan item from the approved plan and can't be deleted: complete it with evidence, or set status deferred with a reason"
                );
            } else {
                assert_eq!(ok(&state, update_to(to)).state.tasks[0].status, to);
            }
        }
    }
}
