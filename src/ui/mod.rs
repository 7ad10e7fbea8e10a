//! The interactive full-screen terminal UI (`fido` with no subcommand).
//!
//! Theory of operation: the [`UiActor`](actor::UiActor) owns a [`Store`]
//! (everything the screen shows: session, turn status, transcript, plan,
//! subagent bar, input line) and the terminal. Agent events, terminal input
//! and turn outcomes arrive as [`UiMessage`]s; the store changes, and a
//! frame is scheduled. Bursts of messages coalesce into one frame per
//! [`actor::FRAME_DELAY`] (a key's frame comes sooner); nothing redraws on
//! a timer except a once-per-second tick while a clock is shown. Each
//! [frame] lays the screen out once from the widgets' own measures and
//! draws them from `&Store`; a key press becomes an [`Action`] that the
//! actor turns into a command for the agent (`SubmitPrompt`, `Interrupt`)
//! or a local command (`/plan`, `/plan clear`, `/quit`).
//!
//! Invariants: the UI never blocks the agent (events reach it through an
//! unbounded channel and every command is a `cast`); the terminal is always
//! restored (raw mode off, alternate screen left, cursor shown) on quit, on
//! error and on panic ([`terminal`]); the plan panel shows every item of the
//! same normalised object the model got, never a count or a summary; the
//! subagent bar shows only sanitised lifecycle metadata.

pub mod actor;
pub mod approval;
pub mod commands;
pub mod diff;
pub mod frame;
pub mod git_diff;
pub mod history;
pub mod input;
pub mod keys;
pub mod layout;
pub mod markdown;
pub mod plan_view;
pub mod status_view;
pub mod store;
pub mod terminal;
pub mod theme;
pub mod widgets;
pub mod wrap;

#[cfg(test)]
mod tests;

pub use actor::{UiActor, UiArguments, UiExit, UiMessage};
pub use commands::{
    ApprovalPrompt, LocalCommands, PlanCleared, Question, StatusInfo, UiUser, UserRequest,
};
pub use history::PromptHistory;
pub use keys::Action;
pub use store::Store;
pub use terminal::{UiError, UiSetup, run};
