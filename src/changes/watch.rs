//! Keeps the plan panel's change-set states true when a change set moves
//! outside the delegation that made it: `/changes apply` in the TUI, or
//! `fido changes apply` (or discard) in another terminal. The records are
//! read every [`EVERY`]; each one whose merge state changed becomes a
//! `change_set` event for the plan item it serves. The records present at
//! the start only seed what was seen.

use std::path::PathBuf;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::changes::records::{self, Record, Seen};
use crate::protocol::EventKind;
use crate::protocol::event_queue::EventSink;

/// How often the records are read: a few small file reads.
const EVERY: Duration = Duration::from_secs(2);

/// Starts the watch of `workspace`'s change sets, once the records there
/// now are seen; abort the handle to stop.
pub async fn start(workspace: PathBuf, events: EventSink) -> JoinHandle<()> {
    let (_, mut seen) = read(workspace.clone(), Seen::new())
        .await
        .unwrap_or_default();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(EVERY).await;
            let Some((moved, back)) = read(workspace.clone(), seen).await else {
                return;
            };
            seen = back;
            moved
                .into_iter()
                .for_each(|record| announce(&events, record));
        }
    })
}

/// The records that moved since `seen`, off the runtime; `None` when the
/// reading thread panicked.
async fn read(workspace: PathBuf, mut seen: Seen) -> Option<(Vec<Record>, Seen)> {
    tokio::task::spawn_blocking(move || {
        let moved = records::changed(&workspace, &mut seen);
        (moved, seen)
    })
    .await
    .ok()
}

/// A `change_set` event for the plan item `record` serves (none without).
fn announce(events: &EventSink, record: Record) {
    if record.plan_item.is_none() {
        return;
    }
    events.emit(EventKind::ChangeSet {
        id: record.set.id,
        plan_item: record.plan_item,
        state: record.set.merge.into(),
    });
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::changes::{self, Start};
    use crate::protocol::changes::ChangeSetState;
    use crate::protocol::event_queue::{EventReceiver, channel};

    fn git(dir: &Path, args: &[&str]) {
        crate::git::Git::new(dir).run(args).unwrap();
    }

    /// A pending change set for the plan item `i1`, built by the real
    /// worktree code.
    fn pending(root: &Path, id: &str) {
        let start = Start {
            task: "t".into(),
            claim: vec!["a.txt".into()],
            plan_item: Some("i1".into()),
        };
        let worktree = changes::start(root, id, &start).unwrap();
        std::fs::write(worktree.layout.tree().join("a.txt"), "two\n").unwrap();
        changes::finish(root, &worktree, &start, changes::DEFAULT_DIFF_CAP).unwrap();
    }

    async fn next_change_set(events: &mut EventReceiver) -> (String, ChangeSetState) {
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                if let Some(event) = events.recv().await
                    && let EventKind::ChangeSet { id, state, .. } = event.kind
                {
                    return (id, state);
                }
            }
        });
        waited.await.expect("no change_set event")
    }

    /// A change set there at the start is only seen; one discarded later
    /// (as `fido changes discard` in another terminal would) and one made
    /// later each become an event.
    #[tokio::test]
    async fn a_change_set_that_moves_elsewhere_is_announced() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        git(root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        git(root, &["add", "a.txt"]);
        git(root, &["commit", "-q", "-m", "first"]);
        pending(root, "subagent-1");
        let (events, mut receiver) = channel();
        let watch = start(root.to_path_buf(), events).await;
        let workspace = root.to_path_buf();
        tokio::task::spawn_blocking(move || {
            changes::apply::discard(&workspace, "subagent-1").unwrap();
        });
        assert_eq!(
            next_change_set(&mut receiver).await,
            ("subagent-1".into(), ChangeSetState::Discarded)
        );
        let workspace = root.to_path_buf();
        tokio::task::spawn_blocking(move || pending(&workspace, "subagent-2"));
        assert_eq!(
            next_change_set(&mut receiver).await,
            ("subagent-2".into(), ChangeSetState::Pending)
        );
        watch.abort();
        assert!(receiver.try_recv().is_none(), "nothing else was announced");
    }
}
