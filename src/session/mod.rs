//! Workspace session state under `.fido-state/`: the undo journal (and, as
//! they land, suspended conversations and logs).
//!
//! Everything here lives in `.fido-*` paths, which the file tools can
//! neither see nor change (see `tools::path`).

pub mod atomic;
pub mod saved;
pub mod state_file;
pub mod undo;

/// The directory of Fido's session state, relative to the workspace root.
pub const STATE_DIR: &str = ".fido-state";
