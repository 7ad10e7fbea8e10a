//! The real `UiActor` on a counting `TestBackend`, talking to a fake engine
//! (the other end of the same op queue) and fake plan commands.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use ractor::{Actor, ActorRef};
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::*;
use crate::agent::ops::{CommandError, FrontDesk, LocalCommands};
use crate::protocol::event_queue::{EventReceiver, EventSink};
use crate::protocol::op::AskId;
use crate::protocol::op::{
    Op, OpReply, OpSender, PlanCleared, Submission, SubmissionId, TurnOutcome, op_channel,
};
use crate::protocol::{ApprovalDecision, ApprovalRequest, Event};
use crate::ui::actor::{UiActor, UiArguments, UiExit, UiMessage};
use crate::ui::state::{Entry, TurnState};

/// Longest wait for the UI actor's answer: a hung test fails instead.
const CALL_MS: u64 = 30_000;

/// What the fake engine was asked.
enum Asked {
    Submit {
        prompt: String,
        reply: TurnReply,
    },
    Interrupt,
    CancelSubagent(Option<String>),
    /// A local command, which the fake engine's desk answers.
    Local(Op),
    Answer {
        id: AskId,
        answer: Option<String>,
    },
    Approve {
        id: AskId,
        decision: ApprovalDecision,
    },
    Other,
}

/// Where the test sends how a turn ended: the `op_replied` event of the
/// prompt's submission.
struct TurnReply {
    events: EventSink,
    id: SubmissionId,
}

impl TurnReply {
    fn send(self, outcome: TurnOutcome) -> Result<(), ()> {
        self.events.emit(EventKind::OpReplied {
            id: self.id,
            reply: OpReply::turn_ended(&outcome),
        });
        Ok(())
    }
}

/// The fake engine: the other end of the UI's op queue, passing each op on
/// to the test; the local commands are answered by the engine's real desk
/// on fake commands. Returns the events it sends the UI.
fn fake_engine(
    asked: mpsc::UnboundedSender<Asked>,
    commands: Arc<FakeLocalCommands>,
) -> (OpSender, EventReceiver) {
    let (engine, mut ops) = op_channel();
    let (events, receiver) = crate::protocol::event_queue::channel();
    let desk = FrontDesk {
        commands: commands.clone(),
        ..FrontDesk::detached(events.clone())
    };
    tokio::spawn(async move {
        while let Some(Submission { id, op }) = ops.recv().await {
            // The prompt history is the engine's desk's, as in the engine.
            if let Op::PromptHistory = op {
                desk.local(id, |c| OpReply::PromptHistory {
                    entries: c.prompt_history(),
                });
                continue;
            }
            if let Op::RememberPrompt { line } = &op {
                commands.remember_prompt(line);
                continue;
            }
            let _ = asked.send(match op {
                Op::SubmitPrompt { prompt } => {
                    let reply = TurnReply {
                        events: events.clone(),
                        id,
                    };
                    Asked::Submit { prompt, reply }
                }
                Op::Interrupt => Asked::Interrupt,
                Op::CancelSubagent { agent_id } => Asked::CancelSubagent(agent_id),
                Op::Answer { id, answer } => Asked::Answer { id, answer },
                Op::Approve { id, decision } => Asked::Approve { id, decision },
                local
                @ (Op::ShowPlan | Op::ClearPlan | Op::Undo | Op::ListSubagents | Op::Diff) => {
                    answer_locally(&desk, &commands, id, &local);
                    Asked::Local(local)
                }
                _ => Asked::Other,
            });
        }
    });
    (engine, receiver)
}

fn answer_locally(desk: &FrontDesk, fake: &FakeLocalCommands, id: SubmissionId, op: &Op) {
    match op {
        Op::ShowPlan => desk.local(id, |c| match c.show() {
            Ok(shown) => OpReply::Plan(Box::new(shown)),
            Err(why) => OpReply::failed(why),
        }),
        Op::Undo => desk.local(id, |c| match c.undo() {
            Ok(change) => OpReply::Undone { change },
            Err(why) => OpReply::failed(why),
        }),
        Op::ListSubagents => {
            let subagents = fake.agents.lock().unwrap().clone();
            desk.reply(id, OpReply::Subagents { subagents });
        }
        Op::Diff => desk.diff(id, fake.workspace.lock().unwrap().clone()),
        _ => desk.local(id, |c| match c.clear() {
            Ok(cleared) => OpReply::PlanCleared(Box::new(cleared)),
            Err(why) => OpReply::failed(why),
        }),
    }
}

