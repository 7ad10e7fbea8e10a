//! The engine's side of the op queue. [`serve`] hands each [`Submission`]
//! of a front end to the agent actor as it is ([`AgentMessage::Op`]); the
//! actor answers the conversation's ops itself and leaves the rest to its
//! [`FrontDesk`]: the local commands behind [`LocalCommands`] (the plan,
//! undo and session stores), the requests waiting for the
//! person ([`PendingAsks`]), the model switcher and `/diff` (the
//! workspace's `git diff`, [`git_diff`]). Every answer is data
//! ([`OpReply`]), which each front end lays out its own way. Answers go
//! out as `op_replied` events with the submission's id, except those an
//! in-process caller waits for ([`Awaited`]).

pub mod git_diff;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;

use super::asks::PendingAsks;
use super::{AgentMessage, AgentRefusal};
use crate::protocol::op::{
    ChangesOp, Op, OpReceiver, OpReply, OpSender, PlanCleared, PlanShown, SessionEntry, StatusInfo,
    Submission, SubmissionId, TurnOutcome, UndoneChange, op_channel,
};
use crate::protocol::{ApprovalPolicy, EventKind, Message, SafetySettings, SandboxMode};
use crate::provider::Provider;
use crate::store::journal::Journal;

/// Builds the provider for another model of the same endpoint (`/model`).
/// It may block (a TLS client takes a moment), so it runs off the runtime.
pub type ModelSwitcher =
    Arc<dyn Fn(&str) -> Result<Arc<dyn Provider>, crate::provider::SwitchError> + Send + Sync>;

/// Switches the session's sandbox mode and approval policy (an editor's
/// session mode): the settings now in force, or why not (the composition
/// root's reasons, which the desk only shows). It blocks (the sandbox is
/// rebuilt), so it runs off the runtime.
pub type SafetySwitcher =
    Arc<dyn Fn(SandboxMode, ApprovalPolicy) -> Result<SafetySettings, SwitchRefusal> + Send + Sync>;

/// Why a [`SafetySwitcher`] refused, as its owner typed it.
pub type SwitchRefusal = Box<dyn std::error::Error + Send + Sync>;

/// Longest wait for the agent's answer between turns (a snapshot, a
/// recalled history): a hung agent gives an error instead of a silent UI.
const AGENT_WAIT: Duration = Duration::from_secs(5);
/// Longest wait for `/compact`, which may ask the model for a summary (as
/// long as the longest model request).
const COMPACT_WAIT: Duration = Duration::from_secs(600);

/// Why a local command did nothing; shown to the person as one sentence.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// This front end has no such command (a subagent's, a test's).
    #[error("/{0} is not available here")]
    Unavailable(&'static str),
    /// The store the command works on refused or failed; the sentence
    /// says why.
    #[error("{0}")]
    Failed(String),
}

