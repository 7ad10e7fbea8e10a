//! Compaction, the step of an agent: plans the cut ([`cut::plan`], pure),
//! asks the model for the summary when the strategy wants one, and
//! replaces the conversation's history.

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

mod cut;

use super::request::{record_usage, request_completion};
use super::{AgentDeps, Conversation};
use crate::plan::todo;
use crate::protocol::{EventKind, Message, UsageTotals};
use cut::Skip;
pub(super) use cut::Trigger;
pub use cut::{CompactionSettings, CompactionStrategy};

/// Compacts `conversation` if it has grown past the threshold (or at once,
/// for [`Trigger::Overflow`]). Returns whether anything was removed.
pub(super) async fn maybe_compact(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    settings: CompactionSettings,
    trigger: Trigger,
    cancel: &CancellationToken,
    usage: &mut UsageTotals,
) -> bool {
    let before = conversation.estimated_tokens();
    let cut = match cut::plan(conversation.messages(), settings, trigger) {
        Ok(cut) => cut,
        Err(skip) => {
            log_skip(skip, before);
            return false;
        }
    };
    super::hook_points::before_compaction(deps, trigger.for_hooks(), cancel).await;
    let summary = match cut.strategy {
        CompactionStrategy::Elide => None,
        CompactionStrategy::Summarize => summarize(conversation, deps, cancel, usage).await,
    };
    let strategy = match summary {
        Some(_) => CompactionStrategy::Summarize,
        None => CompactionStrategy::Elide,
    };
    let messages = conversation.messages();
    let (removed, kept) = (&messages[1..cut.index], &messages[cut.index..]);
    let carried = if deps.catalog.changes_plan(todo::TOOL_NAME) {
        todo_state(removed, deps).await
    } else {
        cut::carried_state(removed, kept)
    };
    let removed_messages = removed.len();
    let history = cut::compacted_history(messages, cut.index, summary.as_deref(), carried);
    conversation.replace_history(history);

    let after = conversation.estimated_tokens();
    info!(
        before,
        after,
        removed_messages,
        strategy = strategy.as_str(),
        "compacted the conversation"
    );
    deps.events.emit(EventKind::Compacted {
        strategy,
        removed_messages,
        estimated_tokens_before: before,
        estimated_tokens_after: after,
    });
    true
}

fn log_skip(skip: Skip, before: usize) {
    match skip {
        Skip::NotNeeded => {}
        Skip::NothingToRemove => warn!(
            before,
            "context is over the compaction threshold but nothing can be removed"
        ),
        Skip::MostlyNewestTurn { removed_tokens } => warn!(
            before,
            removed_tokens,
            "context is over the compaction threshold, mostly in the newest turn; not compacting"
        ),
    }
}

/// For the `todo` flavour, whose results are often one line (`Updated #3`):
/// when todo messages are compacted away, the complete current list comes
/// back as the newest tool result, the same pair a restart restores.
async fn todo_state(removed: &[Message], deps: &AgentDeps) -> Vec<Message> {
    let touched = removed
        .iter()
        .any(|m| matches!(m, Message::Tool { name, .. } if name == todo::TOOL_NAME));
    if !touched {
        return Vec::new();
    }
    // The state file's lock and read block: off the runtime.
    let todos = deps.tool_env.todos.clone();
    let loaded = tokio::task::spawn_blocking(move || todos.load()).await;
    match loaded {
        Ok(Ok(loaded)) => todo::reminder::restore(&loaded).messages,
        Ok(Err(err)) => {
            warn!(error = %err, "cannot read the todo list to carry it through compaction");
            Vec::new()
        }
        Err(err) => {
            warn!(error = %err, "the todo read failed; compacting without it");
            Vec::new()
        }
    }
}

/// Asks the model for a summary of the conversation; `None` when it fails,
/// is interrupted or answers with tool calls (then the caller elides).
async fn summarize(
    conversation: &Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    usage: &mut UsageTotals,
) -> Option<String> {
    let mut request = conversation.clone();
    request.push(Message::user(cut::SUMMARY_REQUEST));
    match request_completion(&request, deps, cancel).await? {
        Ok(completion) => {
            record_usage(deps, usage, &completion);
            match completion.message {
                Message::Assistant {
                    content: Some(text),
                    tool_calls,
                } if tool_calls.is_empty() && !text.trim().is_empty() => Some(text),
                _ => {
                    warn!("the summary request returned no usable text; eliding instead");
                    None
                }
            }
        }
        Err(err) => {
            warn!(error = %err, "the summary request failed; eliding instead");
            None
        }
    }
}
