//! The UI's state: everything the screen shows, apart from drawing.
//!
//! Only the UI actor owns it. Agent events arrive through [`Store::apply`];
//! key presses change it through [`crate::ui::keys`]; widgets read it by
//! shared reference. Time enters only as an argument (`now`), so a store fed
//! the same events draws the same frame.
//!
//! The store knows nothing about rendering. It marks what changed (each
//! transcript entry's revision, the streaming text's revision) so that the
//! frame's line cache, which the UI actor owns, renders only that; and it
//! keeps the scroll limits the last frame measured, so keys never lay out
//! the screen.

use std::time::Instant;

mod approval;
mod changes;
mod hook;
mod queue;
mod restore;
mod subagents;
mod transcript;
mod views;

pub use approval::{PendingApproval, readiness};
pub use queue::TypeAhead;
pub use transcript::{DEFAULT_CAP_BYTES, Transcript};
pub use views::{
    Activity, Entry, LiveAdoption, Notice, Phase, ScrollLimit, ScrollLimits, SessionHeader,
    SubagentView, ToolDetail, ToolResultView, TurnState, tokens,
};

use super::diff;
use super::input::InputBuffer;
use super::plan_view::PlanView;
use crate::protocol::{EventKind, ToolFacts, TurnStatus, UsageTotals};
use crate::text::{sanitize, summary};

#[derive(Debug, Clone)]
pub struct Store {
    pub session: SessionHeader,
    pub turn: TurnState,
    /// Number of the latest turn the agent started (0 before the first).
    pub turn_number: u32,
    /// How the last turn ended, for the header.
    pub last_turn: Option<(u32, TurnStatus)>,
    pub usage: UsageTotals,
    /// Read it freely; change it only through the store's methods.
    pub transcript: Transcript,
    pub plan: Option<PlanView>,
    /// Write subagents' change sets by the plan item they serve.
    pub change_sets: changes::ChangeSets,
    /// This turn's subagents, in the order they first reported; kept with
    /// their outcome until the next prompt.
    pub subagents: Vec<SubagentView>,
    /// The agent id of the focused bar row (always a live subagent, or none).
    pub subagent_focus: Option<String>,
    pub input: InputBuffer,
    /// Lines entered while a turn runs, sent one per turn end.
    pub typeahead: TypeAhead,
    pub notice: Option<Notice>,
    /// Transcript lines scrolled up from the bottom (0: follow the tail).
    pub transcript_scroll: usize,
    /// Plan lines scrolled down from the top.
    pub plan_scroll: usize,
    /// The plan shown over the whole body (F2 / Ctrl+P).
    pub plan_overlay: bool,
    /// Terminal size (columns, rows), for paging.
    pub size: (u16, u16),
    /// When Ctrl+C was pressed while idle (a second press quits).
    pub quit_armed_at: Option<Instant>,
    /// The `ask_user` question waiting for the next line entered.
    pub question: Option<String>,
    /// The approval request on screen (keys answer it first).
    pub approval: Option<PendingApproval>,
    /// Lines entered this session, oldest first (Up/Down recall them).
    pub history: Vec<String>,
    /// The history entry shown in the input line, while browsing.
    pub history_pos: Option<usize>,
    /// Assistant text streaming in (sanitised), until its message is done.
    /// Read it freely; it changes through events (its revision with it).
    pub live: String,
    /// Bumped at each change of `live`.
    live_revision: u64,
    /// The latest message that was the streamed text, already rendered.
    adopted_live: Option<LiveAdoption>,
    /// Tool output and diffs shown whole instead of folded (Ctrl+O).
    pub expanded: bool,
    /// Output arrived below while the transcript was scrolled up.
    pub new_output: bool,
    /// When the running turn was submitted, for the elapsed time.
    pub turn_started_at: Option<Instant>,
    /// The latest time the store was told (events, keys, ticks).
    pub now: Instant,
    /// Usage per identity (`main`, each subagent), from `usage` events.
    pub usage_by_identity: Vec<(String, UsageTotals)>,
    /// Large pastes, shown folded in the editor as `[paste #N …]` and put
    /// back in place when the prompt is sent.
    pub pastes: Vec<String>,
    /// Colours off (`NO_COLOR`).
    pub no_color: bool,
    /// Transcript lines at the last frame, to keep a scrolled view still.
    pub seen_lines: usize,
    /// How far the keys may scroll, as the last frame measured it.
    pub scroll_limits: ScrollLimits,
    saw_turn_started: bool,
}

