//! Surviving a panic in a turn: the turn task catches it, answers every
//! started tool call, reports one `error` event and a failed turn, and
//! hands the conversation back, so the agent is idle and the next prompt
//! works.
//!
//! While the turn future is being polled, a thread-local flag says that a
//! panic there will be caught; the terminal UI's panic hook reads it
//! ([`panic_is_recoverable`]) and leaves the screen alone for such a panic.

use std::cell::Cell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::FutureExt;

use super::{Conversation, EventSink, TurnOutcome};
use crate::protocol::{EventKind, Message, TurnStatus, UsageTotals};

thread_local! {
    static RECOVERABLE: Cell<bool> = const { Cell::new(false) };
}

/// Whether a panic happening now on this thread will be caught by a turn.
pub fn panic_is_recoverable() -> bool {
    RECOVERABLE.with(Cell::get)
}

/// Polls `inner` with the flag set.
struct Flagged<F>(F);

impl<F: Future + Unpin> Future for Flagged<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _restore = FlagRestore(RECOVERABLE.with(|flag| flag.replace(true)));
        Pin::new(&mut self.0).poll(cx)
    }
}

/// Puts the flag back as it was, also when a panic unwinds through the
/// poll (the panic hook has run by then), so no later panic on this
/// thread passes for a recoverable one.
struct FlagRestore(bool);

impl Drop for FlagRestore {
    fn drop(&mut self) {
        RECOVERABLE.with(|flag| flag.set(self.0));
    }
}

/// Runs `future` (an actor's handler) with a panic inside it marked
/// recoverable, without catching it: the actor fails, and its supervisor
/// reports or restarts it while the screen stays.
pub async fn supervised<F: Future>(future: F) -> F::Output {
    Flagged(Box::pin(future)).await
}

/// A panic caught by [`catch`]: its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Panicked {
    pub message: String,
}

/// Runs `future`, turning a panic inside it into a [`Panicked`].
pub async fn catch<F: Future>(future: F) -> Result<F::Output, Panicked> {
    let caught = Flagged(Box::pin(AssertUnwindSafe(future).catch_unwind())).await;
    caught.map_err(|panic| Panicked {
        message: panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
    })
}

/// After turn `number` panicked with `what`: a result for every call it
/// left unanswered in `conversation`, one `error` event, the turn's end,
/// and the failed outcome.
pub fn after_panic(
    conversation: &mut Conversation,
    events: &EventSink,
    number: u32,
    what: &str,
) -> TurnOutcome {
    tracing::error!(panic = %what, "the turn panicked; the agent goes on");
    for call in conversation.unanswered_tool_calls() {
        let content = "Error: not run: the turn stopped on an internal error";
        events.emit(EventKind::ToolResult {
            id: call.id.clone(),
            name: crate::text::summary(&call.name, 64),
            ok: false,
            summary: content.into(),
            facts: None,
        });
        conversation.push(Message::Tool {
            tool_call_id: call.id,
            name: call.name,
            content: content.into(),
            is_error: true,
        });
    }
    let message = format!(
        "internal error in the turn ({}); the conversation is kept and the next prompt works",
        crate::text::summary(what, 200)
    );
    events.emit(EventKind::Error {
        message: message.clone(),
    });
    events.emit(EventKind::TurnCompleted {
        turn: number,
        status: TurnStatus::Failed,
        usage: UsageTotals::default(),
    });
    TurnOutcome::failed(message)
}

/// Test-only panics at named sites of the engine (a turn's tool call, a
/// subagent run, an actor's handler), each armed for one workspace, so
/// tests running in parallel never trip each other. Compiled into unit
/// tests only.
#[cfg(test)]
pub(crate) mod fault {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    static ARMED: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());

    /// The next [`hit`] of `site` by the engine working in `workspace`
    /// panics (once).
    pub(crate) fn arm(workspace: &Path, site: &str) {
        let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
        armed.push((workspace.to_path_buf(), site.to_string()));
    }

    /// Panics if `site` is armed for `workspace`.
    pub(crate) fn hit(workspace: &Path, site: &str) {
        let fired = {
            let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
            let found = armed
                .iter()
                .position(|(root, armed_site)| root == workspace && armed_site == site);
            found.map(|at| armed.remove(at)).is_some()
        };
        assert!(!fired, "injected panic at {site}");
    }
}
