//! The user's tool hooks around one call of the main agent: PreToolUse
//! before it (deny refuses the call, ask asks the person, allow skips its
//! approval prompts but never the sandbox), PostToolUse after it (its
//! objection or context goes to the model). What the hooks add for the
//! model is one user message after the results of the batch of calls:
//! the wire formats want every result of a message right after it.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use super::super::{AgentDeps, Conversation};
use crate::hooks::{HookEvent, HookInput, HookOutcome};
use crate::protocol::hook::HookDecision;
use crate::protocol::{Message, ToolCall};
use crate::tools::ToolOutput;
use crate::tools::approval::CallScope;
use crate::tools::guard;

/// What the hooks of a batch of calls said for the model, in order.
#[derive(Default)]
pub(super) struct HookNotes(Mutex<Vec<String>>);

impl HookNotes {
    fn add(&self, note: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(note);
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
    // Without a matching hook the call pays for no input: parsing the
    // arguments (and, after it, copying the output) is skipped.
    let pre = if hooks.any(HookEvent::PreToolUse, Some(&call.name)) {
        hooks
            .run(HookInput::PreToolUse {
                tool_name: call.name.clone(),
                tool_input: HookInput::tool_input(&call.arguments),
                tool_use_id: call.id.clone(),
            })
            .await
    } else {
        HookOutcome::default()
    };
    add_context(notes, "PreToolUse", call, pre.context_text());
    let preapproved = match pre.decision {
        HookDecision::Deny => return guard::hook_refusal("PreToolUse", &pre.reason_text()),
        HookDecision::Ask => {
            let approvals = &deps.tool_env.approvals;
            if let Err(refusal) = approvals
                .hook_ask(&call.name, &call.arguments, pre.reason.clone())
                .await
            {
                return refusal.into_output();
            }
            true
        }
        HookDecision::Allow => true,
        HookDecision::None => false,
    };
    let output = run(CallScope {
        tool_name: call.name.clone(),
        arguments: call.arguments.clone(),
        tool_use_id: call.id.clone(),
        preapproved,
    })
    .await;
    after_call(deps, call, &output, notes).await;
    output
}

/// PostToolUse: the call already ran, so a block is an objection the model
/// reads after the result.
async fn after_call(deps: &AgentDeps, call: &ToolCall, output: &ToolOutput, notes: &HookNotes) {
    let hooks = &deps.tool_env.hooks;
    if !hooks.any(HookEvent::PostToolUse, Some(&call.name)) {
        return;
    }
    let post = hooks
        .run(HookInput::PostToolUse {
            tool_name: call.name.clone(),
            tool_input: HookInput::tool_input(&call.arguments),
            tool_response: serde_json::json!({"ok": output.ok, "content": output.content}),
            tool_use_id: call.id.clone(),
        })
        .await;
    if post.decision == HookDecision::Deny {
        notes.add(format!(
            "[Fido: a PostToolUse hook of the user objected to the {} call {} (which already ran): {}]",
            call.name,
            call.id,
            post.reason_text()
        ));
    }
    add_context(notes, "PostToolUse", call, post.context_text());
}

fn add_context(notes: &HookNotes, event: &str, call: &ToolCall, context: Option<String>) {
    if let Some(context) = context {
        notes.add(format!(
            "[Fido: context from the user's {event} hook for the {} call {}: {context}]",
            call.name, call.id
        ));
    }
}
