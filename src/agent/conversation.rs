//! The conversation one agent owns: the system prompt at index 0, then
//! user, assistant and tool messages in order.

use crate::protocol::{Message, ToolCall};

#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    messages: Vec<Message>,
    /// The context window the conversation must fit, once learned.
    context_window: Option<u32>,
    /// Whether the server was asked for the window already.
    window_probed: bool,
    /// Bumped whenever history is replaced rather than appended to, so the
    /// session journal knows to write it whole.
    generation: u64,
}

impl Conversation {
    /// A new conversation with the session's system prompt.
    pub fn new(system_prompt: String) -> Self {
        Conversation {
            messages: vec![Message::System {
                content: system_prompt,
            }],
            context_window: None,
            window_probed: false,
            generation: 0,
        }
    }

    /// Rebuilds a conversation from saved messages; `messages[0]` must be
    /// the system prompt.
    pub fn from_messages(messages: Vec<Message>) -> Option<Self> {
        match messages.first() {
            Some(Message::System { .. }) => Some(Conversation {
                messages,
                context_window: None,
                window_probed: false,
                generation: 0,
            }),
            _ => None,
        }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Replaces everything after the system prompt (compaction only).
    pub(crate) fn replace_history(&mut self, history: Vec<Message>) {
        self.messages.truncate(1);
        self.messages.extend(history);
        self.generation += 1;
    }

    /// How many times the history was replaced (see the journal).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The context window this conversation must fit, when known.
    pub fn context_window(&self) -> Option<u32> {
        self.context_window
    }

    /// Whether the window was already asked for (once per conversation).
    pub(crate) fn window_probed(&self) -> bool {
        self.window_probed
    }

    /// Records the window learned from the server or the configuration.
    pub(crate) fn set_context_window(&mut self, window: Option<u32>) {
        self.window_probed = true;
        self.context_window = window;
    }

    /// A refusal named a window: never trust a larger one again.
    pub(crate) fn shrink_context_window(&mut self, n_ctx: u32) {
        self.window_probed = true;
        self.context_window = Some(self.context_window.map_or(n_ctx, |w| w.min(n_ctx)));
    }

    pub fn estimated_tokens(&self) -> usize {
        self.messages.iter().map(Message::estimated_tokens).sum()
    }

    /// Gives every call of the last assistant message that has no result
    /// the error result `why` (a crash or a suspend left it unanswered).
    pub fn answer_unanswered(&mut self, why: &str) {
        for call in self.unanswered_tool_calls() {
            self.messages.push(Message::Tool {
                tool_call_id: call.id,
                name: call.name,
                content: format!("Error: not run: {why}"),
                is_error: true,
            });
        }
    }

    /// Tool calls of the last assistant message that have no result yet.
    pub fn unanswered_tool_calls(&self) -> Vec<ToolCall> {
        let Some(last_assistant) = self
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }))
        else {
            return Vec::new();
        };
        let Message::Assistant { tool_calls, .. } = &self.messages[last_assistant] else {
            return Vec::new();
        };
        tool_calls
            .iter()
            .filter(|call| {
                !self.messages[last_assistant + 1..].iter().any(
                    |m| matches!(m, Message::Tool { tool_call_id, .. } if *tool_call_id == call.id),
                )
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_unanswered_calls_of_the_last_assistant_message() {
        let mut conv = Conversation::new("sys".into());
        conv.push(Message::user("hi"));
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        };
        conv.push(Message::Assistant {
            content: None,
            tool_calls: vec![call("a"), call("b")],
        });
        conv.push(Message::Tool {
            tool_call_id: "a".into(),
            name: "read_file".into(),
            content: "x".into(),
            is_error: false,
        });
        assert_eq!(conv.unanswered_tool_calls(), vec![call("b")]);
        assert!(Conversation::from_messages(vec![Message::user("x")]).is_none());
    }
}
