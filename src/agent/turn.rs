//! The turn loop, shared by every agent (main today, subagents later).
//!
//! A turn: append the user prompt, then repeat — compact if the context is
//! too large, ask the model, record its message, run the tool calls it made
//! and append one result per call — until the model answers without tool
//! calls, the step budget runs out, the provider fails for good, or the user
//! interrupts. Whatever ends the turn, the conversation stays valid: every
//! tool call has its result.

use std::ops::ControlFlow;

use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span, warn};

use self::answer::{AfterAnswer, Answer, Ending, after_answer};
use self::tool_hooks::HookNotes;
use super::compaction;
use super::compaction::Trigger;
use super::loop_detect::{LoopDetector, Repetition, Verdict, signature};
use super::request::{Asked, record_usage, request};
use super::{AgentDeps, CompactionSettings, Conversation, calls, limits};
use crate::protocol::op::TurnOutcome;
use crate::protocol::{EventKind, Message, ToolCall, UsageTotals};
use crate::provider::{Completion, FinishReason, ProviderError, ToolChoice};
use crate::text;
use crate::tools::ToolOutput;
use crate::tools::commit::{CommitPoint, until_cancelled};

mod answer;
mod tool_hooks;

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
        if let Some(delegator) = &deps.tool_env.delegator {
            delegator.begin_turn();
        }
        let before = deps.provider.usage_totals();
        let submitted = super::hook_points::submit_prompt(conversation, deps, prompt, cancel).await;
        let mut outcome = match submitted {
            Ok(()) => turn_steps(conversation, deps, cancel).await,
            Err(kept_back) => kept_back,
        };
        // Through the session's gateway, the turn's totals are everything
        // asked during it: this loop's requests and every subagent's.
        if let (Some(before), Some(after)) = (before, deps.provider.usage_totals()) {
            outcome = outcome.with_usage(after.since(before));
        }
        let (status, usage) = (outcome.status(), outcome.usage());
        if let Some(journal) = &deps.journal {
            let (generation, messages) = (conversation.generation(), conversation.messages());
            journal
                .turn_ended(generation, messages, turn, status, usage)
                .await;
        }
        deps.events.emit(EventKind::TurnCompleted {
            turn,
            status,
            usage,
        });
        info!(?status, requests = usage.requests, "turn ended");
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
    let mut state = TurnState {
        usage: UsageTotals::default(),
        ending: Ending::default(),
        detector: LoopDetector::new(deps.settings.limits.loop_repeat_limit),
        asked: Asked::TURN,
    };
    learn_window(conversation, deps, cancel).await;
    for step in 0..deps.settings.max_steps {
        if let ControlFlow::Break(outcome) =
            turn_step(conversation, deps, cancel, &mut state, step).await
        {
            return outcome;
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
    TurnOutcome::MaxSteps {
        message,
        usage: state.usage,
    }
}

/// What a turn carries from one step to the next.
struct TurnState {
    usage: UsageTotals,
    ending: Ending,
    detector: LoopDetector,
    /// After a warned repetition of a call that worked, the next answer is
    /// asked for in text: the model has what it needs and keeps calling.
    asked: Asked,
}

impl TurnState {
    fn interrupted(&self) -> ControlFlow<TurnOutcome> {
        ControlFlow::Break(TurnOutcome::Interrupted { usage: self.usage })
    }

    /// Ends the turn as failed, saying why in an `error` event.
    fn failed(&self, deps: &AgentDeps, message: String) -> ControlFlow<TurnOutcome> {
        let usage = self.usage;
        self.ended(deps, TurnOutcome::Failed { message, usage })
    }

    /// Ends the turn with `outcome`, saying why in an `error` event.
    fn ended(&self, deps: &AgentDeps, outcome: TurnOutcome) -> ControlFlow<TurnOutcome> {
        if let Some(message) = outcome.error() {
            report(deps, message);
        }
        ControlFlow::Break(outcome)
    }

    /// Ends the turn as stopped by the loop guard, saying why.
    fn looped(&self, deps: &AgentDeps, message: String) -> ControlFlow<TurnOutcome> {
        let usage = self.usage;
        self.ended(deps, TurnOutcome::Looped { message, usage })
    }
}

fn report(deps: &AgentDeps, message: &str) {
    warn!("{message}");
    deps.events.emit(EventKind::Error {
        message: message.to_string(),
    });
}

/// One step: compact if needed, ask the model, record its answer, then
/// either weigh a text answer or run the calls. `Break` ends the turn.
async fn turn_step(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    state: &mut TurnState,
    step: u32,
) -> ControlFlow<TurnOutcome> {
    if cancel.is_cancelled() {
        return state.interrupted();
    }
    // A step boundary: what the last step added is on disk before the
    // next request, so a crash loses at most the step in flight.
    deps.journal_step(conversation).await;
    let budget = compaction_budget(conversation, deps);
    let usage = &mut state.usage;
    compaction::maybe_compact(
        conversation,
        deps,
        budget,
        Trigger::Threshold,
        cancel,
        usage,
    )
    .await;

    let answered = request_fitting(conversation, deps, cancel, usage, state.asked).await;
    let tools_off = state.asked.tool_choice == ToolChoice::None;
    state.asked = Asked::TURN;
    let completion = match answered {
        Some(Ok(completion)) => completion,
        Some(Err(err)) => return state.failed(deps, err.to_string()),
        None => return state.interrupted(),
    };
    record_usage(deps, &mut state.usage, &completion);
    let Some(reply) = record_reply(conversation, deps, completion) else {
        let message = "the provider returned a message that is not an assistant message";
        return ControlFlow::Break(TurnOutcome::Failed {
            message: message.into(),
            usage: state.usage,
        });
    };
    let text_verdict = state
        .detector
        .observe_text(reply.text.as_deref().unwrap_or(""));
    if tools_off
        && reply.tool_calls.is_empty()
        && let Some(message) = repeated_in_text(deps, reply.text.as_deref(), &mut state.detector)
    {
        return state.looped(deps, message);
    }
    if reply.tool_calls.is_empty() {
        let answer = (reply, &text_verdict, cancel);
        return answered_in_text(conversation, deps, answer, state).await;
    }
    info!(step, calls = reply.tool_calls.len(), "running tool calls");
    run_calls(conversation, deps, cancel, &reply, state).await
}

/// The model's answer as recorded in the conversation.
struct Reply {
    /// Its text, when not blank.
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
    /// Why each refused call was refused (see [`calls::sanitize`]).
    refusals: Vec<Option<String>>,
    /// It ended at the output limit.
    cut_off: bool,
    /// The model or its provider refused (its text, if any, says so).
    refused: bool,
}

/// Records the model's message (its text shown, calls written as text
/// taken as calls, malformed calls refused); `None` when it is not an
/// assistant message.
fn record_reply(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    completion: Completion,
) -> Option<Reply> {
    let Message::Assistant {
        content,
        tool_calls,
    } = completion.message
    else {
        return None;
    };
    let (content, tool_calls) = text_calls(deps, content, tool_calls);
    let cut_off = completion.finish_reason == FinishReason::Length;
    let (tool_calls, refusals) = calls::sanitize(tool_calls, cut_off);
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
    Some(Reply {
        text,
        tool_calls,
        refusals,
        cut_off,
        refused: completion.finish_reason == FinishReason::Refusal,
    })
}

/// An answer without calls: the turn's end, or one more step.
async fn answered_in_text(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    (reply, verdict, cancel): (Reply, &Verdict, &CancellationToken),
    state: &mut TurnState,
) -> ControlFlow<TurnOutcome> {
    let answer = Answer {
        text: reply.text.as_deref(),
        cut_off: reply.cut_off,
        refused: reply.refused,
        verdict,
        cancel,
    };
    match after_answer(conversation, deps, answer, &mut state.ending).await {
        AfterAnswer::Continue => ControlFlow::Continue(()),
        AfterAnswer::Looped(message) => state.looped(deps, message),
        AfterAnswer::CutOff(message) => state.ended(
            deps,
            TurnOutcome::MaxTokens {
                message,
                usage: state.usage,
            },
        ),
        AfterAnswer::Refused(message) => state.ended(
            deps,
            TurnOutcome::Refused {
                message,
                usage: state.usage,
            },
        ),
        AfterAnswer::Done => ControlFlow::Break(TurnOutcome::Completed {
            final_text: reply.text,
            usage: state.usage,
        }),
    }
}

/// Runs the reply's calls; the turn ends when it is interrupted or the
/// loop guard stops it.
async fn run_calls(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    reply: &Reply,
    state: &mut TurnState,
) -> ControlFlow<TurnOutcome> {
    // The calls are written before they run: a crash during one leaves
    // a journal that says which call it interrupted.
    deps.journal_calls(conversation).await;
    let ran = run_tool_calls(
        conversation,
        deps,
        &reply.tool_calls,
        &reply.refusals,
        &mut state.detector,
        cancel,
    )
    .await;
    if cancel.is_cancelled() {
        return state.interrupted();
    }
    if let Some(message) = ran.stop {
        return state.looped(deps, message);
    }
    if ran.text_next {
        info!("a repeated call already worked; asking for the next answer in text");
        state.asked.tool_choice = ToolChoice::None;
    }
    ControlFlow::Continue(())
}

/// Asks the server for its context window, once per conversation.
async fn learn_window(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
) {
    if conversation.window_probed() {
        return;
    }
    let served = tokio::select! {
        _ = cancel.cancelled() => None,
        served = deps.provider.context_window() => served,
    };
    let window = limits::resolve_window(served, deps.settings.limits.context_window);
    let budget = limits::compaction_for(
        deps.settings.compaction,
        &deps.settings.limits,
        window,
        limits::tools_tokens(deps.catalog.specs()),
    );
    info!(
        served = ?served,
        window = ?window,
        threshold = budget.threshold_tokens,
        "context window"
    );
    conversation.set_context_window(window);
}

fn compaction_budget(conversation: &Conversation, deps: &AgentDeps) -> CompactionSettings {
    limits::compaction_for(
        deps.settings.compaction,
        &deps.settings.limits,
        conversation.context_window(),
        limits::tools_tokens(deps.catalog.specs()),
    )
}

/// One request; when the server refuses it for its size, learns the window
/// it names, compacts, and tries once more. `None` when interrupted.
async fn request_fitting(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    cancel: &CancellationToken,
    usage: &mut UsageTotals,
    asked: Asked,
) -> Option<Result<Completion, ProviderError>> {
    let result = request(conversation, deps, cancel, asked).await?;
    let Err(err) = &result else {
        return Some(result);
    };
    let Some(n_ctx) = limits::overflow(err) else {
        return Some(result);
    };
    if let Some(n_ctx) = n_ctx {
        conversation.shrink_context_window(n_ctx);
    }
    warn!(error = %err, ?n_ctx, "the request was too large for the context window; compacting and trying again");
    // The estimate said the request fits and the server disagreed: keep
    // much less than the estimate would, so the retry is clearly smaller.
    let mut budget = compaction_budget(conversation, deps);
    budget.keep_recent_tokens = budget
        .keep_recent_tokens
        .min(conversation.estimated_tokens() / 3);
    let compacted =
        compaction::maybe_compact(conversation, deps, budget, Trigger::Overflow, cancel, usage)
            .await;
    if !compacted {
        return Some(result);
    }
    request(conversation, deps, cancel, asked).await
}

/// With `tool_call_fallback`, calls written into the text of an answer that
/// has no real ones. Each gets an id of its own: a model writes the same
/// block turn after turn, and the wire formats need call ids unique in a
/// conversation (Anthropic refuses a repeated `tool_use` id).
fn text_calls(
    deps: &AgentDeps,
    content: Option<String>,
    tool_calls: Vec<ToolCall>,
) -> (Option<String>, Vec<ToolCall>) {
    if !deps.settings.limits.tool_call_fallback || !tool_calls.is_empty() {
        return (content, tool_calls);
    }
    let found = content
        .as_deref()
        .and_then(|text| calls::calls_from_text(text, deps.catalog.specs()));
    match found {
        Some((rest, mut calls)) => {
            for (i, call) in calls.iter_mut().enumerate() {
                call.id = format!("text_call_{:012x}_{i}", fastrand::u64(..) >> 16);
            }
            (Some(rest), calls)
        }
        None => (content, tool_calls),
    }
}

/// Asked for text after a repeated call, a model may write the same call
/// as text instead (a small one copies its last turn): that is the repeat
/// once more, also when `tool_call_fallback` is off. The call is not run.
fn repeated_in_text(
    deps: &AgentDeps,
    text: Option<&str>,
    detector: &mut LoopDetector,
) -> Option<String> {
    let (_, written) = calls::calls_from_text(text?, deps.catalog.specs())?;
    written.iter().find_map(
        |call| match detector.observe_call(&call.name, &call.arguments) {
            Verdict::Stop(repetition) => Some(repetition.stop_message()),
            _ => None,
        },
    )
}

/// How a message's tool calls ended.
#[derive(Debug)]
struct CallsRan {
    /// The loop detector ended the turn with this message.
    stop: Option<String>,
    /// A warned repetition repeats a call that already worked: the next
    /// answer is asked for in text.
    text_next: bool,
}

/// Runs the calls in order, appending exactly one result for each, also
/// for calls that are refused (invalid arguments), skipped because the user
/// interrupted, or left unrun because the model is looping.
async fn run_tool_calls(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    calls: &[ToolCall],
    refusals: &[Option<String>],
    detector: &mut LoopDetector,
    cancel: &CancellationToken,
) -> CallsRan {
    let mut stop: Option<String> = None;
    let mut text_next = false;
    let notes = HookNotes::default();
    // Results of the delegations run together, by call index.
    let mut delegated: Vec<Option<ToolOutput>> = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let ran = delegated.get_mut(index).and_then(Option::take);
        if ran.is_none() {
            emit_call(deps, call);
        }
        #[cfg(test)]
        super::recover::fault::hit(
            &deps.tool_env.workspace.root,
            &format!("before {}", call.name),
        );
        let refusal = refusals.get(index).cloned().flatten();
        let verdict = match (&stop, &refusal) {
            (None, None) => detector.observe_call(&call.name, &call.arguments),
            _ => Verdict::Fine,
        };
        if let Verdict::Stop(repetition) = &verdict {
            stop = Some(repetition.stop_message());
        }
        let output = if let Some(output) = ran {
            output
        } else if let Some(message) = &stop {
            ToolOutput::error(format!("not run: {message}; the turn was ended"))
        } else if let Some(refusal) = refusal {
            ToolOutput::error(refusal)
        } else if cancel.is_cancelled() {
            ToolOutput::error("cancelled by the user before it ran")
        } else if is_delegation(deps, call) && delegated.is_empty() {
            delegated =
                run_delegations(conversation, deps, (calls, refusals), index, cancel, &notes).await;
            delegated
                .get_mut(index)
                .and_then(Option::take)
                .unwrap_or_else(|| ToolOutput::error("the delegation returned no result"))
        } else {
            invoke(conversation, deps, call, cancel, &notes).await
        };
        // A warned repetition ran (delegations included): its result says so.
        let output = match &verdict {
            Verdict::Warn(repetition) => {
                let (output, worked) = with_repeat_note(conversation, call, output, repetition);
                text_next |= worked;
                output
            }
            _ => output,
        };
        record_result(conversation, deps, call, output);
    }
    notes.record(conversation);
    CallsRan { stop, text_next }
}

