//! Where the agent loop meets the user's hooks outside tool calls (those
//! are in `turn::tool_hooks`): SessionStart, UserPromptSubmit, Stop and
//! PreCompact. What each hook's answer means is `hooks::points`; here it
//! is applied to the conversation and the turn, and a hook still running
//! when the person interrupts the turn is stopped (its processes killed).

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::{AgentDeps, Conversation, TurnOutcome};
use crate::hooks::points::{PromptAnswer, StopAnswer};
use crate::hooks::{CompactTrigger, Hooks, SessionSource};
use crate::protocol::{EventKind, Message, UsageTotals};

/// SessionStart, once a session's conversation is ready; what the hooks
/// add comes after what the conversation has.
pub async fn session_started(
    hooks: &Hooks,
    conversation: &mut Conversation,
    source: SessionSource,
) {
    if let Some(note) = hooks.session_start(source).await {
        conversation.push(Message::user(note));
    }
}

/// UserPromptSubmit, then the prompt: added context goes before it. A
/// block keeps the prompt from the model: `Err` is how the turn ends
/// instead (failed, saying why; or interrupted during the hook).
pub(super) async fn submit_prompt(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    prompt: String,
    cancel: &CancellationToken,
) -> Result<(), TurnOutcome> {
    let usage = UsageTotals::default();
    let hooks = &deps.tool_env.hooks;
    let Some(answer) = interruptible(hooks.prompt_submitted(&prompt), cancel).await else {
        return Err(TurnOutcome::Interrupted { usage });
    };
    match answer {
        PromptAnswer::Blocked { message } => {
            deps.events.emit(EventKind::Error {
                message: message.clone(),
            });
            Err(TurnOutcome::Failed { message, usage })
        }
        PromptAnswer::Send { note } => {
            if let Some(note) = note {
                conversation.push(Message::user(note));
            }
            conversation.push(Message::user(prompt));
            Ok(())
        }
    }
}

/// Stop, when the model has answered: the note to go on with when a hook
/// blocks the end of the turn, `None` when the turn ends.
pub(super) async fn stop_blocked(
    deps: &AgentDeps,
    last_text: Option<&str>,
    continuations: u32,
    cancel: &CancellationToken,
) -> Option<String> {
    let hooks = &deps.tool_env.hooks;
    match interruptible(hooks.stop(last_text, continuations), cancel).await? {
        StopAnswer::End => None,
        StopAnswer::EndAnyway { message } => {
            deps.events.emit(EventKind::Error { message });
            None
        }
        StopAnswer::Continue { note } => Some(note),
    }
}

/// PreCompact, before older turns are cut.
pub(super) async fn before_compaction(
    deps: &AgentDeps,
    trigger: CompactTrigger,
    cancel: &CancellationToken,
) {
    interruptible(deps.tool_env.hooks.pre_compact(trigger), cancel).await;
}

/// `hook`'s answer, or `None` when the person interrupts the turn first
/// (dropping the run kills the hooks' processes).
async fn interruptible<T>(hook: impl Future<Output = T>, cancel: &CancellationToken) -> Option<T> {
    tokio::select! {
        answer = hook => Some(answer),
        _ = cancel.cancelled() => None,
    }
}
