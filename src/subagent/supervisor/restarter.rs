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

pub(super) struct Restarter;

/// The restarter takes no messages: it only watches.
pub(super) enum RestarterMessage {}

pub(super) struct RestarterArguments {
    pub(super) shared: Arc<Shared>,
    pub(super) worker: WorkerSlot,
}

pub(super) struct RestarterState {
    shared: Arc<Shared>,
    worker: WorkerSlot,
    restarts: u32,
}

impl Actor for Restarter {
    type Msg = RestarterMessage;
    type State = RestarterState;
    type Arguments = RestarterArguments;

    async fn pre_start(
        &self,
        myself: ActorRef<RestarterMessage>,
        args: RestarterArguments,
    ) -> Result<RestarterState, ActorProcessingErr> {
        let state = RestarterState {
            shared: args.shared,
            worker: args.worker,
            restarts: 0,
        };
        state.spawn_worker(&myself).await?;
        Ok(state)
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<RestarterMessage>,
        event: SupervisionEvent,
        state: &mut RestarterState,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(_, reason) => {
                state.restart(&myself, &reason.to_string()).await;
            }
            // Stopped on purpose (the shutdown): the restarter's work is done.
            SupervisionEvent::ActorTerminated(..) => myself.stop(None),
            _ => {}
        }
        Ok(())
    }
}

impl RestarterState {
    async fn spawn_worker(&self, restarter: &ActorRef<RestarterMessage>) -> Result<(), SpawnErr> {
        let (worker, _) = Actor::spawn_linked(
            None,
            SupervisorActor,
            self.shared.clone(),
            restarter.get_cell(),
        )
        .await?;
        self.worker.set(Some(worker));
        Ok(())
    }

    /// The worker failed with `reason`: a new one, unless it failed too
    /// often already; either way one `error` event.
    async fn restart(&mut self, restarter: &ActorRef<RestarterMessage>, reason: &str) {
        self.worker.set(None);
        self.restarts += 1;
        let restarted = self.restarts <= MAX_RESTARTS && self.spawn_worker(restarter).await.is_ok();
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
            restarter.stop(None);
        }
    }
}
