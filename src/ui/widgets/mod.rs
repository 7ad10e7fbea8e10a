//! The widgets of the full-screen UI. Each draws from `&Store` into the
//! area the [frame](super::frame) gives it and measures itself (its height
//! for a width); none holds a channel. The only state is a memo of
//! rendered lines (the transcript's, the plan panel's), which the frame
//! owns and passes in.

pub mod approval;
pub mod entry;
pub mod header;
pub mod input_line;
pub mod live;
pub mod plan_panel;
pub mod queued;
pub mod status_line;
pub mod subagent_bar;
pub mod transcript;

pub use super::theme::{CHROME, SUBAGENT_ACCENT, SUBAGENT_TEXT, bold, dim};
