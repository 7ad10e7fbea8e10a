//! `UiActor`: owns the [`Store`] and the terminal; turns messages into store
//! changes and frames, and actions into commands for the agent.
//!
//! Draw on change, paced: a message that changes the store schedules one
//! frame, no sooner than [`FRAME_DELAY`] after the last one, so a burst of
//! events costs one draw per interval (the first change after a quiet
//! spell draws at once). A key shortens the wait to [`KEY_FRAME_DELAY`],
//! so typing stays immediate while events flood in. The only timer is a
//! one-second [`TICK`] while a turn or a subagent's clock runs. The actor
//! never waits for the engine: ops are queued without waiting, and their
//! answers arrive later as `op_replied` events with the op's id, among the
//! engine's other events. An answer to an op the actor did not send (or
//! got an answer to already) is ignored with a log line.
//!
//! Generic over the ratatui backend, so tests run the real actor on a
//! `TestBackend`.

use std::collections::HashSet;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::oneshot;

use crossterm::event::MouseEventKind;

use super::frame::Screen;
use super::keys::{self, Action};
use super::state::{Direction, Entry, Store};
use super::{diff, replies, status_view, theme};
use crate::protocol::op::{AskId, ChangesOp, Op, OpReply, OpSender, SubmissionId};
use crate::protocol::{ApprovalRequest, Event, EventKind, TurnStatus};

/// Shortest time between two frames for agent events: bursts within it
/// coalesce into one frame.
pub const FRAME_DELAY: Duration = Duration::from_millis(16);
/// Shortest time between two frames when a key changed the screen.
pub const KEY_FRAME_DELAY: Duration = Duration::from_millis(4);
/// How often on-screen clocks advance while something is running.
pub const TICK: Duration = Duration::from_secs(1);

pub enum UiMessage {
    /// An event of the agent.
    Agent(Event),
    /// Events of the agent, in order, from its event queue; the reply says
    /// they were applied (the forwarder keeps one batch in the mailbox).
    AgentBatch(Vec<Event>, RpcReplyPort<()>),
    /// Terminal input: a key, a paste, a resize (from the input reader).
    Terminal(crossterm::event::Event),
    /// Quit now (SIGTERM, SIGHUP): like `/quit`.
    Shutdown,
    /// Stop with this error: the terminal is gone (the panic hook already
    /// restored it).
    Crashed(String),
    /// A start-up warning from outside the engine, for the transcript.
    Warning(String),
    /// A resumed session's messages, shown as its transcript, and a note.
    Restored(Vec<crate::protocol::Message>, String),
    /// A copy of the store (tests, debugging).
    Snapshot(RpcReplyPort<Store>),
    /// Internal: draw the frame scheduled after a change.
    Frame,
    /// Internal: advance on-screen clocks.
    Tick,
    /// Internal: the approval prompt's grace period may be over.
    ApprovalWake,
}

/// Why the actor stopped, sent once on its exit port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UiExit {
    /// The user quit.
    Quit,
    /// Drawing failed; one sentence.
    Failed(String),
}

pub struct UiActor<B>(PhantomData<fn() -> B>);

impl<B> UiActor<B> {
    pub fn new() -> Self {
        UiActor(PhantomData)
    }
}

impl<B> Default for UiActor<B> {
    fn default() -> Self {
        Self::new()
    }
}

pub struct UiArguments<B: Backend> {
    pub terminal: Terminal<B>,
    /// Where prompts, interrupts and the other commands to the engine go.
    pub engine: OpSender,
    /// Told once why the actor stopped.
    pub exit: oneshot::Sender<UiExit>,
}

pub struct UiState<B: Backend> {
    terminal: Terminal<B>,
    store: Store,
    /// The rendered lines frames share (the transcript's, the plan's).
    screen: Screen,
    engine: OpSender,
    /// The ops sent whose answers are still to come; the running turn's
    /// prompt is one of them.
    awaiting: HashSet<SubmissionId>,
    exit: Option<oneshot::Sender<UiExit>>,
    frame_scheduled: bool,
    /// When the last frame was drawn (pacing).
    last_frame: Instant,
    /// A frame scheduled soon after a key (pending).
    key_frame_scheduled: bool,
    tick_scheduled: bool,
    /// The id of the question on screen, which its answer carries.
    question: Option<AskId>,
    /// The id of the approval request on screen, which its decision carries.
    approval: Option<AskId>,
    /// An [`UiMessage::ApprovalWake`] is on its way.
    approval_wake_scheduled: bool,
}

