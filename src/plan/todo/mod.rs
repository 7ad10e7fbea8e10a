//! The `todo` flavour: the rpiv-todo tool contract
//! (README, the `todo` flavour) to the letter, plan items from an
//! approved Markdown plan, and the settle reminder.
//!
//! Layout: [`state`] (tasks, counter, plan ref, transition table),
//! [`params`] (the shape check of a call), [`engine`] (the pure reducer,
//! `ops` batches included), [`format`] (content strings and the `details`
//! envelope), [`sanitize`] (display text), [`markdown`] + [`approve`] (plan
//! items), [`file`] (`.fido-todo.json`, lock + atomic write) and
//! [`reminder`] (restore after a restart, settle reminder, deferral
//! notices).
//!
//! Invariants: a rejected call or batch never changes the state (the
//! reducer validates before it mutates and returns its input on error; the
//! store writes only a changed state); ids are never reused; the
//! `blockedBy` graph never holds a cycle; every task text shown to the
//! model or a person is sanitised, while the state keeps the raw strings.
//!
//! Where the reference is silent, Fido does what its author evidently
//! intended:
//! - **Argument shapes.** The reference's schema validation becomes an
//!   in-band error before anything runs (`Error: id must be a task id (an
//!   integer)`, `status must be one of …`, `ops[2]: metadata must be an
//!   object`), with the full `details` envelope and the state unchanged. A
//!   field sent as `null` counts as absent; ids may come as integer-valued
//!   numbers or decimal strings; unknown fields are ignored (but next to
//!   `ops` any field is "combined with a top-level … field").
//! - **`details.action`** of a call rejected before it has a usable action
//!   (no action, an unknown one, or any `ops` call) is `batch`, as the
//!   reference does for a call without an action.
//! - **Batch text.** `Applied N ops`, then one `[i] …` block per op, each
//!   exactly the text the op alone would return (a `list` block carries its
//!   own plan header), mutations described at their own point in the
//!   batch, reads from the final state; then the plan header when a plan is
//!   active. `N` counts every op, reads included.
//! - **Plan id.** A plan approved from a file is identified by a hash of
//!   its text ([`approve::plan_id`]): approving the same text again is the
//!   reference's no-op re-announcement.
//! - **Reconciliation** on re-approval (see [`approve`]): only closed items
//!   (`completed`, `deferred`) carry status, evidence and reason, and only
//!   when group, subject and plan text match exactly one old and one new
//!   item. New plan items get new ids and come first, agent todos after.
//! - **Restore.** A restart restores the state as the result of an
//!   internal `{"action":"list"}` call (its exact text), placed right after
//!   the system message; nothing is restored before a state was first
//!   saved, and an emptied list is restored as `No tasks`.
//! - **Settle reminder.** The reference's wording, prefixed with
//!   `[Fido: plan check]` (the marker Fido's turn loop and compaction use
//!   for internal messages), sent as the one extra user message of the
//!   prompt, like the `update_plan` flavour.
//! - **UI feed.** Every successful call publishes `plan_updated` with
//!   flavour `todo` and the call's `details` envelope as `plan` (reads
//!   included: the same state again). The envelope carries the rows, the
//!   plan ref (header), evidence and reasons; the UI computes the header
//!   counts with [`state::TodoState::plan_progress`] and sanitises text
//!   with [`sanitize::display`]. Deferral notices ("Plan item deferred: #N
//!   subject -- reason", net per call) go to the log; Fido has no separate
//!   notification channel.
//! - **`fido plan clear`** with this flavour runs the `clear` action (plan
//!   items stay).

pub mod approve;
pub mod engine;
pub mod file;
pub mod format;
pub mod markdown;
pub mod params;
pub mod reminder;
pub mod sanitize;
pub mod state;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::protocol::plan::TodoSnapshot;

pub use engine::{CallResult, TodoChange, apply_call};
pub use file::TodoStore;
pub use state::{PlanRef, Task, TaskStatus, TodoState};

/// The tool's name.
pub const TOOL_NAME: &str = "todo";

/// What one call returned, as the tool hands it to the model and the UI.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// False for an in-band error (`content` starts with `Error: `).
    pub ok: bool,
    /// `content[0].text`.
    pub content: String,
    /// The `details` envelope.
    pub details: TodoSnapshot,
    /// Net plan deferrals of this call, for the person.
    pub notices: Vec<String>,
    /// A corrupt state file that was moved aside before the call.
    pub warning: Option<String>,
}

/// Approves the plan `markdown` (`fido plan approve`, and later the TUI's
/// `/plan approve`): seeds or replaces the plan items under the store's
/// lock. Returns the approval and the state as saved.
pub fn approve_plan(
    store: &TodoStore,
    markdown: &str,
) -> Result<(approve::Approval, file::Loaded), crate::store::state_file::StateFileError> {
    let plan_id = approve::plan_id(markdown);
    store.update(|state| {
        let approval = approve::apply_plan_approval(state, &plan_id, markdown);
        (approval.state.clone(), approval)
    })
}

/// Runs one call against the saved state and saves the result (only when
/// it changed), all under the store's lock.
pub fn run_call(
    store: &TodoStore,
    args: &Value,
) -> Result<CallOutput, crate::store::state_file::StateFileError> {
    let (output, loaded) = store.update(|current| {
        let result = apply_call(current, args);
        let output = CallOutput {
            ok: result.error().is_none(),
            content: format::content(&result.op, &result.state),
            details: format::details(&result, args),
            notices: reminder::deferral_notices(current, &result.state),
            warning: None,
        };
        (result.state, output)
    })?;
    Ok(CallOutput {
        warning: loaded.warning,
        ..output
    })
}
