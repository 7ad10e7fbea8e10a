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
//! actor turns into an op for the engine (`SubmitPrompt`, `Interrupt`,
//! `ClearPlan`, `Approve`…) or handles itself (`/help`, `/quit`). The UI
//! holds only the two ends of the front-end protocol
//! ([`crate::protocol::op`]): ops out, events in; answers and the engine's
//! questions arrive as events that carry an id.
//!
//! Invariants: the UI never blocks the agent (events reach it through a
//! bounded queue that never blocks the sender, and every op is queued
//! without waiting); the terminal is always
//! restored (raw mode off, alternate screen left, cursor shown) on quit, on
//! error and on panic ([`terminal`]); the plan panel shows every item of the
//! same normalised object the model got, never a count or a summary; the
//! subagent bar shows only sanitised lifecycle metadata.

pub mod actor;
pub mod approval;
pub mod diff;
pub mod frame;
pub mod input;
pub mod keys;
pub mod layout;
pub mod markdown;
pub mod marks;
pub mod plan_view;
pub mod replies;
pub mod rows;
pub mod state;
pub mod status_view;
pub mod terminal;
pub mod theme;
pub mod widgets;
pub mod wrap;

#[cfg(test)]
mod tests;

pub use actor::{UiActor, UiArguments, UiExit, UiMessage};
pub use keys::Action;
pub use state::Store;
pub use terminal::{UiError, UiSetup, run};
