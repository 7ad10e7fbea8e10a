//! The names of Fido's own state in the workspace, all under
//! [`STATE_PREFIX`], so that the file tools can neither see nor change them
//! and no state path is ever an undoable edit.

use std::ffi::OsStr;

/// Prefix of Fido's own state files and directories in the workspace.
pub const STATE_PREFIX: &str = ".fido-";

/// The plan file, in the workspace root, unless config `PLAN_FILE` names
/// another.
pub const DEFAULT_PLAN_FILE: &str = ".fido-plan.json";

/// The state file of the `todo` flavour, in the workspace root.
pub const TODO_FILE: &str = ".fido-todo.json";

/// The directory of Fido's session state, relative to the workspace root.
pub const STATE_DIR: &str = ".fido-state";

/// The undo journal, relative to the workspace root.
pub const UNDO_DIR: &str = ".fido-state/undo";

/// Session journals and older suspended conversations.
pub const SESSIONS_DIR: &str = ".fido-state/sessions";

/// The control sockets (and run records) of the workspace's Fido processes.
pub const RUN_DIR: &str = ".fido-state/run";

/// Where Fido moves a `.git` a sandboxed command made at the top of the
/// workspace (`sandbox::new_repository`).
pub const SET_ASIDE_DIR: &str = ".fido-state/set-aside";

/// The TUI's log files.
pub const LOGS_DIR: &str = ".fido-state/logs";

/// The prompt history of the TUI's input line.
pub const HISTORY_FILE: &str = ".fido-state/history.jsonl";

/// Whether a file name is one of Fido's state entries (`.fido-*`).
pub fn is_state_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(STATE_PREFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_are_those_with_the_prefix() {
        assert!(is_state_name(OsStr::new(".fido-")));
        assert!(is_state_name(OsStr::new(".fido-plan.json")));
        assert!(!is_state_name(OsStr::new(".fido")));
        assert!(!is_state_name(OsStr::new("my.fido-notes")));
        assert!(!is_state_name(OsStr::new(".fidorc")));
    }
}
