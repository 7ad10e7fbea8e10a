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
        RECOVERABLE.with(|flag| flag.set(true));
        let polled = Pin::new(&mut self.0).poll(cx);
        RECOVERABLE.with(|flag| flag.set(false));
        polled
    }
}

/// Runs `future`, turning a panic inside it into its message.
pub async fn catch<F: Future>(future: F) -> Result<F::Output, String> {
    let caught = Flagged(Box::pin(AssertUnwindSafe(future).catch_unwind())).await;
    RECOVERABLE.with(|flag| flag.set(false));
    caught.map_err(|panic| {
        panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into())
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
        conversation.push(Message::Tool {
            tool_call_id: call.id,
            name: call.name,
            content: "Error: not run: the turn stopped on an internal error".into(),
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
    TurnOutcome {
        status: TurnStatus::Failed,
        final_text: None,
        error: Some(message),
        usage: UsageTotals::default(),
    }
}
