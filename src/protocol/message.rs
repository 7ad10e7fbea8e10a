//! The conversation: messages, tool calls and the tool specifications the
//! model is offered.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of the conversation, in the order the model sees them.
///
/// Invariant kept by the agent loop: every `Assistant` tool call is answered
/// by exactly one `Tool` message with the same `tool_call_id`, placed after
/// the assistant message and before the next non-tool message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// The stable system prompt; always `messages[0]`, never rewritten.
    System { content: String },
    /// What the user (or Fido on the user's behalf, e.g. a reminder) said.
    User { content: String },
    /// The model's answer: text, tool calls, or both.
    Assistant {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        tool_call_id: String,
        /// Name of the tool that produced the result; kept so compaction can
        /// recognise state results (the plan) without parsing the call.
        name: String,
        content: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

/// Id of the internal call that answers a restored plan. Not made by the
/// model; it exists because every provider needs a call for each result.
pub const RESTORE_CALL_ID: &str = "fido_plan_restore";

impl Message {
    /// Whether this is half of a plan restore pair (the internal call or
    /// its result): a newer restore replaces it, and the transcript hides it.
    pub fn is_plan_restore(&self) -> bool {
        match self {
            Message::Tool { tool_call_id, .. } => tool_call_id == RESTORE_CALL_ID,
            Message::Assistant { tool_calls, .. } => {
                !tool_calls.is_empty() && tool_calls.iter().all(|c| c.id == RESTORE_CALL_ID)
            }
            Message::System { .. } | Message::User { .. } => false,
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }

    /// The text of a prompt the person typed: a user message that is not
    /// one of Fido's own notes (those start with `[Fido:`).
    pub fn person_prompt(&self) -> Option<&str> {
        match self {
            Message::User { content } if !content.starts_with("[Fido:") => Some(content),
            _ => None,
        }
    }

    /// Rough size of the message in tokens (4 bytes a token), used to decide
    /// when to compact. Deliberately cheap: it runs before every request.
    pub fn estimated_tokens(&self) -> usize {
        let bytes = match self {
            Message::System { content } | Message::User { content } => content.len(),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.as_ref().map_or(0, String::len)
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len() + c.id.len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        };
        bytes / 4 + 4
    }
}

/// A tool call as the model wrote it. `arguments` is the raw JSON text the
/// model produced; it is parsed (and may fail to parse) only when the call
/// is invoked, so a malformed call still gets a proper tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// A short, sanitised description for events and the transcript: the
    /// path, pattern or command the call names, never whole file contents.
    pub fn summary(&self) -> String {
        let args: Value = serde_json::from_str(&self.arguments).unwrap_or_default();
        let detail = ["path", "pattern", "command", "question", "task", "subject"]
            .iter()
            .find_map(|key| args.get(*key).and_then(|v| v.as_str()))
            .unwrap_or("");
        crate::text::summary(detail, 80)
    }
}

/// One advertised tool: what the provider receives in `tools`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// Token usage of one provider request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    /// Part of `prompt_tokens` served from the provider's prompt cache.
    pub cached_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    /// Counts come from servers: the sum saturates instead of overflowing.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }
}
