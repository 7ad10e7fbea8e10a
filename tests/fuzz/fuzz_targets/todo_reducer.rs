//! The `todo` reducer and its Markdown plan parser. The input is a Markdown
//! plan, a NUL byte, then one JSON call per line. The plan is approved into
//! an empty state, then the calls run in order. After every step the state
//! passes its own load check (positive unique ids below `nextId`, no
//! dangling `blockedBy`), holds no cycle, never moves `nextId` back or
//! reuses an id (but for the contract's one reset: `clear` keeping nothing
//! starts again at 1), and survives
//! the state file's JSON round trip; a rejected call changes nothing; the
//! same plan approved again is a no-op; rendering never panics.
#![no_main]

use fido::plan::todo::approve::{apply_plan_approval, plan_id};
use fido::plan::todo::markdown::{parse_plan_items, plan_title};
use fido::plan::todo::{TodoState, apply_call, format, reminder};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn check(state: &TodoState, before: &TodoState) {
    if let Err(message) = state.check() {
        panic!("the state fails its load check: {message}\n{state:#?}");
    }
    assert!(!state.has_cycle(), "a blockedBy cycle");
    let text = match serde_json::to_string(state) {
        Ok(text) => text,
        Err(err) => panic!("the state does not serialise: {err}"),
    };
    match serde_json::from_str::<TodoState>(&text) {
        Ok(read) => assert_eq!(&read, state, "state file round trip"),
        Err(err) => panic!("the state file does not read back: {err}"),
    }
    let _ = reminder::settle_reminder(state);
    let _ = format::list_view(state);
    // The one reset the contract allows: `clear` with nothing kept starts
    // the counter at 1 again (no task is left that an old id could name).
    if state.tasks.is_empty() && state.next_id == 1 {
        return;
    }
    assert!(state.next_id >= before.next_id, "nextId went back");
    for task in &state.tasks {
        if before.task(task.id).is_none() {
            assert!(task.id >= before.next_id, "id {} reused", task.id);
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let (plan, calls) = match input.iter().position(|&b| b == 0) {
        Some(nul) => (&input[..nul], &input[nul + 1..]),
        None => (input, &[][..]),
    };
    let Ok(markdown) = std::str::from_utf8(plan) else {
        return;
    };
    let _ = plan_title(markdown);
    let items = parse_plan_items(markdown);
    for item in &items {
        assert!(!item.subject.is_empty(), "a plan item without a subject");
    }
    let empty = TodoState::empty();
    let id = plan_id(markdown);
    let approval = apply_plan_approval(&empty, &id, markdown);
    check(&approval.state, &empty);
    let again = apply_plan_approval(&approval.state, &id, markdown);
    assert!(!again.changed);
    assert_eq!(
        again.state, approval.state,
        "approving the same plan again changed it"
    );

    let mut state = approval.state;
    for line in calls.split(|&b| b == b'\n').take(32) {
        let Ok(args) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let result = apply_call(&state, &args);
        let _ = format::content(&result.op, &result.state);
        let _ = format::details(&result, &args);
        let _ = reminder::deferral_notices(&state, &result.state);
        if result.error().is_some() {
            assert_eq!(result.state, state, "a rejected call changed the state");
        }
        check(&result.state, &state);
        state = result.state;
    }
    // Re-approving the plan after the calls keeps the state sound too.
    let approval = apply_plan_approval(&state, &plan_id(&format!("{markdown}\n")), markdown);
    check(&approval.state, &state);
});
