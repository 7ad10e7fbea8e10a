//! Types that cross a boundary: conversation messages, tool specifications
//! and results, and the event stream that `fido exec --json` prints.
//!
//! Plain serde, no runtime: everything here can be serialised, compared and
//! snapshotted. The conversation is kept in a provider-neutral shape close to
//! OpenAI's Chat Completions; each provider maps it to its own wire format.

pub mod control;
pub mod delegate;
mod event;
pub mod ipc;
pub mod journal;
pub mod mcp;
mod message;
pub mod plan;
pub mod safety;

pub use event::{Event, EventKind, SubagentPhase, TurnStatus, UsageTotals};
pub use message::{Message, ToolCall, ToolSpec, Usage};
pub use safety::{ApprovalDecision, ApprovalPolicy, ApprovalRequest, SafetySettings, SandboxMode};
