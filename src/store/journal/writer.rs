//! Appending to a journal: one writer thread per session owns the file (and
//! its exclusive lock, which tells other processes the session is live).
//! The async side only serialises records and waits for the thread's
//! acknowledgement, so no write or fsync ever runs on a runtime worker.
//!
//! The acknowledgement comes once the bytes are written: from then on a
//! `kill -9` of Fido loses nothing of them (they are in the kernel). The
//! fsync that makes them survive a power loss follows on the thread right
//! after, at every step boundary, without holding up the turn.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::Flock;
use tokio::sync::{Mutex, mpsc, oneshot};
use tracing::warn;

use crate::protocol::journal_record::JournalRecord;
use crate::protocol::{Message, TurnStatus, UsageTotals};

/// Batches waiting for the writer thread; past this the session waits
/// (back-pressure), it never buffers without bound.
const QUEUE: usize = 16;

/// An open journal, appended to at every step boundary.
pub struct Journal {
    id: String,
    path: PathBuf,
    sender: mpsc::Sender<Batch>,
    cursor: Mutex<Cursor>,
    /// A write failed: warned once, the session goes on without a journal
    /// guarantee rather than failing the user's turn.
    failed: AtomicBool,
}

/// How much of the conversation the journal already holds.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    generation: u64,
    len: usize,
}

/// A cursor that matches no conversation: the next record is a full history.
const UNKNOWN: Cursor = Cursor {
    generation: u64::MAX,
    len: 0,
};

struct Batch {
    bytes: Vec<u8>,
    /// A step boundary: fsync after writing.
    sync: bool,
    /// The session is ending: close the file (and release its lock) before
    /// acknowledging.
    last: bool,
    done: oneshot::Sender<io::Result<()>>,
}

impl Journal {
    /// Starts the writer thread on an opened, locked journal file whose
    /// content already matches `(generation, len)` of the conversation
    /// (`None`: nothing of it is written yet).
    pub(super) fn start(
        id: String,
        path: PathBuf,
        file: Flock<File>,
        written: Option<(u64, usize)>,
    ) -> io::Result<Journal> {
        let (sender, receiver) = mpsc::channel(QUEUE);
        std::thread::Builder::new()
            .name("fido-journal".into())
            .spawn(move || write_loop(file, receiver))?;
        let cursor = written.map_or(UNKNOWN, |(generation, len)| Cursor { generation, len });
        Ok(Journal {
            id,
            path,
            sender,
            cursor: Mutex::new(cursor),
            failed: AtomicBool::new(false),
        })
    }

    /// The session id (what `fido resume` takes).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends what the conversation gained since the last call (or its
    /// whole history when it was replaced) and waits until it is on disk.
    pub async fn record(&self, generation: u64, messages: &[Message]) {
        self.step(Some((generation, messages)), None, true).await;
    }

    /// Like [`Journal::record`], without the fsync: for records that the
    /// next step boundary makes durable anyway (the calls about to run).
    pub async fn record_unsynced(&self, generation: u64, messages: &[Message]) {
        self.step(Some((generation, messages)), None, false).await;
    }

    /// Like [`Journal::record`], then the end of a user turn.
    pub async fn turn_ended(
        &self,
        generation: u64,
        messages: &[Message],
        turn: u32,
        status: TurnStatus,
        usage: UsageTotals,
    ) {
        let ended = JournalRecord::Turn {
            turn,
            status,
            usage,
        };
        self.step(Some((generation, messages)), Some(ended), true)
            .await;
    }

    /// Records a plain event (`resumed`).
    pub async fn note(&self, record: JournalRecord) {
        self.step(None, Some(record), true).await;
    }

    /// `/suspend`: brings the journal up to the conversation, then marks
    /// that point with the bookmark `name`, in one batch on disk (fsynced)
    /// before this returns. Unlike a step, a failure is the caller's to
    /// report: the person asked for this bookmark.
    pub async fn bookmark(
        &self,
        generation: u64,
        messages: &[Message],
        name: &str,
    ) -> io::Result<()> {
        let bookmark = JournalRecord::Bookmark {
            name: name.to_string(),
            at: now(),
        };
        self.write(Some((generation, messages)), Some(bookmark), true)
            .await
    }

