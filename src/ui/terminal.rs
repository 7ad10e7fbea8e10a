//! The real terminal: raw mode, the alternate screen, the input reader,
//! and the guarantee that the terminal is given back as it was.
//!
//! Restoring happens exactly once, whichever comes first: the guard's drop
//! (quit, error) or the panic hook (a panic anywhere, before its message is
//! printed, so the message is readable on the normal screen). After a panic
//! the screen is gone, so the hook also tells the UI to stop with an error.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event as TermEvent, EventStream, KeyCode, KeyEvent, KeyModifiers, KeyboardEnhancementFlags,
    PopKeyboardEnhancementFlags, PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures_util::StreamExt;
use ractor::{Actor, ActorRef};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::oneshot;

use super::actor::{UiActor, UiArguments, UiExit, UiMessage};
use crate::protocol::event_queue::EventReceiver;
use crate::protocol::op::OpSender;

#[derive(Debug, thiserror::Error)]
pub enum UiError {
    #[error(
        "the terminal UI needs an interactive terminal; run `fido exec PROMPT` for a headless session"
    )]
    NotATerminal,
    #[error("cannot set up the terminal: {0}")]
    Terminal(#[source] io::Error),
    #[error("cannot start the terminal UI: {0}")]
    Start(#[source] ractor::SpawnErr),
    #[error("the terminal UI failed: {0}")]
    Failed(String),
}

/// What the UI is connected to.
pub struct UiSetup {
    /// Where commands to the engine go.
    pub engine: OpSender,
    /// The engine's events (the receiving end of its `EventSink`).
    pub events: EventReceiver,
    /// Whether a panic happening now on this thread is caught by the
    /// engine (a turn's): the screen is then left as it is.
    pub panic_is_caught: fn() -> bool,
    /// What the person must read first (ignored keys of an untrusted
    /// workspace file), shown in the transcript.
    pub warnings: Vec<String>,
    /// A resumed session: its messages, and the line saying it was resumed.
    pub resumed: Option<(Vec<crate::protocol::Message>, String)>,
}

/// Fails unless standard input and output are a terminal.
pub fn check_interactive() -> Result<(), UiError> {
    if io::stdin().is_terminal() && io::stdout().is_terminal() {
        Ok(())
    } else {
        Err(UiError::NotATerminal)
    }
}

/// Runs the full-screen UI until the user quits. The terminal is restored
/// before this returns, whatever happened.
pub async fn run(setup: UiSetup) -> Result<(), UiError> {
    check_interactive()?;
    let guard = TerminalGuard::enter(setup.panic_is_caught).map_err(UiError::Terminal)?;
    let terminal = Terminal::new(CrosstermBackend::new(io::stdout())).map_err(UiError::Terminal)?;
    let (exit, exited) = oneshot::channel();
    let arguments = UiArguments {
        terminal,
        engine: setup.engine,
        exit,
    };
    let (ui, handle) = Actor::spawn(None, UiActor::new(), arguments)
        .await
        .map_err(UiError::Start)?;
    set_running_ui(Some(ui.clone()));
    if let Some((messages, note)) = setup.resumed {
        let _ = ui.cast(UiMessage::Restored(messages, note));
    }
    for warning in setup.warnings {
        let _ = ui.cast(UiMessage::Warning(warning));
    }
    let tasks = [
        tokio::spawn(read_input(ui.clone())),
        tokio::spawn(forward_events(setup.events, ui.clone())),
        tokio::spawn(watch_signals(ui)),
    ];
    let _ = handle.await;
    set_running_ui(None);
    for task in &tasks {
        task.abort();
    }
    drop(guard);
    match exited.await {
        Ok(UiExit::Quit) => Ok(()),
        Ok(UiExit::Failed(message)) => Err(UiError::Failed(message)),
        Err(_) => Err(UiError::Failed("the UI stopped unexpectedly".into())),
    }
}

async fn read_input(ui: ActorRef<UiMessage>) {
    let mut stream = EventStream::new();
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                if ui.cast(UiMessage::Terminal(event)).is_err() {
                    return;
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot read terminal input");
                return;
            }
        }
    }
}

