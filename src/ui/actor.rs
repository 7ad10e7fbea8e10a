//! `UiActor`: owns the [`Store`] and the terminal; turns messages into store
//! changes and frames, and actions into commands for the agent.
//!
//! Draw on change, paced: a message that changes the store schedules one
//! frame, no sooner than [`FRAME_DELAY`] after the last one, so a burst of
//! events costs one draw per interval (the first change after a quiet
//! spell draws at once). A key shortens the wait to [`KEY_FRAME_DELAY`],
//! so typing stays immediate while events flood in. The only timer is a
//! one-second [`TICK`] while a turn or a subagent's clock runs. The actor never waits for the agent: commands are
//! casts, and the reply to `SubmitPrompt` is awaited by a spawned task that
//! posts it back as [`UiMessage::TurnEnded`].
//!
//! Generic over the ratatui backend, so tests run the real actor on a
//! `TestBackend`.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::oneshot;

use crossterm::event::MouseEventKind;

use super::commands::{LocalCommands, PlanCleared};
use super::frame::Screen;
use super::history::{HistoryWriter, PromptHistory};
use super::keys::{self, Action};
use super::store::{Direction, Entry, Store};
use super::{diff, git_diff, status_view, theme};
use crate::protocol::op::{Op, OpSender, TurnOutcome};
use crate::protocol::{ApprovalDecision, Event, TurnStatus};

/// Shortest time between two frames for agent events: bursts within it
/// coalesce into one frame.
pub const FRAME_DELAY: Duration = Duration::from_millis(16);
/// Shortest time between two frames when a key changed the screen.
pub const KEY_FRAME_DELAY: Duration = Duration::from_millis(4);
/// The longest wait for the agent to answer a quick question (snapshot,
/// recall): it answers between turns at once, so longer means it is stuck.
const AGENT_CALL_MS: u64 = 5_000;
/// The longest wait for `/compact`, which may ask the model for a summary
/// (as long as the longest model request).
const COMPACT_CALL_MS: u64 = 600_000;
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
    /// The reply to `SubmitPrompt`: the turn ended, or never started.
    TurnEnded(TurnOutcome),
    /// Quit now (SIGTERM, SIGHUP): like `/quit`.
    Shutdown,
    /// Stop with this error: the terminal is gone (the panic hook already
    /// restored it).
    Crashed(String),
    /// The result of a local command that ran in the background
    /// (`/suspend`, `/recall`, `/undo`): a line for the transcript.
    Local(Result<String, String>),
    /// A resumed session's messages, shown as its transcript, and a note.
    Restored(Vec<crate::protocol::Message>, String),
    /// Output of a local command that ran in the background (`/sessions`,
    /// `/plan`), shown verbatim.
    LocalOutput(Result<String, String>),
    /// `ask_user`: show the question; the next line entered answers it.
    Question(super::commands::Question),
    /// The guard asks for approval: show the prompt; y/a/n/Esc answer it.
    Approval(super::commands::ApprovalPrompt),
    /// `/plan clear` finished: the cleared plan, or why not.
    PlanCleared(Result<super::commands::PlanCleared, String>),
    /// `/model NAME` took effect (the model's name), or why not.
    ModelSwitched(Result<String, String>),
    /// `/diff` finished: the diff text, or why there is none.
    DiffReady(Result<String, String>),
    /// A copy of the store (tests, debugging).
    Snapshot(RpcReplyPort<Store>),
    /// Internal: draw the frame scheduled after a change.
    Frame,
    /// Internal: advance on-screen clocks.
    Tick,
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
    pub local_commands: Arc<dyn LocalCommands>,
    /// Told once why the actor stopped.
    pub exit: oneshot::Sender<UiExit>,
    /// Prompts entered before, and where new ones are saved.
    pub history: PromptHistory,
}