impl<B> Actor for UiActor<B>
where
    B: Backend + Send + 'static,
{
    type Msg = UiMessage;
    type State = UiState<B>;
    type Arguments = UiArguments<B>;

    async fn pre_start(
        &self,
        _myself: ActorRef<UiMessage>,
        args: UiArguments<B>,
    ) -> Result<UiState<B>, ActorProcessingErr> {
        let size = args
            .terminal
            .size()
            .map_err(|err| format!("cannot read the terminal size: {err}"))?;
        let mut store = Store::new((size.width, size.height));
        store.no_color = theme::no_color_from_env();
        let mut state = UiState {
            terminal: args.terminal,
            store,
            screen: Screen::default(),
            engine: args.engine,
            awaiting: HashSet::new(),
            exit: Some(args.exit),
            frame_scheduled: false,
            last_frame: Instant::now(),
            key_frame_scheduled: false,
            tick_scheduled: false,
            question: None,
            approval: None,
            approval_wake_scheduled: false,
        };
        // The engine keeps the prompt history; its lines come as a reply.
        request(&mut state, Op::PromptHistory);
        draw(&mut state).map_err(|failed| -> ActorProcessingErr { Box::new(failed) })?;
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<UiMessage>,
        message: UiMessage,
        state: &mut UiState<B>,
    ) -> Result<(), ActorProcessingErr> {
        let now = Instant::now();
        let keyed = matches!(
            message,
            UiMessage::Terminal(
                crossterm::event::Event::Key(_) | crossterm::event::Event::Paste(_)
            )
        );
        let changed = match message {
            UiMessage::Agent(event) => on_event(&myself, state, event.kind, now),
            UiMessage::AgentBatch(events, applied) => {
                let changed = events.into_iter().fold(false, |changed, event| {
                    on_event(&myself, state, event.kind, now) | changed
                });
                // The forwarder may have stopped waiting; nothing to tell it.
                let _ = applied.send(());
                changed
            }
            UiMessage::Terminal(event) => on_terminal(&myself, state, event, now),
            UiMessage::Shutdown => {
                dispatch(&myself, state, Action::Quit);
                false
            }
            UiMessage::Crashed(message) => {
                stop(&myself, state, UiExit::Failed(message));
                false
            }
            UiMessage::Restored(messages, note) => {
                state.store.restore_transcript(&messages, note);
                true
            }
            UiMessage::Warning(warning) => push(state, Entry::Error(format!("warning: {warning}"))),
            UiMessage::Snapshot(reply) => {
                let _ = reply.send(state.store.clone());
                false
            }
            UiMessage::Frame => {
                draw_scheduled(&myself, state, now);
                false
            }
            UiMessage::Tick => {
                state.tick_scheduled = false;
                state.store.tick(now)
            }
            UiMessage::ApprovalWake => {
                state.approval_wake_scheduled = false;
                super::approval::poll(&mut state.store, now)
            }
        };
        if changed {
            schedule_frame(&myself, state, keyed, now);
        }
        if state.store.needs_ticks() && !state.tick_scheduled {
            state.tick_scheduled = true;
            myself.send_after(TICK, || UiMessage::Tick);
        }
        schedule_approval_wake(&myself, state, now);
        Ok(())
    }
}

/// While an approval prompt waits out its grace period, a wake at its
/// end, so the prompt shows itself ready when it is (keys typed meanwhile
/// move the end: the wake then finds it not ready and schedules another).
fn schedule_approval_wake<B: Backend>(
    myself: &ActorRef<UiMessage>,
    state: &mut UiState<B>,
    now: Instant,
) {
    let Some(at) = super::approval::wake_at(&state.store) else {
        return;
    };
    if state.approval_wake_scheduled {
        return;
    }
    state.approval_wake_scheduled = true;
    let delay = at.saturating_duration_since(now);
    myself.send_after(delay, || UiMessage::ApprovalWake);
}

/// Draws the frame scheduled after a change; a second scheduled frame (a
/// key's, an event's) finds nothing left to draw.
fn draw_scheduled<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, now: Instant) {
    if !state.frame_scheduled {
        return;
    }
    state.frame_scheduled = false;
    state.key_frame_scheduled = false;
    state.last_frame = now;
    if let Err(failed) = draw(state) {
        stop(myself, state, UiExit::Failed(failed.to_string()));
    }
}

fn push<B: Backend>(state: &mut UiState<B>, entry: Entry) -> bool {
    state.store.push(entry);
    true
}

