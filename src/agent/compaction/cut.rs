//! Compaction: keeps the conversation inside the context budget.
//!
//! When the estimated size passes `threshold_tokens`, the older part of the
//! history is replaced: `Summarize` asks the model for a summary (one request
//! that shares the cached prefix: the whole conversation plus one question,
//! with the same tools), `Elide` drops it with a note. The system message and
//! the newest `keep_recent_tokens` of history stay as they are; the cut never
//! separates a tool result from its call.
//!
//! This module plans (pure, tested without a model): [`plan`] decides the
//! cut, [`compacted_history`] builds what replaces the removed part. The
//! compaction step (the parent module) asks the model for the summary and
//! applies it.
//!
//! State results survive: the latest result of a state tool (the plan) that
//! falls in the removed part is carried forward as the newest tool result,
//! with its matching call, so the model always sees the complete current
//! state (see [`STATE_TOOLS`]).

use crate::hooks::CompactTrigger;
use crate::protocol::Message;

/// Tools whose latest result is the model-visible source of truth for some
/// state and must never be compacted away.
pub const STATE_TOOLS: &[&str] = &["update_plan", "todo"];

pub use crate::protocol::CompactionStrategy;

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

pub(super) const SUMMARY_REQUEST: &str = "\
[Fido: context compaction] The conversation is about to be shortened. Write a concise summary of everything above that is needed to continue the work: the user's goals and constraints, decisions made, files inspected or changed (with paths), commands run and their results, and what remains to be done. Answer with the summary text only; do not call tools.";

/// Why compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::agent) enum Trigger {
    /// Before a request, when the estimate passes the threshold.
    Threshold,
    /// `/compact`: as [`Trigger::Threshold`] (the caller sets the threshold
    /// to 0); PreCompact hooks are told it was asked for.
    Manual,
    /// The server refused the request for its size: compact whatever can be
    /// removed, without a summary request (it would be refused too).
    Overflow,
}

impl Trigger {
    /// What a PreCompact hook is told: `manual` only for `/compact`.
    pub(in crate::agent) fn for_hooks(self) -> CompactTrigger {
        match self {
            Trigger::Manual => CompactTrigger::Manual,
            Trigger::Threshold | Trigger::Overflow => CompactTrigger::Auto,
        }
    }
}

/// Where to cut and how, decided from the messages alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    /// The first kept message; `messages[1..index]` go.
    pub index: usize,
    pub strategy: CompactionStrategy,
}

/// Why nothing is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Skip {
    /// Under the threshold.
    NotNeeded,
    /// Over it, but every message is part of the newest kept group.
    NothingToRemove,
    /// The newest turn alone is most of the context: removing the little
    /// before it would cost a summary request on every step and gain
    /// nothing.
    MostlyNewestTurn { removed_tokens: usize },
}

/// Plans the compaction of `messages` (the whole conversation, system
/// prompt first). Pure: no model, no I/O.
pub(super) fn plan(
    messages: &[Message],
    settings: CompactionSettings,
    trigger: Trigger,
) -> Result<Cut, Skip> {
    let before: usize = messages.iter().map(Message::estimated_tokens).sum();
    let weighed = match trigger {
        Trigger::Threshold | Trigger::Manual => true,
        Trigger::Overflow => false,
    };
    if weighed && before <= settings.threshold_tokens {
        return Err(Skip::NotNeeded);
    }
    let index = cut_index(messages, settings.keep_recent_tokens).ok_or(Skip::NothingToRemove)?;
    let removed_tokens: usize = messages[1..index]
        .iter()
        .map(Message::estimated_tokens)
        .sum();
    if weighed && removed_tokens * 10 < before {
        return Err(Skip::MostlyNewestTurn { removed_tokens });
    }
    let strategy = match trigger {
        Trigger::Threshold | Trigger::Manual => settings.strategy,
        // The summary request would be refused for its size too.
        Trigger::Overflow => CompactionStrategy::Elide,
    };
    Ok(Cut { index, strategy })
}