pub struct UiState<B: Backend> {
    terminal: Terminal<B>,
    store: Store,
    /// The rendered lines frames share (the transcript's, the plan's).
    screen: Screen,
    engine: OpSender,
    local_commands: Arc<dyn LocalCommands>,
    exit: Option<oneshot::Sender<UiExit>>,
    frame_scheduled: bool,
    /// When the last frame was drawn (pacing).
    last_frame: Instant,
    /// A frame scheduled soon after a key (pending).
    key_frame_scheduled: bool,
    tick_scheduled: bool,
    /// Where the answer to the question on screen goes.
    answer: Option<tokio::sync::oneshot::Sender<Option<String>>>,
    /// Where the decision on the approval request on screen goes.
    approval_answer: Option<tokio::sync::oneshot::Sender<ApprovalDecision>>,
    history: Option<HistoryWriter>,
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
        store.history = args.history.entries;
        store.no_color = theme::no_color_from_env();
        let mut state = UiState {
            terminal: args.terminal,
            store,
            screen: Screen::default(),
            engine: args.engine,
            local_commands: args.local_commands,
            exit: Some(args.exit),
            frame_scheduled: false,
            last_frame: Instant::now(),
            key_frame_scheduled: false,
            tick_scheduled: false,
            answer: None,
            approval_answer: None,
            history: args.history.writer,
        };
        draw(&mut state).map_err(|message| -> ActorProcessingErr { message.into() })?;
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
            UiMessage::Agent(event) => state.store.apply(&event.kind, now),
            UiMessage::AgentBatch(events, applied) => {
                let changed = events.iter().fold(false, |changed, event| {
                    state.store.apply(&event.kind, now) | changed
                });
                let _ = applied.send(());
                changed
            }
            UiMessage::Terminal(event) => on_terminal(&myself, state, event, now),
            UiMessage::TurnEnded(outcome) => {
                let status = outcome.status();
                state
                    .store
                    .turn_replied(status, outcome.error().map(str::to_string));
                true
            }
            UiMessage::Shutdown => {
                dispatch(&myself, state, Action::Quit);
                false
            }
            UiMessage::Crashed(message) => {
                stop(&myself, state, UiExit::Failed(message));
                false
            }
            UiMessage::Approval(prompt) => {
                // A newer request replaces an unanswered one (denied).
                if let Some(previous) = state.approval_answer.replace(prompt.answer) {
                    let _ = previous.send(ApprovalDecision::Denied { reason: None });
                }
                super::approval::show(&mut state.store, prompt.request);
                true
            }
            UiMessage::Question(question) => {
                // A newer question replaces an unanswered one (dismissed).
                if let Some(previous) = state.answer.replace(question.answer) {
                    let _ = previous.send(None);
                }
                state.store.ask(&question.text);
                true
            }
            UiMessage::Restored(messages, note) => {
                state.store.restore_transcript(&messages, note);
                true
            }
            finished @ (UiMessage::LocalOutput(_)
            | UiMessage::Local(_)
            | UiMessage::PlanCleared(_)
            | UiMessage::ModelSwitched(_)
            | UiMessage::DiffReady(_)) => on_finished(state, finished),
            UiMessage::Snapshot(reply) => {
                let _ = reply.send(state.store.clone());
                false
            }
            UiMessage::Frame => {
                // A second scheduled frame (a key's, an event's) finds
                // nothing left to draw.
                if state.frame_scheduled {
                    state.frame_scheduled = false;
                    state.key_frame_scheduled = false;
                    state.last_frame = now;
                    if let Err(message) = draw(state) {
                        stop(&myself, state, UiExit::Failed(message));
                    }
                }
                false
            }
            UiMessage::Tick => {
                state.tick_scheduled = false;
                state.store.tick(now)
            }
        };
        if changed {
            schedule_frame(&myself, state, keyed, now);
        }
        if state.store.needs_ticks() && !state.tick_scheduled {
            state.tick_scheduled = true;
            myself.send_after(TICK, || UiMessage::Tick);
        }
        Ok(())
    }
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

/// The answer of work that ran off the handler, shown in the transcript.
fn on_finished<B: Backend>(state: &mut UiState<B>, finished: UiMessage) -> bool {
    match finished {
        UiMessage::LocalOutput(result) => {
            state.store.push(match result {
                Ok(text) => Entry::Local(text),
                Err(message) => Entry::Error(message),
            });
            true
        }
        UiMessage::Local(result) => {
            state.store.push(match result {
                Ok(text) => Entry::Info(text),
                Err(message) => Entry::Error(message),
            });
            true
        }
        UiMessage::PlanCleared(result) => {
            plan_cleared(state, result);
            true
        }
        UiMessage::ModelSwitched(result) => {
            match result {
                Ok(model) => {
                    state.store.push(Entry::Info(format!(
                        "model: {model} from the next request on; the prompt cache starts cold, so that request pays for the whole prompt again"
                    )));
                    state.store.session.model = model;
                }
                Err(message) => state.store.push(Entry::Error(message)),
            }
            true
        }
        UiMessage::DiffReady(result) => {
            state.store.push(match result {
                Ok(text) if text.trim().is_empty() => {
                    Entry::Info("/diff: no changes to tracked files".into())
                }
                Ok(text) => Entry::Diff(diff::from_git(&text)),
                Err(message) => Entry::Error(message),
            });
            true
        }
        _ => false,
    }
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

/// Saves the line the last key entered (if it did) to the history file,
/// through the writer task.
fn save_history<B: Backend>(state: &UiState<B>, remembered: usize) {
    if state.store.history.len() > remembered
        && let (Some(writer), Some(line)) = (&state.history, state.store.history.last())
    {
        writer.append(line);
    }
}

fn draw<B: Backend>(state: &mut UiState<B>) -> Result<(), String> {
    let (screen, store) = (&mut state.screen, &mut state.store);
    state
        .terminal
        .draw(|frame| screen.draw(frame, store))
        .map(|_| ())
        .map_err(|err| format!("cannot draw to the terminal: {err}"))
}

fn stop<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, exit: UiExit) {
    if let Some(port) = state.exit.take() {
        let _ = port.send(exit);
    }
    myself.stop(None);
}

