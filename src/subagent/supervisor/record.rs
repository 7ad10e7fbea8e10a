//! The session's record of its subagents: every one started, in start
//! order, as its last lifecycle event described it. The supervisor writes
//! it where it emits each `subagent` event ([`Shared::announce`]), so the
//! record and the events never disagree; `fido subagents` (the control
//! socket) reads the running ones, `/subagents` (`Op::ListSubagents`) all of
//! them.
//!
//! [`Shared::announce`]: super::Shared::announce

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::protocol::SubagentPhase;
use crate::protocol::control::{RunningSubagent, SessionSubagent};

/// One lifecycle event of a subagent, as the record takes it.
pub(super) struct Lifecycle<'a> {
    pub(super) agent_id: &'a str,
    pub(super) child_pid: Option<u32>,
    pub(super) phase: SubagentPhase,
    /// When its run started: the clock of its elapsed time.
    pub(super) started: Instant,
    pub(super) tokens: u64,
    pub(super) plan_item: Option<&'a String>,
    /// Already cut to one short line.
    pub(super) detail: String,
}

/// What the record keeps of one subagent.
struct Recorded {
    agent_id: String,
    child_pid: Option<u32>,
    phase: SubagentPhase,
    started: Instant,
    /// The elapsed time at its end (`None`: it still runs).
    ended_ms: Option<u64>,
    tokens: u64,
    plan_item: Option<String>,
    detail: String,
}

impl Recorded {
    fn elapsed_ms(&self) -> u64 {
        self.ended_ms.unwrap_or_else(|| millis_since(self.started))
    }
}

fn millis_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Every subagent of the session, in start order.
#[derive(Default)]
pub(super) struct SessionRecord {
    subagents: Mutex<Vec<Recorded>>,
}

impl SessionRecord {
    fn subagents(&self) -> MutexGuard<'_, Vec<Recorded>> {
        // A panic while holding the lock left plain data; keep using it.
        self.subagents
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a lifecycle event: the first one of a subagent adds it, a
    /// final phase ends it.
    pub(super) fn note(&self, event: &Lifecycle<'_>) {
        let mut subagents = self.subagents();
        let index = match subagents.iter().position(|a| a.agent_id == event.agent_id) {
            Some(index) => index,
            None => {
                subagents.push(Recorded {
                    agent_id: event.agent_id.to_string(),
                    child_pid: None,
                    phase: SubagentPhase::Starting,
                    started: event.started,
                    ended_ms: None,
                    tokens: 0,
                    plan_item: event.plan_item.cloned(),
                    detail: String::new(),
                });
                subagents.len() - 1
            }
        };
        let subagent = &mut subagents[index];
        subagent.child_pid = event.child_pid.or(subagent.child_pid);
        subagent.phase.clone_from(&event.phase);
        subagent.tokens = event.tokens;
        subagent.detail.clone_from(&event.detail);
        if event.phase.is_final() && subagent.ended_ms.is_none() {
            subagent.ended_ms = Some(millis_since(subagent.started));
        }
    }

    /// The run of `agent_id` is over, whether or not it reported a final
    /// phase: its clock stops.
    pub(super) fn ended(&self, agent_id: &str) {
        let mut subagents = self.subagents();
        if let Some(subagent) = subagents.iter_mut().find(|a| a.agent_id == agent_id) {
            subagent
                .ended_ms
                .get_or_insert_with(|| millis_since(subagent.started));
        }
    }

    /// The subagents still running, as the control socket reports them.
    pub(super) fn running(&self, parent_pid: u32) -> Vec<RunningSubagent> {
        self.subagents()
            .iter()
            .filter(|subagent| subagent.ended_ms.is_none())
            .map(|subagent| RunningSubagent {
                agent_id: subagent.agent_id.clone(),
                parent_pid,
                child_pid: subagent.child_pid,
                phase: subagent.phase.clone(),
                elapsed_ms: subagent.elapsed_ms(),
                tokens: subagent.tokens,
                plan_item: subagent.plan_item.clone(),
            })
            .collect()
    }

    /// Every subagent of the session, the ended ones included.
    pub(super) fn session(&self) -> Vec<SessionSubagent> {
        self.subagents()
            .iter()
            .map(|subagent| SessionSubagent {
                agent_id: subagent.agent_id.clone(),
                child_pid: subagent.child_pid,
                phase: subagent.phase.clone(),
                running: subagent.ended_ms.is_none(),
                elapsed_ms: subagent.elapsed_ms(),
                tokens: subagent.tokens,
                plan_item: subagent.plan_item.clone(),
                detail: subagent.detail.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn event<'a>(
        agent_id: &'a str,
        phase: &str,
        started: Instant,
        tokens: u64,
        detail: &str,
    ) -> Lifecycle<'a> {
        Lifecycle {
            agent_id,
            child_pid: None,
            phase: SubagentPhase::parse(phase),
            started,
            tokens,
            plan_item: None,
            detail: detail.into(),
        }
    }

    /// A final phase ends an agent for the control socket but keeps it
    /// for `/subagents`, its clock stopped; a run that ended without one is
    /// kept with its last phase.
    #[test]
    fn ended_agents_stay_in_the_session_with_their_clock_stopped() {
        let record = SessionRecord::default();
        let long_ago = Instant::now().checked_sub(Duration::from_secs(4)).unwrap();
        let plan_item = "i1".to_string();
        let mut first = event("subagent-a", "starting", long_ago, 0, "spawning");
        first.child_pid = Some(7);
        first.plan_item = Some(&plan_item);
        record.note(&first);
        record.note(&event("subagent-b", "reasoning", Instant::now(), 10, ""));
        record.note(&event(
            "subagent-a",
            "completed",
            long_ago,
            2_500,
            "3 findings",
        ));
        assert_eq!(record.running(1).len(), 1);
        assert_eq!(record.running(1)[0].agent_id, "subagent-b");

        record.ended("subagent-b");
        assert!(record.running(1).is_empty());
        let session = record.session();
        let ids: Vec<&str> = session.iter().map(|a| a.agent_id.as_str()).collect();
        assert_eq!(ids, ["subagent-a", "subagent-b"], "start order");
        let a = &session[0];
        assert_eq!(a.phase, SubagentPhase::Completed);
        assert!(!a.running);
        assert_eq!((a.tokens, a.detail.as_str()), (2_500, "3 findings"));
        assert_eq!(a.plan_item.as_deref(), Some("i1"));
        assert!((4_000..60_000).contains(&a.elapsed_ms), "{}", a.elapsed_ms);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(record.session()[0].elapsed_ms, a.elapsed_ms, "stopped");
        let b = &session[1];
        assert_eq!(
            (b.phase.clone(), b.running),
            (SubagentPhase::Reasoning, false)
        );
    }
}
