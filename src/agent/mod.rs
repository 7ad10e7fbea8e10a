//! The agent: one turn loop shared by the main agent and (later) subagents,
//! the conversation it owns, the stable system prompt, and compaction.
//!
//! Invariants (the prompt-cache contract, checked on every recorded request
//! by the integration tests):
//! - `messages[0]` is the system prompt, built once per session and never
//!   rewritten; it holds no timestamps and no state.
//! - The tool catalog is the same object for the whole session.
//! - Requests only append to the conversation, except when compaction runs.
//! - Every tool call is answered by exactly one tool result, also on error or
//!   cancellation.

mod actor;
mod compaction;
mod conversation;
mod events;
mod prompt;
mod turn;

pub use actor::{AgentActor, AgentArguments, AgentMessage};
pub use compaction::{CompactionSettings, CompactionStrategy};
pub use conversation::Conversation;
pub use events::EventSink;
pub use prompt::system_prompt;
pub use turn::{AgentDeps, TurnOutcome, run_turn};

/// Limits of the turn loop, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSettings {
    /// Model requests allowed in one turn before the loop is stopped.
    pub max_steps: u32,
    pub compaction: CompactionSettings,
}
