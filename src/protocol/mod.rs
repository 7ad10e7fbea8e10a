//! Types that cross a boundary: conversation messages, tool specifications
//! and results (with their typed facts, `tool_facts`), and the event stream that `fido exec --json` prints.
//!
//! The wire types are plain serde: they can be serialised, compared and
//! snapshotted. Two modules are the in-process boundary between the engine
//! and a front end, carrying only these types: `op` (commands in) and
//! `event_queue` (events out). The conversation is kept in a provider-neutral shape close to
//! OpenAI's Chat Completions; each provider maps it to its own wire format.

pub mod changes;
pub mod control;
pub mod delegate;
mod event;
pub mod event_queue;
pub mod hook;
mod identity;
pub mod ipc;
pub mod journal_record;
pub mod mcp;
mod message;
pub mod op;
pub mod outcome;
pub mod plan;
pub mod safety;
pub mod schema;
mod status;
pub mod tool_facts;

pub use event::{CompactionStrategy, Event, EventKind};
pub use identity::Identity;
pub use message::{Message, RESTORE_CALL_ID, ToolCall, ToolSpec, Usage};
pub use safety::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, NetworkAccess, SafetySettings, SandboxMode,
};
pub use status::{SubagentPhase, TurnStatus, UsageTotals};
pub use tool_facts::ToolFacts;