/// A call's result: its events (the plan's too, for a plan tool), then
/// the tool message.
fn record_result(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    call: &ToolCall,
    output: ToolOutput,
) {
    for event in super::live::result_events(call, &output) {
        deps.events.emit(event);
    }
    if output.ok
        && deps.catalog.changes_plan(&call.name)
        && let Some(plan) = &output.plan
    {
        deps.events.emit(EventKind::PlanUpdated {
            plan: (**plan).clone(),
        });
    }
    conversation.push(Message::Tool {
        tool_call_id: call.id.clone(),
        name: call.name.clone(),
        content: output.content,
        is_error: !output.ok,
    });
}

fn emit_call(deps: &AgentDeps, call: &ToolCall) {
    deps.events.emit(EventKind::ToolCall {
        id: call.id.clone(),
        name: text::summary(&call.name, 64),
        summary: call.summary(),
    });
}

fn is_delegation(deps: &AgentDeps, call: &ToolCall) -> bool {
    deps.catalog.starts_subagent(&call.name)
}

/// Runs the `delegate` calls of the message from `first` on together (the
/// supervisor runs as many at once as `delegate_concurrency` allows and
/// queues the rest in call order). Every fork is taken from the same
/// conversation, before any of their results is added, so the forks share
/// one prefix. Returns the outputs by call index; the other calls are left
/// to the caller, which runs them after the delegations (as their "not run
/// in this fork" answer in the forks says).
async fn run_delegations(
    conversation: &Conversation,
    deps: &AgentDeps,
    (calls, refusals): (&[ToolCall], &[Option<String>]),
    first: usize,
    cancel: &CancellationToken,
    notes: &HookNotes,
) -> Vec<Option<ToolOutput>> {
    let batch: Vec<usize> = (first..calls.len())
        .filter(|&i| is_delegation(deps, &calls[i]))
        .filter(|&i| refusals.get(i).is_none_or(Option::is_none))
        .collect();
    for &i in batch.iter().skip(1) {
        emit_call(deps, &calls[i]);
    }
    info!(delegations = batch.len(), "running delegations together");
    // `join_all` polls the futures in order, so the supervisor receives
    // them in call order.
    let outputs = futures_util::future::join_all(
        batch
            .iter()
            .map(|&i| invoke(conversation, deps, &calls[i], cancel, notes)),
    )
    .await;
    let mut by_index: Vec<Option<ToolOutput>> = vec![None; calls.len()];
    for (i, output) in batch.into_iter().zip(outputs) {
        by_index[i] = Some(output);
    }
    by_index
}