/// Which way a key moves through the transcript, the plan or the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

impl Store {
    pub fn new(size: (u16, u16)) -> Store {
        Store {
            session: SessionHeader::default(),
            turn: TurnState::Idle,
            turn_number: 0,
            last_turn: None,
            usage: UsageTotals::default(),
            transcript: Transcript::default(),
            plan: None,
            change_sets: Default::default(),
            subagents: Vec::new(),
            subagent_focus: None,
            input: InputBuffer::default(),
            typeahead: TypeAhead::default(),
            notice: None,
            transcript_scroll: 0,
            plan_scroll: 0,
            plan_overlay: false,
            size,
            quit_armed_at: None,
            question: None,
            approval: None,
            history: Vec::new(),
            history_pos: None,
            live: String::new(),
            live_revision: 0,
            adopted_live: None,
            expanded: false,
            new_output: false,
            turn_started_at: None,
            now: Instant::now(),
            usage_by_identity: Vec::new(),
            pastes: Vec::new(),
            no_color: false,
            seen_lines: 0,
            scroll_limits: ScrollLimits::default(),
            saw_turn_started: false,
        }
    }

    /// Applies one agent event; returns whether anything visible changed.
    pub fn apply(&mut self, event: &EventKind, now: Instant) -> bool {
        self.now = now;
        match event {
            EventKind::SessionStarted { .. } => self.session_started(event),
            EventKind::TurnStarted { turn } => self.turn_started(*turn),
            EventKind::AssistantText { text } => self.assistant_text(text),
            EventKind::AssistantDelta { text } => {
                self.live.push_str(&sanitize(text, false));
                self.live_changed();
            }
            // The actor answers the UI protocol's requests and replies; the
            // bar follows `subagent` events, the transcript the main agent.
            EventKind::ApprovalRequested { .. }
            | EventKind::QuestionAsked { .. }
            | EventKind::OpReplied { .. }
            | EventKind::SubagentCall { .. }
            | EventKind::SubagentTextDelta { .. }
            | EventKind::SubagentReasoningDelta { .. }
            | EventKind::ReasoningDelta { .. } => return false,
            EventKind::SubagentPlan { agent_id, plan } => {
                return self.subagent_plan(agent_id, plan);
            }
            EventKind::ChangeSet {
                id,
                plan_item,
                state,
            } => self.change_set(id, plan_item.as_deref(), *state),
            EventKind::ToolOutput {
                id,
                name,
                arguments,
                content,
            } => return self.set_tool_detail(id, name, arguments, content),
            EventKind::ToolCall { id, name, summary } => self.push(Entry::Tool {
                id: id.clone(),
                name: sanitize(name, true),
                summary: sanitize(summary, true),
                result: None,
                detail: None,
            }),
            EventKind::ToolResult {
                id,
                ok,
                summary,
                facts,
                ..
            } => self.tool_result(id, *ok, summary, facts.clone()),
            EventKind::PlanUpdated { plan } => self.set_plan(plan, "updated"),
            EventKind::Subagent { .. } => self.subagent(event, now),
            EventKind::Usage { .. } => return self.usage_event(event),
            EventKind::Compacted { .. } => self.compacted(event),
            EventKind::Retrying {
                attempt,
                delay_ms,
                reason,
            } => self.retrying(*attempt, *delay_ms, reason),
            EventKind::TurnCompleted {
                turn,
                status,
                usage,
            } => {
                self.usage.merge(*usage);
                self.finish_turn(*turn, *status);
            }
            EventKind::Error { message } => self.push(Entry::Error(sanitize(message, false))),
            EventKind::HookStarted { .. } | EventKind::HookFinished { .. } => {
                return self.hook(event);
            }
        }
        true
    }

