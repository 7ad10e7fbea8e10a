//! Where the agent reports what happened: a bounded queue to the UI or the
//! headless printer. Sending never blocks the agent (it emits from sync
//! code and from the runtime); a receiver that went away (the UI closed)
//! is not an error for the agent.
//!
//! The queue is bounded without blocking the sender:
//! - past [`COALESCE_AT`] queued events, a streamed text fragment (the
//!   main agent's or a subagent's) joins the fragment of the same source
//!   queued last instead of taking a slot of its own: the text is all
//!   there, in fewer events (a slow reader gets bigger fragments);
//! - at [`QUEUE_LIMIT`] queued events, further events are dropped and
//!   counted, and the reader gets one `error` event naming the limit and
//!   the count once it has made room.
//!
//! Everything else the agent emits is one event per step, tool call or
//! subagent phase, so only a reader that stopped reading meets the limit.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::protocol::{Event, EventKind};

/// Queued events past which streamed text fragments are joined.
pub const COALESCE_AT: usize = 1024;
/// Queued events past which events are dropped.
pub const QUEUE_LIMIT: usize = 65_536;

#[derive(Debug, Default)]
struct State {
    events: VecDeque<Event>,
    /// Events dropped at the limit since the reader last heard of it.
    dropped: u64,
    senders_gone: bool,
    receiver_gone: bool,
}

#[derive(Debug, Default)]
struct Queue {
    state: Mutex<State>,
    /// Wakes an async reader.
    ready: Notify,
    /// Wakes a reader blocked on its own thread.
    ready_blocking: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        self.ready.notify_one();
        self.ready_blocking.notify_one();
    }
}

/// The sending half: cloned freely; the queue closes when the last clone
/// is dropped.
#[derive(Debug, Clone)]
pub struct EventSink {
    sender: Option<Arc<Sender>>,
}

#[derive(Debug)]
struct Sender(Arc<Queue>);

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.lock().senders_gone = true;
        self.0.wake();
    }
}

/// The receiving half (one reader).
#[derive(Debug)]
pub struct EventReceiver {
    queue: Arc<Queue>,
}

/// A sink and the receiver of its events.
pub fn channel() -> (EventSink, EventReceiver) {
    let queue = Arc::new(Queue::default());
    let sink = EventSink {
        sender: Some(Arc::new(Sender(Arc::clone(&queue)))),
    };
    (sink, EventReceiver { queue })
}

impl EventSink {
    /// A sink that drops every event (tools and tests that need none).
    pub fn discard() -> Self {
        EventSink { sender: None }
    }

    pub fn emit(&self, kind: EventKind) {
        let Some(sender) = &self.sender else {
            return;
        };
        let queue = &sender.0;
        let mut state = queue.lock();
        if state.receiver_gone {
            return;
        }
        let len = state.events.len();
        if len >= COALESCE_AT
            && let Some(last) = state.events.back_mut()
            && join_fragment(&mut last.kind, &kind)
        {
            return;
        }
        if len >= QUEUE_LIMIT {
            state.dropped += 1;
            return;
        }
        state.events.push_back(Event::now(kind));
        drop(state);
        queue.wake();
    }
}

/// Joins `next` to `last` when both are streamed text of the same source:
/// the main agent's answer, or one subagent's.
fn join_fragment(last: &mut EventKind, next: &EventKind) -> bool {
    match (last, next) {
        (EventKind::AssistantDelta { text: last }, EventKind::AssistantDelta { text }) => {
            last.push_str(text);
            true
        }
        (
            EventKind::SubagentTextDelta {
                agent_id: last_agent,
                text: last,
            },
            EventKind::SubagentTextDelta { agent_id, text },
        ) if last_agent == agent_id => {
            last.push_str(text);
            true
        }
        _ => false,
    }
}

impl EventReceiver {
    /// The next event; `None` once every sink is gone and the queue is
    /// empty.
    pub async fn recv(&mut self) -> Option<Event> {
        loop {
            let ready = self.queue.ready.notified();
            match self.take() {
                Taken::Event(event) => return Some(*event),
                Taken::Closed => return None,
                Taken::Empty => ready.await,
            }
        }
    }