/// A `TestBackend` that counts frames (one flush per `Terminal::draw`).
struct CountingBackend {
    inner: TestBackend,
    frames: Arc<AtomicUsize>,
}

impl Backend for CountingBackend {
    type Error = std::convert::Infallible;

    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.frames.fetch_add(1, Ordering::SeqCst);
        self.inner.flush()
    }
}

#[derive(Default)]
struct FakeLocalCommands {
    cleared: Mutex<u32>,
    /// While set, `/undo` blocks its thread until a message arrives, as
    /// file work on a slow or locked disk would.
    undo_gate: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    /// The engine's record of the session's subagents (`/agents`).
    agents: Mutex<Vec<crate::protocol::control::SessionSubagent>>,
    /// The engine's workspace (`/diff`).
    workspace: Mutex<std::path::PathBuf>,
    /// The workspace's prompt history when the UI starts.
    history: Vec<String>,
    /// The lines the UI sent to the prompt history.
    remembered: Mutex<Vec<String>>,
}

impl LocalCommands for FakeLocalCommands {
    fn prompt_history(&self) -> Vec<String> {
        self.history.clone()
    }

    fn remember_prompt(&self, line: &str) {
        self.remembered.lock().unwrap().push(line.to_string());
    }

    fn undo(&self) -> Result<Option<crate::protocol::op::UndoneChange>, CommandError> {
        if let Some(gate) = self.undo_gate.lock().unwrap().take() {
            let _ = gate.recv();
        }
        Ok(Some(crate::protocol::op::UndoneChange {
            kind: crate::protocol::op::UndoneKind::Patch,
            path: "a.txt".into(),
        }))
    }

    fn show(&self) -> Result<crate::protocol::op::PlanShown, CommandError> {
        Ok(crate::protocol::op::PlanShown {
            plan: crate::plan::PlanSnapshot::UpdatePlan(crate::plan::PlanState::empty()),
            warning: None,
            text: "Plan v1 · now · test\n  [ ] a — A (pending)\n".into(),
        })
    }

    fn clear(&self) -> Result<PlanCleared, CommandError> {
        *self.cleared.lock().unwrap() += 1;
        Ok(PlanCleared {
            message: "Plan cleared (version 2).".into(),
            plan: crate::plan::PlanSnapshot::UpdatePlan(
                serde_json::from_value(serde_json::json!({"version": 2, "updatedAt": NOW,
                    "reason": "Plan cleared by the user.", "items": []}))
                .unwrap(),
            ),
        })
    }
}

struct Harness {
    ui: ActorRef<UiMessage>,
    ui_handle: JoinHandle<()>,
    asked: mpsc::UnboundedReceiver<Asked>,
    exit: oneshot::Receiver<UiExit>,
    frames: Arc<AtomicUsize>,
    plan: Arc<FakeLocalCommands>,
}

async fn start() -> Harness {
    start_with(FakeLocalCommands::default()).await
}

async fn start_with(commands: FakeLocalCommands) -> Harness {
    let (asked_tx, asked) = mpsc::unbounded_channel();
    let plan = Arc::new(commands);
    let (engine, events) = fake_engine(asked_tx, plan.clone());
    let frames = Arc::new(AtomicUsize::new(0));
    let backend = CountingBackend {
        inner: TestBackend::new(120, 30),
        frames: frames.clone(),
    };
    let (exit_tx, exit) = oneshot::channel();
    let arguments = UiArguments {
        terminal: Terminal::new(backend).unwrap(),
        engine,
        exit: exit_tx,
    };
    let (ui, ui_handle) = Actor::spawn(None, UiActor::new(), arguments).await.unwrap();
    tokio::spawn(crate::ui::terminal::forward_events(events, ui.clone()));
    ui.cast(UiMessage::Agent(Event::now(session()))).unwrap();
    Harness {
        ui,
        ui_handle,
        asked,
        exit,
        frames,
        plan,
    }
}

