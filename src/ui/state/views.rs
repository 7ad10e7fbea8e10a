//! What the store holds, by concept: the session, the turn and what it is
//! doing, transcript entries, the subagent bar's view, notices. Plain data
//! with the small rules that belong to each (a phase's label, whether a
//! subagent's clock still runs).

use std::time::Instant;

use super::super::diff::DiffLine;
use crate::protocol::ToolFacts;
use crate::protocol::tool_facts::CommandExit;

/// Longest subagent detail kept (the bar cuts it further to fit).
pub(super) const SUBAGENT_DETAIL_CHARS: usize = 200;

/// What the header shows of the session (the journal's own record of it
/// is `store::journal::SessionInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionHeader {
    pub workspace: String,
    pub provider: String,
    pub model: String,
    /// The journaled session's id (`fido resume ID`).
    pub id: Option<String>,
}

/// Where the parent turn is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnState {
    /// Waiting for a prompt.
    Idle,
    /// A prompt was sent; the agent has not said `turn_started` yet.
    Submitted,
    Running {
        turn: u32,
    },
    /// Ctrl+C was pressed; the turn is winding down.
    Interrupting,
}

impl TurnState {
    pub fn is_busy(self) -> bool {
        match self {
            TurnState::Idle => false,
            TurnState::Submitted | TurnState::Running { .. } | TurnState::Interrupting => true,
        }
    }
}

/// The result of a tool call, once it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultView {
    pub ok: bool,
    pub summary: String,
    /// What the call did, as the tool reported it (`None` for a result
    /// restored from the journal, or a tool that says nothing more).
    pub facts: Option<Box<ToolFacts>>,
}

/// More than one line of a tool call, shown under its line (folded past a
/// few lines; Ctrl+O expands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDetail {
    /// A `patch` call's change.
    Diff(Vec<DiffLine>),
    /// The tail of a `bash_exec` call's output, and how the command
    /// ended (`None` when the tool did not say: it never ran).
    Output {
        exit: Option<CommandExit>,
        text: String,
    },
}

/// One entry of the transcript. Subagent activity never appears here (it
/// has its own bar), and a plan update is one line, never the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    User(String),
    /// A whole assistant message, rendered as Markdown.
    Assistant(String),
    Tool {
        id: String,
        name: String,
        summary: String,
        result: Option<ToolResultView>,
        detail: Option<ToolDetail>,
    },
    /// `/diff`: the workspace's `git diff`, coloured.
    Diff(Vec<DiffLine>),
    /// `plan updated: v2 · 3 items, …`
    Plan(String),
    /// Dim information: retries, compaction, an interrupted turn.
    Info(String),
    Error(String),
    /// Output of a local command (`/plan`), kept verbatim.
    Local(String),
}

pub use crate::protocol::SubagentPhase as Phase;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentView {
    pub agent_id: String,
    pub pid: Option<u32>,
    pub phase: Phase,
    /// Elapsed time the last event reported.
    pub elapsed_ms: u64,
    /// Time since that event, added by ticks while the subagent runs.
    pub since_event_ms: u64,
    pub detail: String,
    /// Tokens (prompt + completion) the subagent used so far.
    pub tokens: u64,
    /// The plan item the parent named in the call, sanitised.
    pub plan_item: Option<String>,
    /// Steps done and steps in all of the subagent's own plan, once it
    /// keeps one.
    pub own_plan: Option<(usize, usize)>,
    /// Set when the parent turn ended without a final subagent event: the
    /// clock stops.
    pub frozen: bool,
    pub(super) received_at: Instant,
}

impl SubagentView {
    pub fn shown_elapsed_ms(&self) -> u64 {
        self.elapsed_ms.saturating_add(self.since_event_ms)
    }

    pub(super) fn is_ticking(&self) -> bool {
        !self.phase.is_final() && !self.frozen
    }

    /// Still working: its row can take the focus and Esc can cancel it.
    pub fn is_live(&self) -> bool {
        self.is_ticking()
    }
}

/// What the running turn is doing (the status line says it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Activity {
    Idle,
    /// Waiting for the model's first words.
    Thinking,
    Streaming,
    /// Running this tool.
    Tool(String),
    /// Waiting for this many subagents.
    Subagents(usize),
    /// The approval prompt is on screen.
    WaitingForApproval,
    Interrupting,
}

pub use crate::text::tokens;

/// A transient message on the status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub text: String,
    pub warning: bool,
}

/// A finished message that was the streamed text: entry number `entry`
/// (counted from the session's first) at `revision` is the text `live`
/// was at `live_revision`, so the lines rendered for that text are its
/// lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveAdoption {
    pub entry: usize,
    pub revision: u64,
    pub live_revision: u64,
}

/// How far one view may scroll, and by how much a page moves it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrollLimit {
    pub page: usize,
    pub max: usize,
}

/// The scroll limits the last frame measured; keys read them and never lay
/// out the screen themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScrollLimits {
    /// The transcript's, counted up from the bottom.
    pub transcript: ScrollLimit,
    /// The plan's, while it is shown over the body.
    pub plan_overlay: Option<ScrollLimit>,
}
