//! Fido's own state in the workspace: every name under [`STATE_PREFIX`], so
//! that the file tools can neither see nor change it and no state path is
//! ever an undoable edit.

use std::ffi::OsStr;

/// Prefix of Fido's own state files and directories in the workspace.
pub const STATE_PREFIX: &str = ".fido-";

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
