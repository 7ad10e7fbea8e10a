//! Fido's subagents (the `delegate` tool) as an editor sees them.
//!
//! A client that advertises `subagents` gets each subagent as a child
//! session of its own: announced with `subagent_update` on the parent
//! session (title: the delegated task; state: running, then idle with a
//! stop reason and the child's usage), then, under the child's session
//! id, its answers as `agent_message_chunk` (its reasoning as
//! `agent_thought_chunk`) as its model streams them, and its tool calls
//! as `tool_call` updates, and its own plan (the plan tool keeps one for
//! each subagent, in its memory) as `plan` updates. Any other
//! client sees the subagent as the parent's one `delegate` tool call,
//! whose content says what the subagent is doing as it goes.
//!
//! The tool calls come from the sanitised lifecycle events (tool names and
//! short summaries); the text from the parent's own run of the child's
//! model requests, and the plan from the child's plan frames, bounded by
//! the parent (live-only events, which neither the `--json` stream nor
//! the parent's model sees). Pure: the caller sends what
//! [`Children::of`] returns, in order.

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, ErrorStopReason, IdleStateUpdate, IdleStopReason,
    RunningStateUpdate, SessionCancelCapabilities, SessionUpdate, StateUpdate,
    SubagentSessionCapabilities, SubagentUpdate, ToolCall, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::json;

use super::updates::{fido_meta, plan_update, text_content, tool_kind};
use crate::protocol::{EventKind, Identity, SubagentPhase, UsageTotals};
use crate::tools::capability::Capabilities;
use crate::tools::names::DELEGATE;

/// An update and the session it goes to (`None`: the parent's).
#[derive(Debug)]
pub struct Routed {
    pub session: Option<String>,
    pub update: SessionUpdate,
}

impl Routed {
    fn parent(update: SessionUpdate) -> Routed {
        Routed {
            session: None,
            update,
        }
    }

    fn child(agent_id: &str, update: SessionUpdate) -> Routed {
        Routed {
            session: Some(agent_id.to_string()),
            update,
        }
    }
}

/// What the translation remembers of the session's subagents.
#[derive(Debug, Default)]
pub struct Children {
    /// The client shows subagents as child sessions.
    as_sessions: bool,
    /// What each tool may do (a child's catalog is the parent's).
    tools: Capabilities,
    /// The summary (the task) of each `delegate` call, by call id.
    tasks: HashMap<String, String>,
    /// Each subagent, by agent id (which is its child session id).
    agents: HashMap<String, Child>,
}

#[derive(Debug, Default)]
struct Child {
    call_id: String,
    /// The child's tool call now running, shown under its session.
    open_tool: Option<String>,
    tools_seen: u32,
    usage: UsageTotals,
}

impl Children {
    pub fn new(as_sessions: bool, tools: Capabilities) -> Children {
        Children {
            as_sessions,
            tools,
            ..Children::default()
        }
    }

