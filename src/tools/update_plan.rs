//! `update_plan`: replaces the workspace plan atomically and returns its
//! complete normalised state (the model-visible source of truth).

use serde_json::json;

use super::{Invocation, Tool, ToolFuture, ToolKind, ToolOutput};
use crate::plan::model::{self, PlanState};
use crate::protocol::ToolSpec;

pub struct UpdatePlan;

const DESCRIPTION: &str = "\
Replace the workspace todo list and return its complete normalized state. The returned tool result is the model-visible source of truth for the current plan; it contains the full version, updatedAt, reason, and every item with its ID, title, status, details, dependencies, next action, and evidence. The plan is delivered in the tool result, not interpolated into the initial system prompt, so updating it does not change the cached system-prompt prefix. Use it at milestones, preserve existing IDs, and keep exactly zero or one in_progress item.

When to use: create a plan when a request has multiple meaningful steps, spans several files, or is likely to be interrupted; skip it for a small, obvious change. Call it to establish the current state, after a milestone, or when a blocker changes the next action — not after every tool call. Read the complete state from the latest update_plan result instead of assuming an earlier result is still current; a restored plan after a restart also arrives as an update_plan result.

Rules (a violation is an error and leaves the plan unchanged):
- Send every item you keep, with its existing id; items you leave out are dropped. The result lists added, dropped and status-changed ids: check it for accidental renames.
- At most 20 items; ids unique, short and readable (letters, digits, - _ .), e.g. inspect, implement, verify.
- status is pending, in_progress, blocked (waiting on a person or an external service) or done; at most one item in_progress.
- next_action is required for pending, in_progress and blocked items.
- done requires evidence: concise proof such as `cargo test: 42 passed` or `src/parser.rs:120`; never full command output.
- dependencies name other ids of this plan; no self-dependency, no cycles.
- Keep titles and details short.";

impl Tool for UpdatePlan {
    fn name(&self) -> &'static str {
        "update_plan"
    }

    fn kind(&self) -> ToolKind {
        ToolKind::PlanState
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "update_plan".into(),
            description: DESCRIPTION.into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "reason": {
                        "type": "string",
                        "description": "One short sentence: why the plan is being set or changed."
                    },
                    "items": {
                        "type": "array",
                        "maxItems": model::MAX_ITEMS,
                        "description": "The complete new plan, in order. Include every item you keep.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "description": "Stable, short, readable id, e.g. \"inspect\"."},
                                "title": {"type": "string", "description": "Short title."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "blocked", "done"]},
                                "details": {"type": "string", "description": "Optional short details."},
                                "dependencies": {"type": "array", "items": {"type": "string"}, "description": "Ids of items this one waits for."},
                                "next_action": {"type": "string", "description": "What happens next; required unless done."},
                                "evidence": {"type": "array", "items": {"type": "string"}, "description": "Concise proof; required for done."}
                            },
                            "required": ["id", "title", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["reason", "items"],
                "additionalProperties": false
            }),
        }
    }

    fn invoke<'a>(&'a self, invocation: Invocation<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let (reason, items) = match model::validate(&invocation.args) {
                Ok(valid) => valid,
                Err(message) => {
                    return ToolOutput::error(format!(
                        "update_plan rejected; the plan was not changed. {message}"
                    ));
                }
            };
            // The lock, the read and the fsync'd write block: off the runtime.
            let store = invocation.env.plan.clone();
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
/// object as details.
pub fn state_output(state: &PlanState) -> ToolOutput {
    ToolOutput {
        ok: true,
        content: state.to_json_text(),
        details: serde_json::to_value(state).ok(),
    }
}