    /// The next event, waiting on this thread (not on a runtime worker).
    pub fn blocking_recv(&mut self) -> Option<Event> {
        let mut state = self.queue.lock();
        loop {
            match take(&mut state) {
                Taken::Event(event) => return Some(*event),
                Taken::Closed => return None,
                Taken::Empty => {
                    state = self
                        .queue
                        .ready_blocking
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    /// The next event if one is queued.
    pub fn try_recv(&mut self) -> Option<Event> {
        match self.take() {
            Taken::Event(event) => Some(*event),
            Taken::Closed | Taken::Empty => None,
        }
    }

    fn take(&self) -> Taken {
        take(&mut self.queue.lock())
    }
}

/// The next event of `state`: first the notice of dropped events, once
/// the reader has made room.
fn take(state: &mut State) -> Taken {
    if state.dropped > 0 && state.events.len() < QUEUE_LIMIT / 2 {
        let dropped = std::mem::take(&mut state.dropped);
        return Taken::Event(Box::new(Event::now(EventKind::Error {
            message: format!(
                "the event queue was full ({QUEUE_LIMIT} events): {dropped} events were dropped"
            ),
        })));
    }
    match state.events.pop_front() {
        Some(event) => Taken::Event(Box::new(event)),
        None if state.senders_gone => Taken::Closed,
        None => Taken::Empty,
    }
}

enum Taken {
    Event(Box<Event>),
    Empty,
    Closed,
}

impl Drop for EventReceiver {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.receiver_gone = true;
        state.events.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(text: &str) -> EventKind {
        EventKind::AssistantDelta { text: text.into() }
    }

    fn texts(receiver: &mut EventReceiver) -> Vec<String> {
        std::iter::from_fn(|| receiver.try_recv())
            .map(|event| match event.kind {
                EventKind::AssistantDelta { text } => text,
                EventKind::Error { message } => format!("error: {message}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn events_arrive_in_order_and_the_queue_closes_with_the_last_sink() {
        let (sink, mut receiver) = channel();
        let clone = sink.clone();
        sink.emit(delta("a"));
        clone.emit(delta("b"));
        drop(sink);
        assert_eq!(texts(&mut receiver), ["a", "b"]);
        assert!(receiver.try_recv().is_none());
        drop(clone);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(runtime.block_on(receiver.recv()).is_none(), "closed");
    }

    #[test]
    fn past_the_coalescing_mark_text_fragments_join_and_none_is_lost() {
        let (sink, mut receiver) = channel();
        for _ in 0..COALESCE_AT {
            sink.emit(EventKind::TurnStarted { turn: 1 });
        }
        sink.emit(delta("x"));
        for _ in 0..10_000 {
            sink.emit(delta("y"));
        }
        let all = texts(&mut receiver);
        assert_eq!(all.len(), COALESCE_AT + 1, "one event holds the fragments");
        assert_eq!(all[COALESCE_AT], format!("x{}", "y".repeat(10_000)));
    }

    /// Past the mark a subagent's fragments join its own last one, never
    /// another subagent's nor the main agent's.
    #[test]
    fn past_the_coalescing_mark_a_subagents_fragments_join_its_own_only() {
        let (sink, mut receiver) = channel();
        for _ in 0..COALESCE_AT {
            sink.emit(EventKind::TurnStarted { turn: 1 });
        }
        let from = |agent: &str, text: &str| EventKind::SubagentTextDelta {
            agent_id: agent.into(),
            text: text.into(),
        };
        for kind in [
            from("a", "1"),
            from("a", "2"),
            from("b", "3"),
            delta("4"),
            from("b", "5"),
            from("b", "6"),
        ] {
            sink.emit(kind);
        }
        let tail: Vec<EventKind> = std::iter::from_fn(|| receiver.try_recv())
            .skip(COALESCE_AT)
            .map(|event| event.kind)
            .collect();
        assert_eq!(
            tail,
            [from("a", "12"), from("b", "3"), delta("4"), from("b", "56")]
        );
    }

    #[test]
    fn at_the_limit_events_are_dropped_and_the_reader_is_told_how_many() {
        let (sink, mut receiver) = channel();
        for turn in 0..(QUEUE_LIMIT as u32 + 5) {
            sink.emit(EventKind::TurnStarted { turn });
        }
        let mut seen = 0;
        let mut told = Vec::new();
        while let Some(event) = receiver.try_recv() {
            match event.kind {
                EventKind::TurnStarted { .. } => seen += 1,
                EventKind::Error { message } => told.push(message),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(seen, QUEUE_LIMIT);
        assert_eq!(
            told,
            [format!(
                "the event queue was full ({QUEUE_LIMIT} events): 5 events were dropped"
            )]
        );
    }

    #[test]
    fn a_sink_whose_receiver_is_gone_drops_silently() {
        let (sink, receiver) = channel();
        drop(receiver);
        sink.emit(delta("nobody listens"));
        EventSink::discard().emit(delta("nor here"));
    }

    #[test]
    fn a_blocked_reader_wakes_for_each_event_and_at_the_close() {
        let (sink, mut receiver) = channel();
        let sender = std::thread::spawn(move || {
            for text in ["one", "two"] {
                std::thread::sleep(std::time::Duration::from_millis(10));
                sink.emit(delta(text));
            }
        });
        let mut got = Vec::new();
        while let Some(event) = receiver.blocking_recv() {
            got.push(event.kind);
        }
        sender.join().unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_an_event_sent_from_another_thread() {
        let (sink, mut receiver) = channel();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            sink.emit(delta("late"));
        });
        let event = tokio::time::timeout(std::time::Duration::from_secs(5), receiver.recv())
            .await
            .expect("woken")
            .expect("an event");
        assert!(matches!(event.kind, EventKind::AssistantDelta { text } if text == "late"));
        sender.join().unwrap();
        assert!(
            receiver.recv().await.is_none(),
            "closed after the sink went"
        );
    }
}
