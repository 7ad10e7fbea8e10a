//! `todo`: the rpiv-todo task list (the `todo` plan flavour). The state
//! lives in `.fido-todo.json`; every call returns the reference's content
//! text and its `details` envelope (see [`crate::plan::todo`]).

use serde_json::json;

use super::{Invocation, Tool, ToolFuture, ToolKind, ToolOutput};
use crate::plan::todo::{self, TodoStore};
use crate::protocol::ToolSpec;

pub struct Todo;

const DESCRIPTION: &str = "\
Manage a task list for tracking multi-step progress. Actions: create (new task), update (change status/fields/dependencies), list (all tasks, optionally filtered by status), get (single task details), delete (tombstone), clear (drop every agent-created task; plan items stay). Status: pending → in_progress → completed, plus deferred (descoped, needs a reason) and the deleted tombstone. The list survives restarts; after a restart it arrives as a todo list result.

Guidelines:
- Use todo for complex work with 3+ steps, when the user gives you a list of tasks, or immediately after receiving new instructions to capture requirements. Skip it for single trivial tasks and purely conversational requests.
- When starting a task from the todo list, mark it in_progress BEFORE beginning work. Mark it completed IMMEDIATELY when done — never batch completions. Exactly one task in_progress at a time.
- Never mark a task completed if tests are failing, the implementation is partial, or you hit unresolved errors — keep it in_progress and create a new task for the blocker instead.
- Task status: pending → in_progress → completed, plus deferred (descoped, needs a reason) and deleted as a tombstone. Pass activeForm (present-continuous label, e.g. 'researching existing tool') when marking in_progress.
- To change a task's status, call update with the task id and the target status, e.g. {\"action\":\"update\",\"id\":3,\"status\":\"in_progress\",\"activeForm\":\"writing tests\"}. status is the field that changes the task; an update without a mutable field (status or another) is rejected.
- Marking a task completed requires evidence: the check that proves it (command + result, commit, or test name), e.g. {\"action\":\"update\",\"id\":3,\"status\":\"completed\",\"evidence\":\"cargo test: 42 passed\"}. No evidence means it is not done.
- Todos marked [plan] are the approved plan's items, verbatim. They can't be edited or deleted: complete each with evidence, or set status deferred with a reason and tell the user. Never tell the user the work is done while plan items are open.
- Use blockedBy to express dependencies (A is blocked by B). On create, pass blockedBy as the initial set. On update, use addBlockedBy / removeBlockedBy (additive merge — do not resend the full array). Cycles are rejected.
- Batch with ops: to open or close many todos, pass ONE call {\"ops\":[{\"action\":\"update\",\"id\":1,\"status\":\"completed\",\"evidence\":\"...\"}, ...]} instead of one call per todo. Each op carries its own evidence/reason. A batch is atomic: if any op is invalid nothing changes and the error names the op (ops[3]: ...). list/get ops are answered from the final state. Do not mix ops with top-level fields.
- list hides tombstoned (deleted) tasks by default; pass includeDeleted:true to see them. Pass status to filter by a single status.
- Subject must be short and imperative (e.g. 'Research existing tool'); description is for long-form detail. activeForm is a present-continuous label shown while in_progress.";

fn op_properties() -> serde_json::Value {
    let ids = |description: &str| json!({"type": "array", "items": {"type": "integer"}, "description": description});
    json!({
        "action": {"type": "string", "enum": ["create", "update", "list", "get", "delete", "clear"]},
        "subject": {"type": "string", "description": "Task subject line (required for create)"},
        "blockedBy": ids("create: initial dependency ids"),
        "description": {"type": "string", "description": "Long-form detail"},
        "activeForm": {"type": "string", "description": "Present-continuous label shown while in_progress"},
        "owner": {"type": "string", "description": "Agent/owner assigned to this task"},
        "metadata": {"type": "object", "description": "Arbitrary metadata; on update it merges key by key and a null value deletes that key"},
        "evidence": {"type": "string", "description": "update: required with status completed — the check that proves it"},
        "reason": {"type": "string", "description": "update: required with status deferred — why it is descoped"},
        "addBlockedBy": ids("update: ids to add to blockedBy"),
        "removeBlockedBy": ids("update: ids to remove from blockedBy"),
        "id": {"type": "integer", "description": "Task id (update, get, delete)"},
        "status": {
            "type": "string",
            "enum": ["pending", "in_progress", "completed", "deferred", "deleted"],
            "description": "update: the new status; list: filter by this status"
        },
        "includeDeleted": {"type": "boolean", "description": "list: also show tombstones (default false)"}
    })
}

impl Tool for Todo {
    fn name(&self) -> &'static str {
        todo::TOOL_NAME
    }

    fn kind(&self) -> ToolKind {
        ToolKind::PlanState
    }

    fn spec(&self) -> ToolSpec {
        let mut properties = op_properties();
        properties["ops"] = json!({
            "type": "array",
            "description": "Instead of action and fields: many operations in one atomic call, each an object with its own action and fields",
            "items": {"type": "object", "properties": op_properties(), "required": ["action"]}
        });
        ToolSpec {
            name: todo::TOOL_NAME.into(),
            description: DESCRIPTION.into(),
            parameters: json!({"type": "object", "properties": properties}),
        }
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let store = TodoStore::in_workspace(&invocation.env.workspace.root);
            match todo::run_call(&store, &invocation.args) {
                Ok(output) => {
                    if let Some(warning) = &output.warning {
                        tracing::warn!("{warning}");
                    }
                    for notice in &output.notices {
                        tracing::info!("{notice}");
                    }
                    ToolOutput {
                        ok: output.ok,
                        content: output.content,
                        details: Some(output.details),
                    }
                }
                Err(err) => ToolOutput::error(format!(
                    "todo could not read or save the task list, so nothing changed: {err}"
                )),
            }
        })
    }
}