    /// The updates one event makes about subagents (often none).
    pub fn of(&mut self, event: &EventKind) -> Vec<Routed> {
        match event {
            EventKind::ToolCall { id, name, summary } if name == "delegate" => {
                self.tasks.insert(id.clone(), summary.clone());
                Vec::new()
            }
            EventKind::SubagentCall { call_id, agent_id } => self.started(call_id, agent_id),
            EventKind::SubagentTextDelta { agent_id, text } => {
                self.said(agent_id, SessionUpdate::AgentMessageChunk(chunk(text)))
            }
            EventKind::SubagentReasoningDelta { agent_id, text } => {
                self.said(agent_id, SessionUpdate::AgentThoughtChunk(chunk(text)))
            }
            EventKind::SubagentPlan { agent_id, plan } => {
                self.said(agent_id, SessionUpdate::Plan(plan_update(plan)))
            }
            EventKind::Subagent {
                agent_id,
                phase,
                detail,
                tokens,
                ..
            } => self.progress(agent_id, phase, detail, *tokens),
            EventKind::Usage {
                identity: Identity::Subagent { agent_id },
                prompt_tokens,
                cached_tokens,
                completion_tokens,
            } => {
                if let Some(child) = self.agents.get_mut(agent_id) {
                    child.usage.record(crate::protocol::Usage {
                        prompt_tokens: *prompt_tokens,
                        cached_tokens: *cached_tokens,
                        completion_tokens: *completion_tokens,
                    });
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// What a subagent's model said, under its own session (nothing for a
    /// client without child sessions: the parent's call shows its state).
    fn said(&self, agent_id: &str, update: SessionUpdate) -> Vec<Routed> {
        if !self.as_sessions || !self.agents.contains_key(agent_id) {
            return Vec::new();
        }
        vec![Routed::child(agent_id, update)]
    }

    /// The delegate call `call_id` runs as `agent_id`: a child session is
    /// announced (running, cancellable alone).
    fn started(&mut self, call_id: &str, agent_id: &str) -> Vec<Routed> {
        let child = Child {
            call_id: call_id.to_string(),
            ..Child::default()
        };
        self.agents.insert(agent_id.to_string(), child);
        if !self.as_sessions {
            return Vec::new();
        }
        let task = self.tasks.get(call_id).cloned().unwrap_or_default();
        let title = if task.is_empty() {
            format!("Subagent {agent_id}")
        } else {
            task
        };
        let announce = SubagentUpdate::new(agent_id.to_string())
            .title(title)
            .description(format!(
                "Fido subagent {agent_id}, working in its own sandboxed process for delegate call {call_id}"
            ))
            .capabilities(
                SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
            )
            .state(StateUpdate::Running(RunningStateUpdate::new()))
            .meta(fido_meta(json!({ "agent_id": agent_id, "call_id": call_id })));
        vec![Routed::parent(SessionUpdate::SubagentUpdate(announce))]
    }

    fn progress(
        &mut self,
        agent_id: &str,
        phase: &SubagentPhase,
        detail: &str,
        tokens: u64,
    ) -> Vec<Routed> {
        let as_sessions = self.as_sessions;
        let tools = &self.tools;
        let Some(child) = self.agents.get_mut(agent_id) else {
            return Vec::new();
        };
        if !as_sessions {
            return vec![Routed::parent(live_status(
                child, agent_id, phase, detail, tokens,
            ))];
        }
        let mut out = Vec::new();
        // A new tool, a new model request or the end: the running tool
        // call is over.
        let moved_on = !matches!(phase, SubagentPhase::Starting);
        if moved_on {
            out.extend(close_tool(child, agent_id, phase));
        }
        match phase {
            SubagentPhase::Tool(name) => {
                let kind = tool_kind(tools.of(name));
                out.push(open_tool(child, agent_id, (name, kind), detail));
            }
            SubagentPhase::NestedDelegationRejected => {
                let kind = tool_kind(tools.of(DELEGATE));
                let refused = (DELEGATE, kind);
                out.push(open_tool(child, agent_id, refused, "refused: nested"));
                out.extend(close_tool(child, agent_id, &SubagentPhase::Failed));
            }
            _ if phase.is_final() => out.push(Routed::parent(ended(
                child, agent_id, phase, detail, tokens,
            ))),
            _ => {}
        }
        out
    }
}

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text))
}

/// A child's tool call starts, under the child's session.
/// `tool`: its name and kind.
fn open_tool(child: &mut Child, agent_id: &str, tool: (&str, ToolKind), detail: &str) -> Routed {
    let (name, kind) = tool;
    child.tools_seen += 1;
    let id = format!("{agent_id}-tool-{}", child.tools_seen);
    child.open_tool = Some(id.clone());
    let title = if detail.is_empty() {
        name.to_string()
    } else {
        format!("{name} {detail}")
    };
    let call = ToolCall::new(id, title)
        .kind(kind)
        .status(ToolCallStatus::InProgress)
        .raw_input(json!({ "tool": name, "summary": detail }));
    Routed::child(agent_id, SessionUpdate::ToolCall(call))
}

/// The child's running tool call ended: the child moved on (completed),
/// or stopped meanwhile (failed).
fn close_tool(child: &mut Child, agent_id: &str, next: &SubagentPhase) -> Option<Routed> {
    let id = child.open_tool.take()?;
    let status = match next {
        SubagentPhase::Failed | SubagentPhase::Cancelled => ToolCallStatus::Failed,
        _ => ToolCallStatus::Completed,
    };
    let fields = ToolCallUpdateFields::new().status(status);
    Some(Routed::child(
        agent_id,
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields)),
    ))
}

/// The child's work ended: idle, why, and what it used.
fn ended(
    child: &Child,
    agent_id: &str,
    phase: &SubagentPhase,
    detail: &str,
    tokens: u64,
) -> SessionUpdate {
    let reason = match phase {
        SubagentPhase::Cancelled => IdleStopReason::Cancelled,
        SubagentPhase::Failed => IdleStopReason::Error(ErrorStopReason::new()),
        _ => IdleStopReason::EndTurn,
    };
    let state = IdleStateUpdate::new()
        .stop_reason(reason)
        .meta(fido_meta(json!({
            "outcome": phase.as_str(),
            "detail": detail,
            "tokens": tokens,
            "usage": child.usage,
        })));
    SessionUpdate::SubagentUpdate(
        SubagentUpdate::new(agent_id.to_string()).state(StateUpdate::Idle(state)),
    )
}

