//! Where the agent reports what happened: a channel to the UI or the
//! headless sink. Sending never blocks the agent; a closed receiver (the UI
//! went away) is not an error for the agent.

use tokio::sync::mpsc;

use crate::protocol::{Event, EventKind};

#[derive(Debug, Clone)]
pub struct EventSink {
    sender: Option<mpsc::UnboundedSender<Event>>,
}

impl EventSink {
    pub fn new(sender: mpsc::UnboundedSender<Event>) -> Self {
        EventSink {
            sender: Some(sender),
        }
    }

    /// A sink that drops every event (tools and tests that need none).
    pub fn discard() -> Self {
        EventSink { sender: None }
    }

    pub fn emit(&self, kind: EventKind) {
        if let Some(sender) = &self.sender {
            // The receiver is gone only while shutting down; nothing to do then.
            let _ = sender.send(Event::now(kind));
        }
    }
}
