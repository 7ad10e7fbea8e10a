//! User hooks: commands from the user's configuration that run at the
//! session's events (`[[hooks.EVENT]]`, see the README's "Hooks"), with the
//! protocol of Claude Code and Codex so their scripts port with at most a
//! matcher change.
//!
//! - [`config`]: the tables, from trusted layers only.
//! - [`input`]: the JSON object a hook reads on stdin.
//! - [`runner`]: one run, in a process group of its own, capped, timed.
//! - [`reply`]: what its exit code and stdout decide.
//! - [`points`]: every point of a session where hooks run, and what
//!   their answers do there, typed for the caller to act on.
//!
//! [`Hooks`] runs the hooks of one event in the order configured and sums
//! up what they said; [`points`] says what that means. Hooks never touch
//! the cached prefix: what they add enters the conversation as a message
//! where it happened. Only the main agent runs hooks; a subagent's calls
//! are confined by its sandbox instead (README).

pub mod config;
pub mod input;
pub mod points;
pub mod reply;
pub mod runner;

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

pub use config::{HookConfig, HookConfigError, HooksConfig};
use input::SessionFacts;
pub use input::{CompactTrigger, HookInput, SessionSource};
use reply::Reply;

use crate::process::EnvPolicy;
use crate::protocol::EventKind;
use crate::protocol::event_queue::EventSink;
use crate::protocol::hook::HookDecision;
pub use crate::protocol::hook::HookEvent;

/// What the hooks of one event said together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookOutcome {
    /// The strongest decision: deny beats ask beats allow beats none.
    pub decision: HookDecision,
    /// The reason of the first hook that made that decision.
    pub reason: Option<String>,
    /// What the hooks added for the model, in order.
    pub context: Vec<String>,
}

impl HookOutcome {
    fn add(&mut self, reply: Reply) {
        if reply.decision.strongest(self.decision) != self.decision {
            self.decision = reply.decision;
            self.reason = reply.reason;
        }
        self.context.extend(reply.context);
    }

    /// The added context as one text, if any.
    pub fn context_text(&self) -> Option<String> {
        (!self.context.is_empty()).then(|| self.context.join("\n\n"))
    }

    /// The reason, or a stand-in when the hook gave none.
    pub fn reason_text(&self) -> String {
        self.reason
            .clone()
            .unwrap_or_else(|| "the hook gave no reason".into())
    }
}

/// The session's hooks and what every run of them is told.
pub struct Hooks {
    config: HooksConfig,
    workspace: PathBuf,
    /// Which of Fido's variables the hooks get.
    env_policy: EnvPolicy,
    facts: Mutex<SessionFacts>,
    /// Where `hook_started` / `hook_finished` go.
    events: Option<EventSink>,
}

impl Hooks {
    /// The session's hooks; without any, the same as [`Hooks::none`]
    /// (no clone of `events` kept for nothing).
    pub fn new(
        config: HooksConfig,
        workspace: PathBuf,
        env_policy: EnvPolicy,
        events: EventSink,
    ) -> Hooks {
        if config.is_empty() {
            return Hooks::none();
        }
        let facts = SessionFacts {
            cwd: workspace.display().to_string(),
            ..SessionFacts::default()
        };
        Hooks {
            config,
            workspace,
            env_policy,
            facts: Mutex::new(facts),
            events: Some(events),
        }
    }

    /// No hooks at all (a subagent, a single `fido tool call`, tests).
    pub fn none() -> Hooks {
        Hooks {
            config: HooksConfig::default(),
            workspace: PathBuf::from("."),
            env_policy: EnvPolicy::default(),
            facts: Mutex::new(SessionFacts::default()),
            events: None,
        }
    }

    /// The session's id and transcript, once the journal is open.
    pub fn set_session(&self, session_id: Option<String>, transcript_path: Option<PathBuf>) {
        let mut facts = self.facts.lock().unwrap_or_else(PoisonError::into_inner);
        facts.session_id = session_id;
        facts.transcript_path = transcript_path.map(|p| p.display().to_string());
    }

    /// Whether any hook runs for `event` (and `tool`).
    pub fn any(&self, event: HookEvent, tool: Option<&str>) -> bool {
        self.config.for_event(event, tool).next().is_some()
    }

    /// Runs the hooks `input`'s event selects, one after the other.
    pub async fn run(&self, input: HookInput) -> HookOutcome {
        let event = input.event();
        let mut outcome = HookOutcome::default();
        if !self.any(event, input.tool_name()) {
            return outcome;
        }
        let stdin = {
            let facts = self.facts.lock().unwrap_or_else(PoisonError::into_inner);
            input::stdin_json(&facts, &input)
        };
        for hook in self.config.for_event(event, input.tool_name()) {
            outcome.add(self.run_one(hook, stdin.clone()).await);
        }
        outcome
    }

    async fn run_one(&self, hook: &HookConfig, stdin: Vec<u8>) -> Reply {
        let (event, command) = (hook.event, crate::text::summary(&hook.command, 80));
        self.emit(EventKind::HookStarted {
            event,
            command: command.clone(),
        });
        let ran = runner::run_command(
            &hook.command,
            &self.workspace,
            &self.env_policy,
            stdin,
            hook.timeout,
        )
        .await;
        let reply = reply::interpret(hook.event, &ran);
        let message = match (&reply.failure, reply.decision) {
            (Some(failure), _) => Some(failure.clone()),
            (None, HookDecision::Deny) => reply
                .reason
                .as_deref()
                .map(|r| crate::text::summary(r, 200)),
            (None, HookDecision::None | HookDecision::Allow | HookDecision::Ask) => reply
                .notice
                .as_deref()
                .map(|n| crate::text::summary(n, 200)),
        };
        if let Some(failure) = &reply.failure {
            tracing::warn!(event = event.as_str(), command = %command, "a hook failed (non-blocking): {failure}");
        }
        self.emit(EventKind::HookFinished {
            event,
            command,
            status: ran.status,
            exit_code: ran
                .code
                .filter(|_| ran.status == crate::protocol::hook::HookStatus::Exited),
            decision: reply.decision,
            elapsed_ms: u64::try_from(ran.elapsed.as_millis()).unwrap_or(u64::MAX),
            message,
        });
        reply
    }

    fn emit(&self, event: EventKind) {
        if let Some(events) = &self.events {
            events.emit(event);
        }
    }
}

#[cfg(test)]
mod tests;
