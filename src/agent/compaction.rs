//! Compaction: keeps the conversation inside the context budget.
//!
//! When the estimated size passes `threshold_tokens`, the older part of the
//! history is replaced: `Summarize` asks the model for a summary (one request
//! that shares the cached prefix: the whole conversation plus one question,
//! with the same tools), `Elide` drops it with a note. The system message and
//! the newest `keep_recent_tokens` of history stay as they are; the cut never
//! separates a tool result from its call.
//!
//! State results survive: the latest result of a state tool (the plan) that
//! falls in the removed part is carried forward as the newest tool result,
//! with its matching call, so the model always sees the complete current
//! state (see [`STATE_TOOLS`]).

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::Conversation;
use super::turn::{AgentDeps, record_usage, request_completion};
use crate::plan::restore::is_restore_message;
use crate::plan::todo;
use crate::protocol::{EventKind, Message, UsageTotals};
use crate::tools::ToolKind;

/// Tools whose latest result is the model-visible source of truth for some
/// state and must never be compacted away.
pub const STATE_TOOLS: &[&str] = &["update_plan", "todo"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionStrategy {
    /// One model request writes a summary of the removed part.
    Summarize,
    /// The removed part is dropped with a short note.
    Elide,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    pub threshold_tokens: usize,
    pub keep_recent_tokens: usize,
    pub strategy: CompactionStrategy,
}

impl CompactionSettings {
    /// Estimated context size that triggers compaction, unless configured.
    pub const DEFAULT_THRESHOLD_TOKENS: usize = 120_000;
    /// Estimated size of the newest turns kept, unless configured.
    pub const DEFAULT_KEEP_RECENT_TOKENS: usize = 30_000;
}

const SUMMARY_REQUEST: &str = "\
[Fido: context compaction] The conversation is about to be shortened. Write a concise summary of everything above that is needed to continue the work: the user's goals and constraints, decisions made, files inspected or changed (with paths), commands run and their results, and what remains to be done. Answer with the summary text only; do not call tools.";

/// Why compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// Before a request, when the estimate passes the threshold.
    Threshold,
    /// The server refused the request for its size: compact whatever can be
    /// removed, without a summary request (it would be refused too).
    Overflow,
}

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
    if trigger == Trigger::Threshold && before <= settings.threshold_tokens {
        return false;
    }
    let messages = conversation.messages();
    let Some(cut) = cut_index(messages, settings.keep_recent_tokens) else {
        warn!(
            before,
            "context is over the compaction threshold but nothing can be removed"
        );
        return false;
    };

    let removed_tokens: usize = messages[1..cut].iter().map(Message::estimated_tokens).sum();
    if trigger == Trigger::Threshold && removed_tokens * 10 < before {
        // The newest turn alone is most of the context; removing the little
        // before it would cost a summary request on every step and gain
        // nothing.
        warn!(
            before,
            removed_tokens,
            "context is over the compaction threshold, mostly in the newest turn; not compacting"
        );
        return false;
    }
    let strategy = match trigger {
        Trigger::Threshold => settings.strategy,
        Trigger::Overflow => CompactionStrategy::Elide,
    };
    let (strategy, summary) = match strategy {
        CompactionStrategy::Elide => (CompactionStrategy::Elide, None),
        CompactionStrategy::Summarize => match summarize(conversation, deps, cancel, usage).await {
            Some(summary) => (CompactionStrategy::Summarize, Some(summary)),
            None => (CompactionStrategy::Elide, None),
        },
    };

    let removed = &conversation.messages()[1..cut];
    let note = match &summary {
        Some(summary) => format!(
            "[Fido: {} earlier messages were compacted into this summary]\n{summary}",
            removed.len()
        ),
        None => format!(
            "[Fido: {} earlier messages were removed to fit the context window; ask the user or re-read files if you need what they said]",
            removed.len()
        ),
    };
    // The prompt the model is working on must survive, word for word, even
    // when the turn that holds it is compacted away.
    let kept_has_request = conversation.messages()[cut..]
        .iter()
        .any(|m| matches!(m, Message::User { content } if !content.starts_with("[Fido:")));
    let latest_request = removed
        .iter()
        .rev()
        .filter(|_| !kept_has_request)
        .find_map(|m| match m {
            Message::User { content } if !content.starts_with("[Fido:") => Some(content.as_str()),
            _ => None,
        });
    let note = match latest_request {
        Some(request) => format!("{note}\n[Fido: the user's latest request, verbatim]\n{request}"),
        None => note,
    };
    let kept = &conversation.messages()[cut..];
    let carried = if deps.catalog.kind_of(todo::TOOL_NAME) == Some(ToolKind::PlanState) {
        todo_state(removed, deps)
    } else {
        carried_state(removed, kept)
    };
    let mut history = Vec::with_capacity(kept.len() + 3);
    history.push(Message::user(note));
    // A fresh restore pair replaces an older one still in the kept part:
    // call ids stay unique in the conversation.
    let restores = carried.iter().any(is_restore_message);
    history.extend(
        kept.iter()
            .filter(|m| !(restores && is_restore_message(m)))
            .cloned(),
    );
    history.extend(carried);
    let removed_messages = removed.len();
    conversation.replace_history(history);

    let after = conversation.estimated_tokens();
    let strategy_name = match strategy {
        CompactionStrategy::Summarize => "summarize",
        CompactionStrategy::Elide => "elide",
    };
    info!(
        before,
        after,
        removed_messages,
        strategy = strategy_name,
        "compacted the conversation"
    );
    deps.events.emit(EventKind::Compacted {
        strategy: strategy_name.into(),
        removed_messages,
        estimated_tokens_before: before,
        estimated_tokens_after: after,
    });
    true
}

