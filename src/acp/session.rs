//! One ACP session: a Fido session ([`Engine`]), the task that turns its
//! events into `session/update` notifications and permission requests,
//! and its turn (one at a time), cancel and shutdown.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, PromptResponse, SessionConfigOption, SessionConfigOptionValue,
    SessionModeState, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::{Client, Error, ErrorCode, RequestCancellationHandle};
use serde_json::json;
use tokio::sync::watch;

use super::children::Children;
use super::commands::{self, Usage};
use super::engine::Engine;
use super::models::{MODEL_OPTION, ModelChoice};
use super::modes::{Mode, Modes};
use super::permission;
use super::updates::{Updates, fido_meta};
use crate::protocol::event_queue::EventReceiver;
use crate::protocol::op::{AskId, Op, OpReply};
use crate::protocol::outcome::TurnOutcome;
use crate::protocol::{ApprovalDecision, ApprovalRequest, EventKind};

/// How long a turn's answer waits for its last events to be sent, so the
/// client has every update before the prompt's response.
const LAST_EVENTS: Duration = Duration::from_secs(2);

pub struct Session {
    pub id: String,
    engine: Engine,
    client: ConnectionTo<Client>,
    /// A turn is running (a second prompt is refused meanwhile).
    running: AtomicBool,
    /// `session/cancel` came during the running turn.
    cancelled: AtomicBool,
    /// How many `turn_completed` events were sent on.
    turns_ended: watch::Sender<u64>,
    /// Permission requests waiting for the client, by Fido's ask id.
    pending: Mutex<HashMap<AskId, RequestCancellationHandle>>,
    /// Requests the client rejected for the rest of the session.
    rejected: Mutex<HashSet<String>>,
    /// The client shows subagents as child sessions.
    subagent_sessions: bool,
    /// The subagents announced, by agent id (their child session ids).
    children: Mutex<HashSet<String>>,
    /// The session modes offered, and the one it is in.
    modes: Mutex<Modes>,
    /// The models offered, and the one in use.
    models: Mutex<ModelChoice>,
}

