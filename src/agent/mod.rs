//! The agent: one turn loop shared by the main agent and its subagents,
//! the conversation it owns, the stable system prompt, and compaction.
//!
//! Invariants (the prompt-cache contract, checked on every recorded request
//! by the integration tests):
//! - `messages[0]` is the system prompt, built once per session and never
//!   rewritten; it holds no timestamps and no state.
//! - The tool catalog is the same object for the whole session.
//! - Requests only append to the conversation, except when compaction runs.
//! - Every tool call is answered by exactly one tool result, also on error or
//!   cancellation.

mod actor;
pub mod asks;
mod calls;
mod compaction;
mod conversation;
mod deps;
pub mod hook_points;

pub mod instructions;
pub mod limits;
pub(crate) mod live;
pub mod loop_detect;
pub mod ops;
mod prompt;
pub mod recover;
mod request;
pub mod streamed_text;
mod turn;
mod watch;
#[cfg(test)]
mod wire_tests;

pub use crate::protocol::event_queue::{EventReceiver, EventSink};
pub use crate::protocol::op::TurnOutcome;
pub use actor::{AgentActor, AgentArguments, AgentMessage, AgentRefusal};
pub use compaction::{CompactionSettings, CompactionStrategy};
pub use conversation::Conversation;
pub use deps::AgentDeps;
pub use instructions::ProjectInstructions;
pub use limits::ModelLimits;
pub use prompt::system_prompt;
pub use turn::run_turn;
pub use watch::spawn_watched;

use crate::plan::{PlanFlavour, PlanSnapshot, restore, todo};
use crate::protocol::{EventKind, Message};
use crate::tools::{ToolCatalog, ToolEnv};

/// A new conversation for a session: the stable system prompt and, when the
/// workspace has a saved plan, that plan as a restored tool result right
/// after it (never in the system prompt, so the cached prefix holds). The
/// loaded plan is also published for the UI.
pub fn start_conversation(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    flavour: PlanFlavour,
    instructions: &ProjectInstructions,
    events: &EventSink,
) -> Conversation {
    let prompt = system_prompt(catalog, &env.approvals.settings(), instructions);
    let mut conversation = Conversation::new(prompt);
    restore_plan(&mut conversation, env, flavour, events);
    conversation
}

/// Appends the workspace plan as a restored tool result with its internal
/// matching call (nothing when no plan was ever saved), and publishes it.
/// Used at start-up and after `/recall`: the plan describes the workspace,
/// not the recalled transcript, so the current one is always re-delivered.
/// Blocking: loading waits for the plan's lock; the actor calls
/// [`restore_plan_off_runtime`].
pub fn restore_plan(
    conversation: &mut Conversation,
    env: &ToolEnv,
    flavour: PlanFlavour,
    events: &EventSink,
) {
    for message in plan_restore(env, flavour, events) {
        conversation.push(message);
    }
}

/// [`restore_plan`] with the plan loaded on the blocking pool, so a lock
/// held by another process holds no runtime worker.
pub async fn restore_plan_off_runtime(
    conversation: &mut Conversation,
    env: &std::sync::Arc<ToolEnv>,
    flavour: PlanFlavour,
    events: &EventSink,
) {
    let (env, events) = (env.clone(), events.clone());
    match tokio::task::spawn_blocking(move || plan_restore(&env, flavour, &events)).await {
        Ok(messages) => messages.into_iter().for_each(|m| conversation.push(m)),
        Err(err) => tracing::warn!(error = %err, "the plan could not be restored"),
    }
}

/// The messages that restore the workspace plan (none when no plan was
/// ever saved); publishes it, and reports a plan that cannot be read.
fn plan_restore(env: &ToolEnv, flavour: PlanFlavour, events: &EventSink) -> Vec<Message> {
    match flavour {
        PlanFlavour::UpdatePlan => restore_update_plan(env, flavour, events),
        PlanFlavour::Todo => restore_todo(env, events),
    }
}

fn restore_update_plan(env: &ToolEnv, flavour: PlanFlavour, events: &EventSink) -> Vec<Message> {
    match env.plan.load() {
        Ok(loaded) => {
            if let Some(warning) = loaded.warning {
                tracing::warn!("{warning}");
                events.emit(EventKind::Error { message: warning });
            }
            let content = loaded.state.to_json_text();
            let messages = restore::restore_messages(flavour.tool_name(), &loaded.state, content);
            if loaded.state.version > 0 {
                events.emit(EventKind::PlanUpdated {
                    plan: PlanSnapshot::UpdatePlan(loaded.state),
                });
            }
            messages
        }
        Err(err) => {
            let message = format!("the saved plan cannot be read, so it was not restored: {err}");
            tracing::warn!("{message}");
            events.emit(EventKind::Error { message });
            Vec::new()
        }
    }
}

/// The `todo` flavour's restore: the saved state as the result of an
/// internal `list` call, published for the UI as its `list` envelope.
fn restore_todo(env: &ToolEnv, events: &EventSink) -> Vec<Message> {
    match env.todos.load() {
        Ok(loaded) => {
            let restored = todo::reminder::restore(&loaded);
            if let Some(warning) = restored.warning {
                tracing::warn!("{warning}");
                events.emit(EventKind::Error { message: warning });
            }
            if let Some(envelope) = restored.details {
                events.emit(EventKind::PlanUpdated {
                    plan: PlanSnapshot::Todo(envelope),
                });
            }
            restored.messages
        }
        Err(err) => {
            let message =
                format!("the saved todo list cannot be read, so it was not restored: {err}");
            tracing::warn!("{message}");
            events.emit(EventKind::Error { message });
            Vec::new()
        }
    }
}

/// Limits of the turn loop, from the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentSettings {
    /// Model requests allowed in one turn before the loop is stopped.
    pub max_steps: u32,
    pub compaction: CompactionSettings,
    /// The model's window, output cap, loop limit and text-call fallback.
    pub limits: ModelLimits,
}

#[cfg(test)]
impl AgentSettings {
    /// What the unit tests' agents run with: 5 steps, compaction far away.
    pub(crate) fn for_tests() -> AgentSettings {
        AgentSettings {
            max_steps: 5,
            compaction: CompactionSettings {
                threshold_tokens: 100_000,
                keep_recent_tokens: 10_000,
                strategy: CompactionStrategy::Elide,
            },
            limits: ModelLimits::default(),
        }
    }
}
