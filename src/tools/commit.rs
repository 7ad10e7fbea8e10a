//! A call's commit point: where a file change becomes certain. A cancel
//! that comes before it stops the call and nothing is changed; one that
//! comes after waits for the change, whose result is the call's. So a
//! cancelled call never reports "cancelled" for a change it made, and a
//! change is never cut in half (its undo entry, then its atomic write).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio_util::sync::CancellationToken;

use super::ToolOutput;

const OPEN: u8 = 0;
const CANCELLED: u8 = 1;
const COMMITTED: u8 = 2;

/// Whether a call reached its commit point or was cancelled first: the
/// first of the two wins for good. Clones share it (the blocking work
/// holds one, the agent's wait another).
#[derive(Debug, Clone, Default)]
pub struct CommitPoint(Arc<AtomicU8>);

impl CommitPoint {
    /// The call is about to change something: `false` when a cancel came
    /// first, and then it must change nothing.
    pub fn commit(&self) -> bool {
        self.settle(COMMITTED) == COMMITTED
    }

    /// The user cancelled: `true` when the call had not committed, and
    /// then it never will.
    pub fn cancel(&self) -> bool {
        self.settle(CANCELLED) == CANCELLED
    }

    /// Moves an open commit point to `to`; the state it is in afterwards.
    fn settle(&self, to: u8) -> u8 {
        match self
            .0
            .compare_exchange(OPEN, to, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => to,
            Err(now) => now,
        }
    }
}

/// A file change of `tool` that the user cancelled before its commit
/// point: nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool} was cancelled by the user before it changed anything; nothing was changed")]
pub struct CancelledBeforeCommit {
    pub tool: &'static str,
}

/// Runs `invocation` to its end, or to a cancel: a cancel before the call
/// committed drops it (whatever it started is killed with it) and its
/// result is `cancelled`; a cancel after waits for the committed change,
/// whose result is the call's.
pub async fn until_cancelled(
    invocation: impl Future<Output = ToolOutput>,
    commit_point: &CommitPoint,
    cancel: &CancellationToken,
) -> ToolOutput {
    tokio::pin!(invocation);
    tokio::select! {
        output = &mut invocation => output,
        _ = cancel.cancelled() => {
            if commit_point.cancel() {
                return ToolOutput::error("cancelled by the user");
            }
            invocation.await
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_first_of_commit_and_cancel_wins_for_good() {
        let commit_point = CommitPoint::default();
        assert!(commit_point.commit());
        assert!(!commit_point.cancel());
        assert!(commit_point.commit(), "committed stays committed");
        let commit_point = CommitPoint::default();
        assert!(commit_point.cancel());
        assert!(!commit_point.clone().commit(), "a clone sees the cancel");
        assert!(commit_point.cancel());
    }

    /// A call that never committed is dropped at the cancel; one that
    /// committed finishes, and its own result is the answer.
    #[tokio::test(start_paused = true)]
    async fn a_cancel_drops_an_open_call_and_waits_for_a_committed_one() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let open = CommitPoint::default();
        let forever = std::future::pending::<ToolOutput>();
        let output = until_cancelled(forever, &open, &cancel).await;
        assert_eq!(output.content, "Error: cancelled by the user");

        let commit_point = CommitPoint::default();
        let working = commit_point.clone();
        let change = async move {
            assert!(working.commit());
            tokio::time::sleep(Duration::from_secs(1)).await;
            ToolOutput::ok("Edited a.rs")
        };
        let cancel = CancellationToken::new();
        let output = until_cancelled(change, &commit_point, &cancel);
        let cancelling = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            cancel.cancel();
        };
        let (output, ()) = tokio::join!(output, cancelling);
        assert!(output.ok, "{}", output.content);
        assert_eq!(output.content, "Edited a.rs");
    }

    /// Every file tool cancelled before its commit point changes nothing,
    /// journals nothing and says so; the same calls, not cancelled, do
    /// change the workspace (so the refusals are the commit point's).
    #[tokio::test]
    async fn a_file_tool_cancelled_before_its_commit_changes_nothing() {
        use crate::tools::testing::{call_committing, env};
        use crate::tools::{Tool, TypedTool, mkdir, patch, rm, rmdir};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        let env = env(dir.path());
        let edit = serde_json::json!({"path": "a.txt", "edits": [{"old_text": "alpha", "new_text": "beta"}]});
        let calls: [(&dyn Tool, serde_json::Value, &'static str); 5] = [
            (&patch::Patch, edit, patch::Patch::NAME),
            (
                &patch::Patch,
                serde_json::json!({"path": "new.txt", "content": "x"}),
                patch::Patch::NAME,
            ),
            (
                &mkdir::Mkdir,
                serde_json::json!({"path": "made"}),
                mkdir::Mkdir::NAME,
            ),
            (&rm::Rm, serde_json::json!({"path": "a.txt"}), rm::Rm::NAME),
            (
                &rmdir::Rmdir,
                serde_json::json!({"path": "empty"}),
                rmdir::Rmdir::NAME,
            ),
        ];
        let cancel = CancellationToken::new();
        for (tool, args, name) in &calls {
            let commit_point = CommitPoint::default();
            assert!(commit_point.cancel());
            let output = call_committing(*tool, &env, args.clone(), (&cancel, &commit_point)).await;
            assert!(!output.ok, "{name}");
            let cancelled = CancelledBeforeCommit { tool: name };
            assert_eq!(output.content, format!("Error: {cancelled}"));
        }
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
            "alpha\n"
        );
        assert!(!dir.path().join("new.txt").exists() && !dir.path().join("made").exists());
        assert!(dir.path().join("empty").is_dir());
        assert!(env.undo.entries().unwrap().is_empty(), "nothing journalled");
        for (tool, args, name) in calls {
            let output =
                call_committing(tool, &env, args, (&cancel, &CommitPoint::default())).await;
            assert!(output.ok, "{name}: {}", output.content);
        }
        assert!(!dir.path().join("a.txt").exists() && dir.path().join("made").is_dir());
    }
}