    fn session_started(&mut self, event: &EventKind) {
        if let EventKind::SessionStarted {
            workspace,
            provider,
            model,
            tools: _,
            session_id,
        } = event
        {
            self.session = SessionHeader {
                workspace: summary(workspace, 400),
                provider: summary(provider, 40),
                model: summary(model, 80),
                id: session_id.as_deref().map(|id| summary(id, 40)),
            };
        }
    }

    fn turn_started(&mut self, turn: u32) {
        self.saw_turn_started = true;
        self.turn_number = turn;
        if self.turn != TurnState::Interrupting {
            self.turn = TurnState::Running { turn };
        }
    }

    fn assistant_text(&mut self, text: &str) {
        let text = sanitize(text, false).trim_end().to_string();
        // The streamed lines are already rendered: the entry keeps
        // them instead of rendering a long answer again.
        let streamed = self.live.trim_end() == text;
        let live_revision = self.live_revision;
        self.live.clear();
        self.live_changed();
        let revision = self.transcript.push(Entry::Assistant(text));
        self.adopted_live = streamed.then(|| LiveAdoption {
            entry: self.transcript.dropped() + self.transcript.len() - 1,
            revision,
            live_revision,
        });
    }

    fn tool_result(&mut self, id: &str, ok: bool, text: &str, facts: Option<Box<ToolFacts>>) {
        let view = ToolResultView {
            ok,
            summary: summary(text, 120),
            facts,
        };
        self.update_tool_entry(id, |entry| {
            if let Entry::Tool { result, .. } = entry {
                *result = Some(view);
            }
        });
    }

    /// Usage is counted, not shown until `/status`: nothing visible changes.
    fn usage_event(&mut self, event: &EventKind) -> bool {
        if let EventKind::Usage {
            identity,
            prompt_tokens,
            cached_tokens,
            completion_tokens,
        } = event
        {
            self.record_usage(
                identity.label(),
                crate::protocol::Usage {
                    prompt_tokens: *prompt_tokens,
                    cached_tokens: *cached_tokens,
                    completion_tokens: *completion_tokens,
                },
            );
        }
        false
    }

    fn compacted(&mut self, event: &EventKind) {
        if let EventKind::Compacted {
            strategy,
            removed_messages,
            estimated_tokens_before,
            estimated_tokens_after,
        } = event
        {
            self.drop_live();
            let how = match strategy {
                crate::protocol::CompactionStrategy::Summarize => "summarised",
                crate::protocol::CompactionStrategy::Elide => "elided",
            };
            self.push(Entry::Info(format!(
                "context compacted: {removed_messages} older messages {how} (≈{} → {} tokens)",
                tokens(*estimated_tokens_before as u64),
                tokens(*estimated_tokens_after as u64)
            )));
        }
    }

    fn retrying(&mut self, attempt: u32, delay_ms: u64, reason: &str) {
        // The text streamed so far belongs to the abandoned attempt.
        self.drop_live();
        self.push(Entry::Info(format!(
            "provider: retry {attempt} in {:.1}s ({})",
            delay_ms as f64 / 1000.0,
            summary(reason, 100)
        )));
    }

    /// Changes the tool call entry with this id (the newest such).
    fn update_tool_entry<R>(
        &mut self,
        id: &str,
        change: impl FnOnce(&mut Entry) -> R,
    ) -> Option<R> {
        let index = self
            .transcript
            .iter()
            .rposition(|entry| matches!(entry, Entry::Tool { id: call, .. } if call == id))?;
        self.transcript.update(index, change)
    }

    /// Attaches what a `patch` or `bash_exec` call showed to its entry.
    fn set_tool_detail(&mut self, id: &str, name: &str, arguments: &str, content: &str) -> bool {
        // The result (which came first) says what the call did.
        let facts = self.transcript.facts_of(id).cloned().unwrap_or_default();
        let shown = match name {
            "patch" => diff::from_patch_call(arguments, facts.file.as_ref()).map(ToolDetail::Diff),
            "bash_exec" => Some(ToolDetail::Output {
                exit: facts.command.map(|run| run.exit),
                text: sanitize(content, false),
            }),
            _ => None,
        };
        let Some(shown) = shown else {
            return false;
        };
        let attached = self.update_tool_entry(id, |entry| match entry {
            Entry::Tool { detail, .. } => {
                *detail = Some(shown);
                true
            }
            _ => false,
        });
        attached == Some(true)
    }

