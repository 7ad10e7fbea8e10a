//! `todo`: the rpiv-todo task list (the `todo` plan flavour). The state
//! lives in `.fido-todo.json`; every call returns the reference's content
//! text and its `details` envelope (see [`crate::plan::todo`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Capability;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::plan::PlanSnapshot;
use crate::plan::todo;
use crate::protocol::schema::ToolArgs;

pub struct Todo;

const DESCRIPTION: &str = "\
Keep a task list for multi-step work. Actions: create (adds a pending task with the next id), update (status, fields or dependencies of one task), list (every task, optionally only one status), get (one task with its blockedBy and the tasks it blocks), delete (marks a task deleted; it stays as a tombstone), clear (removes every task you created; plan items stay). The list is kept in the workspace and survives restarts: after a restart it arrives as a todo list result.

How to use it:
- Open a list when the work has three or more steps, when the user hands you several tasks, or right after new instructions, to capture what was asked. Do not use it for a single small change or a plain question.
- Keep exactly one task in_progress. Set it in_progress before you start on it, with activeForm naming what you are doing (e.g. \"writing the parser\").
- Mark each task completed as soon as it is done, one at a time; do not save completions up for later.
- Never complete a task while tests fail, the change is partial or an error is unresolved: leave it open and add a task for the blocker.
- Change a status with update, the task id and the new status, e.g. {\"action\":\"update\",\"id\":3,\"status\":\"in_progress\",\"activeForm\":\"writing tests\"}. An update must change at least one field.
- completed needs evidence: the check that proves it (a command and its result, a commit, a test name), e.g. {\"action\":\"update\",\"id\":3,\"status\":\"completed\",\"evidence\":\"cargo test: 42 passed\"}. deferred needs a reason; reopening a deferred task drops it.
- Tasks marked [plan] come from the approved plan, word for word: their subject and description can't be edited and they can't be deleted. Complete each with evidence or defer it with a reason (and tell the user). Never say the work is done while plan items are open.
- Dependencies: blockedBy on create; addBlockedBy / removeBlockedBy on update, which add or remove ids without resending the list. Unknown, deleted, self and circular dependencies are rejected.
- To change many tasks at once, send one call with ops, e.g. {\"ops\":[{\"action\":\"update\",\"id\":1,\"status\":\"completed\",\"evidence\":\"...\"},{\"action\":\"create\",\"subject\":\"...\"}]}. Every op has its own fields; the batch is all or nothing and an error names the op (ops[2]: ...); list and get ops see the final state; no other top-level field next to ops.
- list leaves deleted tasks out unless includeDeleted is true; status filters it to one status. Keep subjects short and imperative; put detail in description.";

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

/// The arguments as the model sent them: [`todo::run_call`] checks them
/// and answers in the reference's words, so the schema is written here.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct Args(Value);

impl ToolArgs for Args {
    fn parameters() -> Value {
        let mut properties = op_properties();
        properties["ops"] = json!({
            "type": "array",
            "description": "Instead of action and fields: many operations in one atomic call, each an object with its own action and fields",
            "items": {"type": "object", "properties": op_properties(), "required": ["action"]}
        });
        json!({"type": "object", "properties": properties})
    }
}

impl TypedTool for Todo {
    const NAME: &'static str = todo::TOOL_NAME;
    const CAPABILITY: Capability = Capability {
        changes_plan: true,
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        DESCRIPTION.into()
    }

    fn run<'a>(&'a self, Args(args): Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            // The lock, the read and the fsync'd write block: off the runtime.
            let todos = call.env.todos.clone();
            let done = tokio::task::spawn_blocking(move || todo::run_call(&todos, &args)).await;
            let done = match done {
                Ok(done) => done,
                Err(err) => {
                    return ToolOutput::error(format!(
                        "todo could not read or save the task list, so nothing changed: {err}"
                    ));
                }
            };
            match done {
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
                        details: None,
                        plan: Some(Box::new(PlanSnapshot::Todo(output.details))),
                        facts: None,
                    }
                }
                Err(err) => ToolOutput::error(format!(
                    "todo could not read or save the task list, so nothing changed: {err}"
                )),
            }
        })
    }
}
