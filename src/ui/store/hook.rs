//! User hooks in the transcript: one line when a hook blocks something or
//! fails; hooks that run quietly and let things go on are not shown.

use super::{Entry, Store};
use crate::protocol::EventKind;
use crate::protocol::hook::{HookDecision, HookStatus};
use crate::text::summary;

impl Store {
    /// A hook event; returns whether the transcript changed.
    pub(super) fn hook(&mut self, event: &EventKind) -> bool {
        let EventKind::HookFinished {
            event,
            command,
            status,
            exit_code,
            decision,
            message,
            ..
        } = event
        else {
            return false;
        };
        let Some(line) = notice(
            event,
            command,
            *status,
            *exit_code,
            *decision,
            message.as_deref(),
        ) else {
            return false;
        };
        self.push(line);
        true
    }
}

/// The notice for a hook that blocked or failed; `None` for one that did
/// neither.
fn notice(
    event: &str,
    command: &str,
    status: HookStatus,
    exit_code: Option<i32>,
    decision: HookDecision,
    message: Option<&str>,
) -> Option<Entry> {
    let (event, command) = (summary(event, 40), summary(command, 60));
    let why = message
        .map(|m| format!(": {}", summary(m, 160)))
        .unwrap_or_default();
    let failed = !matches!((status, exit_code), (HookStatus::Exited, Some(0 | 2)));
    if failed {
        return Some(Entry::Error(format!(
            "{event} hook `{command}` failed (ignored){why}"
        )));
    }
    match decision {
        HookDecision::Deny => Some(Entry::Info(format!(
            "{event} hook `{command}` blocked{why}"
        ))),
        HookDecision::None | HookDecision::Allow | HookDecision::Ask => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_and_a_failure_are_one_line_and_a_quiet_hook_nothing() {
        let blocked = notice(
            "PreToolUse",
            "./guard.sh",
            HookStatus::Exited,
            Some(2),
            HookDecision::Deny,
            Some("no"),
        );
        assert_eq!(
            blocked,
            Some(Entry::Info(
                "PreToolUse hook `./guard.sh` blocked: no".into()
            ))
        );
        let failed = notice(
            "Stop",
            "x",
            HookStatus::TimedOut,
            None,
            HookDecision::None,
            Some("ran past"),
        );
        assert_eq!(
            failed,
            Some(Entry::Error(
                "Stop hook `x` failed (ignored): ran past".into()
            ))
        );
        assert_eq!(
            notice(
                "Stop",
                "x",
                HookStatus::Exited,
                Some(0),
                HookDecision::Allow,
                None
            ),
            None
        );
    }
}
