//! What a turn and a subagent report of themselves: how a turn ended, what
//! a subagent is doing, the usage summed over their requests. Events,
//! operations, outcomes and the subagent frames all carry them, so they
//! live apart from each (`event` imports them; they import none).

use serde::{Deserialize, Serialize};

use super::Usage;

/// What a subagent is doing (the `phase` of `subagent` events): on the
/// wire the strings `starting`, `reasoning`, a tool name,
/// `nested_delegation_rejected`, `completed`, `partial`, `failed` or
/// `cancelled`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentPhase {
    Starting,
    Reasoning,
    /// Running this tool.
    Tool(String),
    NestedDelegationRejected,
    Completed,
    Partial,
    Failed,
    Cancelled,
}

impl SubagentPhase {
    /// A phase to show: a tool name is sanitised and cut short.
    pub fn parse(text: &str) -> SubagentPhase {
        SubagentPhase::named(text)
            .unwrap_or_else(|| SubagentPhase::Tool(crate::text::summary(text, 40)))
    }

    /// A phase read from the wire, kept as sent: a tool name from a child
    /// or another process is untrusted text, which its reader sanitises
    /// (as the supervisor does with a lifecycle frame, or [`parse`]).
    ///
    /// [`parse`]: SubagentPhase::parse
    fn from_wire(text: String) -> SubagentPhase {
        SubagentPhase::named(&text).unwrap_or(SubagentPhase::Tool(text))
    }

    /// Every phase but a tool's, by its wire name.
    fn named(text: &str) -> Option<SubagentPhase> {
        Some(match text {
            "starting" => SubagentPhase::Starting,
            "reasoning" => SubagentPhase::Reasoning,
            "nested_delegation_rejected" => SubagentPhase::NestedDelegationRejected,
            "completed" => SubagentPhase::Completed,
            "partial" => SubagentPhase::Partial,
            "failed" => SubagentPhase::Failed,
            "cancelled" => SubagentPhase::Cancelled,
            _ => return None,
        })
    }

    /// The subagent has ended; its bar shows the outcome until the next prompt.
    pub fn is_final(&self) -> bool {
        match self {
            SubagentPhase::Completed
            | SubagentPhase::Partial
            | SubagentPhase::Failed
            | SubagentPhase::Cancelled => true,
            SubagentPhase::Starting
            | SubagentPhase::Reasoning
            | SubagentPhase::Tool(_)
            | SubagentPhase::NestedDelegationRejected => false,
        }
    }

    /// How the bar names the phase.
    pub fn label(&self) -> String {
        match self {
            SubagentPhase::Starting => "starting".into(),
            SubagentPhase::Reasoning => "reasoning".into(),
            SubagentPhase::Tool(name) => name.clone(),
            SubagentPhase::NestedDelegationRejected => "nested delegation rejected".into(),
            SubagentPhase::Completed => "completed".into(),
            SubagentPhase::Partial => "partial".into(),
            SubagentPhase::Failed => "failed".into(),
            SubagentPhase::Cancelled => "cancelled".into(),
        }
    }
}

impl SubagentPhase {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            SubagentPhase::Starting => "starting",
            SubagentPhase::Reasoning => "reasoning",
            SubagentPhase::Tool(name) => name,
            SubagentPhase::NestedDelegationRejected => "nested_delegation_rejected",
            SubagentPhase::Completed => "completed",
            SubagentPhase::Partial => "partial",
            SubagentPhase::Failed => "failed",
            SubagentPhase::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for SubagentPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for SubagentPhase {
    fn from(text: &str) -> Self {
        SubagentPhase::parse(text)
    }
}

impl Serialize for SubagentPhase {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SubagentPhase {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(SubagentPhase::from_wire)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The model gave a final answer.
    Completed,
    /// The user interrupted the turn (Ctrl+C, SIGINT, SIGTERM).
    Interrupted,
    /// The max-steps guard ended a runaway loop.
    MaxSteps,
    /// The provider failed for good.
    Failed,
}

/// Usage summed over several requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub requests: u32,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
}

impl UsageTotals {
    /// Counts come from servers and journal files: sums saturate instead
    /// of overflowing (a panic in debug builds, nonsense in release ones).
    pub fn record(&mut self, usage: Usage) {
        self.requests = self.requests.saturating_add(1);
        self.prompt_tokens = self.prompt_tokens.saturating_add(usage.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(usage.cached_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(usage.completion_tokens);
    }

    /// What was added since `earlier` (a snapshot of the same counters).
    pub fn since(&self, earlier: UsageTotals) -> UsageTotals {
        UsageTotals {
            requests: self.requests.saturating_sub(earlier.requests),
            prompt_tokens: self.prompt_tokens.saturating_sub(earlier.prompt_tokens),
            cached_tokens: self.cached_tokens.saturating_sub(earlier.cached_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(earlier.completion_tokens),
        }
    }

    /// Saturating, as [`UsageTotals::record`].
    pub fn merge(&mut self, other: UsageTotals) {
        self.requests = self.requests.saturating_add(other.requests);
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }
}