impl Session {
    pub fn new(
        id: String,
        engine: Engine,
        client: ConnectionTo<Client>,
        subagent_sessions: bool,
    ) -> Arc<Session> {
        let modes = Mutex::new(Modes::new(&engine.safety));
        let models = Mutex::new(engine.models.clone());
        Arc::new(Session {
            id,
            modes,
            models,
            engine,
            client,
            running: AtomicBool::new(false),
            cancelled: AtomicBool::new(false),
            turns_ended: watch::Sender::new(0),
            pending: Mutex::new(HashMap::new()),
            rejected: Mutex::new(HashSet::new()),
            subagent_sessions,
            children: Mutex::new(HashSet::new()),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The modes offered, as `session/new` and `session/load` answer.
    pub fn modes(&self) -> SessionModeState {
        lock(&self.modes).state()
    }

    /// `session/set_mode`: the engine switches the sandbox and approval
    /// policy of mode `id`, or the error names why it refused.
    pub async fn switch_mode(&self, id: &str) -> Result<Mode, Error> {
        let Some(mode) = lock(&self.modes).find(id).cloned() else {
            return Err(Error::new(
                ErrorCode::INVALID_PARAMS,
                format!("unknown mode: {id}"),
            ));
        };
        self.engine
            .switch_safety(mode.sandbox_mode, mode.approval_policy)
            .await
            .map_err(|why| {
                Error::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("mode {id} refused: {why}"),
                )
                .data(json!({ "modeId": id }))
            })?;
        lock(&self.modes).set_current(mode.id);
        Ok(mode)
    }

    /// The config options, as `session/new` and `session/load` answer.
    pub fn config_options(&self) -> Vec<SessionConfigOption> {
        lock(&self.models).options()
    }

    /// `session/set_config_option`: the engine switches to model `value`
    /// from the next request on; the answer is every option as it is now.
    pub async fn set_config_option(
        &self,
        config_id: &str,
        value: &SessionConfigOptionValue,
    ) -> Result<Vec<SessionConfigOption>, Error> {
        let invalid = |message: String| Error::new(ErrorCode::INVALID_PARAMS, message);
        if config_id != MODEL_OPTION {
            return Err(invalid(format!("unknown config option: {config_id}")));
        }
        let Some(model) = value.as_value_id() else {
            return Err(invalid("the model option takes one of its values".into()));
        };
        let model = model.0.to_string();
        if !lock(&self.models).offers(&model) {
            return Err(invalid(format!("{model} is not one of the models offered")));
        }
        match self.engine.command(Op::SwitchModel { model }).await {
            Some(OpReply::ModelSwitched { model }) => {
                lock(&self.models).set_current(model);
                Ok(self.config_options())
            }
            Some(OpReply::Failed { message }) => Err(invalid(message)),
            _ => Err(Error::new(
                ErrorCode::INTERNAL_ERROR,
                "the session has ended",
            )),
        }
    }

    /// Sends one update of this session (a client that is gone loses it).
    pub fn send(&self, update: SessionUpdate) {
        self.send_to(&self.id, update);
    }

    /// Sends one update of this session or of one of its child sessions.
    fn send_to(&self, session: &str, update: SessionUpdate) {
        let notification = SessionNotification::new(session.to_string(), update);
        if let Err(err) = self.client.send_notification(notification) {
            tracing::debug!(error = %err, "a session update was not sent");
        }
    }

    /// Sends the session's events on as they come, until the engine is
    /// gone (runs as a task of its own).
    pub async fn pump(self: Arc<Session>, mut events: EventReceiver) {
        let tools = &self.engine.tools;
        let mut updates = Updates::new(&self.engine.workspace, tools.clone())
            .holding_text_calls(self.engine.text_calls);
        let mut children = Children::new(self.subagent_sessions, tools.clone());
        while let Some(event) = events.recv().await {
            if let EventKind::SubagentCall { agent_id, .. } = &event.kind {
                lock(&self.children).insert(agent_id.clone());
            }
            for routed in children.of(&event.kind) {
                self.send_to(routed.session.as_deref().unwrap_or(&self.id), routed.update);
            }
            if let EventKind::ApprovalRequested { id, request } = &event.kind {
                self.ask(*id, request, updates.running_call());
                continue;
            }
            if let EventKind::QuestionAsked { id, .. } = &event.kind {
                self.engine.dismiss_question(*id);
                continue;
            }
            for update in updates.of(&event.kind) {
                self.send(update);
            }
            if let EventKind::TurnCompleted { .. } = event.kind {
                self.turns_ended.send_modify(|count| *count += 1);
            }
        }
    }

    /// Asks the client to approve `request` (unless it rejected the same
    /// for the session), then hands the answer to the engine.
    fn ask(self: &Arc<Session>, id: AskId, request: &ApprovalRequest, call: Option<&str>) {
        let key = permission::rejection_key(request);
        if lock(&self.rejected).contains(&key) {
            let reason = "rejected in the editor for this session".to_string();
            self.engine.answer(
                id,
                ApprovalDecision::Denied {
                    reason: Some(reason),
                },
            );
            return;
        }
        let call = call.map_or_else(|| format!("approval-{id}"), str::to_string);
        let sent = self.client.send_request(permission::request(
            &self.id,
            &call,
            request,
            &self.engine.tools,
        ));
        lock(&self.pending).insert(id, sent.cancellation_handle());
        let session = self.clone();
        tokio::spawn(async move {
            let answer = sent.block_task().await;
            lock(&session.pending).remove(&id);
            let choice = permission::choice(answer.as_ref().ok().map(|answer| &answer.outcome));
            if choice.remember_rejection {
                lock(&session.rejected).insert(key);
            }
            session.engine.answer(id, choice.decision);
        });
    }

    /// Runs one turn with `prompt`; its stop reason, or the error the
    /// prompt request answers with.
    pub async fn turn(&self, prompt: String) -> Result<PromptResponse, Error> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(Error::new(
                ErrorCode::INVALID_REQUEST,
                "a prompt is already running in this session",
            ));
        }
        self.cancelled.store(false, Ordering::SeqCst);
        if let Some(command) = commands::parse(&prompt) {
            let answered = self.command(command).await;
            self.running.store(false, Ordering::SeqCst);
            return answered;
        }
        let ended_before = *self.turns_ended.borrow();
        let outcome = self.engine.prompt(prompt).await;
        let mut ended = self.turns_ended.subscribe();
        let _ = tokio::time::timeout(LAST_EVENTS, ended.wait_for(|n| *n > ended_before)).await;
        self.running.store(false, Ordering::SeqCst);
        let cancelled = self.cancelled.swap(false, Ordering::SeqCst);
        answer(outcome, cancelled)
    }

