//! Seeding plan items from an approved plan (`fido plan approve FILE.md`).
//!
//! There is no plan mode in Fido: the approved plan arrives as a Markdown
//! file, and its id is derived from its text ([`plan_id`]), so approving the
//! same text again is the reference's "same `planId` again is a no-op".
//!
//! A newly approved plan replaces the plan items. Status (only the closed
//! ones, `completed` and `deferred`), evidence and reason carry over to an
//! item of the new plan only when it is unambiguous and unchanged: its
//! group, subject and plan text equal those of exactly one live item of the
//! old plan, and no other item of the new plan has the same three. Every
//! other item restarts `pending` with a new id. Agent-created todos are
//! untouched, except that their `blockedBy` references to removed plan items
//! are dropped.

use std::collections::BTreeMap;

use super::markdown::{PlanItem, parse_plan_items, plan_title};
use super::state::{PlanRef, Source, Task, TaskId, TaskStatus, TodoState};

/// The outcome of an approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub state: TodoState,
    /// False when the plan was already the active one (nothing changed).
    pub changed: bool,
    /// Plan items whose status, evidence and reason carried over.
    pub carried: usize,
}

/// The id of a plan: `md-` and the FNV-1a 64 hash of its text (line endings
/// normalised), stable across runs and machines.
pub fn plan_id(markdown: &str) -> String {
    let normalized = markdown.replace("\r\n", "\n").replace('\r', "\n");
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in normalized.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("md-{hash:016x}")
}

type ItemKey = (String, String, String);

fn key(group: Option<&str>, subject: &str, text: Option<&str>) -> ItemKey {
    (
        group.unwrap_or_default().to_string(),
        subject.to_string(),
        text.unwrap_or_default().to_string(),
    )
}

/// The plan items of `state` that are not deleted, by their key.
fn live_plan_items(state: &TodoState) -> BTreeMap<ItemKey, Vec<&Task>> {
    let mut previous: BTreeMap<ItemKey, Vec<&Task>> = BTreeMap::new();
    for task in state
        .tasks
        .iter()
        .filter(|t| t.is_plan_item() && t.status != TaskStatus::Deleted)
    {
        previous
            .entry(key(
                task.plan_group.as_deref(),
                &task.subject,
                task.plan_text.as_deref(),
            ))
            .or_default()
            .push(task);
    }
    previous
}

/// How many times each key occurs in the new plan (a prior status is
/// carried over only to a key that occurs once).
fn item_counts(items: &[PlanItem]) -> BTreeMap<ItemKey, usize> {
    let mut in_new_plan: BTreeMap<ItemKey, usize> = BTreeMap::new();
    for item in items {
        *in_new_plan
            .entry(key(
                Some(&item.group),
                &item.subject,
                item.detail.as_deref(),
            ))
            .or_default() += 1;
    }
    in_new_plan
}

/// The agent-created tasks of `state`, without their `blockedBy`
/// references to the plan items a new plan replaces.
fn agent_tasks(state: &TodoState) -> Vec<Task> {
    let removed: Vec<TaskId> = state
        .tasks
        .iter()
        .filter(|t| t.is_plan_item())
        .map(|t| t.id)
        .collect();
    let kept = state.tasks.iter().filter(|t| !t.is_plan_item());
    kept.map(|t| {
        let mut t = t.clone();
        t.blocked_by.retain(|id| !removed.contains(id));
        t
    })
    .collect()
}

/// Replaces the plan items of `state` with those of `markdown`.
pub fn apply_plan_approval(state: &TodoState, plan_id: &str, markdown: &str) -> Approval {
    if state.plan.as_ref().is_some_and(|p| p.id == plan_id) {
        return Approval {
            state: state.clone(),
            changed: false,
            carried: 0,
        };
    }
    let previous = live_plan_items(state);
    let items = parse_plan_items(markdown);
    let in_new_plan = item_counts(&items);
    let mut next_id = state.next_id;
    let mut carried = 0;
    let mut plan_tasks = Vec::with_capacity(items.len());
    for item in items {
        let mut task = Task::new(next_id, item.subject);
        next_id = next_id.saturating_add(1);
        task.source = Some(Source::Plan);
        task.plan_group = Some(item.group).filter(|g| !g.is_empty());
        task.plan_text = item.detail.filter(|d| !d.is_empty());
        let key = key(
            task.plan_group.as_deref(),
            &task.subject,
            task.plan_text.as_deref(),
        );
        let unambiguous = in_new_plan.get(&key) == Some(&1);
        if let (true, Some([prior])) = (unambiguous, previous.get(&key).map(Vec::as_slice))
            && matches!(prior.status, TaskStatus::Completed | TaskStatus::Deferred)
        {
            task.status = prior.status;
            task.evidence = prior.evidence.clone();
            task.reason = prior.reason.clone();
            carried += 1;
        }
        plan_tasks.push(task);
    }

    plan_tasks.extend(agent_tasks(state));
    Approval {
        state: TodoState {
            tasks: plan_tasks,
            next_id,
            plan: Some(PlanRef {
                id: plan_id.to_string(),
                title: plan_title(markdown),
            }),
        },
        changed: true,
        carried,
    }
}