impl Harness {
    fn key(&self, key: KeyEvent) {
        self.ui
            .cast(UiMessage::Terminal(TermEvent::Key(key)))
            .unwrap();
    }

    fn type_line(&self, text: &str) {
        for c in text.chars() {
            self.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
        }
        self.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    }

    fn ctrl_c(&self) {
        self.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    }

    async fn store(&self) -> crate::ui::Store {
        ractor::call_t!(self.ui, UiMessage::Snapshot, CALL_MS).unwrap()
    }

    /// Waits until the approval prompt on screen shows itself ready.
    async fn wait_until_ready(&self) {
        for _ in 0..300 {
            let store = self.store().await;
            if store.approval.is_some_and(|p| p.readiness.shows_ready()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the approval prompt never became ready");
    }

    async fn next_asked(&mut self) -> Asked {
        tokio::time::timeout(Duration::from_secs(5), self.asked.recv())
            .await
            .expect("the agent was asked nothing")
            .unwrap()
    }
}

#[tokio::test]
async fn a_prompt_is_submitted_interrupted_and_ctrl_c_twice_quits() {
    let mut h = start().await;
    h.type_line("hello agent");
    let Asked::Submit { prompt, reply } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    assert_eq!(prompt, "hello agent");
    h.ui.cast(UiMessage::Agent(Event::now(EventKind::TurnStarted {
        turn: 1,
    })))
    .unwrap();
    let store = h.store().await;
    assert_eq!(store.turn, TurnState::Running { turn: 1 });
    assert_eq!(store.transcript[0], Entry::User("hello agent".into()));

    h.ctrl_c();
    assert!(matches!(h.next_asked().await, Asked::Interrupt));
    reply
        .send(TurnOutcome::Interrupted {
            usage: Default::default(),
        })
        .unwrap();
    // The reply arrives through a spawned task; wait for the store to see it.
    let mut idle = false;
    for _ in 0..100 {
        if h.store().await.turn == TurnState::Idle {
            idle = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(idle, "the turn never ended in the UI");

    h.ctrl_c();
    h.ctrl_c();
    let exit = tokio::time::timeout(Duration::from_secs(5), h.exit)
        .await
        .unwrap();
    assert_eq!(exit, Ok(UiExit::Quit));
    tokio::time::timeout(Duration::from_secs(5), h.ui_handle)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn esc_cancels_the_running_subagent_only() {
    let mut h = start().await;
    h.type_line("review the lexer with a subagent");
    // Holding the reply port keeps the turn running.
    let Asked::Submit { reply: _turn, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    h.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    h.ui.cast(UiMessage::Agent(Event::now(subagent("reasoning", 500, ""))))
        .unwrap();
    h.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    // Only the Esc with a running subagent reached the agent.
    assert!(matches!(
        h.next_asked().await,
        Asked::CancelSubagent(Some(id)) if id == "subagent-7f3a"
    ));
    let store = h.store().await;
    assert!(store.turn.is_busy(), "the parent turn goes on");
    assert!(h.asked.try_recv().is_err());
}

#[tokio::test]
async fn plan_clear_updates_the_panel_without_a_turn() {
    let mut h = start().await;
    h.ui.cast(UiMessage::Agent(Event::now(plan_event(plan_value(
        "start",
        three_items(),
    )))))
    .unwrap();
    assert_eq!(h.store().await.plan.unwrap().items.len(), 3);
    h.type_line("/plan clear");
    // The file work runs off the UI's handler; its answer comes after.
    let cleared = Entry::Info("Plan cleared (version 2).".into());
    let store = wait_until(&h, |s| s.transcript.contains(&cleared)).await;
    assert_eq!(*h.plan.cleared.lock().unwrap(), 1);
    let plan = store
        .plan
        .expect("a cleared plan is an empty plan, not none");
    assert!(plan.items.is_empty());
    assert_eq!(plan.version, Some(2));
    h.type_line("/plan");
    let shown = |e: &Entry| matches!(e, Entry::Local(text) if text.contains("[ ] a"));
    let store = wait_until(&h, |s| s.transcript.last().is_some_and(shown)).await;
    assert!(shown(store.transcript.last().unwrap()));
    // No model turn: the engine was asked for the two local commands only.
    assert!(matches!(h.next_asked().await, Asked::Local(Op::ClearPlan)));
    assert!(matches!(h.next_asked().await, Asked::Local(Op::ShowPlan)));
    assert!(h.asked.try_recv().is_err());
}

#[tokio::test]
async fn a_refused_prompt_shows_the_error_and_frees_the_input() {
    let mut h = start().await;
    h.type_line("first");
    let Asked::Submit { reply, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    reply
        .send(TurnOutcome::failed(
            "a turn is already running; interrupt it first",
        ))
        .unwrap();
    let mut store = h.store().await;
    for _ in 0..100 {
        if store.turn == TurnState::Idle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        store = h.store().await;
    }
    assert_eq!(store.turn, TurnState::Idle);
    assert!(store.transcript.contains(&Entry::Error(
        "a turn is already running; interrupt it first".into()
    )));
}

#[tokio::test]
async fn bursts_of_events_coalesce_into_few_frames_and_idle_draws_nothing() {
    let h = start().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = h.frames.load(Ordering::SeqCst);
    for n in 0..500 {
        h.ui.cast(UiMessage::Agent(Event::now(EventKind::AssistantText {
            text: format!("chunk {n}"),
        })))
        .unwrap();
    }
    let _ = h.store().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after_burst = h.frames.load(Ordering::SeqCst);
    let drawn = after_burst - before;
    assert!((1..=5).contains(&drawn), "{drawn} frames for one burst");
    // Nothing changes, nothing is drawn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(h.frames.load(Ordering::SeqCst), after_burst);
}

#[tokio::test]
async fn shutdown_quits() {
    let h = start().await;
    h.ui.cast(UiMessage::Shutdown).unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), h.exit)
        .await
        .unwrap();
    assert_eq!(exit, Ok(UiExit::Quit));
}

#[tokio::test]
async fn a_crash_elsewhere_stops_the_ui_with_an_error() {
    let h = start().await;
    h.ui.cast(UiMessage::Crashed("boom".into())).unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), h.exit)
        .await
        .unwrap();
    assert_eq!(exit, Ok(UiExit::Failed("boom".into())));
}

fn question(id: AskId, text: &str) -> UiMessage {
    UiMessage::Agent(Event::now(EventKind::QuestionAsked {
        id,
        question: text.into(),
    }))
}

#[tokio::test]
async fn ask_user_questions_are_answered_by_the_next_line_or_dismissed_with_esc() {
    let mut h = start().await;
    h.ui.cast(question(41, "Which database?")).unwrap();
    let store = h.store().await;
    assert_eq!(store.question.as_deref(), Some("Which database?"));
    assert!(
        store
            .transcript
            .contains(&Entry::Info("Fido asks: Which database?".into()))
    );
    h.type_line("postgres");
    assert!(matches!(
        h.next_asked().await,
        Asked::Answer { id: 41, answer: Some(answer) } if answer == "postgres"
    ));
    let store = h.store().await;
    assert!(store.question.is_none());
    assert!(
        store.input.is_empty(),
        "the answer is not left in the input line"
    );

    h.ui.cast(question(42, "Proceed?")).unwrap();
    h.key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(matches!(
        h.next_asked().await,
        Asked::Answer {
            id: 42,
            answer: None
        }
    ));
    assert!(h.store().await.question.is_none());
}

/// An approval request is answered by its id; a newer one replaces an
/// unanswered one, which is denied by the old id.
#[tokio::test]
async fn approval_requests_are_answered_by_their_id() {
    let mut h = start().await;
    let request = |id, command: &str| {
        UiMessage::Agent(Event::now(EventKind::ApprovalRequested {
            id,
            request: ApprovalRequest::Command {
                command: command.into(),
                cwd: ".".into(),
                justification: None,
                escalated: false,
            },
        }))
    };
    h.ui.cast(request(7, "make test")).unwrap();
    h.ui.cast(request(8, "make clean")).unwrap();
    assert!(matches!(
        h.next_asked().await,
        Asked::Approve {
            id: 7,
            decision: ApprovalDecision::Denied { reason: None }
        }
    ));
    // A key at once is typing, for the input line; the prompt shows
    // itself ready by itself once the grace period has passed.
    h.key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE));
    let store = h.store().await;
    assert_eq!(store.input.text(), "y");
    assert!(!store.approval.unwrap().readiness.shows_ready());
    h.wait_until_ready().await;
    h.key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE));
    assert!(matches!(
        h.next_asked().await,
        Asked::Approve {
            id: 8,
            decision: ApprovalDecision::Approved
        }
    ));
    let store = h.store().await;
    assert!(store.approval.is_none());
    assert_eq!(store.input.text(), "y", "the typed key was kept");
}

