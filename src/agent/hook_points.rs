//! The user's hooks at the session's points outside tool calls (those are
//! in `turn::tool_hooks`): SessionStart, UserPromptSubmit, Stop and
//! PreCompact. What a hook adds for the model enters the conversation as a
//! user message where it happened, never the cached prefix.

use tokio_util::sync::CancellationToken;

use super::{AgentDeps, Conversation, TurnOutcome};
use crate::hooks::{CompactTrigger, HookInput, HookOutcome, Hooks, SessionSource};
use crate::protocol::hook::HookDecision;
use crate::protocol::{EventKind, Message, UsageTotals};

/// Continuations a Stop hook may force in one user turn: a hook that
/// always blocks would otherwise keep the model working forever.
pub const MAX_STOP_CONTINUATIONS: u32 = 3;

/// SessionStart, once a session's conversation is ready; plain stdout or
/// `additionalContext` is added after what the conversation has.
pub async fn session_started(
    hooks: &Hooks,
    conversation: &mut Conversation,
    source: SessionSource,
) {
    let outcome = hooks.run(HookInput::SessionStart { source }).await;
    push_context(conversation, "SessionStart", &outcome);
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
    let input = HookInput::UserPromptSubmit {
        prompt: prompt.clone(),
    };
    let usage = UsageTotals::default();
    let Some(outcome) = run_interruptible(&deps.tool_env.hooks, input, cancel).await else {
        return Err(TurnOutcome::Interrupted { usage });
    };
    if outcome.decision == HookDecision::Deny {
        let message = format!(
            "a UserPromptSubmit hook blocked the prompt, so it was not sent: {}",
            outcome.reason_text()
        );
        deps.events.emit(EventKind::Error {
            message: message.clone(),
        });
        return Err(TurnOutcome::Failed { message, usage });
    }
    push_context(conversation, "UserPromptSubmit", &outcome);
    conversation.push(Message::user(prompt));
    Ok(())
}

/// Stop, when the model has answered: the hook's reason when it blocks
/// the end of the turn (the turn goes on once more with it), `None` when
/// the turn ends. Past [`MAX_STOP_CONTINUATIONS`] a block is ignored.
pub(super) async fn stop_blocked(
    deps: &AgentDeps,
    last_text: Option<&str>,
    continuations: u32,
    cancel: &CancellationToken,
) -> Option<String> {
    let input = HookInput::Stop {
        stop_hook_active: continuations > 0,
        last_assistant_message: last_text.map(str::to_string),
    };
    let outcome = run_interruptible(&deps.tool_env.hooks, input, cancel).await?;
    if outcome.decision != HookDecision::Deny {
        return None;
    }
    if continuations >= MAX_STOP_CONTINUATIONS {
        deps.events.emit(EventKind::Error {
            message: format!(
                "a Stop hook blocked the end of the turn again; after {MAX_STOP_CONTINUATIONS} continuations the turn ends anyway"
            ),
        });
        return None;
    }
    Some(format!(
        "[Fido: a Stop hook of the user does not let the turn end yet: {}]",
        outcome.reason_text()
    ))
}

/// PreCompact, before older turns are cut. What it decides does not stop
/// the compaction: the context must shrink.
pub(super) async fn before_compaction(
    deps: &AgentDeps,
    trigger: CompactTrigger,
    cancel: &CancellationToken,
) {
    let input = HookInput::PreCompact { trigger };
    run_interruptible(&deps.tool_env.hooks, input, cancel).await;
}

/// Runs the hooks of `input`, or stops them (killing their processes)
/// when the person interrupts the turn: `None`.
async fn run_interruptible(
    hooks: &Hooks,
    input: HookInput,
    cancel: &CancellationToken,
) -> Option<HookOutcome> {
    tokio::select! {
        outcome = hooks.run(input) => Some(outcome),
        _ = cancel.cancelled() => None,
    }
}

fn push_context(conversation: &mut Conversation, event: &str, outcome: &HookOutcome) {
    if let Some(context) = outcome.context_text() {
        conversation.push(Message::user(format!(
            "[Fido: context from the user's {event} hook: {context}]"
        )));
    }
}
