//! The durable plan: model, validation, persistence and restore.
//!
//! One normalised [`PlanState`] feeds everything: the `update_plan` tool
//! result the model reads, the `plan_updated` event the UI draws, the state
//! file and `fido plan show --json`. The plan never enters the system prompt.

pub mod model;
pub mod restore;
pub mod store;

pub use model::{PlanItem, PlanState, Status};
pub use store::{PlanStore, PlanStoreError};
