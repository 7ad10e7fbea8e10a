//! Persistence: what Fido keeps in the workspace. Atomic writes, the
//! locked JSON state files (plan, todo), and under `.fido-state/` the
//! session journals (what `fido resume` continues and `/recall` reads), the
//! undo log, the prompt history and the conversations earlier versions
//! saved with `/suspend`.
//!
//! Everything here lives in `.fido-*` paths, which the file tools can
//! neither see nor change (see [`crate::workspace`]).

pub mod atomic;
mod in_memory;
pub mod journal;
pub mod prompt_history;
pub mod saved;
pub mod state_file;
pub mod undo;
