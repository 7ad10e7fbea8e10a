//! The wire words of user hooks in the event stream (`hook_started`,
//! `hook_finished`): which event ran a hook, how it ended and what it
//! decided.

use serde::{Deserialize, Serialize};

use super::schema::string_enum;

string_enum! {
    /// The events a hook can be configured for: the name in config tables
    /// (`[[hooks.EVENT]]`), in `hook_event_name` and in the `event` of
    /// `hook_started` / `hook_finished`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HookEvent {
        SessionStart = "SessionStart",
        UserPromptSubmit = "UserPromptSubmit",
        PreToolUse = "PreToolUse",
        PostToolUse = "PostToolUse",
        PermissionRequest = "PermissionRequest",
        SubagentStart = "SubagentStart",
        SubagentStop = "SubagentStop",
        PreCompact = "PreCompact",
        Stop = "Stop",
    }
}

impl HookEvent {
    /// Its hooks may select tools with a matcher.
    pub fn is_tool_event(self) -> bool {
        match self {
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PermissionRequest => true,
            HookEvent::SessionStart
            | HookEvent::UserPromptSubmit
            | HookEvent::SubagentStart
            | HookEvent::SubagentStop
            | HookEvent::PreCompact
            | HookEvent::Stop => false,
        }
    }
}

/// How a hook's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookStatus {
    /// It exited; `exit_code` says with what.
    Exited,
    /// It ran past its `timeout_ms`; its process group was killed.
    TimedOut,
    /// A signal ended it (a crash, or something killed it).
    Killed,
    /// It could not be started.
    SpawnFailed,
}

/// What a hook decided: `none` lets things go on as they would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    #[default]
    None,
    Allow,
    Ask,
    /// Refused or blocked (exit 2, or a `deny` / `block` reply).
    Deny,
}

impl HookDecision {
    /// The stronger of two decisions of hooks of one event: deny beats
    /// ask beats allow beats none.
    pub fn strongest(self, other: HookDecision) -> HookDecision {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    fn rank(self) -> u8 {
        match self {
            HookDecision::None => 0,
            HookDecision::Allow => 1,
            HookDecision::Ask => 2,
            HookDecision::Deny => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HookDecision::None => "none",
            HookDecision::Allow => "allow",
            HookDecision::Ask => "ask",
            HookDecision::Deny => "deny",
        }
    }
}

/// The one line a person is shown about a hook: when it blocked something,
/// failed, or let things go on with a message for the person
/// (`systemMessage`); a hook that ran quietly shows nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookNotice {
    Blocked(String),
    /// It let things go on and had something to say.
    Said(String),
    /// It failed; that blocked nothing.
    Failed(String),
}

impl HookNotice {
    pub fn text(&self) -> &str {
        match self {
            HookNotice::Blocked(text) | HookNotice::Said(text) | HookNotice::Failed(text) => text,
        }
    }
}

/// A `hook_finished` of `./guard.sh` for PreToolUse, for the tests of
/// what it shows.
#[cfg(test)]
pub(crate) mod testing {
    use super::{HookDecision, HookEvent, HookStatus};
    use crate::protocol::EventKind;

    pub(crate) fn finished(
        status: HookStatus,
        exit_code: Option<i32>,
        decision: HookDecision,
        message: Option<&str>,
    ) -> EventKind {
        EventKind::HookFinished {
            event: HookEvent::PreToolUse,
            command: "./guard.sh".into(),
            status,
            exit_code,
            decision,
            elapsed_ms: 3,
            message: message.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::EventKind;

    fn finished(status: HookStatus, exit_code: Option<i32>, decision: HookDecision) -> EventKind {
        testing::finished(status, exit_code, decision, Some("no"))
    }

    #[test]
    fn a_block_a_failure_and_a_message_are_one_line_and_a_quiet_hook_nothing() {
        assert_eq!(
            HookNotice::of(&finished(HookStatus::Exited, Some(2), HookDecision::Deny)),
            Some(HookNotice::Blocked(
                "PreToolUse hook `./guard.sh` blocked: no".into()
            ))
        );
        assert_eq!(
            HookNotice::of(&finished(HookStatus::TimedOut, None, HookDecision::None)),
            Some(HookNotice::Failed(
                "PreToolUse hook `./guard.sh` failed (ignored): no".into()
            ))
        );
        // A hook that goes on shows its systemMessage, and nothing without.
        assert_eq!(
            HookNotice::of(&finished(HookStatus::Exited, Some(0), HookDecision::Allow)),
            Some(HookNotice::Said("PreToolUse hook `./guard.sh`: no".into()))
        );
        let quiet = testing::finished(HookStatus::Exited, Some(0), HookDecision::None, None);
        assert_eq!(HookNotice::of(&quiet), None);
    }

    /// Each event travels as the name a config table and a script use;
    /// a name Fido does not know is refused where an event line is read.
    #[test]
    fn every_hook_event_keeps_its_name_on_the_wire() {
        let names = [
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PermissionRequest",
            "SubagentStart",
            "SubagentStop",
            "PreCompact",
            "Stop",
        ];
        assert_eq!(HookEvent::ALL.len(), names.len());
        for (event, name) in HookEvent::ALL.iter().zip(names) {
            assert_eq!(serde_json::to_value(event).unwrap(), name);
            assert_eq!(HookEvent::parse(name), Some(*event));
        }
        let unknown = r#"{"type":"hook_started","event":"PreToolCall","command":"x"}"#;
        let err = serde_json::from_str::<EventKind>(unknown).unwrap_err();
        assert!(err.to_string().contains("PreToolCall"), "{err}");
    }

    /// The `--json` lines of the hook events.
    #[test]
    fn the_hook_events_keep_their_wire_format() {
        let started = EventKind::HookStarted {
            event: HookEvent::Stop,
            command: "make lint".into(),
        };
        assert_eq!(
            serde_json::to_string(&started).unwrap(),
            r#"{"type":"hook_started","event":"Stop","command":"make lint"}"#
        );
        let timed_out = EventKind::HookFinished {
            event: HookEvent::Stop,
            command: "make lint".into(),
            status: HookStatus::TimedOut,
            exit_code: None,
            decision: HookDecision::None,
            elapsed_ms: 60000,
            message: None,
        };
        assert_eq!(
            serde_json::to_string(&timed_out).unwrap(),
            r#"{"type":"hook_finished","event":"Stop","command":"make lint","status":"timed_out","decision":"none","elapsed_ms":60000}"#
        );
        let line =
            serde_json::to_string(&finished(HookStatus::Exited, Some(2), HookDecision::Deny))
                .unwrap();
        assert_eq!(
            line,
            r#"{"type":"hook_finished","event":"PreToolUse","command":"./guard.sh","status":"exited","exit_code":2,"decision":"deny","elapsed_ms":3,"message":"no"}"#
        );
        assert_eq!(
            serde_json::from_str::<EventKind>(&line).unwrap(),
            finished(HookStatus::Exited, Some(2), HookDecision::Deny)
        );
    }
}