/// Carries out an action: a command to the agent, a local command, or quit.
fn dispatch<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, action: Action) {
    let store = &mut state.store;
    match action {
        Action::Submit(prompt) => submit(myself, state, prompt),
        Action::Interrupt => {
            if let Err(refused) = state.engine.send(Op::Interrupt) {
                store.set_notice(refused.to_string(), true);
            }
        }
        Action::CancelSubagent(agent_id) => {
            let notice = match &agent_id {
                Some(id) => format!("cancelling {id}; the other subagents and the turn go on"),
                None => "cancelling every subagent; the turn goes on".into(),
            };
            match state.engine.send(Op::CancelSubagent(agent_id)) {
                Ok(()) => store.set_notice(notice, false),
                Err(refused) => store.set_notice(refused.to_string(), true),
            }
        }
        Action::Agents => store.push(Entry::Local(status_view::agents(store))),
        Action::ShowPlan => {
            store.push(Entry::Info("/plan (local; not sent to the model)".into()));
            off_handler(myself, state, |c| c.show(), UiMessage::LocalOutput);
        }
        Action::ClearPlan => off_handler(myself, state, |c| c.clear(), UiMessage::PlanCleared),
        Action::Undo => off_handler(myself, state, |c| c.undo(), UiMessage::Local),
        Action::Sessions => off_handler(myself, state, |c| c.sessions(), UiMessage::LocalOutput),
        Action::Suspend => {
            let (engine, commands, ui) = (
                state.engine.clone(),
                state.local_commands.clone(),
                myself.clone(),
            );
            tokio::spawn(async move {
                let result = match ask(&engine, |reply| Op::Snapshot { reply }).await {
                    Ok(messages) => off_runtime(move || commands.suspend(&messages)).await,
                    Err(message) => Err(format!("/suspend: {message}")),
                };
                let _ = ui.cast(UiMessage::Local(result));
            });
        }
        Action::Recall(name) => {
            let (engine, commands, ui) = (
                state.engine.clone(),
                state.local_commands.clone(),
                myself.clone(),
            );
            tokio::spawn(async move {
                let result = recall(engine, commands, name).await;
                let _ = ui.cast(UiMessage::Local(result));
            });
        }
        Action::Answer(text) => {
            if let Some(answer) = state.answer.take() {
                // The turn may have been interrupted meanwhile; then nobody waits.
                let _ = answer.send(text);
            }
        }
        Action::Approve(decision) => {
            if let Some(answer) = state.approval_answer.take() {
                // The turn may have been interrupted meanwhile; then nobody waits.
                let _ = answer.send(decision);
            }
        }
        Action::Help => store.push(Entry::Local(status_view::HELP.into())),
        Action::Status => {
            let info = state.local_commands.status();
            store.push(Entry::Local(status_view::status(store, &info)));
        }
        Action::Compact => {
            store.push(Entry::Info("/compact: compacting the conversation…".into()));
            tokio::spawn(compact(state.engine.clone(), myself.clone()));
        }
        Action::Model(model) => {
            let (engine, ui) = (state.engine.clone(), myself.clone());
            tokio::spawn(async move {
                let result = ask(&engine, |reply| Op::SwitchModel { model, reply }).await;
                let _ = ui.cast(UiMessage::ModelSwitched(result));
            });
        }
        Action::Diff => {
            let workspace = std::path::PathBuf::from(&store.session.workspace);
            let ui = myself.clone();
            tokio::spawn(async move {
                let result = git_diff::workspace_diff(workspace).await;
                let _ = ui.cast(UiMessage::DiffReady(result));
            });
        }
        Action::Quit => stop(myself, state, UiExit::Quit),
    }
}

