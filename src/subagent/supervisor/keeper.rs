//! The [`SupervisorActor`]'s own supervisor: it spawns the actor linked to
//! itself and restarts it when it fails (a panic in a handler), so one bug
//! does not end delegation for the session. The failed actor's runs are
//! stopped as its state drops (each call still gets its result), and an
//! `error` event says what happened.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr, SupervisionEvent};

use super::{Shared, SupervisorActor, SupervisorMessage};
use crate::protocol::EventKind;

/// Restarts of a failed supervisor actor before delegation is given up.
const MAX_RESTARTS: u32 = 3;

/// The supervisor actor now running (`None`: there is none, for good).
#[derive(Clone, Default)]
pub(super) struct WorkerSlot(Arc<Mutex<Option<ActorRef<SupervisorMessage>>>>);

impl WorkerSlot {
    pub(super) fn get(&self) -> Option<ActorRef<SupervisorMessage>> {
        self.lock().clone()
    }

    fn set(&self, worker: Option<ActorRef<SupervisorMessage>>) {
        *self.lock() = worker;
    }

    fn lock(&self) -> MutexGuard<'_, Option<ActorRef<SupervisorMessage>>> {
        // Plain data: a panic while it was held left nothing half-done.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) struct Keeper;

/// The keeper takes no messages: it only watches.
pub(super) enum KeeperMessage {}

pub(super) struct KeeperArguments {
    pub(super) shared: Arc<Shared>,
    pub(super) worker: WorkerSlot,
}

pub(super) struct KeeperState {
    shared: Arc<Shared>,
    worker: WorkerSlot,
    restarts: u32,
}

impl Actor for Keeper {
    type Msg = KeeperMessage;
    type State = KeeperState;
    type Arguments = KeeperArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<KeeperMessage>,
        args: KeeperArguments,
    ) -> Result<KeeperState, ActorProcessingErr> {
        let state = KeeperState {
            shared: args.shared,
            worker: args.worker,
            restarts: 0,
        };
        state.spawn_worker(&myself).await?;
        Ok(state)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<KeeperMessage>,
        event: SupervisionEvent,
        state: &mut KeeperState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(_, reason) => {
                state.restart(&myself, &reason.to_string()).await;
            }
            // Stopped on purpose (the shutdown): the keeper's work is done.
            SupervisionEvent::ActorTerminated(..) => myself.stop(None),
            _ => {}
        }
        Ok(())
    }
}

impl KeeperState {
    async fn spawn_worker(&self, keeper: &ActorRef<KeeperMessage>) -> Result<(), SpawnErr> {
        let (worker, _) = Actor::spawn_linked(
            None,
            SupervisorActor,
            self.shared.clone(),
            keeper.get_cell(),
        )
        .await?;
        self.worker.set(Some(worker));
        Ok(())
    }

    /// The worker failed with `reason`: a new one, unless it failed too
    /// often already; either way one `error` event.
    async fn restart(&mut self, keeper: &ActorRef<KeeperMessage>, reason: &str) {
        self.worker.set(None);
        self.restarts += 1;
        let restarted = self.restarts <= MAX_RESTARTS && self.spawn_worker(keeper).await.is_ok();
        tracing::error!(%reason, restarted, restarts = self.restarts, "the subagent supervisor failed");
        let outcome = if restarted {
            "it was restarted: the subagents it ran were stopped, and delegate works again"
        } else {
            "delegate is unavailable for the rest of the session"
        };
        self.shared.events.emit(EventKind::Error {
            message: format!(
                "the subagent supervisor stopped on an internal error ({}); {outcome}",
                crate::text::summary(reason, 200)
            ),
        });
        if !restarted {
            keeper.stop(None);
        }
    }
}
