//! The durable plan: model, validation, persistence and restore.
//!
//! One normalised [`PlanState`] feeds everything: the `update_plan` tool
//! result the model reads, the `plan_updated` event the UI draws, the state
//! file and `fido plan show --json`. The plan never enters the system prompt.

pub mod file;
pub mod model;
pub mod restore;
pub mod todo;

pub use model::{PlanItem, PlanState, Status};

pub use crate::protocol::ipc::PlanFlavour;
pub use crate::protocol::plan::PlanSnapshot;
pub use file::PlanStore;

#[cfg(test)]
mod tests {
    #[test]
    fn the_todo_flavour_names_the_todo_tool() {
        assert_eq!(super::PlanFlavour::Todo.tool_name(), super::todo::TOOL_NAME);
    }
}
