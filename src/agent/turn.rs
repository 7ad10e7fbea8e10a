//! The turn loop, shared by every agent (main today, subagents later).
//!
//! A turn: append the user prompt, then repeat — compact if the context is
//! too large, ask the model, record its message, run the tool calls it made
//! and append one result per call — until the model answers without tool
//! calls, the step budget runs out, the provider fails for good, or the user
//! interrupts. Whatever ends the turn, the conversation stays valid: every
//! tool call has its result.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use super::compaction;
use super::{AgentSettings, Conversation, EventSink};
use crate::plan::{restore, todo};
use crate::protocol::{EventKind, Message, ToolCall, TurnStatus, UsageTotals};
use crate::provider::{
    ChatRequest, Completion, FinishReason, Provider, ProviderError, ProviderNotice,
};
use crate::text;
use crate::tools::{InvocationContext, ToolCatalog, ToolEnv, ToolKind, ToolOutput};

/// Everything a turn needs besides the conversation. Shared, immutable
/// (`/model` swaps in a copy with another provider between turns).
#[derive(Clone)]
pub struct AgentDeps {
    pub provider: Arc<dyn Provider>,
    pub catalog: Arc<ToolCatalog>,
    pub tool_env: Arc<ToolEnv>,
    pub ctx: InvocationContext,
    pub settings: AgentSettings,
    pub events: EventSink,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub status: TurnStatus,
    /// The model's final answer, when there is one.
    pub final_text: Option<String>,
    /// What went wrong, for `Failed` and `MaxSteps`.
    pub error: Option<String>,
    pub usage: UsageTotals,
}

/// Runs one user turn to its end.
pub async fn run_turn(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    prompt: String,
    turn: u32,
    cancel: &CancellationToken,
) -> TurnOutcome {
    let span = info_span!("turn", turn, identity = deps.ctx.identity.label());
    async {
        deps.events.emit(EventKind::TurnStarted { turn });
        conversation.push(Message::user(prompt));
        let outcome = turn_steps(conversation, deps, cancel).await;
        deps.events.emit(EventKind::TurnCompleted {
            turn,
            status: outcome.status,
            usage: outcome.usage,
        });
        info!(status = ?outcome.status, requests = outcome.usage.requests, "turn ended");
        outcome
    }
    .instrument(span)
    .await
}

async fn turn_steps(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
) -> TurnOutcome {
    let mut usage = UsageTotals::default();
    let mut reminded = false;
    let outcome = |status, final_text, error, usage| TurnOutcome {
        status,
        final_text,
        error,
        usage,
    };
    for step in 0..deps.settings.max_steps {
        if cancel.is_cancelled() {
            return outcome(TurnStatus::Interrupted, None, None, usage);
        }
        compaction::maybe_compact(conversation, deps, cancel, &mut usage).await;

        let completion = match request(conversation, deps, cancel, true).await {
            Some(Ok(completion)) => completion,
            Some(Err(err)) => {
                let message = err.to_string();
                deps.events.emit(EventKind::Error {
                    message: message.clone(),
                });
                return outcome(TurnStatus::Failed, None, Some(message), usage);
            }
            None => return outcome(TurnStatus::Interrupted, None, None, usage),
        };
        record_usage(deps, &mut usage, &completion);

        let Message::Assistant {
            content,
            tool_calls,
        } = completion.message
        else {
            let message = "the provider returned a message that is not an assistant message";
            return outcome(TurnStatus::Failed, None, Some(message.into()), usage);
        };
        let text = content.filter(|t| !t.trim().is_empty());
        if let Some(text) = &text {
            deps.events
                .emit(EventKind::AssistantText { text: text.clone() });
        }
        // An assistant message needs content or tool calls to be valid on
        // every wire format; an empty answer is kept as empty text.
        let stored_content = match (&text, tool_calls.is_empty()) {
            (None, true) => Some(String::new()),
            _ => text.clone(),
        };
        conversation.push(Message::Assistant {
            content: stored_content,
            tool_calls: tool_calls.clone(),
        });

        if tool_calls.is_empty() {
            if completion.finish_reason == FinishReason::Length {
                deps.events.emit(EventKind::Error {
                    message: "the answer was cut off at the model's output limit".into(),
                });
            }
            if !reminded && let Some(reminder) = settle_reminder(deps) {
                // Once per user prompt: the model gets one more turn to
                // finish open items or record honestly why they are open.
                reminded = true;
                info!("plan has open items; reminding the model before the turn ends");
                conversation.push(Message::user(reminder));
                continue;
            }
            return outcome(TurnStatus::Completed, text, None, usage);
        }

        info!(step, calls = tool_calls.len(), "running tool calls");
        run_tool_calls(conversation, deps, &tool_calls, cancel).await;
        if cancel.is_cancelled() {
            return outcome(TurnStatus::Interrupted, None, None, usage);
        }
    }
    let message = format!(
        "stopped after {} model requests in one turn (max_steps); the work may be unfinished. Raise FIDO_MAX_STEPS or ask again to continue.",
        deps.settings.max_steps
    );
    deps.events.emit(EventKind::Error {
        message: message.clone(),
    });
    warn!("{message}");
    outcome(TurnStatus::MaxSteps, None, Some(message), usage)
}

