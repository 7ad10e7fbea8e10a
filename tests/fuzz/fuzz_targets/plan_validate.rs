//! `update_plan` argument validation: any JSON value is an `Ok` or an
//! `Err` sentence, never a panic; a validated plan is a fixed point (its
//! normalised items, sent back as arguments, validate to themselves) and
//! keeps the plan invariants; the state built from it survives the plan
//! file's JSON round trip.
#![no_main]

use std::collections::BTreeSet;

use fido::plan::model::{MAX_ITEMS, validate};
use fido::plan::{PlanState, Status};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|input: &[u8]| {
    let Ok(args) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let (reason, items) = match validate(&args) {
        Ok(plan) => plan,
        Err(message) => {
            assert!(!message.is_empty());
            return;
        }
    };
    assert!(!reason.is_empty() && reason == reason.trim());
    assert!(items.len() <= MAX_ITEMS);
    let ids: BTreeSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
    assert_eq!(ids.len(), items.len(), "ids are unique");
    let in_progress = items.iter().filter(|i| i.status == Status::InProgress);
    assert!(in_progress.count() <= 1);
    for item in &items {
        assert!(
            item.dependencies
                .iter()
                .all(|d| ids.contains(d.as_str()) && *d != item.id)
        );
        if item.status.is_open() || item.status == Status::Blocked {
            assert!(item.next_action.is_some());
        }
    }

    let normalised = json!({ "reason": reason, "items": items });
    match validate(&normalised) {
        Ok(again) => assert_eq!(again, (reason.clone(), items.clone()), "not a fixed point"),
        Err(message) => panic!("a normalised plan does not validate again: {message}"),
    }

    let state = PlanState::empty().successor(reason, items, "2026-01-01T00:00:00.000Z".into());
    let text = state.to_json_text();
    match serde_json::from_str::<PlanState>(&text) {
        Ok(read) => assert_eq!(read, state),
        Err(err) => panic!("the plan file does not read back: {err}"),
    }
});
