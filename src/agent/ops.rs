//! The engine's side of the op queue: each [`Op`] a front end sends becomes
//! the agent actor's message, so the front end never sees [`AgentMessage`].

use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, MessagingErr};
use tokio::sync::oneshot;

use super::AgentMessage;
use crate::protocol::Message;
use crate::protocol::op::{Op, OpReceiver, OpSender, TurnOutcome, op_channel};
use crate::provider::Provider;

/// Builds the provider for another model of the same endpoint (`/model`).
/// It may block (a TLS client takes a moment), so it runs off the runtime.
pub type ModelSwitcher = Arc<dyn Fn(&str) -> Result<Arc<dyn Provider>, String> + Send + Sync>;

/// Longest wait for the agent's answer to a snapshot: a hung agent gives
/// an error instead of a silent UI.
const SNAPSHOT_WAIT: Duration = Duration::from_secs(5);

/// Starts serving `agent`'s ops, until the sender and its clones are gone;
/// an op the stopped agent cannot take is answered with why.
pub fn serve(agent: ActorRef<AgentMessage>, switch_model: ModelSwitcher) -> OpSender {
    let (sender, receiver) = op_channel();
    tokio::spawn(forward(receiver, agent, switch_model));
    sender
}

async fn forward(mut ops: OpReceiver, agent: ActorRef<AgentMessage>, switch: ModelSwitcher) {
    while let Some(op) = ops.recv().await {
        let message = match op {
            Op::SubmitPrompt { prompt, reply } => AgentMessage::SubmitPrompt {
                prompt,
                reply: reply.into(),
            },
            Op::Interrupt => AgentMessage::Interrupt,
            Op::CancelSubagent(id) => AgentMessage::CancelSubagent(id),
            Op::RestorePlan => AgentMessage::RestorePlan,
            Op::CompactNow { reply } => AgentMessage::CompactNow {
                reply: reply.into(),
            },
            Op::Recall { history, reply } => AgentMessage::Recall {
                history,
                reply: reply.into(),
            },
            Op::SwitchModel { model, reply } => {
                tokio::spawn(switch_model(model, agent.clone(), switch.clone(), reply));
                continue;
            }
            Op::Snapshot { reply } => {
                tokio::spawn(snapshot(agent.clone(), reply));
                continue;
            }
        };
        if let Err(MessagingErr::SendErr(message)) = agent.cast(message) {
            refuse(message);
        }
    }
}

/// A message the agent could not take (it has stopped): the asker, if
/// any, hears why instead of waiting out its timeout.
fn refuse(message: AgentMessage) {
    let gone = || "the agent is not running".to_string();
    match message {
        AgentMessage::SubmitPrompt { reply, .. } => {
            let _ = reply.send(TurnOutcome::failed(gone()));
        }
        AgentMessage::CompactNow { reply } => drop(reply.send(Err(gone()))),
        AgentMessage::Recall { reply, .. } => drop(reply.send(Err(gone()))),
        _ => {}
    }
}

async fn switch_model(
    model: String,
    agent: ActorRef<AgentMessage>,
    switch: ModelSwitcher,
    reply: oneshot::Sender<Result<String, String>>,
) {
    let built = tokio::task::spawn_blocking(move || switch(&model)).await;
    let result = match built {
        Ok(Ok(provider)) => {
            let model = provider.model().to_string();
            match agent.cast(AgentMessage::SwitchProvider { provider }) {
                Ok(()) => Ok(model),
                Err(_) => Err("the agent is not running".into()),
            }
        }
        Ok(Err(message)) => Err(message),
        Err(err) => Err(format!("cannot switch the model: {err}")),
    };
    let _ = reply.send(result);
}

type SnapshotReply = oneshot::Sender<Result<Vec<Message>, String>>;

async fn snapshot(agent: ActorRef<AgentMessage>, reply: SnapshotReply) {
    let millis = SNAPSHOT_WAIT.as_millis() as u64;
    let messages = match ractor::call_t!(agent, AgentMessage::Snapshot, millis) {
        Ok(Some(conversation)) => Ok(conversation.messages().to_vec()),
        Ok(None) => Err("a turn is running; wait for it to end".into()),
        Err(ractor::RactorErr::Messaging(_)) => Err("the agent is not running".into()),
        Err(err) => Err(format!("the agent did not answer: {err}")),
    };
    let _ = reply.send(messages);
}

#[cfg(test)]
mod tests {
    use ractor::{Actor, ActorProcessingErr, RpcReplyPort};

    use super::*;
    use crate::protocol::TurnStatus;

    /// Answers a snapshot as an agent with a turn running does; every
    /// other message it leaves unanswered.
    struct Busy;

    impl Actor for Busy {
        type Msg = AgentMessage;
        type State = ();
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<AgentMessage>,
            _args: (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn handle(
            &self,
            _myself: ActorRef<AgentMessage>,
            message: AgentMessage,
            _state: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            if let AgentMessage::Snapshot(reply) = message {
                let _ = RpcReplyPort::send(reply, None);
            }
            Ok(())
        }
    }

    fn no_models() -> ModelSwitcher {
        Arc::new(|model: &str| Err(format!("no model {model} here")))
    }

    async fn answer<T>(receiver: oneshot::Receiver<T>) -> T {
        tokio::time::timeout(Duration::from_secs(5), receiver)
            .await
            .expect("an answer within 5 s")
            .expect("an answer, not a dropped reply")
    }

    #[tokio::test]
    async fn ops_to_a_stopped_agent_are_answered_at_once() {
        let (agent, handle) = Actor::spawn(None, Busy, ()).await.unwrap();
        agent.stop(None);
        handle.await.unwrap();
        let engine = serve(agent, no_models());

        let (reply, outcome) = oneshot::channel();
        let prompt = "hi".to_string();
        engine.send(Op::SubmitPrompt { prompt, reply }).unwrap();
        let outcome = answer(outcome).await;
        assert_eq!(outcome.status(), TurnStatus::Failed);
        assert_eq!(outcome.error(), Some("the agent is not running"));

        let (reply, compacted) = oneshot::channel();
        engine.send(Op::CompactNow { reply }).unwrap();
        assert_eq!(
            answer(compacted).await,
            Err("the agent is not running".into())
        );

        let (reply, messages) = oneshot::channel();
        engine.send(Op::Snapshot { reply }).unwrap();
        assert_eq!(
            answer(messages).await,
            Err("the agent is not running".into())
        );
    }

    #[tokio::test]
    async fn a_snapshot_during_a_turn_and_a_model_that_cannot_be_built_say_why() {
        let (agent, _handle) = Actor::spawn(None, Busy, ()).await.unwrap();
        let engine = serve(agent.clone(), no_models());

        let (reply, messages) = oneshot::channel();
        engine.send(Op::Snapshot { reply }).unwrap();
        assert_eq!(
            answer(messages).await,
            Err("a turn is running; wait for it to end".into())
        );

        let (reply, switched) = oneshot::channel();
        let model = "gpt-x".to_string();
        engine.send(Op::SwitchModel { model, reply }).unwrap();
        assert_eq!(answer(switched).await, Err("no model gpt-x here".into()));
        agent.stop(None);
    }
}
