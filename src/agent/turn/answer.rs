//! Whether a text answer ends the turn: a refusal ends it, a cut-off
//! answer is continued (a few times, then it ends the turn), a repeated
//! one pointed out, a call written as text with misfit arguments sent
//! back, and open plan items get their one reminder.

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::super::loop_detect::Verdict;
use super::super::{AgentDeps, Conversation, calls, hook_points};
use crate::plan::{restore, todo};
use crate::protocol::{EventKind, Message};

/// What happens after an answer without tool calls.
pub(super) enum AfterAnswer {
    /// The model gets another step (a note or a reminder was appended).
    Continue,
    /// The answer is final.
    Done,
    /// The loop guard ends the turn with this message.
    Looped(String),
    /// The answer stayed cut off at the output limit.
    CutOff(String),
    /// The model or its provider refused.
    Refused(String),
}

/// What the turn already did to get a final answer.
#[derive(Default)]
pub(super) struct Ending {
    /// The settle reminder was sent (once per user prompt).
    reminded: bool,
    /// Answers cut off at the output limit so far.
    cut_off_answers: u32,
    /// Times a Stop hook kept the turn going.
    stop_continuations: u32,
}

/// A text answer, as [`after_answer`] weighs it.
pub(super) struct Answer<'a> {
    pub(super) text: Option<&'a str>,
    /// It ended at the output limit.
    pub(super) cut_off: bool,
    /// The model or its provider refused.
    pub(super) refused: bool,
    /// The loop detector's word on it.
    pub(super) verdict: &'a Verdict,
    /// The turn's; an interrupt stops a Stop hook that is running.
    pub(super) cancel: &'a CancellationToken,
}

/// Decides whether a text answer ends the turn: a cut-off answer is
/// continued (a few times), a repeated one is pointed out, a call written
/// as text with misfit arguments is sent back, open plan items get their
/// one reminder.
pub(super) async fn after_answer(
    conversation: &mut Conversation,
    deps: &AgentDeps,
    answer: Answer<'_>,
    ending: &mut Ending,
) -> AfterAnswer {
    if answer.refused {
        return AfterAnswer::Refused(refusal(answer.text));
    }
    if answer.cut_off {
        ending.cut_off_answers += 1;
        let message = format!(
            "the answer was cut off at the model's output limit (max_output_tokens {})",
            deps.settings.limits.max_output_tokens
        );
        if ending.cut_off_answers > MAX_CUT_OFF_CONTINUATIONS {
            return AfterAnswer::CutOff(format!("{message}, again; the answer is incomplete"));
        }
        deps.events.emit(EventKind::Error {
            message: format!("{message}; asking the model to finish it"),
        });
        conversation.push(Message::user(CUT_OFF_NOTE));
        return AfterAnswer::Continue;
    }
    match answer.verdict {
        Verdict::Stop(repetition) => return AfterAnswer::Looped(repetition.stop_message()),
        Verdict::Warn(repetition) => {
            conversation.push(Message::user(repetition.note(true, false)));
            return AfterAnswer::Continue;
        }
        Verdict::Fine => {}
    }
    if let Some(note) = misfit_call_note(deps, answer.text) {
        info!("the answer is a call written as text with misfit arguments; sending it back");
        conversation.push(Message::user(note));
        return AfterAnswer::Continue;
    }
    if !ending.reminded
        && let Some(reminder) = settle_reminder(deps).await
    {
        // Once per user prompt: the model gets one more turn to finish open
        // items or record honestly why they are open.
        ending.reminded = true;
        info!("plan has open items; reminding the model before the turn ends");
        conversation.push(Message::user(reminder));
        return AfterAnswer::Continue;
    }
    let continuations = ending.stop_continuations;
    let stop = hook_points::stop_blocked(deps, answer.text, continuations, answer.cancel);
    if let Some(note) = stop.await {
        ending.stop_continuations += 1;
        info!("a Stop hook keeps the turn going");
        conversation.push(Message::user(note));
        return AfterAnswer::Continue;
    }
    AfterAnswer::Done
}

/// With `tool_call_fallback`, an answer that is only a call written as text
/// whose arguments miss the tool's schema was meant as a call (Qwen2.5-Coder
/// 0.5B on llama.cpp wrote `delegate` so, with an object for `context`): the
/// note that tells the model, instead of taking the text as its answer.
fn misfit_call_note(deps: &AgentDeps, text: Option<&str>) -> Option<String> {
    if !deps.settings.limits.tool_call_fallback {
        return None;
    }
    let (name, problem) = calls::misfit_text_call(text?, deps.catalog.specs())?;
    Some(format!(
        "[Fido: your reply is a call to {name} written as text, and its arguments do not fit the tool ({problem}), so it was not run. Call {name} as a tool with fitting arguments, or give your answer in prose.]"
    ))
}

/// Why a refused turn ended: the model's words, or the provider's filter.
fn refusal(text: Option<&str>) -> String {
    match text {
        Some(text) => format!("the model refused: {}", crate::text::summary(text, 200)),
        None => "the provider refused the answer (a content filter)".into(),
    }
}

/// Answers cut off at the output limit the model may continue in one turn.
const MAX_CUT_OFF_CONTINUATIONS: u32 = 2;

/// What the model is told after an answer that hit the output limit.
const CUT_OFF_NOTE: &str = "[Fido: your last answer was cut off at the output limit, so it is incomplete. Continue from where it stopped, more briefly.]";

/// The settle reminder when the workspace plan still has open items; never
/// for a subagent, whose plan is its own working notes and whose model
/// requests are few.
async fn settle_reminder(deps: &AgentDeps) -> Option<String> {
    if deps.ctx.is_subagent() {
        return None;
    }
    // The catalog advertises exactly one plan tool: it names the flavour.
    let todo_flavour = deps.catalog.changes_plan(todo::TOOL_NAME);
    let root = deps.tool_env.workspace.root.clone();
    let plan = deps.tool_env.plan.clone();
    // The state file's lock and read block: off the runtime.
    let reminder = tokio::task::spawn_blocking(move || {
        if todo_flavour {
            return todo::reminder::settle_reminder_in(&root);
        }
        match plan.load() {
            Ok(loaded) => restore::settle_reminder(&loaded.state),
            Err(err) => {
                warn!(error = %err, "cannot read the plan for the settle reminder");
                None
            }
        }
    })
    .await;
    reminder.unwrap_or(None)
}