    fn record_usage(&mut self, identity: &str, usage: crate::protocol::Usage) {
        let identity = summary(identity, 64);
        match self
            .usage_by_identity
            .iter_mut()
            .find(|(name, _)| *name == identity)
        {
            Some((_, totals)) => totals.record(usage),
            None => {
                let mut totals = UsageTotals::default();
                totals.record(usage);
                self.usage_by_identity.push((identity, totals));
            }
        }
    }

    /// Streamed text that will not be completed (a retry, compaction, the
    /// turn's end without a message).
    fn drop_live(&mut self) {
        if !self.live.is_empty() {
            self.live.clear();
            self.live_changed();
        }
    }

    fn live_changed(&mut self) {
        self.live_revision += 1;
    }

    /// The revision of the streaming text (`live`).
    pub fn live_revision(&self) -> u64 {
        self.live_revision
    }

    /// The latest message that was the streamed text, whose lines a
    /// renderer may keep instead of rendering the message again.
    pub fn adopted_live(&self) -> Option<LiveAdoption> {
        self.adopted_live
    }

    /// What the agent is doing now, for the status line.
    pub fn activity(&self) -> Activity {
        match self.turn {
            TurnState::Idle => return Activity::Idle,
            TurnState::Interrupting => return Activity::Interrupting,
            TurnState::Submitted | TurnState::Running { .. } => {}
        }
        if self.approval.is_some() {
            return Activity::WaitingForApproval;
        }
        let live = self.subagents.iter().filter(|s| s.is_ticking()).count();
        if live > 0 {
            return Activity::Subagents(live);
        }
        if let Some(name) = self.transcript.unfinished_tool() {
            return Activity::Tool(name.to_string());
        }
        if self.live.is_empty() {
            Activity::Thinking
        } else {
            Activity::Streaming
        }
    }

    /// Time since the running turn was submitted.
    pub fn elapsed(&self) -> Option<std::time::Duration> {
        let started = self.turn_started_at?;
        self.turn
            .is_busy()
            .then(|| self.now.saturating_duration_since(started))
    }

    /// Ctrl+O: every folded tool output and diff opens, or folds again.
    pub fn toggle_expanded(&mut self) {
        self.expanded = !self.expanded;
    }

    /// Adds an entered line to the history (not twice in a row).
    pub fn remember(&mut self, line: &str) {
        self.history_pos = None;
        if self.history.last().map(String::as_str) != Some(line) {
            self.history.push(line.to_string());
        }
    }

    /// The workspace's earlier lines, which the engine sent after the
    /// screen came up: they go before the lines entered since.
    pub fn load_history(&mut self, mut earlier: Vec<String>) {
        if let Some(pos) = &mut self.history_pos {
            *pos += earlier.len();
        }
        earlier.append(&mut self.history);
        self.history = earlier;
    }

    /// Up: the previous entered line into the input; Down: the next one, or
    /// an empty line past the newest.
    pub fn recall_history(&mut self, direction: Direction) {
        if self.history.is_empty() {
            return;
        }
        let last = self.history.len() - 1;
        self.history_pos = match (direction, self.history_pos) {
            (Direction::Up, None) => Some(last),
            (Direction::Up, Some(pos)) => Some(pos.saturating_sub(1)),
            (Direction::Down, Some(pos)) if pos < last => Some(pos + 1),
            (Direction::Down, _) => None,
        };
        self.input.take();
        if let Some(pos) = self.history_pos {
            let line = self.history[pos].clone();
            self.input.insert_str(&line);
        }
    }

    /// Shows an `ask_user` question; Enter answers, Esc dismisses.
    pub fn ask(&mut self, question: &str) {
        self.push(Entry::Info(format!("Fido asks: {question}")));
        self.question = Some(question.to_string());
        self.set_notice(
            "answer the question and press Enter (Esc dismisses it)",
            false,
        );
    }