/// The history after the cut (everything but the system prompt): a note
/// with the summary (or that messages were removed) and the user's latest
/// request if it was cut, the kept messages, then `carried` state results.
pub(super) fn compacted_history(
    messages: &[Message],
    cut: usize,
    summary: Option<&str>,
    carried: Vec<Message>,
) -> Vec<Message> {
    let (removed, kept) = (&messages[1..cut], &messages[cut..]);
    let note = match summary {
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
    let note = match latest_request(removed, kept) {
        Some(request) => format!("{note}\n[Fido: the user's latest request, verbatim]\n{request}"),
        None => note,
    };
    let mut history = Vec::with_capacity(kept.len() + 3);
    history.push(Message::user(note));
    // A fresh restore pair replaces an older one still in the kept part:
    // call ids stay unique in the conversation.
    let restores = carried.iter().any(Message::is_plan_restore);
    history.extend(
        kept.iter()
            .filter(|m| !(restores && m.is_plan_restore()))
            .cloned(),
    );
    history.extend(carried);
    history
}

/// The person's latest prompt in `removed`, unless `kept` holds one.
fn latest_request<'a>(removed: &'a [Message], kept: &[Message]) -> Option<&'a str> {
    if kept.iter().any(|m| m.person_prompt().is_some()) {
        return None;
    }
    removed.iter().rev().find_map(Message::person_prompt)
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

/// The latest state-tool result in `removed`, with its call, unless `kept`
/// holds a newer result of the same tool.
pub(super) fn carried_state(removed: &[Message], kept: &[Message]) -> Vec<Message> {
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

    fn settings(threshold: usize, keep: usize) -> CompactionSettings {
        CompactionSettings {
            threshold_tokens: threshold,
            keep_recent_tokens: keep,
            strategy: CompactionStrategy::Summarize,
        }
    }

    fn long_conversation() -> Vec<Message> {
        vec![
            Message::System {
                content: "s".into(),
            },
            Message::user("fix the parser"),
            Message::Assistant {
                content: None,
                tool_calls: vec![call("1", "read_file")],
            },
            result("1", "read_file", &big("old file ")),
            Message::Assistant {
                content: Some(big("analysis ")),
                tool_calls: vec![],
            },
            Message::user("[Fido: a note]"),
            Message::Assistant {
                content: Some("short".into()),
                tool_calls: vec![],
            },
        ]
    }

    #[test]
    fn the_plan_is_decided_from_the_messages_alone() {
        let messages = long_conversation();
        let size: usize = messages.iter().map(Message::estimated_tokens).sum();
        assert_eq!(
            plan(&messages, settings(size, 10), Trigger::Threshold),
            Err(Skip::NotNeeded)
        );
        let cut = plan(&messages, settings(size / 2, 10), Trigger::Threshold).unwrap();
        assert_eq!(cut.strategy, CompactionStrategy::Summarize);
        assert!(cut.index > 1 && !matches!(messages[cut.index], Message::Tool { .. }));
        // A refusal for size never asks for a summary (it would be refused too).
        let overflow = plan(&messages, settings(usize::MAX, 10), Trigger::Overflow).unwrap();
        assert_eq!(overflow.strategy, CompactionStrategy::Elide);
        // The newest turn alone is the context: nothing worth cutting.
        let mut newest_heavy = messages.clone();
        newest_heavy.push(Message::user(big("huge paste ").repeat(20)));
        let keep = newest_heavy.last().unwrap().estimated_tokens();
        assert!(matches!(
            plan(&newest_heavy, settings(1, keep), Trigger::Threshold),
            Err(Skip::MostlyNewestTurn { .. })
        ));
    }

    #[test]
    fn the_compacted_history_keeps_the_request_and_carries_the_state() {
        let messages = long_conversation();
        let cut = 5;
        let carried = vec![
            Message::Assistant {
                content: None,
                tool_calls: vec![call("p", "update_plan")],
            },
            result("p", "update_plan", "{\"version\":2}"),
        ];
        let history =
            compacted_history(&messages, cut, Some("we read the parser"), carried.clone());
        let Message::User { content } = &history[0] else {
            panic!("{history:?}");
        };
        assert!(
            content.contains("4 earlier messages were compacted"),
            "{content}"
        );
        assert!(content.contains("we read the parser"), "{content}");
        assert!(
            content.ends_with("[Fido: the user's latest request, verbatim]\nfix the parser"),
            "the cut prompt survives word for word: {content}"
        );
        assert_eq!(&history[1..3], &messages[cut..]);
        assert_eq!(&history[3..], &carried[..]);
        let elided = compacted_history(&messages, cut, None, Vec::new());
        let Message::User { content } = &elided[0] else {
            panic!("{elided:?}");
        };
        assert!(content.contains("were removed to fit the context window"));
    }

    /// Only `/compact` is `manual` to a PreCompact hook; a threshold and a
    /// refused request are both the context's own doing.
    #[test]
    fn only_the_persons_compact_is_manual_to_hooks() {
        assert_eq!(Trigger::Manual.for_hooks(), CompactTrigger::Manual);
        assert_eq!(Trigger::Threshold.for_hooks(), CompactTrigger::Auto);
        assert_eq!(Trigger::Overflow.for_hooks(), CompactTrigger::Auto);
    }
}
