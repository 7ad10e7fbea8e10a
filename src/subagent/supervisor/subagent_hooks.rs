//! The user's SubagentStart and SubagentStop hooks, run in the parent
//! around each delegation (never inside the child, whose calls its sandbox
//! confines). They are told what happens; what they decide changes
//! nothing (a PreToolUse hook on `delegate` is the one that can veto).

use crate::hooks::{HookInput, Hooks};
use crate::protocol::delegate::DelegateResult;

/// Before the subagent `agent_id` starts on `task` (already cut short).
pub(super) async fn started(hooks: Option<&Hooks>, agent_id: &str, task: &str) {
    if let Some(hooks) = hooks {
        hooks
            .run(HookInput::SubagentStart {
                agent_id: agent_id.to_string(),
                task: task.to_string(),
            })
            .await;
    }
}

/// After the subagent ended with `result`.
pub(super) async fn stopped(
    hooks: Option<&Hooks>,
    agent_id: &str,
    task: String,
    result: &DelegateResult,
) {
    if let Some(hooks) = hooks {
        hooks
            .run(HookInput::SubagentStop {
                agent_id: agent_id.to_string(),
                task,
                status: result.status,
                summary: crate::text::summary(&result.summary, 1000),
            })
            .await;
    }
}
