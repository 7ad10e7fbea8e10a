//! Plan items: the Markdown rules, seeding, reconciliation on re-approval,
//! the plan-item rules, the header, the deferral notice and reminder.

use serde_json::json;

use super::*;
use crate::plan::todo::approve::{apply_plan_approval, plan_id};
use crate::plan::todo::markdown::{PlanItem, parse_plan_items, plan_title};
use crate::plan::todo::reminder::{deferral_notices, settle_reminder};
use crate::plan::todo::state::TodoState;

fn item(group: &str, subject: &str, detail: Option<&str>) -> PlanItem {
    PlanItem {
        group: group.into(),
        subject: subject.into(),
        detail: detail.map(String::from),
    }
}

#[test]
fn headings_group_bullets_and_nested_lines_are_kept_verbatim() {
    let plan = "# Title\n\n## Work\n- First **thing**\n  - sub one\n\n    more detail\n1. Numbered\n2) Also numbered\n* star\n+ plus\n\n### Deeper\n- deep item\n";
    assert_eq!(
        parse_plan_items(plan),
        vec![
            item(
                "Work",
                "First **thing**",
                Some("- sub one\n\n  more detail")
            ),
            item("Work", "Numbered", None),
            item("Work", "Also numbered", None),
            item("Work", "star", None),
            item("Work", "plus", None),
            item("Deeper", "deep item", None),
        ]
    );
}

#[test]
fn context_sections_and_lead_ins_are_skipped_verification_is_kept() {
    let plan = "\
# Plan

## Summary
- not work

## 1. Key findings
- not work either
### Sub of findings
- skipped with its parent

## Work
Intro prose.
- do this

Not adopted:
- rejected idea
  - and its detail

- after the skipped list

## *Risks* and mitigations
- nope

## Assumptions
- nope

## Out of scope
- nope

## Notes
- nope

## Open questions
- nope

## Verification
- `cargo test` passes
";
    assert_eq!(
        parse_plan_items(plan),
        vec![
            item("Work", "do this", None),
            item("Verification", "`cargo test` passes", None),
        ],
        "a list led in by `Not adopted:` is skipped up to the next paragraph or heading"
    );
}

#[test]
fn a_word_that_only_starts_like_a_context_label_is_not_one() {
    let plan = "## Notebook support\n- item\n## Contextual help\n- other\n";
    assert_eq!(
        parse_plan_items(plan),
        vec![
            item("Notebook support", "item", None),
            item("Contextual help", "other", None)
        ]
    );
}

#[test]
fn a_prose_only_section_becomes_one_item_named_by_its_heading() {
    let plan = "# T\n\n## Migrate the database\nRun the migration on staging first.\n\n## Background\nJust context.\n\n## Empty\n";
    assert_eq!(
        parse_plan_items(plan),
        vec![item("Migrate the database", "Migrate the database", None)]
    );
}

#[test]
fn fenced_code_never_starts_an_item() {
    let plan =
        "## Work\n```\n- not an item\n## not a heading\n```\n- real\n  ```sh\n  - inside\n  ```\n";
    assert_eq!(
        parse_plan_items(plan),
        vec![item("Work", "real", Some("```sh\n- inside\n```"))]
    );
}

#[test]
fn bullets_before_any_group_have_no_group() {
    let plan = "# Title\n- loose\n\r\n## G ##\n- grouped\r\n";
    assert_eq!(
        parse_plan_items(plan),
        vec![item("", "loose", None), item("G", "grouped", None)]
    );
}

#[test]
fn plan_titles() {
    for (markdown, title) in [
        ("# Add *widgets*\n## Work\n", "Add widgets"),
        ("intro\n## Second level\n", "Second level"),
        ("\n\n  plain first line  \n", "plain first line"),
        ("", "plan"),
        ("# `**`\n", "plan"),
        ("## A ##\n# B\n", "B"),
    ] {
        assert_eq!(plan_title(markdown), title, "{markdown:?}");
    }
}

#[test]
fn approval_seeds_verbatim_plan_items_tagged_plan() {
    let s = with_plan(&with_tasks(&["agent todo"]));
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        json!({
            "tasks": [
                {"id": 2, "subject": "Add the `alpha` module", "status": "pending", "source": "plan", "planGroup": "Work"},
                {"id": 3, "subject": "Wire `beta` into the CLI", "status": "pending", "source": "plan", "planGroup": "Work"},
                {"id": 4, "subject": "`make test` passes", "status": "pending", "source": "plan", "planGroup": "Verification"},
                {"id": 1, "subject": "agent todo", "status": "pending"},
            ],
            "nextId": 5,
            "plan": {"id": "p1", "title": "Add widgets"},
        })
    );
    let list = ok(&s, json!({"action": "list"})).text;
    assert_eq!(
        list,
        "Plan: Add widgets -- 3/3 plan items open\n\
         [pending] #2 Add the `alpha` module [plan: Work]\n\
         [pending] #3 Wire `beta` into the CLI [plan: Work]\n\
         [pending] #4 `make test` passes [plan: Verification]\n\
         [pending] #1 agent todo"
    );
}