/// Events per batch forwarded to the UI.
const FORWARD_BATCH: usize = 256;
/// How long the forwarder waits for the UI to apply a batch before it sends
/// the next one anyway.
const FORWARD_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Forwards the agent's events to the UI in batches, one batch in the UI's
/// mailbox at a time: while the UI is busy, events wait in the bounded
/// event queue (where streamed text fragments join), not in the actor's
/// unbounded mailbox.
pub async fn forward_events(mut events: EventReceiver, ui: ActorRef<UiMessage>) {
    while let Some(first) = events.recv().await {
        let mut batch = vec![first];
        while batch.len() < FORWARD_BATCH
            && let Some(event) = events.try_recv()
        {
            batch.push(event);
        }
        let forwarded = ui
            .call(
                |applied| UiMessage::AgentBatch(batch, applied),
                Some(FORWARD_WAIT),
            )
            .await;
        match forwarded {
            // A slow UI gets its next batch when this one is applied.
            Ok(ractor::rpc::CallResult::Success(())) | Ok(ractor::rpc::CallResult::Timeout) => {}
            Ok(ractor::rpc::CallResult::SenderError) | Err(_) => return,
        }
    }
}

/// SIGTERM and SIGHUP quit cleanly; a SIGINT from outside (raw mode turns
/// the keyboard's Ctrl+C into a key) counts as Ctrl+C.
async fn watch_signals(ui: ActorRef<UiMessage>) {
    let (Ok(mut term), Ok(mut hup), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot watch for signals");
        return;
    };
    loop {
        let message = tokio::select! {
            _ = term.recv() => UiMessage::Shutdown,
            _ = hup.recv() => UiMessage::Shutdown,
            _ = int.recv() => UiMessage::Terminal(TermEvent::Key(KeyEvent::new(
                KeyCode::Char('c'),
                KeyModifiers::CONTROL,
            ))),
        };
        if ui.cast(message).is_err() {
            return;
        }
    }
}

/// Whether the terminal is in the UI's modes and must be restored.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// The running UI, for the panic hook.
static RUNNING_UI: Mutex<Option<ActorRef<UiMessage>>> = Mutex::new(None);

fn set_running_ui(ui: Option<ActorRef<UiMessage>>) {
    if let Ok(mut running) = RUNNING_UI.lock() {
        *running = ui;
    }
}

/// Raw mode, alternate screen, bracketed paste and mouse capture (for the
/// wheel) while it lives. The keyboard protocol that tells Shift+Enter
/// from Enter is asked for; terminals without it ignore the request (and
/// Alt+Enter or Ctrl+J still make a new line). Text is selected with Shift
/// held while dragging: terminals bypass mouse capture then.
struct TerminalGuard;

impl TerminalGuard {
    fn enter(panic_is_caught: fn() -> bool) -> io::Result<TerminalGuard> {
        install_panic_hook(panic_is_caught);
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard;
        crossterm::execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture,
            PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
        )?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back: keyboard protocol popped, mouse capture and
/// bracketed paste off, normal screen, cursor shown, raw mode off.
/// Idempotent.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(
            io::stdout(),
            PopKeyboardEnhancementFlags,
            DisableMouseCapture,
            DisableBracketedPaste,
            LeaveAlternateScreen,
            crossterm::cursor::Show
        );
        let _ = disable_raw_mode();
    }
}

fn install_panic_hook(panic_is_caught: fn() -> bool) {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // A panic in a turn is caught and reported as an error event:
            // the screen stays as it is (the message goes to the log).
            if panic_is_caught() {
                tracing::error!("{info}");
                return;
            }
            let was_active = ACTIVE.load(Ordering::SeqCst);
            restore();
            previous(info);
            // `try_lock`: never wait inside a panic hook.
            let ui = RUNNING_UI
                .try_lock()
                .ok()
                .and_then(|running| running.clone());
            if let (true, Some(ui)) = (was_active, ui) {
                let _ = ui.cast(UiMessage::Crashed(
                    "an internal error (panic) stopped it; the message is above".into(),
                ));
            }
        }));
    });
}
