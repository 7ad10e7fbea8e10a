//! `update_plan`: replaces the workspace plan atomically and returns its
//! complete normalised state (the model-visible source of truth).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Capability;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::plan::PlanSnapshot;
use crate::plan::model::{self, PlanState};
use crate::protocol::schema::ToolArgs;

pub struct UpdatePlan;

/// The facts the README promises (full state, source of truth, not in the
/// prompt), then the rules the validator enforces.
/// When to plan is the system prompt's policy, not repeated here.
const DESCRIPTION: &str = "\
Replace the workspace todo list and return its complete normalized state: version, updatedAt, reason and every item with all its fields. That tool result is the model-visible source of truth for the current plan; the plan is not interpolated into the system prompt, so updating it keeps the cached prefix. Keep exactly zero or one in_progress item. Send every item you keep (others are dropped), at most 20, short unique ids. blocked: waiting on a person or service. next_action is required unless done; done needs evidence, e.g. `cargo test: 42 passed`. dependencies: other ids, no cycles. A rejected update changes nothing.";

/// The arguments as the model sent them: [`model::validate`] checks them
/// and words each rejection for the model, so the schema is written here.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct Args(Value);

impl ToolArgs for Args {
    fn parameters() -> Value {
        json!({
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "Why, in one sentence."},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "title": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "blocked", "done"]},
                            "details": {"type": "string"},
                            "dependencies": {"type": "array", "items": {"type": "string"}},
                            "next_action": {"type": "string", "description": "Required unless done."},
                            "evidence": {"type": "array", "items": {"type": "string"}, "description": "Required for done."}
                        },
                        "required": ["id", "title", "status"]
                    }
                }
            },
            "required": ["reason", "items"],
            "additionalProperties": false
        })
    }
}

impl TypedTool for UpdatePlan {
    const NAME: &'static str = "update_plan";
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
            let (reason, items) = match model::validate(&args) {
                Ok(valid) => valid,
                Err(message) => {
                    return ToolOutput::error(format!(
                        "update_plan rejected; the plan was not changed. {message}"
                    ));
                }
            };
            // The lock, the read and the fsync'd write block: off the runtime.
            let store = call.env.plan.clone();
            let saved = tokio::task::spawn_blocking(move || store.replace(reason, items)).await;
            let saved = match saved {
                Ok(saved) => saved,
                Err(err) => {
                    return ToolOutput::error(format!(
                        "update_plan could not save the plan, so it was not changed: {err}"
                    ));
                }
            };
            match saved {
                Ok((state, warning)) => {
                    if let Some(warning) = warning {
                        // The model gets the complete new state either way;
                        // the person learns the old file was kept aside.
                        tracing::warn!("{warning}");
                    }
                    state_output(&state)
                }
                Err(err) => ToolOutput::error(format!(
                    "update_plan could not save the plan, so it was not changed: {err}"
                )),
            }
        })
    }
}

/// The successful result: the complete state as JSON text, and the same
/// state for the `plan_updated` event.
pub fn state_output(state: &PlanState) -> ToolOutput {
    ToolOutput {
        ok: true,
        content: state.to_json_text(),
        details: None,
        plan: Some(Box::new(PlanSnapshot::UpdatePlan(state.clone()))),
        facts: None,
    }
}
