//! The state of the `todo` flavour: tasks, the id counter and the approved
//! plan, exactly the `tasks` / `nextId` / `plan` of the reference's
//! `details` envelope (and of `.fido-todo.json`).
//!
//! Text fields hold the raw strings the model (or the plan) sent; display
//! code sanitises them ([`super::sanitize`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

// The task shapes are the wire's (`plan_updated` carries them); their
// logic is here.
pub use crate::protocol::plan::{PlanRef, Source, Task, TaskId, TaskStatus};

impl TaskStatus {
    /// The reference's transition table (without the same-status no-op).
    pub fn targets(self) -> &'static [TaskStatus] {
        use TaskStatus::*;
        match self {
            Pending => &[InProgress, Completed, Deferred, Deleted],
            InProgress => &[Pending, Completed, Deferred, Deleted],
            Completed => &[Deleted],
            Deferred => &[Pending, InProgress, Deleted],
            Deleted => &[],
        }
    }

    /// Whether `self → to` is allowed. A transition to the current status is
    /// always accepted (and reported as a no-op when nothing else changes).
    pub fn can_become(self, to: TaskStatus) -> bool {
        self == to || self.targets().contains(&to)
    }

    /// Still work to do (`pending` or `in_progress`).
    pub fn is_open(self) -> bool {
        match self {
            TaskStatus::Pending | TaskStatus::InProgress => true,
            TaskStatus::Completed | TaskStatus::Deferred | TaskStatus::Deleted => false,
        }
    }
}

/// The whole state (contract: the shape of `.fido-todo.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TodoState {
    pub tasks: Vec<Task>,
    pub next_id: TaskId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanRef>,
}

impl Default for TodoState {
    fn default() -> Self {
        TodoState::empty()
    }
}

/// `{ open, total }` over plan items, tombstones excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanProgress {
    pub open: usize,
    pub total: usize,
}

impl TodoState {
    /// No tasks, the counter at 1, no plan.
    pub fn empty() -> TodoState {
        TodoState {
            tasks: Vec::new(),
            next_id: 1,
            plan: None,
        }
    }

    pub fn task(&self, id: TaskId) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    pub fn position(&self, id: TaskId) -> Option<usize> {
        self.tasks.iter().position(|t| t.id == id)
    }

    /// Plan items still to do (`pending` / `in_progress`), in order.
    pub fn open_plan_items(&self) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(|t| t.is_plan_item() && t.status.is_open())
    }

    /// Deferred plan items, in order.
    pub fn deferred_plan_items(&self) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(|t| t.is_plan_item() && t.status == TaskStatus::Deferred)
    }

    /// Plan progress; `None` without (live) plan items.
    pub fn plan_progress(&self) -> Option<PlanProgress> {
        let total = self
            .tasks
            .iter()
            .filter(|t| t.is_plan_item() && t.status != TaskStatus::Deleted)
            .count();
        (total > 0).then(|| PlanProgress {
            open: self.open_plan_items().count(),
            total,
        })
    }

    /// Reverse `blockedBy` edges: for each id, the tasks that wait on it,
    /// in task order.
    pub fn blocks(&self) -> BTreeMap<TaskId, Vec<TaskId>> {
        let mut blocks: BTreeMap<TaskId, Vec<TaskId>> = BTreeMap::new();
        for task in &self.tasks {
            for dep in &task.blocked_by {
                let waiting = blocks.entry(*dep).or_default();
                if !waiting.contains(&task.id) {
                    waiting.push(task.id);
                }
            }
        }
        blocks
    }

    /// Whether giving `task` the dependency list `blocked_by` would close a
    /// cycle: some dependency already (transitively) waits on `task`.
    pub fn would_cycle(&self, task: TaskId, blocked_by: &[TaskId]) -> bool {
        let edges: BTreeMap<TaskId, &[TaskId]> = self
            .tasks
            .iter()
            .map(|t| (t.id, t.blocked_by.as_slice()))
            .collect();
        let mut seen = BTreeSet::new();
        let mut stack: Vec<TaskId> = blocked_by.to_vec();
        while let Some(id) = stack.pop() {
            if id == task {
                return true;
            }
            if !seen.insert(id) {
                continue;
            }
            if let Some(deps) = edges.get(&id) {
                stack.extend(deps.iter().copied());
            }
        }
        false
    }

    /// Whether the `blockedBy` graph holds a cycle anywhere.
    pub fn has_cycle(&self) -> bool {
        self.tasks
            .iter()
            .any(|t| self.would_cycle(t.id, &t.blocked_by))
    }

    /// Checks a state read from disk: the reference skips snapshots with
    /// invalid task shapes, duplicate ids, invalid counters or dangling
    /// dependencies instead of installing them partially.
    pub fn check(&self) -> Result<(), StateCheckError> {
        if self.next_id < 1 {
            return Err(StateCheckError::NextIdNotPositive(self.next_id));
        }
        let mut ids = BTreeSet::new();
        for task in &self.tasks {
            if task.id < 1 {
                return Err(StateCheckError::IdNotPositive(task.id));
            }
            if !ids.insert(task.id) {
                return Err(StateCheckError::IdTwice(task.id));
            }
            if task.id >= self.next_id {
                return Err(StateCheckError::IdNotBelowNext {
                    id: task.id,
                    next_id: self.next_id,
                });
            }
        }
        for task in &self.tasks {
            if let Some(&dep) = task.blocked_by.iter().find(|d| !ids.contains(d)) {
                return Err(StateCheckError::MissingBlocker { task: task.id, dep });
            }
        }
        Ok(())
    }
}

/// Why a todo state read from disk is not installed (the file is set
/// aside with this sentence).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateCheckError {
    #[error("nextId {0} is not a positive id")]
    NextIdNotPositive(TaskId),
    #[error("task id {0} is not a positive id")]
    IdNotPositive(TaskId),
    #[error("task id {0} is used twice")]
    IdTwice(TaskId),
    #[error("task id {id} is not below nextId {next_id}")]
    IdNotBelowNext { id: TaskId, next_id: TaskId },
    #[error("task {task} is blocked by #{dep}, which does not exist")]
    MissingBlocker { task: TaskId, dep: TaskId },
}