/// Invokes `call` through the user's tool hooks.
async fn invoke(
    conversation: &Conversation,
    deps: &AgentDeps,
    call: &ToolCall,
    cancel: &CancellationToken,
    notes: &HookNotes,
) -> ToolOutput {
    let commit_point = CommitPoint::default();
    let invocation = tool_hooks::hooked(deps, call, notes, |scope| {
        let invocation = deps.catalog.invoke_committing(
            call,
            &deps.tool_env,
            &deps.ctx,
            conversation.messages(),
            (cancel, &commit_point),
        );
        crate::tools::approval::in_call(scope, invocation)
    });
    // A cancel drops the invocation, which kills what it started (process
    // groups are killed on drop), unless a file change already committed:
    // then its own result is the call's.
    until_cancelled(invocation, &commit_point, cancel).await
}

/// The results of the earlier calls with `call`'s name and arguments, in
/// conversation order, each with whether it succeeded.
fn earlier_identical_results<'a>(
    conversation: &'a Conversation,
    call: &ToolCall,
) -> Vec<(&'a String, bool)> {
    let wanted = signature(&call.name, &call.arguments);
    let messages = conversation.messages();
    let ids: Vec<&str> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls),
            _ => None,
        })
        .flatten()
        .filter(|c| c.id != call.id && signature(&c.name, &c.arguments) == wanted)
        .map(|c| c.id.as_str())
        .collect();
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } if ids.contains(&tool_call_id.as_str()) => Some((content, !is_error)),
            _ => None,
        })
        .collect()
}

/// `output` of a warned repetition with the note for the model appended;
/// and whether the call worked, this time or an earlier one.
fn with_repeat_note(
    conversation: &Conversation,
    call: &ToolCall,
    mut output: ToolOutput,
    repetition: &Repetition,
) -> (ToolOutput, bool) {
    let earlier = earlier_identical_results(conversation, call);
    let unchanged = earlier.last().map(|(content, _)| *content) == Some(&output.content);
    let worked = output.ok || earlier.iter().any(|(_, ok)| *ok);
    let note = repetition.note(unchanged, worked);
    output.content = format!("{}\n\n{note}", output.content);
    (output, worked)
}