/// One provider request; `None` when the user interrupted it.
pub(super) async fn request_completion(
    conversation: &Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
) -> Option<Result<Completion, ProviderError>> {
    request(conversation, deps, cancel, false).await
}

/// One provider request; with `stream_text`, its text fragments go to the
/// live UI as they arrive (the answers of a turn, not compaction summaries).
async fn request(
    conversation: &Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    stream_text: bool,
) -> Option<Result<Completion, ProviderError>> {
    let events = deps.events.clone();
    let notices = move |notice: ProviderNotice| match notice {
        ProviderNotice::Retrying {
            attempt,
            delay,
            reason,
        } => events.emit(EventKind::Retrying {
            attempt,
            delay_ms: delay.as_millis() as u64,
            reason: text::summary(&reason, 200),
        }),
        ProviderNotice::TextDelta(text) if stream_text => {
            events.emit(EventKind::AssistantDelta { text });
        }
        ProviderNotice::TextDelta(_) | ProviderNotice::ToolCallStarted { .. } => {}
    };
    let request = ChatRequest {
        messages: conversation.messages(),
        tools: deps.catalog.specs(),
    };
    tokio::select! {
        // Dropping the request future aborts the HTTP request at once.
        _ = cancel.cancelled() => None,
        result = deps.provider.complete(request, &notices) => Some(result),
    }
}

pub(super) fn record_usage(deps: &AgentDeps, usage: &mut UsageTotals, completion: &Completion) {
    usage.record(completion.usage);
    deps.events.emit(EventKind::Usage {
        identity: deps.ctx.identity.label().to_string(),
        prompt_tokens: completion.usage.prompt_tokens,
        cached_tokens: completion.usage.cached_tokens,
        completion_tokens: completion.usage.completion_tokens,
    });
}

/// Runs the calls in order, appending exactly one result for each, also
/// for calls that are skipped because the user interrupted.
async fn run_tool_calls(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    calls: &[ToolCall],
    cancel: &CancellationToken,
) {
    for call in calls {
        deps.events.emit(EventKind::ToolCall {
            id: call.id.clone(),
            name: text::summary(&call.name, 64),
            summary: call_summary(call),
        });
        let output = if cancel.is_cancelled() {
            ToolOutput::error("cancelled by the user before it ran")
        } else {
            let invocation = deps.catalog.invoke(
                call,
                &deps.tool_env,
                &deps.ctx,
                conversation.messages(),
                cancel,
            );
            tokio::select! {
                output = invocation => output,
                // Dropping the invocation kills what it started (process groups
                // are killed on drop); the call still gets its result.
                _ = cancel.cancelled() => ToolOutput::error("cancelled by the user"),
            }
        };
        deps.events.emit(EventKind::ToolResult {
            id: call.id.clone(),
            name: text::summary(&call.name, 64),
            ok: output.ok,
            summary: text::summary(&output.content, 120),
        });
        if let Some(shown) = super::live::tool_output(call, &output) {
            deps.events.emit(shown);
        }
        if output.ok
            && deps.catalog.kind_of(&call.name) == Some(ToolKind::PlanState)
            && let Some(plan) = &output.details
        {
            deps.events.emit(EventKind::PlanUpdated {
                flavour: call.name.clone(),
                plan: plan.clone(),
            });
        }
        conversation.push(Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content: output.content,
            is_error: !output.ok,
        });
    }
}

/// The settle reminder when the workspace plan still has open items; never
/// for a subagent, which does not own the plan.
fn settle_reminder(deps: &AgentDeps) -> Option<String> {
    if deps.ctx.is_subagent() {
        return None;
    }
    // The catalog advertises exactly one plan tool: it names the flavour.
    if deps.catalog.kind_of(todo::TOOL_NAME) == Some(ToolKind::PlanState) {
        return todo::reminder::settle_reminder_in(&deps.tool_env.workspace.root);
    }
    match deps.tool_env.plan.load() {
        Ok(loaded) => restore::settle_reminder(&loaded.state),
        Err(err) => {
            warn!(error = %err, "cannot read the plan for the settle reminder");
            None
        }
    }
}

/// A short, sanitised description of a call for events: the path, pattern
/// or command it names, never whole file contents.
fn call_summary(call: &ToolCall) -> String {
    let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
    let detail = ["path", "pattern", "command", "question", "task", "subject"]
        .iter()
        .find_map(|key| args.get(*key).and_then(|v| v.as_str()))
        .unwrap_or("");
    text::summary(detail, 80)
}
