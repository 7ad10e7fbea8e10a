//! The user's tool hooks around one call of the main agent, as
//! `hooks::points` words their answers: PreToolUse before it (deny refuses
//! the call, ask asks the person, allow skips its approval prompts but
//! never the sandbox), PostToolUse after it (its objection or context goes
//! to the model). What the hooks add for the model is one user message
//! after the results of the batch of calls: the wire formats want every
//! result of a message right after it.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use super::super::{AgentDeps, Conversation};
use crate::hooks::points::{CallFacts, ToolVerdict};
use crate::protocol::{Message, ToolCall};
use crate::tools::ToolOutput;
use crate::tools::approval::CallScope;
use crate::tools::guard;

/// What the hooks of a batch of calls said for the model, in order.
#[derive(Default)]
pub(super) struct HookNotes(Mutex<Vec<String>>);

impl HookNotes {
    fn extend(&self, notes: impl IntoIterator<Item = String>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(notes);
    }

    /// Appends the notes as one user message (nothing when there are none).
    pub(super) fn record(self, conversation: &mut Conversation) {
        let notes = self.0.into_inner().unwrap_or_else(PoisonError::into_inner);
        if !notes.is_empty() {
            conversation.push(Message::user(notes.join("\n\n")));
        }
    }
}

/// Runs `call` through the tool hooks; `run` invokes the tool in the
/// scope its approvals see.
pub(super) async fn hooked<F, Fut>(
    deps: &AgentDeps,
    call: &ToolCall,
    notes: &HookNotes,
    run: F,
) -> ToolOutput
where
    F: FnOnce(CallScope) -> Fut,
    Fut: Future<Output = ToolOutput>,
{
    let hooks = &deps.tool_env.hooks;
    let facts = CallFacts {
        tool_name: &call.name,
        arguments: &call.arguments,
        tool_use_id: &call.id,
    };
    let before = hooks.before_tool(facts).await;
    notes.extend(before.note);
    let preapproved = match before.verdict {
        ToolVerdict::Refuse { reason } => return guard::hook_refusal("PreToolUse", &reason),
        ToolVerdict::Ask { reason } => {
            let approvals = &deps.tool_env.approvals;
            if let Err(refusal) = approvals
                .hook_ask(&call.name, &call.arguments, reason)
                .await
            {
                return refusal.into_output();
            }
            true
        }
        ToolVerdict::RunApproved => true,
        ToolVerdict::Run => false,
    };
    let output = run(CallScope {
        tool_name: call.name.clone(),
        arguments: call.arguments.clone(),
        tool_use_id: call.id.clone(),
        preapproved,
    })
    .await;
    notes.extend(hooks.after_tool(facts, output.ok, &output.content).await);
    output
}
