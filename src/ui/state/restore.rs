//! The transcript of a resumed session, rebuilt from its messages: what the
//! person saw (prompts, answers, tool calls and their results), without
//! Fido's own notes and plan restores.

use super::{Entry, ToolResultView};
use crate::protocol::Message;
use crate::text::{sanitize, summary};

/// The entries `messages` would have shown when they happened.
pub fn entries(messages: &[Message]) -> Vec<Entry> {
    let mut entries = Vec::new();
    for message in messages.iter().filter(|m| !m.is_plan_restore()) {
        match message {
            Message::System { .. } => {}
            Message::User { .. } => {
                if let Some(prompt) = message.person_prompt() {
                    entries.push(Entry::User(sanitize(prompt, false)));
                }
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(text) = content.as_deref().filter(|t| !t.trim().is_empty()) {
                    entries.push(Entry::Assistant(sanitize(text, false).trim_end().into()));
                }
                entries.extend(tool_calls.iter().map(|call| Entry::Tool {
                    id: call.id.clone(),
                    name: sanitize(&call.name, true),
                    summary: call.summary(),
                    result: None,
                    detail: None,
                }));
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let entry = entries.iter_mut().rev().find(
                    |e| matches!(e, Entry::Tool { id, result: None, .. } if id == tool_call_id),
                );
                if let Some(Entry::Tool { result, .. }) = entry {
                    *result = Some(ToolResultView {
                        ok: !is_error,
                        summary: summary(content, 120),
                        facts: None,
                    });
                }
            }
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolCall;

    #[test]
    fn prompts_answers_and_calls_come_back_without_fidos_notes() {
        let messages = vec![
            Message::System {
                content: "system".into(),
            },
            Message::user("what does frob return?"),
            Message::Assistant {
                content: Some("Let me look.".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/lib.rs"}"#.into(),
                }],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                name: "read_file".into(),
                content: "Error: no such file\u{1b}[31m".into(),
                is_error: true,
            },
            Message::user("[Fido: your last answer was cut off]"),
            Message::Assistant {
                content: Some("It returns 42.".into()),
                tool_calls: vec![],
            },
        ];
        let entries = entries(&messages);
        assert_eq!(entries.len(), 4, "{entries:?}");
        assert_eq!(entries[0], Entry::User("what does frob return?".into()));
        assert_eq!(entries[1], Entry::Assistant("Let me look.".into()));
        let Entry::Tool {
            summary, result, ..
        } = &entries[2]
        else {
            panic!("{:?}", entries[2]);
        };
        assert_eq!(summary, "src/lib.rs");
        let result = result.as_ref().unwrap();
        assert!(!result.ok);
        assert!(!result.summary.contains('\u{1b}'), "sanitised");
        assert_eq!(entries[3], Entry::Assistant("It returns 42.".into()));
    }
}