    /// Records the answer (or the dismissal) of the question on screen.
    pub fn answered(&mut self, answer: Option<&str>) {
        self.question = None;
        self.push(match answer {
            Some(text) => Entry::User(text.to_string()),
            None => Entry::Info("question dismissed".into()),
        });
    }

    pub fn set_plan(&mut self, plan: &crate::protocol::plan::PlanSnapshot, verb: &str) {
        self.plan = PlanView::from_event(plan);
        changes::decorate(self.plan.as_mut(), &self.change_sets);
        let line = match &self.plan {
            Some(view) => format!("plan {verb}: {}", view.summary()),
            None => format!("plan {verb}: no plan"),
        };
        self.push(Entry::Plan(line));
    }

    /// The user submitted a prompt: the parent turn advances, so a finished
    /// subagent's bar goes away.
    pub fn begin_turn(&mut self, prompt: &str) {
        self.push(Entry::User(sanitize(prompt, false)));
        self.turn = TurnState::Submitted;
        self.turn_started_at = Some(self.now);
        self.new_output = false;
        self.saw_turn_started = false;
        self.transcript_scroll = 0;
        self.subagents.clear();
        self.subagent_focus = None;
    }

    /// The reply to `SubmitPrompt` arrived (after `turn_completed`, or
    /// instead of it when the turn never started).
    pub fn turn_replied(&mut self, status: TurnStatus, error: Option<String>) {
        if !self.turn.is_busy() {
            return;
        }
        if !self.saw_turn_started
            && let Some(error) = error
        {
            self.push(Entry::Error(sanitize(&error, false)));
        }
        self.finish_turn(self.turn_number, status);
    }

    fn finish_turn(&mut self, turn: u32, status: TurnStatus) {
        let was_busy = self.turn.is_busy();
        // A request still on screen was dropped with the turn.
        self.approval = None;
        self.turn = TurnState::Idle;
        self.drop_live();
        for subagent in &mut self.subagents {
            if subagent.is_ticking() {
                subagent.frozen = true;
            }
        }
        self.subagent_focus = None;
        if was_busy {
            self.last_turn = Some((turn, status));
            if status == TurnStatus::Interrupted {
                self.push(Entry::Info(format!("turn {turn} interrupted")));
            }
        }
    }

    /// Advances clocks shown on screen; returns whether a second passed on
    /// any of them (so a frame is worth drawing).
    pub fn tick(&mut self, now: Instant) -> bool {
        let turn_second = |store: &Store| store.elapsed().map(|e| e.as_secs());
        let before = turn_second(self);
        self.now = now;
        let turn_moved = turn_second(self) != before;
        let mut moved = turn_moved;
        for subagent in self.subagents.iter_mut().filter(|s| s.is_ticking()) {
            let before = subagent.shown_elapsed_ms() / 1000;
            subagent.since_event_ms = now
                .saturating_duration_since(subagent.received_at)
                .as_millis() as u64;
            moved |= subagent.shown_elapsed_ms() / 1000 != before;
        }
        moved
    }

    /// Whether something on screen moves with time (ticks are scheduled
    /// only then).
    pub fn needs_ticks(&self) -> bool {
        self.turn.is_busy() || self.subagents.iter().any(SubagentView::is_ticking)
    }

    pub fn push(&mut self, entry: Entry) {
        self.transcript.push(entry);
    }

    /// Shows the transcript of a resumed session, then a line saying so.
    pub fn restore_transcript(&mut self, messages: &[crate::protocol::Message], note: String) {
        for entry in restore::entries(messages) {
            self.push(entry);
        }
        self.push(Entry::Info(note));
    }

    /// Replaces the entry at `index` (its rendered lines are redrawn).
    pub fn replace(&mut self, index: usize, entry: Entry) {
        self.transcript.update(index, |slot| *slot = entry);
    }

    pub fn set_notice(&mut self, text: impl Into<String>, warning: bool) {
        self.notice = Some(Notice {
            text: text.into(),
            warning,
        });
    }
}
