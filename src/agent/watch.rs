//! The agent actor's supervisor. A panic inside a turn is caught by the
//! turn task ([`super::recover`]); a panic in the actor's own handler fails
//! the actor, and with it goes the conversation it owned, so there is
//! nothing to restart: the watch turns the failure into one `error` event
//! (and a log line) that says so, instead of a session that silently
//! answers "the agent is not running".

use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr, SupervisionEvent};
use tokio::task::JoinHandle;

use super::{AgentActor, AgentArguments, AgentMessage, EventSink};
use crate::protocol::EventKind;

/// Spawns the agent linked to a watch of its own.
pub async fn spawn_watched(
    arguments: AgentArguments,
) -> Result<(ActorRef<AgentMessage>, JoinHandle<()>), SpawnErr> {
    let (watch, _) = Actor::spawn(None, AgentWatch, arguments.deps.events.clone()).await?;
    let spawned = Actor::spawn_linked(None, AgentActor, arguments, watch.get_cell()).await;
    if spawned.is_err() {
        watch.stop(None);
    }
    spawned
}

struct AgentWatch;

/// The watch takes no messages.
enum WatchMessage {}

impl Actor for AgentWatch {
    type Msg = WatchMessage;
    type State = EventSink;
    type Arguments = EventSink;

    async fn pre_start(
        &self,
        _myself: ActorRef<WatchMessage>,
        events: EventSink,
    ) -> Result<EventSink, ActorProcessingErr> {
        Ok(events)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<WatchMessage>,
        event: SupervisionEvent,
        events: &mut EventSink,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(_, reason) => {
                tracing::error!(%reason, "the agent actor failed");
                events.emit(EventKind::Error {
                    message: format!(
                        "the agent stopped on an internal error ({}); this session takes no more prompts: quit, then `fido resume` continues it from its last step",
                        crate::text::summary(&reason.to_string(), 200)
                    ),
                });
                myself.stop(None);
            }
            SupervisionEvent::ActorTerminated(..) => myself.stop(None),
            _ => {}
        }
        Ok(())
    }
}
