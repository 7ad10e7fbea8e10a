//! The wire words of user hooks in the event stream (`hook_started`,
//! `hook_finished`): how a hook ended and what it decided.

use serde::{Deserialize, Serialize};

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
