//! `AgentActor`: owns one agent's conversation and runs its turns.
//!
//! The handler never stays open for a turn: a prompt moves the
//! conversation into a spawned task, which posts it back with
//! `TurnFinished`. So `Interrupt` is handled while a turn runs, and the
//! conversation has exactly one owner at any time.
//!
//! A front end's ops arrive as they were submitted ([`AgentMessage::Op`]);
//! the actor answers the conversation's ops and hands the others to its
//! [`FrontDesk`] (see [`super::ops`]).

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio_util::sync::CancellationToken;

use super::ops::FrontDesk;
use super::{AgentDeps, Conversation, TurnOutcome, compaction, restore_plan_off_runtime, run_turn};
use crate::plan::PlanFlavour;
use crate::protocol::op::{Op, OpReply, Submission, SubmissionId};
use crate::protocol::{EventKind, Message, SafetySettings, UsageTotals};
use crate::provider::Provider;

pub struct AgentActor;

pub struct AgentArguments {
    pub deps: Arc<AgentDeps>,
    pub conversation: Conversation,
    /// User turns the conversation already had (a resumed session).
    pub turns: u32,
}

pub enum AgentMessage {
    /// A front end's op, as submitted; an answer, if the op has one, is an
    /// `op_replied` event with the submission's id.
    Op(Submission),
    /// In process (tests): start a turn with this prompt; the reply is
    /// its whole outcome when it ends. Front ends submit
    /// [`Op::SubmitPrompt`] through the engine instead. Refused (status `Failed`)
    /// while another turn runs.
    SubmitPrompt {
        prompt: String,
        reply: RpcReplyPort<TurnOutcome>,
    },
    /// Cancel the running turn (Ctrl+C, SIGINT, SIGTERM). The turn ends with
    /// `Interrupted` after every started tool call has its result.
    Interrupt,
    /// Internal: the front desk of [`super::ops::serve`], for the ops that
    /// need more than the conversation.
    Attach(Box<FrontDesk>),
    /// Internal (`/recall`): replace the conversation after the system
    /// message with a recalled one; the current workspace plan is
    /// re-delivered after it as a tool result. Replies with the number of
    /// recalled messages, or why not (a turn is running).
    ReplaceHistory {
        history: Vec<Message>,
        reply: RpcReplyPort<Result<usize, AgentRefusal>>,
    },
    /// Internal: the workspace plan changed outside a model turn (`/plan
    /// clear`): append it as a restored tool result, so the model sees the
    /// current state on its next request. Applied after the running turn,
    /// if any.
    RestorePlan,
    /// Internal (`/compact`): compact the conversation now, whatever its
    /// size; a `compacted` event says what was cut. Replies whether
    /// anything was, or why not (a turn is running).
    CompactNow {
        reply: RpcReplyPort<Result<bool, AgentRefusal>>,
    },
    /// Internal (`/model NAME`): use this provider (the same endpoint,
    /// another model) from the next turn on; a running turn keeps the one
    /// it started with.
    SwitchProvider { provider: Arc<dyn Provider> },
    /// Internal (a mode switch, in force for the tools already): tell the
    /// model with the next prompt; the system prompt stays as it was.
    SafetySwitched { settings: SafetySettings },
    /// Internal: the compaction task hands the conversation back.
    CompactionFinished {
        conversation: Box<Conversation>,
        reply: RpcReplyPort<Result<bool, AgentRefusal>>,
        compacted: Result<bool, AgentRefusal>,
    },
    /// Internal: the turn task hands the conversation back.
    TurnFinished {
        conversation: Box<Conversation>,
        outcome: TurnOutcome,
    },
    /// A copy of the conversation as it is between turns (for saving and
    /// tests); `None` while a turn runs.
    Snapshot(RpcReplyPort<Option<Conversation>>),
}

/// Why the agent did not do what the front desk asked between turns;
/// each says why in one sentence for the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentRefusal {
    #[error("a turn is running; interrupt it before recalling a conversation")]
    RecallDuringTurn,
    #[error("a turn is running; /compact when it has ended")]
    CompactDuringTurn,
    /// `/compact` panicked (what it said, cut short); the conversation is
    /// the one before.
    #[error("internal error in /compact ({0}); the conversation is unchanged")]
    CompactPanicked(String),
}

