//! The sandbox a session's commands run in now: one [`CommandSandbox`],
//! replaced whole when the person switches the session's mode
//! (`Op::SwitchSafety`). A command takes the current one when it starts
//! and keeps it to its end, so a switch never changes a running command.

use std::sync::{Arc, Mutex, PoisonError};

use super::CommandSandbox;

#[derive(Debug)]
pub struct SandboxSlot(Mutex<Arc<CommandSandbox>>);

impl SandboxSlot {
    pub fn new(sandbox: CommandSandbox) -> SandboxSlot {
        SandboxSlot::from(Arc::new(sandbox))
    }

    /// The sandbox the next command starts in.
    pub fn current(&self) -> Arc<CommandSandbox> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Puts `sandbox` in for the next commands; the one it replaces (whose
    /// `TMPDIR` goes with its last reference). Call it off the runtime's
    /// workers: dropping that reference may remove a folder.
    pub fn replace(&self, sandbox: CommandSandbox) -> Arc<CommandSandbox> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *slot, Arc::new(sandbox))
    }
}

impl From<Arc<CommandSandbox>> for SandboxSlot {
    fn from(sandbox: Arc<CommandSandbox>) -> SandboxSlot {
        SandboxSlot(Mutex::new(sandbox))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SandboxMode;

    #[test]
    fn a_replaced_sandbox_serves_the_next_command_and_the_running_one_keeps_its_own() {
        let slot = SandboxSlot::new(CommandSandbox::unconfined());
        let running = slot.current();
        let scratch = tempfile::tempdir().unwrap();
        let shell = CommandSandbox::subagent_shell(scratch.path().to_path_buf());
        let replaced = slot.replace(shell);
        assert!(Arc::ptr_eq(&running, &replaced));
        assert_eq!(running.mode(), SandboxMode::DangerFullAccess);
        assert_eq!(slot.current().mode(), SandboxMode::ReadOnly);
    }
}