/// A key, paste, resize or wheel: whether the screen changed.
fn on_terminal<B: Backend>(
    myself: &ActorRef<UiMessage>,
    state: &mut UiState<B>,
    event: crossterm::event::Event,
    now: Instant,
) -> bool {
    match event {
        crossterm::event::Event::Key(key) => {
            state.store.now = now;
            let remembered = state.store.history.len();
            let action = keys::handle_key(&mut state.store, key, now);
            save_history(state, remembered);
            if let Some(action) = action {
                dispatch(myself, state, action);
            }
            true
        }
        crossterm::event::Event::Paste(text) => {
            state.store.now = now;
            keys::handle_paste(&mut state.store, &text);
            true
        }
        crossterm::event::Event::Resize(width, height) => {
            state.store.size = (width, height);
            true
        }
        crossterm::event::Event::Mouse(mouse) => match mouse.kind {
            MouseEventKind::ScrollUp => {
                keys::wheel(&mut state.store, Direction::Up);
                true
            }
            MouseEventKind::ScrollDown => {
                keys::wheel(&mut state.store, Direction::Down);
                true
            }
            _ => false,
        },
        crossterm::event::Event::FocusGained | crossterm::event::Event::FocusLost => false,
    }
}

/// One event of the engine: the UI protocol's requests and answers are
/// the actor's; the others change the store.
fn on_event<B: Backend>(
    myself: &ActorRef<UiMessage>,
    state: &mut UiState<B>,
    kind: EventKind,
    now: Instant,
) -> bool {
    match kind {
        EventKind::ApprovalRequested { id, request } => show_approval(state, id, request, now),
        EventKind::QuestionAsked { id, question } => show_question(state, id, &question),
        EventKind::OpReplied { id, reply } => {
            let shown = on_reply(state, id, reply);
            release_queued(myself, state, id) | shown
        }
        kind @ (EventKind::SessionStarted { .. }
        | EventKind::TurnStarted { .. }
        | EventKind::AssistantText { .. }
        | EventKind::ToolCall { .. }
        | EventKind::ToolResult { .. }
        | EventKind::PlanUpdated { .. }
        | EventKind::Subagent { .. }
        | EventKind::Usage { .. }
        | EventKind::Compacted { .. }
        | EventKind::Retrying { .. }
        | EventKind::TurnCompleted { .. }
        | EventKind::Error { .. }
        | EventKind::HookStarted { .. }
        | EventKind::HookFinished { .. }
        | EventKind::AssistantDelta { .. }
        | EventKind::ToolOutput { .. }
        | EventKind::SubagentCall { .. }
        | EventKind::SubagentTextDelta { .. }
        | EventKind::SubagentReasoningDelta { .. }
        | EventKind::SubagentPlan { .. }
        | EventKind::ReasoningDelta { .. }
        | EventKind::ChangeSet { .. }) => state.store.apply(&kind, now),
    }
}

/// The guard asks for approval: the prompt, which y/a/n/Esc answer. A
/// newer request replaces an unanswered one still on screen (denied); one
/// that went with its turn needs no answer.
fn show_approval<B: Backend>(
    state: &mut UiState<B>,
    id: AskId,
    request: ApprovalRequest,
    now: Instant,
) -> bool {
    if let Some(previous) = state.approval.replace(id)
        && state.store.approval.is_some()
    {
        let decision = crate::protocol::ApprovalDecision::Denied { reason: None };
        send(
            state,
            Op::Approve {
                id: previous,
                decision,
            },
        );
    }
    // Its keys wait for a quiet moment from now on.
    state.store.now = now;
    super::approval::show(&mut state.store, request);
    true
}

/// `ask_user`: the question, which the next line entered answers. A newer
/// question replaces an unanswered one (dismissed).
fn show_question<B: Backend>(state: &mut UiState<B>, id: AskId, question: &str) -> bool {
    if let Some(previous) = state.question.replace(id) {
        send(
            state,
            Op::Answer {
                id: previous,
                answer: None,
            },
        );
    }
    state.store.ask(question);
    true
}