pub struct AgentState {
    deps: Arc<AgentDeps>,
    conversation: Option<Conversation>,
    running: Option<RunningTurn>,
    turns: u32,
    /// A `RestorePlan` that arrived during a turn.
    plan_restore_pending: bool,
    /// What the model is told before its next prompt of a mode switch
    /// (the last one, when several came between two prompts).
    safety_note: Option<String>,
    desk: FrontDesk,
}

struct RunningTurn {
    cancel: CancellationToken,
    reply: TurnReply,
}

/// Who hears how a turn ended.
enum TurnReply {
    /// An in-process caller.
    Port(RpcReplyPort<TurnOutcome>),
    /// A front end's submission: an `op_replied` event.
    Submission(SubmissionId),
}

impl TurnReply {
    fn send(self, outcome: TurnOutcome, desk: &FrontDesk) {
        match self {
            // The reply port may be gone already; nothing else to tell.
            TurnReply::Port(port) => drop(port.send(outcome)),
            TurnReply::Submission(id) => desk.reply(id, OpReply::turn_ended(&outcome)),
        }
    }
}

impl Actor for AgentActor {
    type Msg = AgentMessage;
    type State = AgentState;
    type Arguments = AgentArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AgentArguments,
    ) -> Result<AgentState, ActorProcessingErr> {
        let desk = FrontDesk::detached(args.deps.events.clone());
        Ok(AgentState {
            deps: args.deps,
            conversation: Some(args.conversation),
            running: None,
            turns: args.turns,
            plan_restore_pending: false,
            safety_note: None,
            desk,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: AgentMessage,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        // A panic here fails the actor, which its watch reports.
        super::recover::supervised(state.handle(myself, message)).await;
        Ok(())
    }
}

impl Drop for AgentState {
    /// However the actor ends (stopped, or failed in a handler), a turn
    /// still running is cancelled: it winds down and answers every call.
    /// A front end that asked for it hears that the agent stopped (an
    /// in-process caller sees its reply port close).
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            running.cancel.cancel();
            if let TurnReply::Submission(id) = running.reply {
                let stopped = TurnOutcome::failed("the agent stopped during the turn");
                self.desk.reply(id, OpReply::turn_ended(&stopped));
            }
        }
        // Ops still in the mailbox go with it: their waiters must not wait.
        self.desk.awaited.abandon_all();
    }
}

impl AgentState {
    async fn handle(&mut self, myself: ActorRef<AgentMessage>, message: AgentMessage) {
        match message {
            AgentMessage::Op(submission) => self.on_op(myself, submission),
            AgentMessage::SubmitPrompt { prompt, reply } => {
                self.start_turn(myself, prompt, TurnReply::Port(reply))
            }
            AgentMessage::Interrupt => self.interrupt(),
            AgentMessage::Attach(desk) => self.desk = *desk,
            AgentMessage::TurnFinished {
                conversation,
                outcome,
            } => self.turn_finished(*conversation, outcome).await,
            AgentMessage::RestorePlan => self.restore_plan().await,
            AgentMessage::ReplaceHistory { history, reply } => {
                let _ = reply.send(self.replace_history(history).await);
            }
            AgentMessage::Snapshot(reply) => drop(reply.send(self.conversation.clone())),
            AgentMessage::CompactNow { reply } => self.compact(myself, reply),
            AgentMessage::CompactionFinished {
                conversation,
                reply,
                compacted,
            } => {
                self.deps.journal_step(&conversation).await;
                self.conversation = Some(*conversation);
                let _ = reply.send(compacted);
            }
            AgentMessage::SwitchProvider { provider } => self.switch_provider(provider),
            AgentMessage::SafetySwitched { settings } => {
                self.safety_note = Some(super::prompt::safety_note(&settings));
            }
        }
    }