/// The approval prompt draws itself ready at the end of its grace
/// period, with no key or event to wake it.
#[tokio::test]
async fn the_approval_prompt_redraws_when_it_becomes_ready() {
    let h = start().await;
    h.ui.cast(UiMessage::Agent(Event::now(EventKind::ApprovalRequested {
        id: 1,
        request: ApprovalRequest::Command {
            command: "make".into(),
            cwd: ".".into(),
            justification: None,
            escalated: false,
        },
    })))
    .unwrap();
    let shown = std::time::Instant::now();
    // The prompt's first frame, well within the grace period.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let frames = h.frames.load(Ordering::SeqCst);
    h.wait_until_ready().await;
    let waited = shown.elapsed();
    assert!(waited >= crate::ui::approval::GRACE, "{waited:?}");
    assert!(waited < crate::ui::approval::GRACE * 3, "{waited:?}");
    for _ in 0..100 {
        if h.frames.load(Ordering::SeqCst) > frames {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no frame drew the prompt ready");
}

/// Answers to ops this UI never sent, or got already, change nothing.
#[tokio::test]
async fn a_reply_with_an_unknown_or_stale_id_is_ignored() {
    let mut h = start().await;
    h.type_line("first");
    let Asked::Submit { reply, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    let id = reply.id;
    let stray = |id| {
        UiMessage::Agent(Event::now(EventKind::OpReplied {
            id,
            reply: OpReply::Info {
                text: "stray".into(),
            },
        }))
    };
    h.ui.cast(stray(id + 1000)).unwrap();
    reply.send(TurnOutcome::failed("refused")).unwrap();
    let store = wait_until(&h, |s| s.turn == TurnState::Idle).await;
    assert!(store.transcript.contains(&Entry::Error("refused".into())));
    h.ui.cast(stray(id)).unwrap();
    let store = h.store().await;
    let stray = Entry::Info("stray".into());
    assert!(!store.transcript.contains(&stray), "{:?}", store.transcript);
}

/// Polls the store until `ready` holds.
async fn wait_until(h: &Harness, ready: impl Fn(&crate::ui::Store) -> bool) -> crate::ui::Store {
    for _ in 0..500 {
        let store = h.store().await;
        if ready(&store) {
            return store;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "the store never got there: {:?}",
        h.store().await.transcript
    );
}

/// The runtime has one worker here, so file work on the UI's handler would
/// stop every answer of the actor.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_local_command_blocked_on_its_file_leaves_the_ui_answering() {
    let h = start().await;
    let (release, gate) = std::sync::mpsc::channel();
    *h.plan.undo_gate.lock().unwrap() = Some(gate);
    h.type_line("/undo");
    h.type_line("/help");
    let help = |s: &crate::ui::Store| s.transcript.iter().any(|e| matches!(e, Entry::Local(_)));
    let store = wait_until(&h, help).await;
    let undone = Entry::Info("undone: patch of a.txt".into());
    assert!(!store.transcript.contains(&undone), "undo is still blocked");
    release.send(()).unwrap();
    wait_until(&h, |s| s.transcript.contains(&undone)).await;
}

#[tokio::test]
async fn help_lists_the_keys_and_diff_shows_the_workspace_changes_coloured() {
    let h = start().await;
    h.type_line("/help");
    let store = wait_until(&h, |s| matches!(s.transcript.last(), Some(Entry::Local(_)))).await;
    let Some(Entry::Local(help)) = store.transcript.last() else {
        unreachable!()
    };
    for key in [
        "Alt+Enter",
        "Ctrl+J",
        "Ctrl+O",
        "Shift+drag",
        "/model NAME",
        "/diff",
    ] {
        assert!(help.contains(key), "{key} missing from /help:\n{help}");
    }

    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    // The engine's workspace, which the engine diffs (the UI reads none).
    *h.plan.workspace.lock().unwrap() = repo.path().to_path_buf();
    h.type_line("/diff");
    let error = wait_until(&h, |s| matches!(s.transcript.last(), Some(Entry::Error(_)))).await;
    let Some(Entry::Error(message)) = error.transcript.last() else {
        unreachable!()
    };
    assert!(message.starts_with("git diff failed"), "{message}");
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("a.txt"), "old\n").unwrap();
    git(&["add", "a.txt"]);
    h.type_line("/diff");
    let none = Entry::Info("/diff: no changes to tracked files".into());
    wait_until(&h, |s| s.transcript.last() == Some(&none)).await;
    std::fs::write(repo.path().join("a.txt"), "new\n").unwrap();
    h.type_line("/diff");
    let store = wait_until(&h, |s| matches!(s.transcript.last(), Some(Entry::Diff(_)))).await;
    let Some(Entry::Diff(lines)) = store.transcript.last() else {
        unreachable!()
    };
    use crate::ui::diff::DiffLine;
    assert!(
        lines.contains(&DiffLine::Removed("old".into())),
        "{lines:?}"
    );
    assert!(lines.contains(&DiffLine::Added("new".into())), "{lines:?}");
}

/// `/agents` asks the engine, and its answer (built from the engine's
/// record, here three subagents) is shown as it comes, whatever the
/// subagent bar holds.
#[tokio::test]
async fn slash_agents_shows_the_engines_list_of_the_session() {
    use crate::protocol::control::SessionSubagent;
    let mut h = start().await;
    let agent = |id: &str, phase: &str, elapsed_ms: u64, tokens: u64| SessionSubagent {
        agent_id: id.into(),
        child_pid: None,
        phase: phase.into(),
        running: false,
        elapsed_ms,
        tokens,
        plan_item: None,
        detail: String::new(),
    };
    let mut a = agent("subagent-a", "completed", 4_000, 2_500);
    a.plan_item = Some("i1".into());
    a.detail = "3 findings".into();
    *h.plan.agents.lock().unwrap() = vec![
        a,
        agent("subagent-b", "cancelled", 2_000, 40),
        agent("subagent-c", "reasoning", 1_000, 10),
    ];
    h.type_line("/agents");
    assert!(matches!(
        h.next_asked().await,
        Asked::Local(Op::ListSubagents)
    ));
    let store = wait_until(&h, |s| matches!(s.transcript.last(), Some(Entry::Local(_)))).await;
    let Some(Entry::Local(text)) = store.transcript.last() else {
        unreachable!()
    };
    assert!(
        text.starts_with("3 subagents this session, 0 running"),
        "{text}"
    );
    assert!(
        text.contains("subagent-a         completed · 4s · 2.5k tok · plan: i1 · 3 findings"),
        "{text}"
    );
    assert!(
        text.contains("subagent-b         cancelled · 2s · 40 tok"),
        "{text}"
    );
    assert!(
        text.contains("subagent-c         stopped with its turn"),
        "{text}"
    );
    h.plan.agents.lock().unwrap().clear();
    h.type_line("/agents");
    let none = Entry::Local("no subagent has run in this session".into());
    wait_until(&h, |s| s.transcript.last() == Some(&none)).await;
}

#[tokio::test]
async fn the_forwarder_hands_every_event_over_in_order_in_batches() {
    let h = start().await;
    let (sink, receiver) = crate::protocol::event_queue::channel();
    let forwarder = tokio::spawn(crate::ui::terminal::forward_events(receiver, h.ui.clone()));
    // More than one batch, sent while the forwarder already runs.
    for n in 0..1_000 {
        sink.emit(EventKind::Error {
            message: format!("event {n}"),
        });
    }
    drop(sink);
    tokio::time::timeout(Duration::from_secs(10), forwarder)
        .await
        .expect("the forwarder ends with the queue")
        .unwrap();
    let store = h.store().await;
    let errors: Vec<&str> = store
        .transcript
        .iter()
        .filter_map(|entry| match entry {
            Entry::Error(message) => Some(message.as_str()),
            _ => None,
        })
        .collect();
    let expected: Vec<String> = (0..1_000).map(|n| format!("event {n}")).collect();
    assert_eq!(errors, expected);
}

fn completed() -> TurnOutcome {
    TurnOutcome::Completed {
        final_text: Some("done".into()),
        usage: Default::default(),
    }
}

fn event(kind: EventKind) -> UiMessage {
    UiMessage::Agent(Event::now(kind))
}

/// The line entered as the answer finishes (after `turn_completed`, before
/// the prompt's reply) is sent once, unchanged, when the reply arrives;
/// the next line typed is a line of its own.
#[tokio::test]
async fn a_line_entered_as_the_turn_ends_is_sent_once_after_its_reply() {
    let mut h = start().await;
    h.type_line("markdown please");
    let Asked::Submit { reply, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    h.ui.cast(event(EventKind::TurnStarted { turn: 1 }))
        .unwrap();
    h.type_line("during the turn");
    h.ui.cast(event(turn_completed(1, TurnStatus::Completed)))
        .unwrap();
    h.type_line("patch it");
    let store = h.store().await;
    let queued: Vec<&String> = store.typeahead.iter().collect();
    assert_eq!(queued, ["during the turn", "patch it"]);
    // Time for an op the UI wrongly sent to reach the fake engine.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(h.asked.try_recv().is_err(), "nothing sent before the reply");
    reply.send(completed()).unwrap();
    let Asked::Submit { prompt, reply } = h.next_asked().await else {
        panic!("expected the first queued line");
    };
    assert_eq!(prompt, "during the turn");
    let _ = h.store().await;
    assert!(h.asked.try_recv().is_err(), "one line per turn end");
    reply.send(completed()).unwrap();
    let Asked::Submit {
        prompt,
        reply: _turn,
    } = h.next_asked().await
    else {
        panic!("expected the second queued line");
    };
    assert_eq!(prompt, "patch it");
    let store = h.store().await;
    assert!(store.typeahead.is_empty() && store.input.is_empty());
    assert!(h.asked.try_recv().is_err(), "each line is sent once");
}

/// After Ctrl+C the queue stays and nothing goes by itself; Enter on an
/// empty prompt sends the next line.
#[tokio::test]
async fn after_ctrl_c_the_queue_waits_for_enter() {
    let mut h = start().await;
    h.type_line("long job");
    let Asked::Submit { reply, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    h.type_line("next job");
    h.ctrl_c();
    assert!(matches!(h.next_asked().await, Asked::Interrupt));
    reply
        .send(TurnOutcome::Interrupted {
            usage: Default::default(),
        })
        .unwrap();
    let store = wait_until(&h, |s| s.turn == TurnState::Idle).await;
    assert_eq!(store.typeahead.len(), 1, "the queue stays");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        h.asked.try_recv().is_err(),
        "nothing sent after an interrupt"
    );
    h.key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let Asked::Submit { prompt, .. } = h.next_asked().await else {
        panic!("expected the queued line");
    };
    assert_eq!(prompt, "next job");
}

/// The prompt history is the engine's: the UI walks the lines the engine
/// sends, after any entered meanwhile, and sends back each line entered.
#[tokio::test]
async fn the_prompt_history_comes_from_the_engine_and_each_line_goes_back() {
    let mut h = start_with(FakeLocalCommands {
        history: vec!["older one".into(), "older\ntwo".into()],
        ..FakeLocalCommands::default()
    })
    .await;
    h.type_line("new prompt");
    let Asked::Submit { prompt, .. } = h.next_asked().await else {
        panic!("expected SubmitPrompt");
    };
    assert_eq!(prompt, "new prompt");
    assert_eq!(*h.plan.remembered.lock().unwrap(), ["new prompt"]);
    let mut history = Vec::new();
    for _ in 0..300 {
        history = h.store().await.history;
        if history.len() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(history, ["older one", "older\ntwo", "new prompt"]);
}