/// Starts a turn; its outcome comes back as `TurnEnded`.
fn submit<B: Backend>(myself: &ActorRef<UiMessage>, state: &mut UiState<B>, prompt: String) {
    state.store.begin_turn(&prompt);
    let (sender, reply) = oneshot::channel();
    let submitted = state.engine.send(Op::SubmitPrompt {
        prompt,
        reply: sender,
    });
    if let Err(refused) = submitted {
        let error = Some(refused.to_string());
        state.store.turn_replied(TurnStatus::Failed, error);
        return;
    }
    let ui = myself.clone();
    tokio::spawn(async move {
        let outcome = reply
            .await
            .unwrap_or_else(|_| TurnOutcome::failed("the agent stopped during the turn"));
        // Fails only when the UI is gone; nothing to tell then.
        let _ = ui.cast(UiMessage::TurnEnded(outcome));
    });
}

/// Shows the cleared plan; the model sees it as a tool result on its next
/// request.
fn plan_cleared<B: Backend>(state: &mut UiState<B>, result: Result<PlanCleared, String>) {
    match result {
        Ok(cleared) => {
            state.store.set_plan(&cleared.plan, "cleared");
            state.store.push(Entry::Info(cleared.message));
            if let Err(refused) = state.engine.send(Op::RestorePlan) {
                state.store.set_notice(refused.to_string(), true);
            }
        }
        Err(message) => state.store.push(Entry::Error(message)),
    }
}

/// `/compact`, off the handler: the agent compacts; its `compacted` event
/// says what was cut, so only "nothing" or a failure comes back here.
async fn compact(engine: OpSender, ui: ActorRef<UiMessage>) {
    let result = match ask_within(&engine, COMPACT_CALL_MS, |reply| Op::CompactNow { reply }).await
    {
        Ok(true) => return,
        Ok(false) => Ok("nothing to compact: the conversation is too short".into()),
        Err(message) => Err(message),
    };
    // Fails only when the UI is gone.
    let _ = ui.cast(UiMessage::Local(result));
}

/// Sends the op `make` builds and waits for its answer, at most
/// [`AGENT_CALL_MS`].
async fn ask<T>(
    engine: &OpSender,
    make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Op,
) -> Result<T, String> {
    ask_within(engine, AGENT_CALL_MS, make).await
}

async fn ask_within<T>(
    engine: &OpSender,
    millis: u64,
    make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Op,
) -> Result<T, String> {
    let (sender, answer) = oneshot::channel();
    engine
        .send(make(sender))
        .map_err(|refused| refused.to_string())?;
    match tokio::time::timeout(Duration::from_millis(millis), answer).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the agent stopped before it answered".into()),
        Err(_) => Err(format!("the agent did not answer within {millis} ms")),
    }
}

/// Runs a local command's file work on the blocking pool, never in the
/// handler or on a runtime worker; `answer` brings its result back.
fn off_handler<B: Backend, T: Send + 'static>(
    myself: &ActorRef<UiMessage>,
    state: &UiState<B>,
    work: impl FnOnce(&dyn LocalCommands) -> Result<T, String> + Send + 'static,
    answer: fn(Result<T, String>) -> UiMessage,
) {
    let (commands, ui) = (state.local_commands.clone(), myself.clone());
    tokio::spawn(async move {
        let result = off_runtime(move || work(commands.as_ref())).await;
        // Fails only when the UI is gone.
        let _ = ui.cast(answer(result));
    });
}

/// Runs a local command's file work on the blocking pool, never in the
/// actor or on a runtime worker.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|err| Err(format!("the command failed: {err}")))
}

/// `/recall [NAME]`: loads the conversation, then hands it to the agent.
async fn recall(
    engine: OpSender,
    commands: Arc<dyn LocalCommands>,
    name: Option<String>,
) -> Result<String, String> {
    let loaded = tokio::task::spawn_blocking(move || commands.recall(name.as_deref()))
        .await
        .map_err(|err| format!("/recall failed: {err}"))?;
    let (name, history) = loaded?;
    let count = ask(&engine, |reply| Op::Recall { history, reply }).await?;
    Ok(format!(
        "recalled {count} messages from {name}; the workspace plan was kept and re-delivered to the model"
    ))
}