    /// A front end's op: the conversation's here, the rest at the desk.
    fn on_op(&mut self, myself: ActorRef<AgentMessage>, submission: Submission) {
        let (id, desk) = (submission.id, &self.desk);
        match submission.op {
            Op::SubmitPrompt { prompt } => {
                self.start_turn(myself, prompt, TurnReply::Submission(id))
            }
            Op::Interrupt => self.interrupt(),
            Op::CancelSubagent { agent_id } => {
                let subagent_ids = self.cancel_subagent(agent_id);
                desk.reply(id, OpReply::Cancelled { subagent_ids });
            }
            Op::Compact => desk.compact(myself, id),
            Op::SwitchModel { model } => desk.switch_model(myself, id, model),
            Op::SwitchSafety {
                sandbox_mode,
                approval_policy,
            } => desk.switch_safety(myself, id, sandbox_mode, approval_policy),
            Op::ShowPlan => desk.local(id, |c| match c.show() {
                Ok(shown) => OpReply::Plan(Box::new(shown)),
                Err(err) => OpReply::failed(err),
            }),
            Op::ClearPlan => desk.clear_plan(myself, id),
            Op::Undo => desk.local(id, |c| match c.undo() {
                Ok(change) => OpReply::Undone { change },
                Err(err) => OpReply::failed(err),
            }),
            Op::Suspend { name } => desk.suspend(myself, id, name),
            Op::Recall { name } => desk.recall(myself, id, name),
            Op::ListSessions => desk.local(id, |c| match c.sessions() {
                Ok(sessions) => OpReply::Sessions { sessions },
                Err(err) => OpReply::failed(err),
            }),
            Op::Changes(request) => desk.local(id, move |c| match c.changes(&request) {
                Ok((true, text)) => OpReply::Output { text },
                Ok((false, text)) => OpReply::Info { text },
                Err(err) => OpReply::failed(err),
            }),
            Op::Status => desk.local(id, |c| OpReply::Status(c.status())),
            Op::ListSubagents => {
                let subagents = self.session_subagents();
                desk.reply(id, OpReply::Subagents { subagents });
            }
            Op::Diff => desk.diff(id, self.deps.tool_env.workspace.root.clone()),
            Op::PromptHistory => desk.local(id, |c| OpReply::PromptHistory {
                entries: c.prompt_history(),
            }),
            // The op forwarder writes these itself (`ops::forward`).
            Op::RememberPrompt { .. } => {}
            Op::Approve { id, decision } => desk.approve(id, decision),
            Op::Answer { id, answer } => desk.answer(id, answer),
        }
    }

    /// Moves the conversation into a turn task, which posts it back with
    /// `TurnFinished`; refused while a turn runs.
    fn start_turn(&mut self, myself: ActorRef<AgentMessage>, prompt: String, reply: TurnReply) {
        #[cfg(test)]
        super::recover::fault::hit(&self.deps.tool_env.workspace.root, "agent handler");
        let Some(mut conversation) = self.conversation.take() else {
            reply.send(busy(), &self.desk);
            return;
        };
        if let Some(note) = self.safety_note.take() {
            // Journaled with the turn's first step, before the prompt.
            conversation.push(Message::user(note));
        }
        self.turns += 1;
        let cancel = CancellationToken::new();
        self.running = Some(RunningTurn {
            cancel: cancel.clone(),
            reply,
        });
        let (deps, turn) = (self.deps.clone(), self.turns);
        tokio::spawn(async move {
            let (conversation, outcome) = turn_task(conversation, deps, prompt, turn, cancel).await;
            // Fails only when the actor is gone, and then so is the reply.
            let _ = myself.cast(AgentMessage::TurnFinished {
                conversation: Box::new(conversation),
                outcome,
            });
        });
    }

    fn interrupt(&self) {
        if let Some(running) = &self.running {
            running.cancel.cancel();
        }
    }

    /// `Some(agent_id)`: the TUI's Esc on the focused row, `/cancel ID`,
    /// `fido cancel ID`; `None`: `/cancel all`. The turn goes on with
    /// their cancelled (partial or failed) results. The running subagents
    /// asked to stop.
    fn cancel_subagent(&self, agent_id: Option<String>) -> Vec<String> {
        let Some(delegator) = &self.deps.tool_env.delegator else {
            return Vec::new();
        };
        let running = delegator
            .session_subagents()
            .into_iter()
            .filter(|agent| agent.running)
            .map(|agent| agent.agent_id);
        match agent_id {
            Some(id) => {
                delegator.cancel_subagent(&id);
                running.filter(|running| *running == id).collect()
            }
            None => {
                delegator.cancel_running();
                running.collect()
            }
        }
    }

    /// Every subagent of the session, from the supervisor's record; none
    /// without a supervisor (a subagent's own engine, a test's).
    fn session_subagents(&self) -> Vec<crate::protocol::control::SessionSubagent> {
        self.deps
            .tool_env
            .delegator
            .as_ref()
            .map(|delegator| delegator.session_subagents())
            .unwrap_or_default()
    }