#[test]
fn plan_rows_show_plan_text_while_open_then_evidence_or_reason() {
    let markdown = "# P\n## G\n- Do it\n  step one\n  step two\n- Other\n- Ungrouped? no\n";
    let s = apply_plan_approval(&TodoState::empty(), "x", markdown).state;
    let open = ok(&s, json!({"action": "list"})).text;
    assert_eq!(
        open,
        "Plan: P -- 3/3 plan items open\n[pending] #1 Do it [plan: G]\n    step one\n    step two\n[pending] #2 Other [plan: G]\n[pending] #3 Ungrouped? no [plan: G]"
    );
    let s = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "vitest: 3 passed"},
            {"action": "update", "id": 2, "status": "deferred", "reason": "needs a design call"},
        ]}),
    )
    .state;
    assert_eq!(
        ok(&s, json!({"action": "list"})).text,
        "Plan: P -- 1/3 plan items open\n[completed] #1 Do it [plan: G]\n    evidence: vitest: 3 passed\n[deferred] #2 Other [plan: G]\n    deferred: needs a design call\n[pending] #3 Ungrouped? no [plan: G]"
    );
    assert_eq!(
        ok(&s, json!({"action": "get", "id": 1})).text,
        "#1 [completed] Do it\n  plan item: G\n    step one\n    step two\n  evidence: vitest: 3 passed"
    );
    let ungrouped = apply_plan_approval(&TodoState::empty(), "y", "- solo\n").state;
    assert_eq!(
        ok(&ungrouped, json!({"action": "list"})).text,
        "Plan: - solo -- 1/1 plan items open\n[pending] #1 solo [plan]"
    );
    assert_eq!(
        ok(&ungrouped, json!({"action": "get", "id": 1})).text,
        "#1 [pending] solo\n  plan item"
    );
}

#[test]
fn plan_items_text_is_verbatim_but_the_rest_is_editable() {
    let s = with_plan(&TodoState::empty());
    // Same text is not an edit.
    ok(
        &s,
        json!({"action": "update", "id": 1, "subject": "Add the `alpha` module", "status": "in_progress"}),
    );
    let edited = ok(
        &s,
        json!({"action": "update", "id": 1, "activeForm": "adding alpha", "owner": "me",
               "metadata": {"k": "v"}, "addBlockedBy": [2]}),
    );
    assert_eq!(edited.text, "Updated #1");
}

#[test]
fn the_deferral_notice_reply_and_user_notice() {
    let s = with_plan(&TodoState::empty());
    let deferred = ok(
        &s,
        json!({"action": "update", "id": 2, "status": "deferred", "reason": "needs a design call"}),
    );
    assert_eq!(
        deferred.text,
        "Updated #2 (pending → deferred). Tell the user this plan item is descoped and why: needs a design call"
    );
    assert_eq!(
        deferral_notices(&s, &deferred.state),
        ["Plan item deferred: #2 Wire `beta` into the CLI -- needs a design call"]
    );
    // Re-deferring with a new reason is an update, not a new notice.
    let again = ok(
        &deferred.state,
        json!({"action": "update", "id": 2, "status": "deferred", "reason": "still blocked"}),
    );
    assert_eq!(again.text, "Updated #2");
    assert!(deferral_notices(&deferred.state, &again.state).is_empty());
    // Net per call: defer then reopen in one batch gives no notice.
    let net = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 2, "status": "deferred", "reason": "x"},
            {"action": "update", "id": 2, "status": "pending"},
            {"action": "update", "id": 3, "status": "deferred", "reason": "y"},
            {"action": "update", "id": 3, "status": "in_progress"},
            {"action": "update", "id": 3, "status": "deferred", "reason": "final"},
        ]}),
    );
    assert_eq!(
        deferral_notices(&s, &net.state),
        ["Plan item deferred: #3 `make test` passes -- final"]
    );
}

#[test]
fn re_announcing_the_same_plan_is_a_no_op() {
    let s = with_plan(&TodoState::empty());
    let again = apply_plan_approval(&s, "p1", "# Totally different\n- x\n");
    assert!(!again.changed);
    assert_eq!(again.state, s);
    assert_eq!(plan_id(PLAN), plan_id(&PLAN.replace('\n', "\r\n")));
    assert_ne!(plan_id(PLAN), plan_id("# other\n"));
    assert!(plan_id(PLAN).starts_with("md-") && plan_id(PLAN).len() == 19);
}

#[test]
fn re_approval_replaces_plan_items_and_keeps_agent_todos() {
    let s = with_plan(&with_tasks(&["agent todo"]));
    let s = ok(
        &s,
        json!({"action": "update", "id": 1, "addBlockedBy": [2, 3]}),
    )
    .state;
    let next = apply_plan_approval(&s, "p2", "# v2\n\n## Work\n- Only this\n");
    assert!(next.changed);
    let summary: Vec<(i64, &str, bool)> = next
        .state
        .tasks
        .iter()
        .map(|t| (t.id, t.subject.as_str(), t.is_plan_item()))
        .collect();
    assert_eq!(summary, [(5, "Only this", true), (1, "agent todo", false)]);
    assert!(
        next.state.tasks[1].blocked_by.is_empty(),
        "references to removed plan items are dropped"
    );
    assert_eq!(next.state.plan.as_ref().map(|p| p.id.as_str()), Some("p2"));
}

