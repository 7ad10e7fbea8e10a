//! Type-ahead: lines entered while a turn runs wait here, oldest first,
//! and go one at a time, each when the op before it is answered.
//!
//! The queue waits on one submission's reply, the one that lets the next
//! line go (the running turn's prompt, or a command that needs the
//! conversation to itself, such as `/compact`). It goes on at that
//! reply (`op_replied`), not on `turn_completed`: the engine takes the
//! next prompt only once the turn handed the conversation back, which is
//! when it replies. Until then Enter queues, so a line entered as the
//! answer finishes is neither refused nor lost.
//!
//! Ctrl+C *holds* the queue: when the interrupted turn ends nothing goes
//! on its own; Enter on an empty prompt sends the next line.

use std::collections::VecDeque;

use super::Store;
use crate::protocol::op::SubmissionId;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeAhead {
    /// Oldest first, as they will be sent (paste placeholders expanded).
    queued: VecDeque<String>,
    /// The submission whose reply lets the next line go.
    awaiting: Option<SubmissionId>,
    /// Ctrl+C interrupted the turn: at its end the queue waits for Enter.
    held: bool,
}

impl TypeAhead {
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// The queued lines, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.queued.iter()
    }

    pub fn push(&mut self, line: String) {
        self.queued.push_back(line);
    }

    /// The newest line leaves the queue (Up edits it, Esc drops it).
    pub fn take_last(&mut self) -> Option<String> {
        self.queued.pop_back()
    }

    /// The oldest line leaves the queue, to be sent.
    pub fn take_next(&mut self) -> Option<String> {
        self.queued.pop_front()
    }

    /// `id` was sent and the queue waits for its reply.
    pub fn wait_for(&mut self, id: SubmissionId) {
        self.awaiting = Some(id);
    }

    /// Whether the queue still waits for a reply.
    pub fn is_waiting(&self) -> bool {
        self.awaiting.is_some()
    }

    /// The reply to `id` arrived; `true` when it was the one the queue
    /// waited for (then the next line may go).
    pub fn replied(&mut self, id: SubmissionId) -> bool {
        if self.awaiting != Some(id) {
            return false;
        }
        self.awaiting = None;
        true
    }

    /// Ctrl+C: the end of this turn sends nothing by itself.
    pub fn hold(&mut self) {
        self.held = true;
    }

    /// Whether the turn that just ended was interrupted with Ctrl+C (asked
    /// once: the hold covers that turn's end only).
    pub fn take_hold(&mut self) -> bool {
        std::mem::take(&mut self.held)
    }
}

impl Store {
    /// A turn runs, or its reply (or that of a command that needs the
    /// conversation to itself) is still to come: Enter queues.
    pub fn turn_open(&self) -> bool {
        self.turn.is_busy() || self.typeahead.is_waiting()
    }

    /// What to say when lines wait and nothing will send them by itself.
    pub fn queued_waiting_notice(&mut self) {
        let count = self.typeahead.len();
        if count > 0 {
            let text = format!("{count} queued: Enter sends the next, Esc drops the last");
            self.set_notice(text, false);
        }
    }
}
