//! The event stream (contract): one JSON object per line on stdout with
//! `fido exec --json`, and the feed of the terminal UI.
//!
//! Events are past tense: they report what happened. Summaries and details
//! are sanitised by their producer (no message contents beyond the final
//! assistant text, control characters stripped, cut short).

use serde::{Deserialize, Serialize};

use super::hook::{HookDecision, HookNotice, HookStatus};
use super::status::{SubagentPhase, TurnStatus, UsageTotals};

/// An event with its timestamp (RFC 3339, milliseconds, UTC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(flatten)]
    pub kind: EventKind,
    pub ts: String,
}

impl Event {
    pub fn now(kind: EventKind) -> Self {
        Event {
            kind,
            ts: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The session is ready: provider chosen, catalog built.
    SessionStarted {
        workspace: String,
        provider: String,
        model: String,
        tools: Vec<String>,
        /// The journaled session's id, what `--resume` takes (absent when
        /// the session could not be journaled).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    /// A user prompt was accepted and the agent started working on it.
    TurnStarted { turn: u32 },
    /// The final text of one assistant message.
    AssistantText { text: String },
    /// The model asked for a tool call; `summary` is short and sanitised.
    ToolCall {
        id: String,
        name: String,
        summary: String,
    },
    /// A tool call finished; `summary` is short and sanitised.
    ToolResult {
        id: String,
        name: String,
        ok: bool,
        summary: String,
        /// What the call did, typed, for front ends (in process only:
        /// never serialised, so the `--json` stream keeps its format).
        #[serde(skip)]
        facts: Option<Box<super::ToolFacts>>,
    },
    /// The plan changed (or was loaded at start): the complete normalised
    /// state, the same object the model got in the tool result. On the
    /// wire `flavour` (the plan tool, `update_plan` or `todo`) and `plan`.
    PlanUpdated {
        #[serde(flatten)]
        plan: super::plan::PlanSnapshot,
    },
    /// What a delegated subagent is doing (sanitised lifecycle only: never
    /// message contents, reasoning or the private transcript). `phase` is
    /// `starting`, `reasoning`, a tool name, `nested_delegation_rejected`,
    /// `completed`, `partial`, `failed` or `cancelled`.
    Subagent {
        agent_id: String,
        pid: Option<u32>,
        phase: SubagentPhase,
        elapsed_ms: u64,
        detail: String,
        /// Tokens (prompt + completion) the subagent used so far.
        #[serde(default)]
        tokens: u64,
        /// The plan item the parent named in the call, sanitised.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan_item: Option<String>,
    },
    /// A provider request finished; usage of that one request.
    Usage {
        identity: super::Identity,
        prompt_tokens: u64,
        cached_tokens: u64,
        completion_tokens: u64,
    },
    /// Older turns were summarised or elided to fit the context budget.
    Compacted {
        strategy: CompactionStrategy,
        removed_messages: usize,
        estimated_tokens_before: usize,
        estimated_tokens_after: usize,
    },
    /// A provider request failed and is tried again after `delay_ms`.
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
    /// The turn ended; `usage` sums every request of the turn.
    TurnCompleted {
        turn: u32,
        status: TurnStatus,
        usage: UsageTotals,
    },
    /// Something went wrong that the user must know about.
    Error { message: String },
    /// A user hook (`[[hooks.EVENT]]`) started; `command` is sanitised
    /// and cut short.
    HookStarted {
        event: super::hook::HookEvent,
        command: String,
    },
    /// A user hook ended: how (`exit_code` when it exited), what it
    /// decided, and, when it blocked or failed, why (sanitised, short).
    HookFinished {
        event: super::hook::HookEvent,
        command: String,
        status: super::hook::HookStatus,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        decision: super::hook::HookDecision,
        elapsed_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// Live display only (never printed by `fido exec --json`, see
    /// [`EventKind::is_live_only`]): a fragment of assistant text as it
    /// streams. `assistant_text` with the whole message still follows; a
    /// `retrying` or `compacted` event drops the fragments seen so far.
    AssistantDelta { text: String },
    /// Live display only: a fragment of the model's reasoning as it
    /// streams, from providers that send it; never kept in the
    /// conversation (the terminal UI does not show it).
    ReasoningDelta { text: String },
    /// Live display only: what the terminal UI shows of a finished call of
    /// `patch` (its arguments, for the diff) or `bash_exec` (the tail of
    /// its output and the exit line), after the call's `tool_result`.
    ToolOutput {
        id: String,
        name: String,
        arguments: String,
        content: String,
    },
    /// UI protocol, live only: the engine asks the person to approve
    /// `request`; answered by `Op::Approve` with this `id`.
    ApprovalRequested {
        id: super::op::AskId,
        request: super::ApprovalRequest,
    },
    /// UI protocol, live only: `ask_user` puts `question` to the person;
    /// answered by `Op::Answer` with this `id`.
    QuestionAsked {
        id: super::op::AskId,
        question: String,
    },
    /// UI protocol, live only: the answer to the submission `id`.
    OpReplied {
        id: super::op::SubmissionId,
        reply: super::op::OpReply,
    },
    /// Live only: a fragment of subagent `agent_id`'s answer as its model
    /// streams it (the parent runs the subagent's model requests), for a
    /// front end that shows each subagent on its own: an editor's child
    /// session. The `subagent` events stay sanitised; these never reach
    /// the `--json` stream nor the parent's model.
    SubagentTextDelta { agent_id: String, text: String },
    /// Live only: a fragment of subagent `agent_id`'s reasoning, from
    /// providers that stream it.
    SubagentReasoningDelta { agent_id: String, text: String },
    /// Live only: subagent `agent_id`'s own plan after a change, bounded
    /// by the parent (a subagent plans its own work; the session's plan
    /// stays the parent's). On the wire `flavour` and `plan`, as
    /// `plan_updated`.
    SubagentPlan {
        agent_id: String,
        #[serde(flatten)]
        plan: super::plan::PlanSnapshot,
    },
    /// Live only: the model's `delegate` call `call_id` runs as subagent
    /// `agent_id` (emitted once, before the subagent's `subagent` events),
    /// so a front end can show the subagent under the call that made it.
    SubagentCall { call_id: String, agent_id: String },
    /// Live only: where a write subagent's change set stands, for the plan
    /// item it serves (the `delegate_result` carries the change set).
    ChangeSet {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        plan_item: Option<String>,
        state: super::changes::ChangeSetState,
    },
}

impl EventKind {
    /// Events for the live terminal UI only: the `--json` stream (a
    /// contract) and the subagent lifecycle frames leave them out, so they
    /// may carry message contents. The UI protocol's requests and replies
    /// are among them: a headless run has nobody to answer them.
    pub fn is_live_only(&self) -> bool {
        match self {
            EventKind::AssistantDelta { .. }
            | EventKind::ReasoningDelta { .. }
            | EventKind::ToolOutput { .. }
            | EventKind::ApprovalRequested { .. }
            | EventKind::QuestionAsked { .. }
            | EventKind::OpReplied { .. }
            | EventKind::SubagentCall { .. }
            | EventKind::SubagentTextDelta { .. }
            | EventKind::SubagentReasoningDelta { .. }
            | EventKind::SubagentPlan { .. }
            | EventKind::ChangeSet { .. } => true,
            EventKind::SessionStarted { .. }
            | EventKind::TurnStarted { .. }
            | EventKind::AssistantText { .. }
            | EventKind::ToolCall { .. }
            | EventKind::ToolResult { .. }
            | EventKind::PlanUpdated { .. }
            | EventKind::Subagent { .. }
            | EventKind::Usage { .. }
            | EventKind::Compacted { .. }
            | EventKind::Retrying { .. }
            | EventKind::TurnCompleted { .. }
            | EventKind::Error { .. }
            | EventKind::HookStarted { .. }
            | EventKind::HookFinished { .. } => false,
        }
    }
}

/// What a `hook_finished` event shows: it lives with the event it reads,
/// so that `hook` (whose types the event carries) imports no event.
impl HookNotice {
    /// The notice of a `hook_finished` event, if it calls for one.
    pub fn of(event: &EventKind) -> Option<HookNotice> {
        let EventKind::HookFinished {
            event,
            command,
            status,
            exit_code,
            decision,
            message,
            ..
        } = event
        else {
            return None;
        };
        let summary = crate::text::summary;
        let (event, command) = (event.as_str(), summary(command, 60));
        let why = message
            .as_deref()
            .map(|m| format!(": {}", summary(m, 160)))
            .unwrap_or_default();
        if !matches!((status, exit_code), (HookStatus::Exited, Some(0 | 2))) {
            return Some(HookNotice::Failed(format!(
                "{event} hook `{command}` failed (ignored){why}"
            )));
        }
        match decision {
            HookDecision::Deny => Some(HookNotice::Blocked(format!(
                "{event} hook `{command}` blocked{why}"
            ))),
            HookDecision::None | HookDecision::Allow | HookDecision::Ask => {
                message.as_deref().map(|m| {
                    HookNotice::Said(format!("{event} hook `{command}`: {}", summary(m, 160)))
                })
            }
        }
    }
}

/// How older turns are compacted (`compact_strategy`; on the wire the
/// `strategy` of `compacted` events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    /// One model request writes a summary of the removed part.
    Summarize,
    /// The removed part is dropped with a short note.
    Elide,
}

impl CompactionStrategy {
    /// The name a strategy has in events and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStrategy::Summarize => "summarize",
            CompactionStrategy::Elide => "elide",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Usage;
    use crate::protocol::plan::{PlanSnapshot, PlanState, TodoSnapshot};

    /// Counts from servers and journals saturate (found by fuzzing the
    /// journal replay and the Anthropic decoder with `u64::MAX` counts).
    #[test]
    fn usage_sums_saturate() {
        let huge = Usage {
            prompt_tokens: u64::MAX,
            cached_tokens: 1,
            completion_tokens: u64::MAX - 1,
        };
        let mut usage = huge;
        usage.add(huge);
        assert_eq!(usage.prompt_tokens, u64::MAX);
        assert_eq!(usage.cached_tokens, 2);
        assert_eq!(usage.completion_tokens, u64::MAX);
        let mut totals = UsageTotals {
            requests: u32::MAX,
            ..UsageTotals::default()
        };
        totals.record(huge);
        totals.merge(totals);
        assert_eq!(totals.requests, u32::MAX);
        assert_eq!(totals.prompt_tokens, u64::MAX);
        assert_eq!(totals.cached_tokens, 2);
        let spent = crate::protocol::delegate::DelegateUsage {
            totals: UsageTotals {
                prompt_tokens: u64::MAX,
                completion_tokens: 5,
                ..UsageTotals::default()
            },
            wall_ms: 0,
        };
        assert_eq!(spent.budget_tokens(), u64::MAX);
    }

    /// A tool's facts never reach the wire: a `tool_result` that carries
    /// them prints byte for byte as before, and reads back without them.
    #[test]
    fn a_tool_results_facts_stay_off_the_wire() {
        use crate::protocol::tool_facts::{CommandExit, CommandRun};
        let facts = crate::protocol::ToolFacts {
            command: Some(CommandRun {
                exit: CommandExit::Code { code: 3 },
                elapsed_ms: 4,
                output_bytes: 2,
            }),
            ..Default::default()
        };
        let result = |facts| EventKind::ToolResult {
            id: "c1".into(),
            name: "bash_exec".into(),
            ok: false,
            summary: "no\nexit code: 3".into(),
            facts,
        };
        let line = serde_json::to_string(&result(Some(Box::new(facts)))).unwrap();
        assert_eq!(
            line,
            r#"{"type":"tool_result","id":"c1","name":"bash_exec","ok":false,"summary":"no\nexit code: 3"}"#
        );
        assert_eq!(
            serde_json::from_str::<EventKind>(&line).unwrap(),
            result(None)
        );
    }

    /// The `--json` stream is a contract: typed fields (status, flavour)
    /// serialise to exactly the strings they had as `String`s.
    #[test]
    fn the_event_stream_keeps_its_wire_format() {
        let events = [
            EventKind::SessionStarted {
                workspace: "/w".into(),
                provider: "openai".into(),
                model: "m".into(),
                tools: vec!["read_file".into()],
                session_id: Some("20261201T120000-abcd".into()),
            },
            EventKind::PlanUpdated {
                plan: PlanSnapshot::Todo(TodoSnapshot {
                    action: crate::protocol::plan::TodoAction::List,
                    params: serde_json::json!({}),
                    tasks: Vec::new(),
                    next_id: 1,
                    error: None,
                    plan: None,
                }),
            },
            EventKind::PlanUpdated {
                plan: PlanSnapshot::UpdatePlan(PlanState::empty()),
            },
            EventKind::TurnCompleted {
                turn: 2,
                status: TurnStatus::MaxSteps,
                usage: UsageTotals {
                    requests: 3,
                    prompt_tokens: 10,
                    cached_tokens: 4,
                    completion_tokens: 2,
                },
            },
            EventKind::Subagent {
                agent_id: "sub-1".into(),
                pid: Some(42),
                phase: SubagentPhase::Tool("read_file".into()),
                elapsed_ms: 7,
                detail: "x".into(),
                tokens: 9,
                plan_item: None,
            },
        ];
        let lines: Vec<String> = events
            .iter()
            .map(|e| serde_json::to_string(e).unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                r#"{"type":"session_started","workspace":"/w","provider":"openai","model":"m","tools":["read_file"],"session_id":"20261201T120000-abcd"}"#,
                r#"{"type":"plan_updated","flavour":"todo","plan":{"action":"list","params":{},"tasks":[],"nextId":1}}"#,
                r#"{"type":"plan_updated","flavour":"update_plan","plan":{"version":0,"updatedAt":null,"reason":"","items":[],"changes":{"added":[],"dropped":[],"status_changed":[]}}}"#,
                r#"{"type":"turn_completed","turn":2,"status":"max_steps","usage":{"requests":3,"prompt_tokens":10,"cached_tokens":4,"completion_tokens":2}}"#,
                r#"{"type":"subagent","agent_id":"sub-1","pid":42,"phase":"read_file","elapsed_ms":7,"detail":"x","tokens":9}"#,
            ]
        );
        for (line, event) in lines.iter().zip(&events) {
            assert_eq!(&serde_json::from_str::<EventKind>(line).unwrap(), event);
        }
    }
}
