//! User hooks in the transcript: one line when a hook blocks something,
//! fails or has a message for the person ([`HookNotice`]); hooks that run
//! quietly are not shown.

use super::{Entry, Store};
use crate::protocol::EventKind;
use crate::protocol::hook::HookNotice;

impl Store {
    /// A hook event; returns whether the transcript changed.
    pub(super) fn hook(&mut self, event: &EventKind) -> bool {
        let entry = match HookNotice::of(event) {
            None => return false,
            Some(HookNotice::Blocked(text) | HookNotice::Said(text)) => Entry::Info(text),
            Some(HookNotice::Failed(text)) => Entry::Error(text),
        };
        self.push(entry);
        true
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crate::protocol::EventKind;
    use crate::protocol::hook::{HookDecision, HookStatus};
    use crate::ui::state::{Entry, Store};

    fn finished(status: HookStatus, exit_code: Option<i32>, decision: HookDecision) -> EventKind {
        crate::protocol::hook::testing::finished(status, exit_code, decision, Some("frozen"))
    }

    #[test]
    fn the_transcript_gets_one_line_for_a_blocking_failing_or_speaking_hook_only() {
        let mut store = Store::new((80, 24));
        let now = Instant::now();
        let started = EventKind::HookStarted {
            event: crate::protocol::hook::HookEvent::PreToolUse,
            command: "./guard.sh".into(),
        };
        assert!(!store.apply(&started, now));
        let quiet = crate::protocol::hook::testing::finished(
            HookStatus::Exited,
            Some(0),
            HookDecision::None,
            None,
        );
        assert!(!store.apply(&quiet, now));
        assert!(store.transcript.is_empty());
        assert!(store.apply(
            &finished(HookStatus::Exited, Some(2), HookDecision::Deny),
            now
        ));
        assert!(store.apply(
            &finished(HookStatus::Killed, Some(11), HookDecision::None),
            now
        ));
        assert!(store.apply(
            &finished(HookStatus::Exited, Some(0), HookDecision::Allow),
            now
        ));
        assert_eq!(
            &store.transcript[..],
            [
                Entry::Info("PreToolUse hook `./guard.sh` blocked: frozen".into()),
                Entry::Error("PreToolUse hook `./guard.sh` failed (ignored): frozen".into()),
                Entry::Info("PreToolUse hook `./guard.sh`: frozen".into()),
            ]
        );
    }
}