    async fn turn_finished(&mut self, mut conversation: Conversation, outcome: TurnOutcome) {
        if std::mem::take(&mut self.plan_restore_pending) {
            self.restore_into(&mut conversation).await;
        }
        self.conversation = Some(conversation);
        if let Some(running) = self.running.take() {
            running.reply.send(outcome, &self.desk);
        }
    }

    async fn restore_plan(&mut self) {
        match self.conversation.take() {
            Some(mut conversation) => {
                self.restore_into(&mut conversation).await;
                self.conversation = Some(conversation);
            }
            None => self.plan_restore_pending = true,
        }
    }

    /// Appends the workspace plan to `conversation` and journals the step.
    async fn restore_into(&self, conversation: &mut Conversation) {
        let flavour = flavour_of(&self.deps);
        restore_plan_off_runtime(
            conversation,
            &self.deps.tool_env,
            flavour,
            &self.deps.events,
        )
        .await;
        self.deps.journal_step(conversation).await;
    }

    async fn replace_history(&mut self, history: Vec<Message>) -> Result<usize, AgentRefusal> {
        let Some(current) = self.conversation.take() else {
            return Err(AgentRefusal::RecallDuringTurn);
        };
        let (conversation, recalled) = recall(current, history, &self.deps).await;
        self.deps.journal_step(&conversation).await;
        self.conversation = Some(conversation);
        Ok(recalled)
    }

    /// Compacts in a task of its own, which posts the conversation back
    /// with `CompactionFinished`; refused while a turn runs.
    fn compact(
        &mut self,
        myself: ActorRef<AgentMessage>,
        reply: RpcReplyPort<Result<bool, AgentRefusal>>,
    ) {
        let Some(conversation) = self.conversation.take() else {
            let _ = reply.send(Err(AgentRefusal::CompactDuringTurn));
            return;
        };
        let deps = self.deps.clone();
        tokio::spawn(async move {
            let (conversation, compacted) = compact_watched(conversation, &deps).await;
            let _ = myself.cast(AgentMessage::CompactionFinished {
                conversation: Box::new(conversation),
                reply,
                compacted,
            });
        });
    }

    fn switch_provider(&mut self, provider: Arc<dyn Provider>) {
        let mut deps = (*self.deps).clone();
        deps.provider = provider;
        self.deps = Arc::new(deps);
    }
}

/// One turn, watched: a panic in it must not leave the agent busy forever.
async fn turn_task(
    mut conversation: Conversation,
    deps: Arc<AgentDeps>,
    prompt: String,
    turn: u32,
    cancel: CancellationToken,
) -> (Conversation, TurnOutcome) {
    let run = run_turn(&mut conversation, &deps, prompt, turn, &cancel);
    let outcome = match super::recover::catch(run).await {
        Ok(outcome) => outcome,
        Err(panicked) => {
            let what = &panicked.message;
            super::recover::after_panic(&mut conversation, &deps.events, turn, what)
        }
    };
    (conversation, outcome)
}

/// [`compact_now`], watched: after a panic inside it, the conversation as
/// it was before, one `error` event and the reason, so the agent is idle
/// again instead of waiting for a conversation that never comes back.
async fn compact_watched(
    conversation: Conversation,
    deps: &AgentDeps,
) -> (Conversation, Result<bool, AgentRefusal>) {
    let before = conversation.clone();
    match super::recover::catch(compact_now(conversation, deps)).await {
        Ok((conversation, compacted)) => (conversation, Ok(compacted)),
        Err(super::recover::Panicked { message: what }) => {
            tracing::error!(panic = %what, "compaction panicked; the conversation is kept");
            let refusal = AgentRefusal::CompactPanicked(crate::text::summary(&what, 200));
            deps.events.emit(EventKind::Error {
                message: refusal.to_string(),
            });
            (before, Err(refusal))
        }
    }
}

/// Compaction on request: the configured strategy with no threshold, and
/// at most half of the conversation kept, so a short one can be compacted
/// too. Returns the conversation and whether anything was cut.
async fn compact_now(mut conversation: Conversation, deps: &AgentDeps) -> (Conversation, bool) {
    #[cfg(test)]
    super::recover::fault::hit(&deps.tool_env.workspace.root, "compaction");
    let size = conversation.estimated_tokens();
    let mut settings = deps.settings.compaction;
    settings.threshold_tokens = 0;
    settings.keep_recent_tokens = settings.keep_recent_tokens.min(size / 2);
    let before = (conversation.messages().len(), size);
    let mut usage = UsageTotals::default();
    compaction::maybe_compact(
        &mut conversation,
        deps,
        settings,
        compaction::Trigger::Manual,
        &CancellationToken::new(),
        &mut usage,
    )
    .await;
    let after = (
        conversation.messages().len(),
        conversation.estimated_tokens(),
    );
    (conversation, after != before)
}