/// For a client without child sessions: the parent's `delegate` call
/// says what its subagent is doing now.
fn live_status(
    child: &Child,
    agent_id: &str,
    phase: &SubagentPhase,
    detail: &str,
    tokens: u64,
) -> SessionUpdate {
    let line = if detail.is_empty() {
        format!("{agent_id}: {}", phase.label())
    } else {
        format!("{agent_id}: {} {detail}", phase.label())
    };
    let fields = ToolCallUpdateFields::new()
        .content(vec![text_content(&line)])
        .raw_output(json!({
            "agent_id": agent_id,
            "phase": phase.as_str(),
            "tokens": tokens,
            "usage": child.usage,
        }));
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(child.call_id.clone(), fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_json(routed: &Routed) -> serde_json::Value {
        serde_json::to_value(&routed.update).unwrap()
    }

    fn delegated(children: &mut Children) {
        children.of(&EventKind::ToolCall {
            id: "d1".into(),
            name: "delegate".into(),
            summary: "Find what main does".into(),
        });
        children.of(&EventKind::SubagentCall {
            call_id: "d1".into(),
            agent_id: "subagent-1".into(),
        });
    }

    /// What a subagent's model says streams under its own session, text
    /// and reasoning apart; another subagent's words are not its.
    #[test]
    fn a_subagents_words_stream_under_its_own_session() {
        let mut children = Children::new(true, Capabilities::default());
        delegated(&mut children);
        let said = children.of(&EventKind::SubagentTextDelta {
            agent_id: "subagent-1".into(),
            text: "Reading main.rs".into(),
        });
        assert_eq!(said.len(), 1);
        assert_eq!(said[0].session.as_deref(), Some("subagent-1"));
        assert_eq!(to_json(&said[0])["sessionUpdate"], "agent_message_chunk");
        assert_eq!(to_json(&said[0])["content"]["text"], "Reading main.rs");
        let thought = children.of(&EventKind::SubagentReasoningDelta {
            agent_id: "subagent-1".into(),
            text: "hmm".into(),
        });
        assert_eq!(to_json(&thought[0])["sessionUpdate"], "agent_thought_chunk");
        let stranger = children.of(&EventKind::SubagentTextDelta {
            agent_id: "subagent-9".into(),
            text: "not announced".into(),
        });
        assert!(stranger.is_empty());
    }

    /// Without child sessions the parent's `delegate` call stands for the
    /// subagent: its words are not sent at all.
    #[test]
    fn without_child_sessions_a_subagents_words_are_not_sent() {
        let mut children = Children::new(false, Capabilities::default());
        delegated(&mut children);
        let said = children.of(&EventKind::SubagentTextDelta {
            agent_id: "subagent-1".into(),
            text: "Reading main.rs".into(),
        });
        assert!(said.is_empty());
    }

    /// A subagent's own plan is a `plan` update of its session, every
    /// entry in it; without child sessions it is not sent.
    #[test]
    fn a_subagents_plan_is_a_plan_update_of_its_session() {
        let state: crate::protocol::plan::PlanState = serde_json::from_value(json!({
            "version": 1, "updatedAt": null, "reason": "r",
            "items": [
                {"id": "a", "title": "Read main", "status": "done", "details": null, "next_action": null, "evidence": ["read"]},
                {"id": "b", "title": "Report", "status": "in_progress", "details": null, "next_action": "write it"},
            ],
        }))
        .unwrap();
        let plan = EventKind::SubagentPlan {
            agent_id: "subagent-1".into(),
            plan: crate::protocol::plan::PlanSnapshot::UpdatePlan(state),
        };
        let mut children = Children::new(true, Capabilities::default());
        delegated(&mut children);
        let shown = children.of(&plan);
        assert_eq!(shown.len(), 1);
        assert_eq!(shown[0].session.as_deref(), Some("subagent-1"));
        let update = to_json(&shown[0]);
        assert_eq!(update["sessionUpdate"], "plan");
        let entries: Vec<_> = update["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["content"].clone(), e["status"].clone()))
            .collect();
        assert_eq!(
            entries,
            [
                (json!("Read main"), json!("completed")),
                (json!("Report"), json!("in_progress"))
            ]
        );
        let mut plain = Children::new(false, Capabilities::default());
        delegated(&mut plain);
        assert!(plain.of(&plan).is_empty());
    }
}