/// Index of the first kept message: the newest messages worth at most
/// `keep_tokens`, moved forward to a user or assistant message so no tool
/// result loses its call. `None` when nothing before it can be removed.
fn cut_index(messages: &[Message], keep_tokens: usize) -> Option<usize> {
    let mut kept = 0usize;
    let mut cut = messages.len();
    while cut > 1 {
        let size = messages[cut - 1].estimated_tokens();
        if kept + size > keep_tokens {
            break;
        }
        kept += size;
        cut -= 1;
    }
    // Always keep at least the newest message.
    cut = cut.min(messages.len().saturating_sub(1)).max(1);
    while cut < messages.len() && matches!(messages[cut], Message::Tool { .. }) {
        cut += 1;
    }
    if cut == messages.len() {
        // The newest messages are one assistant message and its results:
        // keep that whole group by moving back to its assistant message.
        cut = messages[..cut]
            .iter()
            .rposition(|m| !matches!(m, Message::Tool { .. }))
            .unwrap_or(1);
    }
    (cut > 1).then_some(cut)
}

/// For the `todo` flavour, whose results are often one line (`Updated #3`):
/// when todo messages are compacted away, the complete current list comes
/// back as the newest tool result, the same pair a restart restores.
fn todo_state(removed: &[Message], deps: &AgentDeps) -> Vec<Message> {
    let touched = removed
        .iter()
        .any(|m| matches!(m, Message::Tool { name, .. } if name == todo::TOOL_NAME));
    if !touched {
        return Vec::new();
    }
    match todo::TodoStore::in_workspace(&deps.tool_env.workspace.root).load() {
        Ok(loaded) => todo::reminder::restore(&loaded).messages,
        Err(err) => {
            warn!(error = %err, "cannot read the todo list to carry it through compaction");
            Vec::new()
        }
    }
}

/// The latest state-tool result in `removed`, with its call, unless `kept`
/// holds a newer result of the same tool.
fn carried_state(removed: &[Message], kept: &[Message]) -> Vec<Message> {
    let mut carried = Vec::new();
    for tool in STATE_TOOLS {
        let newer_in_kept = kept
            .iter()
            .any(|m| matches!(m, Message::Tool { name, .. } if name == tool));
        if newer_in_kept {
            continue;
        }
        let Some(result) = removed
            .iter()
            .rev()
            .find(|m| matches!(m, Message::Tool { name, is_error: false, .. } if name == tool))
        else {
            continue;
        };
        let Message::Tool { tool_call_id, .. } = result else {
            continue;
        };
        let call = removed.iter().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => {
                tool_calls.iter().find(|c| c.id == *tool_call_id).cloned()
            }
            _ => None,
        });
        if let Some(call) = call {
            carried.push(Message::Assistant {
                content: None,
                tool_calls: vec![call],
            });
            carried.push(result.clone());
        }
    }
    carried
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
    request.push(Message::user(SUMMARY_REQUEST));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolCall;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn result(id: &str, name: &str, content: &str) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            name: name.into(),
            content: content.into(),
            is_error: false,
        }
    }

    fn big(text: &str) -> String {
        text.repeat(400)
    }

    #[test]
    fn cut_never_separates_results_from_their_call() {
        let messages = vec![
            Message::System {
                content: "s".into(),
            },
            Message::user(big("a")),
            Message::Assistant {
                content: None,
                tool_calls: vec![call("1", "read_file")],
            },
            result("1", "read_file", &big("b")),
            Message::Assistant {
                content: Some(big("c")),
                tool_calls: vec![],
            },
            Message::user("short"),
        ];
        for keep in [1, 50, 150, 250, 400, 10_000] {
            if let Some(cut) = cut_index(&messages, keep) {
                assert!(cut > 1 && cut < messages.len(), "keep {keep}: cut {cut}");
                assert!(
                    !matches!(messages[cut], Message::Tool { .. }),
                    "keep {keep}"
                );
            }
        }
        assert_eq!(cut_index(&messages, 1), Some(5));
        assert_eq!(cut_index(&messages, 10_000), None);
    }

    #[test]
    fn latest_plan_result_is_carried_unless_a_newer_one_is_kept() {
        let removed = vec![
            Message::Assistant {
                content: None,
                tool_calls: vec![call("p1", "update_plan")],
            },
            result("p1", "update_plan", "{\"version\":1}"),
            Message::Assistant {
                content: None,
                tool_calls: vec![call("p2", "update_plan"), call("r", "read_file")],
            },
            result("p2", "update_plan", "{\"version\":2}"),
            result("r", "read_file", "x"),
        ];
        let carried = carried_state(&removed, &[]);
        assert_eq!(
            carried,
            vec![
                Message::Assistant {
                    content: None,
                    tool_calls: vec![call("p2", "update_plan")]
                },
                result("p2", "update_plan", "{\"version\":2}"),
            ]
        );
        let kept = vec![result("p3", "update_plan", "{\"version\":3}")];
        assert!(carried_state(&removed, &kept).is_empty());
    }
}