/// The answer to an op this UI sent, shown; any other is ignored.
fn on_reply<B: Backend>(state: &mut UiState<B>, id: SubmissionId, reply: OpReply) -> bool {
    if !state.awaiting.remove(&id) {
        tracing::info!(id, "ignored the answer to an op this UI is not waiting for");
        return false;
    }
    let store = &mut state.store;
    match reply {
        OpReply::TurnEnded { outcome } => {
            store.turn_replied(outcome.status(), outcome.error().map(str::to_string))
        }
        OpReply::Compacted { cut: true } => return false,
        OpReply::Compacted { cut: false } => store.push(Entry::Info(
            "nothing to compact: the conversation is too short".into(),
        )),
        OpReply::ModelSwitched { model } => {
            store.push(Entry::Info(format!(
                "model: {model} from the next request on; the prompt cache starts cold, so that request pays for the whole prompt again"
            )));
            store.session.model = model;
        }
        OpReply::SafetySwitched {
            sandbox_mode,
            approval_policy,
        } => store.push(Entry::Info(format!(
            "sandbox mode {sandbox_mode}, approval policy {approval_policy} from the next tool call on"
        ))),
        OpReply::PlanCleared(cleared) => {
            store.set_plan(&cleared.plan, "cleared");
            store.push(Entry::Info(cleared.message));
        }
        OpReply::Status(info) => {
            let text = status_view::status(store, &info);
            store.push(Entry::Local(text));
        }
        OpReply::Plan(shown) => store.push(Entry::Local(shown_plan(&shown))),
        OpReply::Sessions { sessions } => {
            store.push(Entry::Local(replies::sessions_text(&sessions)))
        }
        OpReply::PromptHistory { entries } => {
            store.load_history(entries);
            return false;
        }
        OpReply::Subagents { subagents } => store.push(Entry::Local(replies::subagents_text(&subagents))),
        // The notice said so when the key was pressed.
        OpReply::Cancelled { .. } => return false,
        OpReply::Undone { change } => {
            store.push(Entry::Info(replies::undone_text(change.as_ref())))
        }
        OpReply::Bookmarked { name } => store.push(Entry::Info(replies::bookmarked_text(&name))),
        OpReply::Recalled { from, messages } => {
            store.push(Entry::Info(replies::recalled_text(&from, messages)))
        }
        OpReply::Info { text } => store.push(Entry::Info(text)),
        OpReply::Output { text } => store.push(Entry::Local(text)),
        OpReply::Diff { text } => store.push(Entry::Diff(diff::from_git(&text))),
        OpReply::Failed { message } => store.push(Entry::Error(message)),
    }
    true
}

/// `/plan`: the plan as `fido plan show` prints it, after the warning
/// about the saved file, if any.
fn shown_plan(shown: &crate::protocol::op::PlanShown) -> String {
    match &shown.warning {
        Some(warning) => format!("warning: {warning}\n{}", shown.text),
        None => shown.text.clone(),
    }
}

/// The reply to `id` arrived: when the queue waited for it, the next
/// queued line goes (a prompt, or a command that waited for the turn).
fn release_queued<B: Backend>(
    myself: &ActorRef<UiMessage>,
    state: &mut UiState<B>,
    id: SubmissionId,
) -> bool {
    if !state.store.typeahead.replied(id) {
        return false;
    }
    if let Some(action) = keys::release_queued(&mut state.store) {
        dispatch(myself, state, action);
    }
    true
}

/// Schedules the next frame, paced from the last one; a key gets a frame
/// sooner even when an event's frame is already on its way.
fn schedule_frame<B: Backend>(
    myself: &ActorRef<UiMessage>,
    state: &mut UiState<B>,
    keyed: bool,
    now: Instant,
) {
    let pace = if keyed { KEY_FRAME_DELAY } else { FRAME_DELAY };
    // Scheduled already, and no key needs it sooner.
    let sooner = keyed && !state.key_frame_scheduled;
    if state.frame_scheduled && !sooner {
        return;
    }
    state.frame_scheduled = true;
    state.key_frame_scheduled |= keyed;
    let delay = (state.last_frame + pace).saturating_duration_since(now);
    if delay.is_zero() {
        // Fails only when the actor is stopping.
        let _ = myself.cast(UiMessage::Frame);
    } else {
        myself.send_after(delay, || UiMessage::Frame);
    }
}

/// Sends the line the last key entered (if it did) to the engine's
/// prompt history.
fn save_history<B: Backend>(state: &mut UiState<B>, remembered: usize) {
    if state.store.history.len() > remembered
        && let Some(line) = state.store.history.last().cloned()
    {
        send(state, Op::RememberPrompt { line });
    }
}

/// The terminal refused a frame (what its backend said).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw to the terminal: {0}")]
struct DrawFailed(String);

fn draw<B: Backend>(state: &mut UiState<B>) -> Result<(), DrawFailed> {
    let (screen, store) = (&mut state.screen, &mut state.store);
    state
        .terminal
        .draw(|frame| screen.draw(frame, store))
        .map(|_| ())
        .map_err(|err| DrawFailed(err.to_string()))
}

