//! What the engine asks the person: the invocation guard's approval
//! requests and `ask_user` questions. Each goes out as an event with an id
//! of its own (`approval_requested`, `question_asked`) on the front end's
//! event queue, and comes back as `Op::Approve` / `Op::Answer` with that
//! id. An answer with an unknown or stale id (the asker stopped waiting,
//! the question was answered already) is ignored with a log line.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::oneshot;

use crate::protocol::event_queue::EventSink;
use crate::protocol::op::AskId;
use crate::protocol::{ApprovalDecision, ApprovalRequest, EventKind};
use crate::tools::approval::{ApprovalFuture, Approver};
use crate::tools::ask_user::{AnswerFuture, UserChannel};

/// The requests waiting for the person, by id.
pub struct PendingAsks {
    events: EventSink,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<AskId, Waiter>>,
}

/// Where the answer to one request goes.
enum Waiter {
    Approval(oneshot::Sender<ApprovalDecision>),
    Question(oneshot::Sender<Option<String>>),
}

impl PendingAsks {
    /// Requests go out on `events`, the front end's event queue.
    pub fn new(events: EventSink) -> Arc<PendingAsks> {
        Arc::new(PendingAsks {
            events,
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        })
    }

    /// `Op::Approve`: hands `decision` to the request `id` is waiting on.
    pub fn approve(&self, id: AskId, decision: ApprovalDecision) {
        match self.take(id, "approval") {
            Some(Waiter::Approval(answer)) => deliver(answer.send(decision).is_ok(), id),
            Some(question @ Waiter::Question(_)) => self.put_back(id, question, "approval"),
            None => {}
        }
    }

    /// `Op::Answer`: hands `answer` (`None`: dismissed) to the question `id`.
    pub fn answer(&self, id: AskId, answer: Option<String>) {
        match self.take(id, "answer") {
            Some(Waiter::Question(waiter)) => deliver(waiter.send(answer).is_ok(), id),
            Some(approval @ Waiter::Approval(_)) => self.put_back(id, approval, "answer"),
            None => {}
        }
    }

    /// Registers a request, sends its event, and waits for the answer:
    /// `None` when the front end is gone. The request is forgotten when
    /// the asker stops waiting (an interrupted turn drops its future).
    fn ask<T: Send + 'static>(
        &self,
        waiter: fn(oneshot::Sender<T>) -> Waiter,
        event: impl FnOnce(AskId) -> EventKind,
    ) -> impl Future<Output = Option<T>> + Send + '_ {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        self.lock().insert(id, waiter(sender));
        self.events.emit(event(id));
        let forget = Forget { asks: self, id };
        async move {
            let answer = answer.await.ok();
            drop(forget);
            answer
        }
    }

    fn take(&self, id: AskId, what: &str) -> Option<Waiter> {
        let waiter = self.lock().remove(&id);
        if waiter.is_none() {
            tracing::warn!(id, what, "ignored an answer to an unknown or stale request");
        }
        waiter
    }

    /// An answer of the wrong kind leaves the request waiting.
    fn put_back(&self, id: AskId, waiter: Waiter, what: &str) {
        tracing::warn!(id, what, "ignored an answer of the wrong kind");
        self.lock().insert(id, waiter);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<AskId, Waiter>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn deliver(delivered: bool, id: AskId) {
    if !delivered {
        tracing::info!(id, "the answer came after the asker stopped waiting");
    }
}

/// Removes a request whose asker stopped waiting.
struct Forget<'a> {
    asks: &'a PendingAsks,
    id: AskId,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.asks.lock().remove(&self.id);
    }
}

impl Approver for PendingAsks {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        let request = request.clone();
        Box::pin(
            self.ask(Waiter::Approval, move |id| EventKind::ApprovalRequested {
                id,
                request,
            }),
        )
    }
}

impl UserChannel for PendingAsks {
    fn ask<'a>(&'a self, question: &'a str) -> AnswerFuture<'a> {
        let question = question.to_string();
        let asked = PendingAsks::ask(self, Waiter::Question, move |id| EventKind::QuestionAsked {
            id,
            question,
        });
        Box::pin(async move { asked.await.flatten() })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::event_queue::{EventReceiver, channel};

    async fn next_kind(events: &mut EventReceiver) -> EventKind {
        tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event within 30 s")
            .expect("an open queue")
            .kind
    }

    #[tokio::test]
    async fn answers_reach_their_request_by_id_and_strays_are_ignored() {
        let (sink, mut events) = channel();
        let asks = PendingAsks::new(sink);
        let request = ApprovalRequest::McpCall {
            tool: "t".into(),
            server: "s".into(),
            arguments: "{}".into(),
        };
        let approval = tokio::spawn({
            let asks = asks.clone();
            let request = request.clone();
            async move { Approver::approve(asks.as_ref(), &request).await }
        });
        let EventKind::ApprovalRequested { id, request: shown } = next_kind(&mut events).await
        else {
            panic!("expected an approval request")
        };
        assert_eq!(shown, request);
        // An unknown id and an answer of the wrong kind change nothing.
        asks.approve(id + 100, ApprovalDecision::Approved);
        asks.answer(id, Some("yes".into()));
        asks.approve(id, ApprovalDecision::ApprovedForSession);
        let decided = approval.await.unwrap();
        assert_eq!(decided, Some(ApprovalDecision::ApprovedForSession));
        // Stale: answered already.
        asks.approve(id, ApprovalDecision::Approved);
        assert!(asks.lock().is_empty());
    }

    #[tokio::test]
    async fn a_request_whose_asker_stopped_waiting_is_forgotten() {
        let (sink, mut events) = channel();
        let asks = PendingAsks::new(sink);
        let asked = UserChannel::ask(asks.as_ref(), "Which one?");
        let waited = tokio::time::timeout(Duration::from_millis(1), asked).await;
        assert!(waited.is_err(), "nobody answered");
        let EventKind::QuestionAsked { id, question } = next_kind(&mut events).await else {
            panic!("expected a question")
        };
        assert_eq!(question, "Which one?");
        assert!(asks.lock().is_empty(), "dropped with its asker");
        asks.answer(id, Some("late".into()));
    }
}
