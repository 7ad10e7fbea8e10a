//! Every point of a session where the user's hooks run, and what their
//! answers do there: the one place that turns a [`HookOutcome`] into what
//! happens next, and that words what the model reads of a hook.
//!
//! The callers only say when: the agent loop (session start, a prompt, a
//! tool call, the end of a turn, a compaction), the approvals (a
//! permission request) and the supervisor (a subagent's start and stop).
//! Each asks its point here and acts on the typed answer. What a hook adds
//! for the model is a note that enters the conversation as a user message
//! where it happened, never the cached prefix.

use serde_json::Value;

use super::{CompactTrigger, HookEvent, HookInput, HookOutcome, Hooks, SessionSource};
use crate::protocol::delegate::DelegateStatus;
use crate::protocol::hook::HookDecision;

/// Continuations a Stop hook may force in one user turn: a hook that
/// always blocks would otherwise keep the model working forever.
pub const MAX_STOP_CONTINUATIONS: u32 = 3;

/// What UserPromptSubmit decided about a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptAnswer {
    /// Send it, after the note the hooks added, if any.
    Send { note: Option<String> },
    /// Keep it from the model: the turn fails with `message`.
    Blocked { message: String },
}

/// What PreToolUse decided about a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolVerdict {
    /// Run it as without hooks.
    Run,
    /// Run it without its approval prompts (never outside the sandbox).
    RunApproved,
    /// Ask the person first (denied in a headless run).
    Ask { reason: Option<String> },
    /// Refuse it: nothing runs, the model reads `reason`.
    Refuse { reason: String },
}

/// PreToolUse's answer: the verdict, and a note for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeforeTool {
    pub verdict: ToolVerdict,
    pub note: Option<String>,
}

/// What a Stop hook decided when the model answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopAnswer {
    /// The turn ends.
    End,
    /// A hook blocked the end once too often: the turn ends anyway, and
    /// the person is told why.
    EndAnyway { message: String },
    /// The turn goes on once more, with this note for the model.
    Continue { note: String },
}

/// What the PermissionRequest hooks decided about an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionAnswer {
    Allow,
    Deny(String),
    /// Ask the person, as without hooks.
    Ask,
}

/// A tool call as the hooks are told of it.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub tool_name: &'a str,
    pub arguments: &'a str,
    pub tool_use_id: &'a str,
}

impl Hooks {
    /// SessionStart, once a session's conversation is ready: the note
    /// for the model (plain stdout or `additionalContext`), if any.
    pub async fn session_start(&self, source: SessionSource) -> Option<String> {
        let outcome = self.run(HookInput::SessionStart { source }).await;
        context_note("SessionStart", &outcome)
    }

    /// UserPromptSubmit, before the prompt goes to the model.
    pub async fn prompt_submitted(&self, prompt: &str) -> PromptAnswer {
        let input = HookInput::UserPromptSubmit {
            prompt: prompt.to_string(),
        };
        let outcome = self.run(input).await;
        if outcome.decision == HookDecision::Deny {
            return PromptAnswer::Blocked {
                message: format!(
                    "a UserPromptSubmit hook blocked the prompt, so it was not sent: {}",
                    outcome.reason_text()
                ),
            };
        }
        PromptAnswer::Send {
            note: context_note("UserPromptSubmit", &outcome),
        }
    }

    /// PreToolUse, before a call of the main agent. Without a matching
    /// hook the call pays for no input (its arguments are not parsed).
    pub async fn before_tool(&self, call: CallFacts<'_>) -> BeforeTool {
        if !self.any(HookEvent::PreToolUse, Some(call.tool_name)) {
            return BeforeTool {
                verdict: ToolVerdict::Run,
                note: None,
            };
        }
        let outcome = self
            .run(HookInput::PreToolUse {
                tool_name: call.tool_name.to_string(),
                tool_input: HookInput::tool_input(call.arguments),
                tool_use_id: call.tool_use_id.to_string(),
            })
            .await;
        let verdict = match outcome.decision {
            HookDecision::Deny => ToolVerdict::Refuse {
                reason: outcome.reason_text(),
            },
            HookDecision::Ask => ToolVerdict::Ask {
                reason: outcome.reason.clone(),
            },
            HookDecision::Allow => ToolVerdict::RunApproved,
            HookDecision::None => ToolVerdict::Run,
        };
        BeforeTool {
            verdict,
            note: call_note("PreToolUse", call, &outcome),
        }
    }