#[test]
fn reconciliation_carries_only_unambiguous_unchanged_closed_items() {
    let v1 = "# v1\n## Work\n- keep done\n  detail\n- keep deferred\n- edited\n- in progress\n- dup\n- dup\n";
    let s = apply_plan_approval(&TodoState::empty(), "v1", v1).state;
    let s = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "proof"},
            {"action": "update", "id": 2, "status": "deferred", "reason": "why"},
            {"action": "update", "id": 3, "status": "completed", "evidence": "e"},
            {"action": "update", "id": 4, "status": "in_progress"},
            {"action": "update", "id": 5, "status": "completed", "evidence": "d"},
        ]}),
    )
    .state;
    let v2 = "# v2\n## Work\n- keep done\n  detail\n- keep deferred\n- edited\n  now with detail\n- in progress\n- dup\n- dup\n## Other\n- keep deferred\n";
    let next = apply_plan_approval(&s, "v2", v2);
    let view: Vec<(&str, TaskStatus, Option<&str>, Option<&str>)> = next
        .state
        .tasks
        .iter()
        .map(|t| {
            (
                t.subject.as_str(),
                t.status,
                t.evidence.as_deref(),
                t.reason.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            ("keep done", TaskStatus::Completed, Some("proof"), None),
            ("keep deferred", TaskStatus::Deferred, None, Some("why")),
            ("edited", TaskStatus::Pending, None, None),
            ("in progress", TaskStatus::Pending, None, None),
            ("dup", TaskStatus::Pending, None, None),
            ("dup", TaskStatus::Pending, None, None),
            ("keep deferred", TaskStatus::Pending, None, None),
        ]
    );
    assert_eq!(next.carried, 2);
    let ids: Vec<i64> = next.state.tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids, [7, 8, 9, 10, 11, 12, 13], "new ids, never reused");
}

#[test]
fn settle_reminder_lists_open_items_and_deferred_ones_with_reasons() {
    let s = with_plan(&TodoState::empty());
    let s = ok(
        &s,
        json!({"ops": [
            {"action": "update", "id": 1, "status": "completed", "evidence": "done"},
            {"action": "update", "id": 3, "status": "deferred", "reason": "CI is down"},
        ]}),
    )
    .state;
    let reminder = settle_reminder(&s).unwrap();
    assert_eq!(
        reminder,
        "[Fido: plan check] Plan check: the approved plan \"Add widgets\" still has 1/3 items open. Do not tell the user the work is done.\n\
         Open plan items:\n\
         - #2 [Work] Wire `beta` into the CLI\n\
         Keep working on them now. For any item you can't finish in this run: if it is actually done, complete it with evidence; otherwise set status deferred with a reason. Then tell the user exactly which plan items are still open or deferred, and why.\n\
         Deferred plan items (tell the user):\n\
         - #3 [Verification] `make test` passes -- CI is down"
    );
}

#[test]
fn no_reminder_without_a_plan_or_once_every_plan_item_is_closed() {
    let agent_only = with_tasks(&["agent only"]);
    assert_eq!(settle_reminder(&agent_only), None);
    let s = apply_plan_approval(&agent_only, "p", "# T\n## Work\n- one\n").state;
    assert!(settle_reminder(&s).is_some());
    let s = ok(
        &s,
        json!({"action": "update", "id": 2, "status": "deferred", "reason": "later"}),
    )
    .state;
    assert_eq!(settle_reminder(&s), None, "deferred items are closed");
}

#[test]
fn the_reminder_and_rows_are_sanitised_but_the_state_is_raw() {
    let evil = "# T\x1b]0;pwned\x07\n## G\u{202e}\n- Do \x1b[31mred\x1b[0m\tnow\n";
    let s = apply_plan_approval(&TodoState::empty(), "e", evil).state;
    assert_eq!(s.tasks[0].subject, "Do \x1b[31mred\x1b[0m\tnow");
    let reminder = settle_reminder(&s).unwrap();
    assert!(reminder.contains("- #1 [G] Do red now"), "{reminder}");
    assert!(!reminder.contains('\x1b') && !reminder.contains('\u{202e}'));
    assert_eq!(
        ok(&s, json!({"action": "list"})).text,
        "Plan: T -- 1/1 plan items open\n[pending] #1 Do red now [plan: G]"
    );
}

/// Found by the `todo_reducer` fuzz target: a bare `- ` was an item with a
/// blank subject, a task `create` refuses and nobody could edit or delete.
#[test]
fn a_bare_bullet_marker_is_no_item() {
    let plan = "# Plan\n\n## Work\n- \n  its nested line goes with it\n-\t\n- real item\n1. \n";
    assert_eq!(
        parse_plan_items(plan),
        vec![item("Work", "real item", None)]
    );
    // A section whose only bullets are bare is a prose section again.
    let plan = "# Plan\n\n## Lone\nSome prose.\n- \n";
    assert_eq!(parse_plan_items(plan), vec![item("Lone", "Lone", None)]);
}
