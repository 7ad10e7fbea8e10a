//! The durable plan: model, validation, persistence and restore.
//!
//! One normalised [`PlanState`] feeds everything: the `update_plan` tool
//! result the model reads, the `plan_updated` event the UI draws, the state
//! file and `fido plan show --json`. The plan never enters the system prompt.

pub mod model;
pub mod restore;
pub mod store;
pub mod todo;

pub use model::{PlanItem, PlanState, Status};

/// Which plan tool a session advertises (exactly one, so the catalog stays
/// stable for the whole session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanFlavour {
    /// `update_plan`: atomic replacement, full normalised state.
    UpdatePlan,
    /// `todo`: the rpiv-todo contract (see [`todo`]).
    Todo,
}

impl PlanFlavour {
    pub fn tool_name(self) -> &'static str {
        match self {
            PlanFlavour::UpdatePlan => "update_plan",
            PlanFlavour::Todo => todo::TOOL_NAME,
        }
    }

    /// The flavour whose tool is named `name`.
    pub fn from_tool_name(name: &str) -> Option<PlanFlavour> {
        [PlanFlavour::UpdatePlan, PlanFlavour::Todo]
            .into_iter()
            .find(|flavour| flavour.tool_name() == name)
    }
}
pub use store::{PlanStore, PlanStoreError};