    /// Records that the session ended cleanly and closes the file: when
    /// this returns, the lock is released and nothing more is written.
    pub async fn close(&self) {
        let ended = JournalRecord::Ended { at: now() };
        let closed = match self.enqueue(&[ended], true, true).await {
            Ok(acknowledged) => acknowledged.await.unwrap_or_else(|_| Err(gone())),
            Err(err) => Err(err),
        };
        if let Err(err) = closed {
            warn!(path = %self.path.display(), error = %err, "cannot close the session journal");
        }
    }

    /// [`Journal::write`] for the session's own steps: a failure is warned
    /// once and the session goes on.
    async fn step(
        &self,
        conversation: Option<(u64, &[Message])>,
        tail: Option<JournalRecord>,
        sync: bool,
    ) {
        if let Err(err) = self.write(conversation, tail, sync).await
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            warn!(path = %self.path.display(), error = %err, "cannot write the session journal; a crash now would lose this session's latest steps");
        }
    }

    /// Brings the journal up to `conversation` (when given), then appends
    /// `tail`, and waits until the bytes are written. The batch is queued
    /// while the cursor is held, so two writers (a step, a bookmark) never
    /// land in another order than their cursors say.
    async fn write(
        &self,
        conversation: Option<(u64, &[Message])>,
        tail: Option<JournalRecord>,
        sync: bool,
    ) -> io::Result<()> {
        let acknowledged = {
            let mut cursor = self.cursor.lock().await;
            let mut records = match conversation {
                Some((generation, messages)) => delta(&mut cursor, generation, messages),
                None => Vec::new(),
            };
            records.extend(tail);
            if records.is_empty() {
                return Ok(());
            }
            let queued = self.enqueue(&records, sync, false).await;
            if queued.is_err() {
                *cursor = UNKNOWN;
            }
            queued?
        };
        let written = acknowledged.await.unwrap_or_else(|_| Err(gone()));
        if written.is_err() {
            // The next write carries the whole history again, so one failed
            // write never leaves a gap that a resume would miss.
            *self.cursor.lock().await = UNKNOWN;
        }
        written
    }

    /// Hands a batch to the writer thread; the receiver gets its result.
    async fn enqueue(
        &self,
        records: &[JournalRecord],
        sync: bool,
        last: bool,
    ) -> io::Result<oneshot::Receiver<io::Result<()>>> {
        let mut bytes = Vec::new();
        for record in records {
            serde_json::to_writer(&mut bytes, record).map_err(io::Error::other)?;
            bytes.push(b'\n');
        }
        let (done, acknowledged) = oneshot::channel();
        let batch = Batch {
            bytes,
            sync,
            last,
            done,
        };
        self.sender.send(batch).await.map_err(|_| gone())?;
        Ok(acknowledged)
    }
}

/// The records that bring a journal at `cursor` up to the conversation.
fn delta(cursor: &mut Cursor, generation: u64, messages: &[Message]) -> Vec<JournalRecord> {
    let records = if cursor.generation == generation && cursor.len <= messages.len() {
        messages[cursor.len..]
            .iter()
            .map(|message| JournalRecord::Message {
                message: message.clone(),
            })
            .collect()
    } else {
        vec![JournalRecord::History {
            messages: messages.to_vec(),
        }]
    };
    *cursor = Cursor {
        generation,
        len: messages.len(),
    };
    records
}

fn gone() -> io::Error {
    io::Error::other("the journal writer has stopped")
}

fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The writer thread: each batch is written whole and acknowledged, then
/// fsynced when it ends a step. Ends after the last batch (its lock is
/// released before the acknowledgement), or when the journal is dropped.
fn write_loop(file: Flock<File>, mut receiver: mpsc::Receiver<Batch>) {
    let mut sync_failed = false;
    while let Some(batch) = receiver.blocking_recv() {
        let written = (&*file).write_all(&batch.bytes);
        let ok = written.is_ok();
        if batch.last {
            let _ = file.sync_data();
            drop(file);
            let _ = batch.done.send(written);
            return;
        }
        let _ = batch.done.send(written);
        if ok
            && batch.sync
            && let Err(err) = file.sync_data()
            && !std::mem::replace(&mut sync_failed, true)
        {
            warn!(error = %err, "cannot fsync the session journal; a power loss could lose its latest steps");
        }
    }
}
