//! The local `/plan` commands, behind a trait so that the TUI and
//! `fido plan show|clear` share one implementation (the CLI provides it).
//! They run without a model turn.

/// What `/plan clear` produced: the new plan for the panel, and one line for
/// the transcript.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCleared {
    /// Said to the user, e.g. `Plan cleared (version 4).`
    pub message: String,
    /// The plan tool the state belongs to (`update_plan`, `todo`).
    pub flavour: String,
    /// The complete normalised state after clearing: the same object a
    /// `plan_updated` event carries.
    pub plan: serde_json::Value,
}

/// `/plan` and `/plan clear`. Errors are one sentence for the user.
pub trait PlanCommands: Send + Sync {
    /// The current plan as text, exactly as `fido plan show` prints it.
    fn show(&self) -> Result<String, String>;
    /// Starts a new, empty plan, as `fido plan clear` does.
    fn clear(&self) -> Result<PlanCleared, String>;
}