/// The conversation after `/recall`: this session's system message (it never
/// changes), the recalled history without its own system message and plan
/// restores, a result for any call it left unanswered, then the current plan.
async fn recall(
    mut conversation: Conversation,
    history: Vec<Message>,
    deps: &AgentDeps,
) -> (Conversation, usize) {
    let kept: Vec<Message> = history
        .into_iter()
        .filter(|m| !matches!(m, Message::System { .. }) && !m.is_plan_restore())
        .collect();
    let recalled = kept.len();
    conversation.replace_history(kept);
    conversation.answer_unanswered("the conversation was suspended before this call ran");
    restore_plan_off_runtime(
        &mut conversation,
        &deps.tool_env,
        flavour_of(deps),
        &deps.events,
    )
    .await;
    (conversation, recalled)
}

/// The plan flavour this session advertises (the catalog holds exactly one).
fn flavour_of(deps: &AgentDeps) -> PlanFlavour {
    match deps.catalog.capability_of("todo") {
        Some(_) => PlanFlavour::Todo,
        None => PlanFlavour::UpdatePlan,
    }
}

fn busy() -> TurnOutcome {
    TurnOutcome::failed("a turn is already running; interrupt it first")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::EventSink;
    use crate::protocol::ToolCall;
    use crate::protocol::{RESTORE_CALL_ID, TurnStatus};
    use crate::provider::script::ScriptProvider;
    use crate::tools::{InvocationContext, ToolCatalog};

    /// Longest wait for an answer from the actor: a test that would hang
    /// fails instead.
    const CALL_MS: u64 = 30_000;

    async fn agent(dir: &std::path::Path) -> ActorRef<AgentMessage> {
        let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
        let deps = Arc::new(AgentDeps {
            provider: Arc::new(
                ScriptProvider::from_json("t", "t", r#"{"turns": [{"text": "hi"}]}"#).unwrap(),
            ),
            tool_env: Arc::new(crate::tools::testing::env(dir)),
            ctx: InvocationContext::main(),
            settings: crate::agent::AgentSettings::for_tests(),
            events: EventSink::discard(),
            journal: None,
            catalog,
        });
        let conversation = Conversation::new("the system prompt".into());
        let (actor, _) = Actor::spawn(
            None,
            AgentActor,
            AgentArguments {
                deps,
                conversation,
                turns: 0,
            },
        )
        .await
        .unwrap();
        actor
    }

    #[tokio::test]
    async fn recall_keeps_the_system_message_answers_every_call_and_redelivers_the_plan() {
        let dir = tempfile::tempdir().unwrap();
        let actor = agent(dir.path()).await;
        // A plan saved in the workspace after the conversation was suspended.
        let store = crate::plan::PlanStore::new(dir.path(), dir.path().join(".fido-plan.json"));
        let now = "2026-01-01T00:00:00.000Z".to_string();
        store
            .update(|s| Ok::<_, ()>(s.successor("current".into(), Vec::new(), now)))
            .unwrap()
            .unwrap();
        let old_restore = ToolCall {
            id: RESTORE_CALL_ID.into(),
            name: "update_plan".into(),
            arguments: "{}".into(),
        };
        let history = vec![
            Message::System {
                content: "an older system prompt".into(),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![old_restore],
            },
            Message::Tool {
                tool_call_id: RESTORE_CALL_ID.into(),
                name: "update_plan".into(),
                content: "{\"version\": 1}".into(),
                is_error: false,
            },
            Message::user("earlier request"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: "{}".into(),
                }],
            },
        ];
        let recalled = ractor::call_t!(
            actor,
            |reply| AgentMessage::ReplaceHistory { history, reply },
            CALL_MS
        )
        .unwrap()
        .unwrap();
        assert_eq!(recalled, 2);
        let conversation = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        let messages = conversation.messages();
        assert_eq!(
            messages[0],
            Message::System {
                content: "the system prompt".into()
            }
        );
        assert_eq!(messages[1], Message::user("earlier request"));
        assert!(
            matches!(&messages[3], Message::Tool { tool_call_id, is_error: true, .. } if tool_call_id == "c1")
        );
        let Message::Tool {
            tool_call_id,
            content,
            ..
        } = &messages[5]
        else {
            panic!("{messages:?}")
        };
        assert_eq!(tool_call_id, RESTORE_CALL_ID);
        assert!(content.contains("\"reason\": \"current\""), "{content}");
        assert_eq!(messages.len(), 6);
        assert!(conversation.unanswered_tool_calls().is_empty());
    }

    #[tokio::test]
    async fn restore_plan_appends_the_current_plan_without_touching_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let actor = agent(dir.path()).await;
        let before = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        let store = crate::plan::PlanStore::new(dir.path(), dir.path().join(".fido-plan.json"));
        let now = "2026-01-01T00:00:00.000Z".to_string();
        store
            .update(|s| {
                Ok::<_, ()>(s.successor("Plan cleared by the user.".into(), Vec::new(), now))
            })
            .unwrap()
            .unwrap();
        actor.cast(AgentMessage::RestorePlan).unwrap();
        let after = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        let messages = after.messages();
        assert_eq!(&messages[..before.messages().len()], before.messages());
        let Some(Message::Tool { content, .. }) = messages.last() else {
            panic!("{messages:?}")
        };
        assert!(content.contains("Plan cleared by the user."), "{content}");
        assert!(after.unanswered_tool_calls().is_empty());
    }

    async fn agent_with_events(
        script: &str,
        dir: &std::path::Path,
    ) -> (ActorRef<AgentMessage>, crate::agent::EventReceiver) {
        let provider = ScriptProvider::from_json("a", "first", script).unwrap();
        agent_with_provider(Arc::new(provider), dir).await
    }

    async fn agent_with_provider(
        provider: Arc<dyn crate::provider::Provider>,
        dir: &std::path::Path,
    ) -> (ActorRef<AgentMessage>, crate::agent::EventReceiver) {
        let (arguments, events) = arguments_with(provider, dir);
        let (actor, _) = Actor::spawn(None, AgentActor, arguments).await.unwrap();
        (actor, events)
    }

    fn arguments_with(
        provider: Arc<dyn crate::provider::Provider>,
        dir: &std::path::Path,
    ) -> (AgentArguments, crate::agent::EventReceiver) {
        let (sink, events) = crate::protocol::event_queue::channel();
        let deps = Arc::new(AgentDeps {
            provider,
            tool_env: Arc::new(crate::tools::testing::env(dir)),
            ctx: InvocationContext::main(),
            settings: crate::agent::AgentSettings::for_tests(),
            events: sink,
            journal: None,
            catalog: ToolCatalog::standard(PlanFlavour::UpdatePlan),
        });
        let arguments = AgentArguments {
            deps,
            conversation: Conversation::new("the system prompt".into()),
            turns: 0,
        };
        (arguments, events)
    }

    /// Every event emitted so far.
    fn drain(events: &mut crate::agent::EventReceiver) -> Vec<crate::protocol::EventKind> {
        let mut kinds = Vec::new();
        while let Some(event) = events.try_recv() {
            kinds.push(event.kind);
        }
        kinds
    }

    async fn ask(actor: &ActorRef<AgentMessage>, prompt: &str) -> TurnOutcome {
        ractor::call_t!(
            actor,
            |reply| AgentMessage::SubmitPrompt {
                prompt: prompt.into(),
                reply
            },
            CALL_MS
        )
        .unwrap()
    }

    /// A provider whose first request panics (a test double behind the
    /// trait: the real turn task, actor and recovery run).
    struct PanicsOnce {
        inner: ScriptProvider,
        panicked: std::sync::atomic::AtomicBool,
    }

    impl crate::provider::Provider for PanicsOnce {
        fn name(&self) -> &str {
            "panics-once"
        }
        fn model(&self) -> &str {
            "m"
        }
        fn complete<'a>(
            &'a self,
            request: crate::provider::ChatRequest<'a>,
            notices: crate::provider::NoticeSink<'a>,
        ) -> crate::provider::CompletionFuture<'a> {
            let first = !self
                .panicked
                .swap(true, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                assert!(!first, "injected panic in the provider");
                self.inner.complete(request, notices).await
            })
        }
    }

    #[tokio::test]
    async fn a_panic_in_a_turn_is_an_error_event_and_the_next_prompt_works() {
        let dir = tempfile::tempdir().unwrap();
        let inner =
            ScriptProvider::from_json("a", "m", r#"{"turns": [{"text": "fine now"}]}"#).unwrap();
        let provider = Arc::new(PanicsOnce {
            inner,
            panicked: Default::default(),
        });
        let (actor, mut events) = agent_with_provider(provider, dir.path()).await;
        let failed = ask(&actor, "first").await;
        assert_eq!(failed.status(), TurnStatus::Failed);
        let error = failed.error().unwrap();
        assert!(error.contains("injected panic"), "{error}");
        let mut kinds = Vec::new();
        while let Some(event) = events.try_recv() {
            kinds.push(event.kind);
        }
        assert!(
            kinds
                .iter()
                .any(|k| matches!(k, crate::protocol::EventKind::Error { message } if message.contains("internal error"))),
            "{kinds:?}"
        );
        assert!(
            kinds
                .iter()
                .any(|k| matches!(k, crate::protocol::EventKind::TurnCompleted { .. }))
        );
        let next = ask(&actor, "second").await;
        assert_eq!(next.status(), TurnStatus::Completed, "{next:?}");
        assert_eq!(next.final_text(), Some("fine now"));
        let after = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        assert!(after.unanswered_tool_calls().is_empty());
    }

    /// A panic injected between two tool calls of a turn: the call that
    /// ran keeps its result, the started one gets an error result (in the
    /// conversation and as a `tool_result` event), one `error` event says
    /// what happened, and the agent takes the next prompt.
    #[tokio::test]
    async fn a_panic_after_a_call_started_answers_every_call_and_the_next_prompt_works() {
        use crate::protocol::EventKind;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
        let script = r#"{"turns": [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}},
                            {"name": "list_files", "arguments": {}}]},
            {"text": "fine now"}
        ]}"#;
        let (actor, mut events) = agent_with_events(script, dir.path()).await;
        let root = crate::workspace::Workspace::new(dir.path()).unwrap().root;
        crate::agent::recover::fault::arm(&root, "before list_files");

        let failed = ask(&actor, "first").await;
        assert_eq!(failed.status(), TurnStatus::Failed);
        assert!(
            failed
                .error()
                .unwrap()
                .contains("injected panic at before list_files"),
            "{failed:?}"
        );
        let kinds = drain(&mut events);
        let result_of = |id: &str| {
            kinds.iter().find_map(|k| match k {
                EventKind::ToolResult { id: of, ok, .. } if of == id => Some(*ok),
                _ => None,
            })
        };
        assert_eq!(result_of("script-call-1"), Some(true), "{kinds:?}");
        assert_eq!(result_of("script-call-2"), Some(false), "{kinds:?}");
        assert!(
            kinds
                .iter()
                .any(|k| matches!(k, EventKind::Error { message }
                if message.contains("internal error in the turn"))),
            "{kinds:?}"
        );
        assert!(kinds.iter().any(|k| matches!(
            k,
            EventKind::TurnCompleted {
                status: TurnStatus::Failed,
                ..
            }
        )));
        let kept = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        assert!(kept.unanswered_tool_calls().is_empty());
        let answers: Vec<bool> = kept
            .messages()
            .iter()
            .filter_map(|m| match m {
                Message::Tool { is_error, .. } => Some(*is_error),
                _ => None,
            })
            .collect();
        assert_eq!(answers, [false, true]);

        let next = ask(&actor, "second").await;
        assert_eq!(next.status(), TurnStatus::Completed, "{next:?}");
        assert_eq!(next.final_text(), Some("fine now"));
    }

    /// A panic in the actor's own handler fails the actor (its conversation
    /// goes with it): the watch it is linked to says so in an `error`
    /// event, and callers get an error instead of waiting forever.
    #[tokio::test]
    async fn a_failed_agent_actor_is_reported_by_its_watch() {
        use crate::protocol::EventKind;
        let dir = tempfile::tempdir().unwrap();
        let provider =
            ScriptProvider::from_json("a", "m", r#"{"turns": [{"text": "never"}]}"#).unwrap();
        let (arguments, mut events) = arguments_with(Arc::new(provider), dir.path());
        let (actor, handle) = crate::agent::spawn_watched(arguments).await.unwrap();
        let root = crate::workspace::Workspace::new(dir.path()).unwrap().root;
        crate::agent::recover::fault::arm(&root, "agent handler");

        let asked = ractor::call_t!(
            actor,
            |reply| AgentMessage::SubmitPrompt {
                prompt: "hi".into(),
                reply
            },
            CALL_MS
        );
        assert!(asked.is_err(), "the failed actor cannot answer");
        tokio::time::timeout(std::time::Duration::from_secs(30), handle)
            .await
            .unwrap()
            .unwrap();
        let mut kinds = drain(&mut events);
        for _ in 0..500 {
            if !kinds.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            kinds = drain(&mut events);
        }
        assert!(
            kinds
                .iter()
                .any(|k| matches!(k, EventKind::Error { message }
                if message.contains("the agent stopped on an internal error")
                    && message.contains("injected panic at agent handler"))),
            "{kinds:?}"
        );
        assert!(actor.cast(AgentMessage::Interrupt).is_err());
    }

    #[tokio::test]
    async fn compact_now_cuts_a_short_conversation_and_says_so_in_an_event() {
        let dir = tempfile::tempdir().unwrap();
        let script = r#"{"turns": [{"text": "one"}, {"text": "two"}, {"text": "three"}]}"#;
        let (actor, mut events) = agent_with_events(script, dir.path()).await;
        for prompt in ["first request", "second request", "third request"] {
            assert_eq!(ask(&actor, prompt).await.status(), TurnStatus::Completed);
        }
        let before = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        let compacted =
            ractor::call_t!(actor, |reply| AgentMessage::CompactNow { reply }, CALL_MS).unwrap();
        assert_eq!(compacted, Ok(true));
        let after = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        assert!(after.messages().len() < before.messages().len());
        assert_eq!(
            after.messages()[0],
            before.messages()[0],
            "the system prompt stays"
        );
        let mut removed = None;
        while let Some(event) = events.try_recv() {
            if let crate::protocol::EventKind::Compacted {
                removed_messages, ..
            } = event.kind
            {
                removed = Some(removed_messages);
            }
        }
        assert!(removed.is_some_and(|n| n > 0), "{removed:?}");
        // An empty conversation has nothing to cut.
        let (fresh, _events) = agent_with_events(script, dir.path()).await;
        let nothing =
            ractor::call_t!(fresh, |reply| AgentMessage::CompactNow { reply }, CALL_MS).unwrap();
        assert_eq!(nothing, Ok(false));
    }

    /// `/compact` runs in a task of its own, watched like a turn: a panic
    /// there is an `error` event and an error reply, the conversation is
    /// kept, and the next prompt works.
    #[tokio::test]
    async fn a_panic_in_compaction_keeps_the_conversation_and_the_agent_idle() {
        let dir = tempfile::tempdir().unwrap();
        let script = r#"{"turns": [{"text": "one"}, {"text": "two"}]}"#;
        let (actor, mut events) = agent_with_events(script, dir.path()).await;
        assert_eq!(ask(&actor, "first").await.status(), TurnStatus::Completed);
        let before = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        let root = crate::workspace::Workspace::new(dir.path()).unwrap().root;
        crate::agent::recover::fault::arm(&root, "compaction");
        let compacted =
            ractor::call_t!(actor, |reply| AgentMessage::CompactNow { reply }, CALL_MS).unwrap();
        assert!(
            compacted
                .unwrap_err()
                .to_string()
                .contains("injected panic at compaction")
        );
        assert!(drain(&mut events).iter().any(|k| matches!(k,
            crate::protocol::EventKind::Error { message } if message.contains("internal error in /compact"))));
        let kept = ractor::call_t!(actor, AgentMessage::Snapshot, CALL_MS)
            .unwrap()
            .unwrap();
        assert_eq!(kept.messages(), before.messages());
        assert_eq!(ask(&actor, "second").await.final_text(), Some("two"));
    }

    #[tokio::test]
    async fn a_switched_provider_answers_from_the_next_turn_on() {
        let dir = tempfile::tempdir().unwrap();
        let (actor, _events) =
            agent_with_events(r#"{"turns": [{"text": "from the first"}]}"#, dir.path()).await;
        assert_eq!(ask(&actor, "hi").await.final_text(), Some("from the first"));
        let other =
            ScriptProvider::from_json("b", "second", r#"{"turns": [{"text": "from the second"}]}"#)
                .unwrap();
        actor
            .cast(AgentMessage::SwitchProvider {
                provider: Arc::new(other),
            })
            .unwrap();
        assert_eq!(
            ask(&actor, "again").await.final_text(),
            Some("from the second")
        );
    }
}
