//! What `delegate` may start and how long a subagent may run, as the
//! configuration sets them (the `sandbox` and `delegate_*` keys): the
//! supervisor's own settings type, which `config` fills and the composition
//! root hands over in [`DelegationSettings`](super::supervisor::DelegationSettings).

use std::time::Duration;

use crate::sandbox::SandboxRequirement;

/// Most subagents that may run at once, whatever the configuration says.
pub const MAX_DELEGATE_CONCURRENCY: u64 = 16;

/// The limits of `delegate`; [`Default`] holds the configuration's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationLimits {
    /// How strictly a child's sandbox is required (`sandbox`).
    pub sandbox: SandboxRequirement,
    /// A subagent's time limit when the call and its profile name none.
    pub default_timeout: Duration,
    /// The longest time limit a call may ask for.
    pub max_timeout: Duration,
    /// Time a cancelled child has to send its partial result.
    pub grace: Duration,
    /// Model requests one subagent may make.
    pub max_steps: u32,
    /// Subagents running at once (1 to [`MAX_DELEGATE_CONCURRENCY`]); the
    /// rest wait in call order.
    pub concurrency: u32,
    /// Subagents started in one parent turn.
    pub max_per_turn: u32,
    /// Default budget of one subagent, in tokens; `None`: unlimited.
    pub budget_tokens: Option<u64>,
    /// Budget of all subagents of the session together; `None`: unlimited.
    pub session_budget_tokens: Option<u64>,
    /// Bytes of a write subagent's diff its result carries.
    pub diff_bytes: usize,
}

impl Default for DelegationLimits {
    fn default() -> Self {
        DelegationLimits {
            sandbox: SandboxRequirement::Required,
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(600),
            grace: Duration::from_secs(2),
            max_steps: 40,
            concurrency: 4,
            max_per_turn: 16,
            budget_tokens: None,
            session_budget_tokens: None,
            diff_bytes: crate::changes::DEFAULT_DIFF_CAP,
        }
    }
}