    /// A slash command the engine answers: its answer as the agent's
    /// message, and the end of the turn.
    async fn command(&self, command: Result<Op, Usage>) -> Result<PromptResponse, Error> {
        let text = match command {
            Ok(op) => self.engine.command(op).await.map(|reply| {
                if let OpReply::ModelSwitched { model } = &reply {
                    let mut models = lock(&self.models);
                    models.set_current(model.clone());
                    self.send(models.update());
                }
                commands::reply_text(reply)
            }),
            Err(usage) => Some(usage.to_string()),
        };
        let Some(text) = text else {
            return answer(None, false);
        };
        self.send(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text),
        )));
        Ok(PromptResponse::new(StopReason::EndTurn))
    }

    /// `session/cancel`: the pending permission requests are answered as
    /// cancelled, then the turn is interrupted.
    pub fn cancel(&self) {
        if self.running.load(Ordering::SeqCst) {
            self.cancelled.store(true, Ordering::SeqCst);
        }
        let pending: Vec<_> = lock(&self.pending).drain().collect();
        for (id, request) in pending {
            let _ = request.cancel();
            self.engine.answer(
                id,
                ApprovalDecision::Denied {
                    reason: Some("the turn was cancelled".into()),
                },
            );
        }
        self.engine.interrupt();
    }

    /// Whether `session_id` is one of this session's subagents.
    pub fn owns_child(&self, session_id: &str) -> bool {
        lock(&self.children).contains(session_id)
    }

    /// `session/cancel` on a child session: that subagent alone stops, and
    /// the turn goes on with what it had.
    pub fn cancel_child(&self, agent_id: &str) {
        self.engine.cancel_subagent(agent_id);
    }

    /// Cancels a running turn, then reaps every child of the session.
    pub async fn shutdown(&self) {
        self.cancel();
        self.engine.shutdown().await;
    }
}

/// The prompt's answer for how the turn ended. A cancelled turn says
/// `cancelled` whatever else happened meanwhile (ACP asks for it); a
/// failure is a JSON-RPC error carrying the reason.
fn answer(outcome: Option<TurnOutcome>, cancelled: bool) -> Result<PromptResponse, Error> {
    let Some(outcome) = outcome else {
        return Err(Error::new(
            ErrorCode::INTERNAL_ERROR,
            "the agent stopped before the turn ended",
        ));
    };
    let usage = outcome.usage();
    let stop = match &outcome {
        _ if cancelled => StopReason::Cancelled,
        TurnOutcome::Completed { .. } => StopReason::EndTurn,
        TurnOutcome::Interrupted { .. } => StopReason::Cancelled,
        TurnOutcome::MaxSteps { .. } => StopReason::MaxTurnRequests,
        TurnOutcome::MaxTokens { .. } => StopReason::MaxTokens,
        TurnOutcome::Refused { .. } => StopReason::Refusal,
        TurnOutcome::Failed { message, .. } | TurnOutcome::Looped { message, .. } => {
            let kind = if matches!(outcome, TurnOutcome::Looped { .. }) {
                "looped"
            } else {
                "failed"
            };
            return Err(Error::new(ErrorCode::INTERNAL_ERROR, message.clone())
                .data(json!({ "outcome": kind })));
        }
    };
    Ok(PromptResponse::new(stop).meta(fido_meta(json!({ "usage": usage }))))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::UsageTotals;

    #[test]
    fn stop_reasons_follow_the_outcome_and_a_cancel_wins() {
        let usage = UsageTotals::default();
        let stop = |outcome, cancelled| answer(Some(outcome), cancelled).map(|r| r.stop_reason);
        let completed = TurnOutcome::Completed {
            final_text: None,
            usage,
        };
        assert_eq!(
            stop(completed.clone(), false).ok(),
            Some(StopReason::EndTurn)
        );
        assert_eq!(stop(completed, true).ok(), Some(StopReason::Cancelled));
        assert_eq!(
            stop(TurnOutcome::Interrupted { usage }, false).ok(),
            Some(StopReason::Cancelled)
        );
        let max = TurnOutcome::MaxSteps {
            message: "m".into(),
            usage,
        };
        assert_eq!(stop(max, false).ok(), Some(StopReason::MaxTurnRequests));
        let cut_off = TurnOutcome::MaxTokens {
            message: "cut off".into(),
            usage,
        };
        assert_eq!(stop(cut_off, false).ok(), Some(StopReason::MaxTokens));
        let refused = TurnOutcome::Refused {
            message: "no".into(),
            usage,
        };
        assert_eq!(stop(refused, false).ok(), Some(StopReason::Refusal));
        assert!(stop(TurnOutcome::failed("boom"), false).is_err());
        assert!(answer(None, false).is_err());
    }
}
