//! What the file tools share: the owned part of the environment their
//! blocking work needs, the hop to the blocking pool, and the sentences
//! for places that are not regular files.

use std::io;

use super::commit::{CancelledBeforeCommit, CommitPoint};
use super::{Call, ToolOutput};
use crate::store::undo::UndoLog;
use crate::workspace::Workspace;
use crate::workspace::beneath::{Kind, odd_file_message, odd_kind};

/// The workspace, the undo log and the call's commit point, owned, so the
/// file work can run on the blocking pool (clones of the log share its
/// lock).
#[derive(Clone)]
pub(crate) struct FileEnv {
    pub workspace: Workspace,
    pub undo: UndoLog,
    commit_point: CommitPoint,
}

impl FileEnv {
    pub fn of(call: &Call<'_>) -> FileEnv {
        FileEnv {
            workspace: call.env.workspace.clone(),
            undo: call.env.undo.clone(),
            commit_point: call.commit_point.clone(),
        }
    }

    /// The change of `tool` is about to be journalled and made: `Err`
    /// when the user cancelled first, and then nothing is.
    pub fn commit(&self, tool: &'static str) -> Result<(), CancelledBeforeCommit> {
        match self.commit_point.commit() {
            true => Ok(()),
            false => Err(CancelledBeforeCommit { tool }),
        }
    }
}

/// Runs the blocking `work` of `tool` on the blocking pool, never on a
/// runtime worker (a slow disk or a huge tree would stall every task).
pub(crate) async fn off_runtime<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ToolOutput> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolOutput::error(format!("{tool} failed: {err}")))
}

/// The refusal for an entry that is no regular file or folder (a FIFO, a
/// socket, a device), else `None`.
pub(crate) fn refuse_odd(shown: &str, kind: Kind) -> Option<ToolOutput> {
    kind.odd_name()
        .map(|what| ToolOutput::error(odd_file_message(shown, what)))
}

/// The answer to a failed open for reading: the odd-file refusal when
/// that is why, else `cannot read` with the error.
pub(crate) fn open_failed(shown: &str, err: &io::Error) -> ToolOutput {
    odd_kind(err)
        .and_then(|kind| refuse_odd(shown, kind))
        .unwrap_or_else(|| ToolOutput::error(format!("cannot read `{shown}`: {err}")))
}