fn stop<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, exit: UiExit) {
    if let Some(port) = state.exit.take() {
        let _ = port.send(exit);
    }
    myself.stop(None);
}

/// Carries out an action: an op for the engine, or what the UI does itself.
fn dispatch<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, action: Action) {
    match action {
        Action::Submit(prompt) => submit(state, prompt),
        Action::Interrupt => send(state, Op::Interrupt),
        Action::CancelSubagent(agent_id) => cancel_subagent(state, agent_id),
        Action::Subagents => request(state, Op::ListSubagents),
        Action::ShowPlan => {
            let note = "/plan (local; not sent to the model)";
            state.store.push(Entry::Info(note.into()));
            request(state, Op::ShowPlan);
        }
        Action::ClearPlan => request_alone(state, Op::ClearPlan),
        Action::Undo => request_alone(state, Op::Undo),
        Action::Sessions => request(state, Op::ListSessions),
        Action::Changes(op) => changes(state, op),
        Action::Suspend(name) => request_alone(state, Op::Suspend { name }),
        Action::Recall(name) => request_alone(state, Op::Recall { name }),
        Action::Answer(answer) => {
            if let Some(id) = state.question.take() {
                send(state, Op::Answer { id, answer });
            }
        }
        Action::Approve(decision) => {
            if let Some(id) = state.approval.take() {
                send(state, Op::Approve { id, decision });
            }
        }
        Action::Help => state.store.push(Entry::Local(status_view::HELP.into())),
        Action::Status => request(state, Op::Status),
        Action::Compact => {
            let note = "/compact: compacting the conversation…";
            state.store.push(Entry::Info(note.into()));
            request_alone(state, Op::Compact);
        }
        Action::Model(model) => request(state, Op::SwitchModel { model }),
        Action::Diff => request(state, Op::Diff),
        Action::Quit => stop(myself, state, UiExit::Quit),
    }
}

/// Queues an op that has no answer; a refusal is a notice.
fn send<B: Backend>(state: &mut UiState<B>, op: Op) {
    if let Err(refused) = state.engine.send(op) {
        state.store.set_notice(refused.to_string(), true);
    }
}

/// Queues an op whose answer comes as an `op_replied` event; a refusal is
/// an error in the transcript.
fn request<B: Backend>(state: &mut UiState<B>, op: Op) {
    sent_request(state, op);
}

/// [`request`], returning the op's id when the engine took it.
fn sent_request<B: Backend>(state: &mut UiState<B>, op: Op) -> Option<SubmissionId> {
    match state.engine.send(op) {
        Ok(id) => {
            state.awaiting.insert(id);
            Some(id)
        }
        Err(refused) => {
            state.store.push(Entry::Error(refused.to_string()));
            None
        }
    }
}

/// A command that needs the conversation to itself (as a turn does):
/// lines entered until its answer arrives wait in the queue.
fn request_alone<B: Backend>(state: &mut UiState<B>, op: Op) {
    if let Some(id) = sent_request(state, op) {
        state.store.typeahead.wait_for(id);
    }
}

/// `/changes`: listing and showing only read; applying and discarding
/// change the workspace, so they wait like a turn.
fn changes<B: Backend>(state: &mut UiState<B>, op: ChangesOp) {
    let writes = op.writes();
    let op = Op::Changes(op);
    if writes {
        request_alone(state, op)
    } else {
        request(state, op)
    }
}

fn cancel_subagent<B: Backend>(state: &mut UiState<B>, agent_id: Option<String>) {
    let notice = match &agent_id {
        Some(id) => format!("cancelling {id}; the other subagents and the turn go on"),
        None => "cancelling every subagent; the turn goes on".into(),
    };
    match state.engine.send(Op::CancelSubagent { agent_id }) {
        Ok(_) => state.store.set_notice(notice, false),
        Err(refused) => state.store.set_notice(refused.to_string(), true),
    }
}

/// Starts a turn; its outcome comes back as an `op_replied` event.
fn submit<B: Backend>(state: &mut UiState<B>, prompt: String) {
    state.store.begin_turn(&prompt);
    match state.engine.send(Op::SubmitPrompt { prompt }) {
        Ok(id) => {
            state.awaiting.insert(id);
            state.store.typeahead.wait_for(id);
        }
        Err(refused) => {
            let error = Some(refused.to_string());
            state.store.turn_replied(TurnStatus::Failed, error);
        }
    }
}