/// Why an op the front desk answers failed; its `Display` is the
/// `OpReply::Failed` sentence.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error(transparent)]
    Agent(#[from] AgentUnanswered),
    #[error(transparent)]
    Refused(#[from] AgentRefusal),
    #[error(transparent)]
    Command(#[from] CommandError),
    /// Work on the blocking pool panicked or was cancelled.
    #[error("the command failed: {0}")]
    Blocking(#[source] tokio::task::JoinError),
    #[error("/suspend: a turn is running; wait for it to end")]
    SuspendDuringTurn,
    #[error("/suspend: {0}")]
    SuspendUnanswered(#[source] AgentUnanswered),
    #[error("cannot write the bookmark to the session journal: {0}")]
    Bookmark(#[source] std::io::Error),
    #[error("cannot switch the model: {0}")]
    ModelSwitchTask(#[source] tokio::task::JoinError),
    #[error(transparent)]
    ModelSwitch(#[from] crate::provider::SwitchError),
    #[error("switching the sandbox mode is not available here")]
    SafetySwitchUnavailable,
    #[error("cannot switch the sandbox mode: {0}")]
    SafetySwitchTask(#[source] tokio::task::JoinError),
    /// The switcher refused; its sentence says why.
    #[error(transparent)]
    SafetySwitch(SwitchRefusal),
    #[error(transparent)]
    Diff(#[from] git_diff::GitDiffFailed),
}

/// Why the agent gave no answer to a call of the front desk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AgentUnanswered {
    #[error("the agent did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("the agent stopped before it answered")]
    Stopped,
    #[error("the agent is not running")]
    NotRunning,
}

impl From<String> for CommandError {
    fn from(message: String) -> CommandError {
        CommandError::Failed(message)
    }
}

/// The local commands (`/plan`, `/plan clear`, `/undo`, `/suspend`,
/// `/recall`, `/sessions`, `/status`) on the session's stores: the same
/// data and changes as the command line's. They run without a model turn,
/// on the blocking pool. Errors are one sentence for the user.
pub trait LocalCommands: Send + Sync {
    /// The current plan, as `fido plan show` finds it.
    fn show(&self) -> Result<PlanShown, CommandError>;
    /// Starts a new, empty plan, as `fido plan clear` does.
    fn clear(&self) -> Result<PlanCleared, CommandError>;
    /// `/undo`: reverts the last file change of the file tools (`None`:
    /// nothing left to undo).
    fn undo(&self) -> Result<Option<UndoneChange>, CommandError> {
        Err(CommandError::Unavailable("undo"))
    }
    /// `/suspend [NAME]`: the session's journal and the name of the
    /// bookmark about to go in it (`name` checked against the session's
    /// bookmarks, or a generated one).
    fn bookmark(&self, _name: Option<&str>) -> Result<(Arc<Journal>, String), CommandError> {
        Err(CommandError::Unavailable("suspend"))
    }
    /// `/recall [NAME]`: what was recalled (a bookmark, a session) and its
    /// messages (the newest session when no name is given).
    fn recall(&self, _name: Option<&str>) -> Result<(String, Vec<Message>), CommandError> {
        Err(CommandError::Unavailable("recall"))
    }
    /// `/sessions`: the sessions, each with its bookmarks, and the
    /// conversations earlier versions saved.
    fn sessions(&self) -> Result<Vec<SessionEntry>, CommandError> {
        Err(CommandError::Unavailable("sessions"))
    }
    /// `/status`: the settings it shows.
    fn status(&self) -> StatusInfo {
        StatusInfo::default()
    }
    /// `/changes`: the open change sets, one in full, or an apply or a
    /// discard (`Ok` is what to show; `Output` when `true`).
    fn changes(&self, _request: &ChangesOp) -> Result<(bool, String), CommandError> {
        Err(CommandError::Unavailable("changes"))
    }
    /// The workspace's prompt history, oldest first. Blocking.
    fn prompt_history(&self) -> Vec<String> {
        Vec::new()
    }
    /// Appends a line the person entered to the prompt history. Blocking.
    fn remember_prompt(&self, _line: &str) {}
}

/// What an agent without a front end (a subagent, a test's) answers.
struct NoCommands;

impl LocalCommands for NoCommands {
    fn show(&self) -> Result<PlanShown, CommandError> {
        Err(CommandError::Unavailable("plan"))
    }
    fn clear(&self) -> Result<PlanCleared, CommandError> {
        Err(CommandError::Unavailable("plan clear"))
    }
}

/// Everything the engine needs to answer a front end beyond the
/// conversation: handed to the actor by [`serve`].
#[derive(Clone)]
pub struct FrontDesk {
    /// The front end's event queue, where answers go.
    pub events: crate::protocol::event_queue::EventSink,
    pub commands: Arc<dyn LocalCommands>,
    /// Approvals and questions waiting for the person.
    pub asks: Option<Arc<PendingAsks>>,
    pub switch_model: Option<ModelSwitcher>,
    pub switch_safety: Option<SafetySwitcher>,
    /// The replies in-process callers wait for, which skip the events.
    pub awaited: Arc<Awaited>,
}

/// The submissions whose reply a caller in this process waits for (the
/// control socket, `fido exec`, an ACP session): each reply goes to its
/// waiter instead of the event queue, so a front end reading the events
/// never sees an answer it did not ask for.
#[derive(Default)]
pub struct Awaited {
    waiting: Mutex<HashMap<SubmissionId, tokio::sync::oneshot::Sender<OpReply>>>,
}

impl Awaited {
    /// The reply to `id` will come here; ask before `id` is queued.
    pub fn expect(&self, id: SubmissionId) -> tokio::sync::oneshot::Receiver<OpReply> {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        self.lock().insert(id, sender);
        receiver
    }

    /// Nobody waits for `id` any more (it was never queued).
    pub fn forget(&self, id: SubmissionId) {
        self.lock().remove(&id);
    }

    /// The engine stopped: every waiter hears that no reply will come.
    pub fn abandon_all(&self) {
        self.lock().clear();
    }

    fn take(&self, id: SubmissionId) -> Option<tokio::sync::oneshot::Sender<OpReply>> {
        self.lock().remove(&id)
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<SubmissionId, tokio::sync::oneshot::Sender<OpReply>>>
    {
        // A panic while holding it cannot leave the map half-changed.
        self.waiting
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl FrontDesk {
    /// The desk of an agent no front end serves: local commands are not
    /// available, answers go to `events`.
    pub fn detached(events: crate::protocol::event_queue::EventSink) -> FrontDesk {
        FrontDesk {
            events,
            commands: Arc::new(NoCommands),
            asks: None,
            switch_model: None,
            switch_safety: None,
            awaited: Arc::default(),
        }
    }

    /// Answers submission `id`: to its waiter, else as an event.
    pub fn reply(&self, id: SubmissionId, reply: OpReply) {
        match self.awaited.take(id) {
            // A waiter that went away wanted nothing more.
            Some(waiter) => drop(waiter.send(reply)),
            None => self.events.emit(EventKind::OpReplied { id, reply }),
        }
    }

    /// Answers submission `id` with what `work` comes to, in a task of its
    /// own: the actor never waits for an answer.
    fn reply_later<F>(&self, id: SubmissionId, work: impl FnOnce(FrontDesk) -> F)
    where
        F: std::future::Future<Output = OpReply> + Send + 'static,
    {
        let desk = self.clone();
        let reply = work(self.clone());
        tokio::spawn(async move { desk.reply(id, reply.await) });
    }

    /// Runs a local command on the blocking pool; its answer is the reply.
    pub fn local(
        &self,
        id: SubmissionId,
        work: impl FnOnce(&dyn LocalCommands) -> OpReply + Send + 'static,
    ) {
        self.reply_later(id, |desk| async move {
            off_runtime(move || Ok(work(desk.commands.as_ref())))
                .await
                .unwrap_or_else(OpReply::failed)
        });
    }

    /// `/plan clear`: the model gets the cleared plan on its next request.
    pub fn clear_plan(&self, agent: ActorRef<AgentMessage>, id: SubmissionId) {
        self.reply_later(id, |desk| async move {
            let commands = desk.commands;
            match off_runtime(move || commands.clear()).await {
                Ok(cleared) => {
                    // Fails only when the agent is gone, and with it the model.
                    let _ = agent.cast(AgentMessage::RestorePlan);
                    OpReply::PlanCleared(Box::new(cleared))
                }
                Err(why) => OpReply::failed(why),
            }
        });
    }

    /// `/compact`, in a task: the agent's `compacted` event says what was cut.
    pub fn compact(&self, agent: ActorRef<AgentMessage>, id: SubmissionId) {
        self.reply_later(id, |_| async move {
            let asked = call(&agent, COMPACT_WAIT, |reply| AgentMessage::CompactNow {
                reply,
            });
            match asked.await {
                Ok(Ok(cut)) => OpReply::Compacted { cut },
                Ok(Err(refusal)) => OpReply::failed(refusal),
                Err(unanswered) => OpReply::failed(unanswered),
            }
        });
    }

    /// `/suspend [NAME]`: the conversation between turns, bookmarked in
    /// the session's journal.
    pub fn suspend(&self, agent: ActorRef<AgentMessage>, id: SubmissionId, name: Option<String>) {
        self.reply_later(id, |desk| async move {
            bookmark(agent, desk.commands, name)
                .await
                .unwrap_or_else(OpReply::failed)
        });
    }

    /// `/recall [NAME]`: loads the conversation, then hands it to the agent.
    pub fn recall(&self, agent: ActorRef<AgentMessage>, id: SubmissionId, name: Option<String>) {
        self.reply_later(id, |desk| async move {
            recall(agent, desk.commands, name)
                .await
                .unwrap_or_else(OpReply::failed)
        });
    }

    /// `/model NAME`: builds the provider off the runtime, then hands it over.
    pub fn switch_model(&self, agent: ActorRef<AgentMessage>, id: SubmissionId, model: String) {
        self.reply_later(id, |desk| async move {
            match switch_model(&desk, model, agent).await {
                Ok(model) => OpReply::ModelSwitched { model },
                Err(why) => OpReply::failed(why),
            }
        });
    }

    /// A mode switch: rebuilds the sandbox off the runtime, then tells the
    /// agent, whose model hears of it with the next prompt.
    pub fn switch_safety(
        &self,
        agent: ActorRef<AgentMessage>,
        id: SubmissionId,
        mode: SandboxMode,
        policy: ApprovalPolicy,
    ) {
        self.reply_later(id, |desk| async move {
            match switch_safety(&desk, mode, policy, agent).await {
                Ok(settings) => OpReply::SafetySwitched {
                    sandbox_mode: settings.sandbox_mode,
                    approval_policy: settings.approval_policy,
                },
                Err(why) => OpReply::failed(why),
            }
        });
    }

    /// `/diff`: the `git diff` of `workspace`, in a task of its own.
    pub fn diff(&self, id: SubmissionId, workspace: std::path::PathBuf) {
        self.reply_later(id, |_| async move {
            match git_diff::workspace_diff(workspace).await {
                Ok(text) if text.trim().is_empty() => OpReply::Info {
                    text: "/diff: no changes to tracked files".into(),
                },
                Ok(text) => OpReply::Diff { text },
                Err(why) => OpReply::failed(why),
            }
        });
    }

    /// `Op::Approve`: an agent nobody asks for approval ignores it.
    pub fn approve(
        &self,
        id: crate::protocol::op::AskId,
        decision: crate::protocol::ApprovalDecision,
    ) {
        match &self.asks {
            Some(asks) => asks.approve(id, decision),
            None => tracing::warn!(id, "ignored an approval: nothing asks here"),
        }
    }

    /// `Op::Answer`: an agent that asks nobody ignores it.
    pub fn answer(&self, id: crate::protocol::op::AskId, answer: Option<String>) {
        match &self.asks {
            Some(asks) => asks.answer(id, answer),
            None => tracing::warn!(id, "ignored an answer: nothing asks here"),
        }
    }
}

/// How long the op forwarder waits for one line of the prompt history.
const HISTORY_WRITE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Starts serving `agent`'s ops with `desk`, until the sender and its
/// clones are gone; an op the stopped agent cannot take is answered with
/// why.
pub fn serve(agent: ActorRef<AgentMessage>, desk: FrontDesk) -> OpSender {
    let (sender, receiver) = op_channel();
    let _ = agent.cast(AgentMessage::Attach(Box::new(desk.clone())));
    tokio::spawn(forward(receiver, agent, desk));
    sender
}

async fn forward(mut ops: OpReceiver, agent: ActorRef<AgentMessage>, desk: FrontDesk) {
    while let Some(submission) = ops.recv().await {
        // Kept here, one after another, so that the lines stay in order and
        // each is written before any op sent after it is served; a disk
        // that hangs holds the ops behind it (an interrupt among them) for
        // a second at most.
        if let Op::RememberPrompt { line } = submission.op {
            let commands = Arc::clone(&desk.commands);
            let write = tokio::task::spawn_blocking(move || commands.remember_prompt(&line));
            if tokio::time::timeout(HISTORY_WRITE_LIMIT, write)
                .await
                .is_err()
            {
                tracing::warn!("the prompt history is slow to write; not waiting for it");
            }
            continue;
        }
        if let Err(ractor::MessagingErr::SendErr(AgentMessage::Op(refused))) =
            agent.cast(AgentMessage::Op(submission))
        {
            refuse(&desk, refused);
        }
    }
}

/// An op the agent could not take (it has stopped): the front end hears
/// why instead of waiting.
fn refuse(desk: &FrontDesk, submission: Submission) {
    let gone = AgentUnanswered::NotRunning;
    let reply = match submission.op {
        Op::SubmitPrompt { .. } => OpReply::turn_ended(&TurnOutcome::failed(gone.to_string())),
        Op::Interrupt | Op::Approve { .. } | Op::Answer { .. } | Op::RememberPrompt { .. } => {
            return;
        }
        Op::CancelSubagent { .. } => OpReply::Cancelled {
            subagent_ids: Vec::new(),
        },
        Op::Compact
        | Op::SwitchModel { .. }
        | Op::SwitchSafety { .. }
        | Op::ShowPlan
        | Op::ClearPlan
        | Op::Undo
        | Op::Suspend { .. }
        | Op::Recall { .. }
        | Op::ListSessions
        | Op::Changes { .. }
        | Op::Status
        | Op::ListSubagents
        | Op::PromptHistory
        | Op::Diff => OpReply::failed(gone),
    };
    desk.reply(submission.id, reply);
}

/// Sends the message `make` builds and waits for its answer, at most `wait`.
async fn call<T: Send + 'static>(
    agent: &ActorRef<AgentMessage>,
    wait: Duration,
    make: impl FnOnce(ractor::RpcReplyPort<T>) -> AgentMessage,
) -> Result<T, AgentUnanswered> {
    match agent.call(make, Some(wait)).await {
        Ok(ractor::rpc::CallResult::Success(answer)) => Ok(answer),
        Ok(ractor::rpc::CallResult::Timeout) => Err(AgentUnanswered::Timeout(wait)),
        Ok(ractor::rpc::CallResult::SenderError) => Err(AgentUnanswered::Stopped),
        Err(_) => Err(AgentUnanswered::NotRunning),
    }
}

/// Runs file work on the blocking pool, never on a runtime worker.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CommandError> + Send + 'static,
) -> Result<T, OpError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => Ok(done?),
        Err(err) => Err(OpError::Blocking(err)),
    }
}

async fn recall(
    agent: ActorRef<AgentMessage>,
    commands: Arc<dyn LocalCommands>,
    name: Option<String>,
) -> Result<OpReply, OpError> {
    let (from, history) = off_runtime(move || commands.recall(name.as_deref())).await?;
    let make = |reply| AgentMessage::ReplaceHistory { history, reply };
    let messages = call(&agent, AGENT_WAIT, make).await??;
    Ok(OpReply::Recalled { from, messages })
}

async fn bookmark(
    agent: ActorRef<AgentMessage>,
    commands: Arc<dyn LocalCommands>,
    name: Option<String>,
) -> Result<OpReply, OpError> {
    let conversation = match call(&agent, AGENT_WAIT, AgentMessage::Snapshot).await {
        Ok(Some(conversation)) => conversation,
        Ok(None) => return Err(OpError::SuspendDuringTurn),
        Err(unanswered) => return Err(OpError::SuspendUnanswered(unanswered)),
    };
    let (journal, name) = off_runtime(move || commands.bookmark(name.as_deref())).await?;
    journal
        .bookmark(conversation.generation(), conversation.messages(), &name)
        .await
        .map_err(OpError::Bookmark)?;
    Ok(OpReply::Bookmarked { name })
}

async fn switch_model(
    desk: &FrontDesk,
    model: String,
    agent: ActorRef<AgentMessage>,
) -> Result<String, OpError> {
    let Some(switch) = desk.switch_model.clone() else {
        return Err(CommandError::Unavailable("model").into());
    };
    let provider = tokio::task::spawn_blocking(move || switch(&model))
        .await
        .map_err(OpError::ModelSwitchTask)??;
    let model = provider.model().to_string();
    agent
        .cast(AgentMessage::SwitchProvider { provider })
        .map_err(|_| AgentUnanswered::NotRunning)?;
    Ok(model)
}

async fn switch_safety(
    desk: &FrontDesk,
    mode: SandboxMode,
    policy: ApprovalPolicy,
    agent: ActorRef<AgentMessage>,
) -> Result<SafetySettings, OpError> {
    let Some(switch) = desk.switch_safety.clone() else {
        return Err(OpError::SafetySwitchUnavailable);
    };
    let settings = tokio::task::spawn_blocking(move || switch(mode, policy))
        .await
        .map_err(OpError::SafetySwitchTask)?
        .map_err(OpError::SafetySwitch)?;
    // The switch is in force for the tools already; a stopped agent has no
    // model left to tell.
    let _ = agent.cast(AgentMessage::SafetySwitched {
        settings: settings.clone(),
    });
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use ractor::{Actor, ActorProcessingErr, RpcReplyPort};

    use super::*;
    use crate::protocol::event_queue::{EventReceiver, channel};
    use crate::protocol::{ApprovalDecision, ApprovalRequest};

    /// Answers a snapshot as an agent with a turn running does; every
    /// other message it leaves unanswered.
    struct Busy;

    impl Actor for Busy {
        type Msg = AgentMessage;
        type State = ();
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<AgentMessage>,
            _args: (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn handle(
            &self,
            _myself: ActorRef<AgentMessage>,
            message: AgentMessage,
            _state: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            if let AgentMessage::Snapshot(reply) = message {
                let _ = RpcReplyPort::send(reply, None);
            }
            Ok(())
        }
    }

    fn desk() -> (FrontDesk, EventReceiver) {
        let (events, receiver) = channel();
        let mut desk = FrontDesk::detached(events);
        desk.switch_model = Some(Arc::new(|model: &str| {
            Err(crate::provider::SwitchError::Build {
                model: model.to_string(),
                source: crate::provider::BuildError::NoAnthropicKey,
            })
        }));
        (desk, receiver)
    }

    async fn next_event(events: &mut EventReceiver) -> EventKind {
        tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event within 30 s")
            .expect("an open queue")
            .kind
    }

    /// The reply to submission `id`, skipping other events.
    async fn reply_to(events: &mut EventReceiver, id: SubmissionId) -> OpReply {
        loop {
            if let EventKind::OpReplied { id: of, reply } = next_event(events).await
                && of == id
            {
                return reply;
            }
        }
    }

    #[tokio::test]
    async fn ops_to_a_stopped_agent_are_answered_at_once() {
        let (agent, handle) = Actor::spawn(None, Busy, ()).await.unwrap();
        agent.stop(None);
        handle.await.unwrap();
        let (desk, mut events) = desk();
        let engine = serve(agent, desk);

        let prompt = "hi".to_string();
        let turn = engine.send(Op::SubmitPrompt { prompt }).unwrap();
        let compact = engine.send(Op::Compact).unwrap();
        let suspend = engine.send(Op::Suspend { name: None }).unwrap();
        let gone = "the agent is not running".to_string();
        assert_eq!(
            reply_to(&mut events, turn).await,
            OpReply::TurnEnded {
                outcome: TurnOutcome::failed(gone.clone())
            }
        );
        let failed = OpReply::Failed { message: gone };
        assert_eq!(reply_to(&mut events, compact).await, failed);
        assert_eq!(reply_to(&mut events, suspend).await, failed);
    }

    #[tokio::test]
    async fn a_snapshot_during_a_turn_and_a_model_that_cannot_be_built_say_why() {
        let (agent, _handle) = Actor::spawn(None, Busy, ()).await.unwrap();
        let (desk, mut events) = desk();
        desk.suspend(agent.clone(), 7, None);
        assert_eq!(
            reply_to(&mut events, 7).await,
            OpReply::Failed {
                message: "/suspend: a turn is running; wait for it to end".into()
            }
        );
        desk.switch_model(agent.clone(), 8, "gpt-x".into());
        assert_eq!(
            reply_to(&mut events, 8).await,
            OpReply::Failed {
                message: "cannot switch to gpt-x: no API key for Anthropic: set FIDO_API_KEY or ANTHROPIC_API_KEY".into()
            }
        );
        agent.stop(None);
    }

    /// The real agent, asked through the op queue: a turn whose tools ask
    /// the person a question and then for approval. Each request is an
    /// event with an id; answers with an unknown or stale id are ignored
    /// and the right ones let the turn go on.
    #[tokio::test]
    async fn an_approval_and_a_question_are_answered_through_the_ops_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let (events, mut receiver) = channel();
        let asks = PendingAsks::new(events.clone());
        let agent = asking_agent(dir.path(), &events, &asks).await;
        let desk = FrontDesk {
            asks: Some(asks),
            ..FrontDesk::detached(events)
        };
        let engine = serve(agent, desk);
        let prompt = "make the db directory".to_string();
        let turn = engine.send(Op::SubmitPrompt { prompt }).unwrap();

        let question = loop {
            if let EventKind::QuestionAsked { id, question } = next_event(&mut receiver).await {
                assert_eq!(question, "Which database?");
                break id;
            }
        };
        let stray = Some("ignored".to_string());
        engine
            .send(Op::Answer {
                id: question + 100,
                answer: stray,
            })
            .unwrap();
        let answer = Some("postgres".to_string());
        engine
            .send(Op::Answer {
                id: question,
                answer,
            })
            .unwrap();

        let approval = loop {
            match next_event(&mut receiver).await {
                EventKind::ApprovalRequested { id, request } => {
                    assert!(
                        matches!(request, ApprovalRequest::FileChange { ref path, .. } if path == "db"),
                        "{request:?}"
                    );
                    break id;
                }
                EventKind::ToolResult { name, ok, .. } if name == "ask_user" => assert!(ok),
                _ => {}
            }
        };
        assert_ne!(approval, question);
        let stale = ApprovalDecision::Denied { reason: None };
        engine
            .send(Op::Approve {
                id: question,
                decision: stale,
            })
            .unwrap();
        let decision = ApprovalDecision::Approved;
        engine
            .send(Op::Approve {
                id: approval,
                decision,
            })
            .unwrap();

        let ended = reply_to(&mut receiver, turn).await;
        assert!(
            matches!(&ended, OpReply::TurnEnded {
                outcome: TurnOutcome::Completed { final_text: Some(text), usage },
            } if text == "done" && usage.requests == 3),
            "{ended:?}"
        );
        assert!(dir.path().join("db").is_dir(), "the approved change ran");
    }

    /// `/diff` through the real agent: the `git diff` of the agent's own
    /// workspace, a sentence outside a repository or with no change.
    #[tokio::test]
    async fn diff_answers_with_the_workspaces_git_diff() {
        let dir = tempfile::tempdir().unwrap();
        let (events, mut receiver) = channel();
        let agent = asking_agent(dir.path(), &events, &PendingAsks::new(events.clone())).await;
        let engine = serve(agent, FrontDesk::detached(events));
        let outside = engine.send(Op::Diff).unwrap();
        let reply = reply_to(&mut receiver, outside).await;
        assert!(
            matches!(&reply, OpReply::Failed { message } if message.starts_with("git diff failed")),
            "{reply:?}"
        );
        let git = |args: &[&str]| {
            crate::git::Git::new(dir.path()).run(args).unwrap();
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        git(&["add", "a.txt"]);
        let unchanged = engine.send(Op::Diff).unwrap();
        let text = "/diff: no changes to tracked files".to_string();
        assert_eq!(
            reply_to(&mut receiver, unchanged).await,
            OpReply::Info { text }
        );
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        let changed = engine.send(Op::Diff).unwrap();
        let reply = reply_to(&mut receiver, changed).await;
        assert!(
            matches!(&reply, OpReply::Diff { text } if text.contains("-one\n+two")),
            "{reply:?}"
        );
    }

    /// An agent whose model asks a question, then makes a directory, in a
    /// read-only session that asks before file changes.
    async fn asking_agent(
        dir: &std::path::Path,
        events: &crate::protocol::event_queue::EventSink,
        asks: &Arc<PendingAsks>,
    ) -> ActorRef<AgentMessage> {
        use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};
        let script = r#"{"turns": [
            {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which database?"}}]},
            {"tool_calls": [{"name": "mkdir", "arguments": {"path": "db"}}]},
            {"text": "done"}
        ]}"#;
        let provider =
            crate::provider::script::ScriptProvider::from_json("s", "m", script).unwrap();
        let mut env = crate::tools::testing::env(dir);
        env.user = Some(asks.clone());
        let settings = SafetySettings {
            sandbox_mode: SandboxMode::ReadOnly,
            approval_policy: ApprovalPolicy::OnRequest,
            network: crate::protocol::NetworkAccess::Off,
        };
        env.approvals = crate::tools::approval::Approvals::new(settings, Some(asks.clone()));
        let deps = Arc::new(super::super::AgentDeps {
            provider: Arc::new(provider),
            tool_env: Arc::new(env),
            ctx: crate::tools::InvocationContext::main(),
            settings: super::super::AgentSettings::for_tests(),
            events: events.clone(),
            journal: None,
            catalog: crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan),
        });
        let arguments = super::super::AgentArguments {
            deps,
            conversation: super::super::Conversation::new("system".into()),
            turns: 0,
        };
        let (agent, _) = Actor::spawn(None, super::super::AgentActor, arguments)
            .await
            .unwrap();
        agent
    }
}
