//! A state kept in this process's memory instead of a file, taken through
//! the same lock, read and write as a file (`state_file`): a subagent's
//! own plan, which lives as long as the subagent, and which a read-only
//! subagent (no byte written to any file, `RLIMIT_FSIZE` 0) could not save.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The text the state would have in its file, and who holds its lock.
#[derive(Debug, Default)]
pub(super) struct InMemory {
    text: Mutex<Option<String>>,
    held: Mutex<bool>,
    freed: Condvar,
}

impl InMemory {
    /// Waits for the lock: only this process's threads take it, each for
    /// one read-modify-write.
    pub(super) fn lock(self: &Arc<Self>) -> MemoryLock {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .freed
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *held = true;
        MemoryLock(self.clone())
    }

    pub(super) fn text(&self) -> Option<String> {
        self.text
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the text; `None` forgets it (a state found invalid).
    pub(super) fn set_text(&self, text: Option<String>) {
        *self.text.lock().unwrap_or_else(PoisonError::into_inner) = text;
    }
}

/// The lock of an [`InMemory`] state, released on drop.
pub(super) struct MemoryLock(Arc<InMemory>);

impl Drop for MemoryLock {
    fn drop(&mut self) {
        *self.0.held.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.0.freed.notify_one();
    }
}
