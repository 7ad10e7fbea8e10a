//! Persistence of the `todo` state in `.fido-todo.json` (workspace root),
//! with the plan file's rules: every change happens under an exclusive
//! advisory lock on a sidecar lock file, re-reads the file (another Fido
//! process may have written it) and replaces it atomically through
//! [`write_atomic`] (temp file, fsync, rename, fsync of the directory).
//!
//! Only a call that changed the state writes: reads, no-op updates and
//! batches, and rejected calls leave the file (and its mtime) alone. A file
//! that cannot be read as a valid state (bad JSON, bad shapes, duplicate
//! ids, an invalid counter, dangling dependencies) is never overwritten
//! silently: it is moved aside to `<file>.corrupt-<timestamp>` and reported,
//! and the state starts empty.

use std::path::Path;

use super::state::TodoState;
use crate::store::state_file::{Contents, StateFile, StateLock};
use crate::workspace::TODO_FILE;

/// Errors of the todo file (lock, read, write).
use crate::store::state_file::StateFileError;

/// The result of reading the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub state: TodoState,
    /// Whether a state was ever saved (the file exists and was valid).
    pub saved: bool,
    /// Set when the file was corrupt and has been moved aside.
    pub warning: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TodoStore {
    file: StateFile,
}

impl TodoStore {
    /// The store of the workspace at `root`.
    pub fn in_workspace(root: &Path) -> Self {
        TodoStore {
            file: StateFile::in_workspace(root, root.join(TODO_FILE), "todo list"),
        }
    }

    /// A list kept in this process's memory: a subagent's own.
    pub fn in_memory() -> Self {
        TodoStore {
            file: StateFile::in_memory("the subagent's todo list", "todo list"),
        }
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Reads the state (empty when there is no file).
    pub fn load(&self) -> Result<Loaded, StateFileError> {
        let lock = self.file.lock()?;
        self.read(&lock)
    }

    /// Runs `change` on the current state under the lock and saves the
    /// state it returns when that differs from the current one.
    pub fn update<R>(
        &self,
        change: impl FnOnce(&TodoState) -> (TodoState, R),
    ) -> Result<(R, Loaded), StateFileError> {
        let lock = self.file.lock()?;
        let current = self.read(&lock)?;
        let (next, result) = change(&current.state);
        if next == current.state {
            return Ok((result, current));
        }
        self.file.write(&lock, &next)?;
        Ok((
            result,
            Loaded {
                state: next,
                saved: true,
                warning: current.warning,
            },
        ))
    }

    /// A file that parses but breaks the state's invariants (duplicate
    /// ids, a bad counter, dangling dependencies) is set aside like bad JSON.
    fn read(&self, lock: &StateLock) -> Result<Loaded, StateFileError> {
        Ok(
            match self.file.read::<TodoState, _>(lock, TodoState::check)? {
                Contents::Missing => Loaded {
                    state: TodoState::empty(),
                    saved: false,
                    warning: None,
                },
                Contents::Valid(state) => Loaded {
                    state,
                    saved: true,
                    warning: None,
                },
                Contents::SetAside { warning } => Loaded {
                    state: TodoState::empty(),
                    saved: false,
                    warning: Some(warning),
                },
            },
        )
    }
}