    /// PostToolUse, after a call ran (`ok`, `content`: its result): the
    /// notes for the model. A block is an objection the model reads after
    /// the result, since the call already ran.
    pub async fn after_tool(&self, call: CallFacts<'_>, ok: bool, content: &str) -> Vec<String> {
        if !self.any(HookEvent::PostToolUse, Some(call.tool_name)) {
            return Vec::new();
        }
        let outcome = self
            .run(HookInput::PostToolUse {
                tool_name: call.tool_name.to_string(),
                tool_input: HookInput::tool_input(call.arguments),
                tool_response: serde_json::json!({"ok": ok, "content": content}),
                tool_use_id: call.tool_use_id.to_string(),
            })
            .await;
        let objection = (outcome.decision == HookDecision::Deny).then(|| {
            format!(
                "[Fido: a PostToolUse hook of the user objected to the {} call {} (which already ran): {}]",
                call.tool_name,
                call.tool_use_id,
                outcome.reason_text()
            )
        });
        objection
            .into_iter()
            .chain(call_note("PostToolUse", call, &outcome))
            .collect()
    }

    /// Stop, when the model has answered (`continuations`: how often a
    /// Stop hook kept this turn going already).
    pub async fn stop(&self, last_text: Option<&str>, continuations: u32) -> StopAnswer {
        let input = HookInput::Stop {
            stop_hook_active: continuations > 0,
            last_assistant_message: last_text.map(str::to_string),
        };
        let outcome = self.run(input).await;
        if outcome.decision != HookDecision::Deny {
            return StopAnswer::End;
        }
        if continuations >= MAX_STOP_CONTINUATIONS {
            return StopAnswer::EndAnyway {
                message: format!(
                    "a Stop hook blocked the end of the turn again; after {MAX_STOP_CONTINUATIONS} continuations the turn ends anyway"
                ),
            };
        }
        StopAnswer::Continue {
            note: format!(
                "[Fido: a Stop hook of the user does not let the turn end yet: {}]",
                outcome.reason_text()
            ),
        }
    }

    /// PreCompact, before older turns are cut. What it decides does not
    /// stop the compaction: the context must shrink.
    pub async fn pre_compact(&self, trigger: CompactTrigger) {
        self.run(HookInput::PreCompact { trigger }).await;
    }

    /// PermissionRequest, before the person is asked to approve
    /// `request` (the approval as the `approval_requested` event carries
    /// it) for `call`.
    pub async fn permission_request(
        &self,
        call: CallFacts<'_>,
        request: Value,
    ) -> PermissionAnswer {
        let outcome = self
            .run(HookInput::PermissionRequest {
                tool_name: call.tool_name.to_string(),
                tool_input: HookInput::tool_input(call.arguments),
                tool_use_id: call.tool_use_id.to_string(),
                request,
            })
            .await;
        match outcome.decision {
            HookDecision::Allow => PermissionAnswer::Allow,
            HookDecision::Deny => PermissionAnswer::Deny(outcome.reason_text()),
            HookDecision::None | HookDecision::Ask => PermissionAnswer::Ask,
        }
    }

    /// SubagentStart, in the parent, before subagent `agent_id` starts on
    /// `task` (already cut short). The hooks are told; what they decide
    /// changes nothing (a PreToolUse hook on `delegate` is the one that
    /// can veto).
    pub async fn subagent_started(&self, agent_id: &str, task: &str) {
        self.run(HookInput::SubagentStart {
            agent_id: agent_id.to_string(),
            task: task.to_string(),
        })
        .await;
    }

    /// SubagentStop, in the parent, after the subagent ended with
    /// `status` and `summary`. Told, as SubagentStart is.
    pub async fn subagent_stopped(
        &self,
        agent_id: &str,
        task: String,
        status: DelegateStatus,
        summary: &str,
    ) {
        self.run(HookInput::SubagentStop {
            agent_id: agent_id.to_string(),
            task,
            status,
            summary: crate::text::summary(summary, 1000),
        })
        .await;
    }
}

/// The note for the model of what the hooks of `event` added, if any.
fn context_note(event: &str, outcome: &HookOutcome) -> Option<String> {
    outcome
        .context_text()
        .map(|context| format!("[Fido: context from the user's {event} hook: {context}]"))
}

/// The same, about one call.
fn call_note(event: &str, call: CallFacts<'_>, outcome: &HookOutcome) -> Option<String> {
    outcome.context_text().map(|context| {
        format!(
            "[Fido: context from the user's {event} hook for the {} call {}: {context}]",
            call.tool_name, call.tool_use_id
        )
    })
}
