//! What a front end asks of the engine: commands in, while events come out
//! through [`super::event_queue`]. The TUI holds an [`OpSender`] and knows
//! nothing of the agent actor behind it, the way codex-rs's front ends
//! submit `Op`s and read `EventMsg`s.
//!
//! The answers that only the asker needs (how a turn ended, whether
//! `/compact` cut anything) come back on a oneshot channel carried in the
//! op; everything the transcript shows arrives as events.

use tokio::sync::{mpsc, oneshot};

use super::Message;
pub use super::outcome::TurnOutcome;

/// A command to the engine.
#[derive(Debug)]
pub enum Op {
    /// Start a turn with this prompt; the outcome comes when it ends.
    /// Refused (status `Failed`) while another turn runs.
    SubmitPrompt {
        prompt: String,
        reply: oneshot::Sender<TurnOutcome>,
    },
    /// Cancel the running turn, its subagents included.
    Interrupt,
    /// Cancel one subagent (`Some(agent_id)`) or every one (`None`); the
    /// turn goes on with their cancelled results.
    CancelSubagent(Option<String>),
    /// The workspace plan changed outside a turn (`/plan clear`): the model
    /// gets the current one on its next request.
    RestorePlan,
    /// Compact the conversation now: whether anything was cut, or why not.
    CompactNow {
        reply: oneshot::Sender<Result<bool, String>>,
    },
    /// Replace the conversation after the system message with a recalled
    /// one: how many messages, or why not.
    Recall {
        history: Vec<Message>,
        reply: oneshot::Sender<Result<usize, String>>,
    },
    /// Use this model of the same endpoint from the next turn on: its
    /// name as the provider reports it, or why not.
    SwitchModel {
        model: String,
        reply: oneshot::Sender<Result<String, String>>,
    },
    /// The conversation's messages between turns (`/suspend`), or why not
    /// (a turn is running, the agent did not answer).
    Snapshot {
        reply: oneshot::Sender<Result<Vec<Message>, String>>,
    },
}

/// Ops a front end can have queued before the engine takes them. A person
/// types them, so the limit is never met in use; a full queue is refused,
/// never waited on, because the UI's handler must not block.
pub const OP_QUEUE_LIMIT: usize = 64;

/// The front end's end of the op queue.
#[derive(Debug, Clone)]
pub struct OpSender(mpsc::Sender<Op>);

/// The engine's end of the op queue.
pub type OpReceiver = mpsc::Receiver<Op>;

/// Why an op was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpRefused {
    #[error("the agent is not running")]
    EngineGone,
    #[error("the agent has {OP_QUEUE_LIMIT} commands waiting; try again")]
    Full,
}

pub fn op_channel() -> (OpSender, OpReceiver) {
    let (sender, receiver) = mpsc::channel(OP_QUEUE_LIMIT);
    (OpSender(sender), receiver)
}

impl OpSender {
    /// Queues `op` without waiting.
    pub fn send(&self, op: Op) -> Result<(), OpRefused> {
        self.0.try_send(op).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => OpRefused::Full,
            mpsc::error::TrySendError::Closed(_) => OpRefused::EngineGone,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_and_a_gone_engine_are_refused_without_waiting() {
        let (sender, receiver) = op_channel();
        for _ in 0..OP_QUEUE_LIMIT {
            sender.send(Op::Interrupt).unwrap();
        }
        assert_eq!(sender.send(Op::Interrupt), Err(OpRefused::Full));
        drop(receiver);
        assert_eq!(sender.send(Op::Interrupt), Err(OpRefused::EngineGone));
    }
}
