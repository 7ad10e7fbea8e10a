//! The session journal: every session, TUI or `fido exec`, appended to
//! `.fido-state/sessions/<id>.jsonl` as it happens (see
//! [`crate::protocol::journal_record`] for the records). A live session holds an
//! exclusive lock on its file, so another process can tell it is running
//! and can never resume it twice.
//!
//! Everything here blocks (files, locks): call it off the async runtime.
//! The [`Journal`] itself writes on its own thread.

mod bookmark;
mod error;
mod read;
mod writer;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;

pub use bookmark::{Found, find as find_bookmark, name_for as bookmark_name_for};
pub use error::{BookmarkNameError, JournalError, ReplayError};
pub use read::{Bookmark, Replayed, replay, replay_to_bookmark};
pub use writer::Journal;

use crate::protocol::journal_record::{JOURNAL_VERSION, JournalRecord};
use crate::protocol::op::SessionStatus;
use crate::protocol::{Message, UsageTotals};
use crate::workspace::SESSIONS_DIR;

/// The folder of journals (and of the `/suspend` files of earlier
/// versions), in the workspace.
pub fn dir(workspace: &Path) -> PathBuf {
    workspace.join(SESSIONS_DIR)
}

/// What a new journal's header names.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    pub workspace: String,
    pub provider: String,
    pub model: String,
}

/// Which session to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick<'a> {
    /// This id, or a prefix of exactly one id.
    Id(&'a str),
    /// The most recently written session that no process is running.
    Last,
}

/// Creates the journal of a new session and writes its header.
pub fn create(
    workspace: &Path,
    info: &SessionInfo,
    saved_from: Option<String>,
) -> io::Result<Journal> {
    let dir = dir(workspace);
    fs::create_dir_all(&dir)?;
    let (id, file) = create_unique(&dir)?;
    let file = lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| io::Error::other("a new journal is locked by another process"))?;
    let header = header(&id, info, saved_from);
    let mut line = serde_json::to_vec(&header).map_err(io::Error::other)?;
    line.push(b'\n');
    // Durable with the first step's fsync, off the start-up path.
    io::Write::write_all(&mut &*file, &line)?;
    let path = dir.join(format!("{id}.jsonl"));
    Journal::start(id, path, file, Some((0, 0)))
}

/// Opens an existing session to continue it: replays it, drops a torn last
/// line from the file, takes its lock and records that it was resumed.
/// The returned journal already holds all of `Replayed::messages`.
pub fn resume(workspace: &Path, pick: Pick<'_>) -> Result<(Journal, Replayed), JournalError> {
    let path = find(workspace, pick)?;
    let id = id_of(&path);
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .map_err(|source| JournalError::Open {
            session: id.clone(),
            source,
        })?;
    let file = lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| JournalError::InUse {
        session: id.clone(),
    })?;
    let bytes = read_journal(&path, &id)?;
    let replayed = replay(&id, &bytes)?;
    if replayed.valid_len < bytes.len() as u64 {
        file.set_len(replayed.valid_len)
            .map_err(|source| JournalError::DropTornLine {
                session: id.clone(),
                source,
            })?;
    } else if !bytes.ends_with(b"\n") {
        io::Write::write_all(&mut &*file, b"\n").map_err(|source| JournalError::Write {
            session: id.clone(),
            source,
        })?;
    }
    let journal = Journal::start(id, path, file, Some((0, replayed.messages.len())))
        .map_err(JournalError::StartWriter)?;
    Ok((journal, replayed))
}

/// The bytes of the journal of session `id` at `path`.
fn read_journal(path: &Path, id: &str) -> Result<Vec<u8>, JournalError> {
    fs::read(path).map_err(|source| JournalError::Read {
        session: id.to_string(),
        source,
    })
}

/// The messages of a journaled session (for `/recall`), read without
/// taking it over.
pub fn load_messages(
    workspace: &Path,
    pick: Pick<'_>,
) -> Result<(String, Vec<Message>), JournalError> {
    let path = find(workspace, pick)?;
    let id = id_of(&path);
    let bytes = read_journal(&path, &id)?;
    Ok((id.clone(), replay(&id, &bytes)?.messages))
}

/// One line of `fido sessions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub started_at: String,
    /// The first user prompt, on one line, cut short.
    pub first_prompt: String,
    pub turns: u32,
    pub usage: UsageTotals,
    /// `running`, `ended`, `interrupted` (its process died), or
    /// `unreadable`; never `saved`.
    pub status: SessionStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its `/suspend` bookmarks, oldest first (the TUI's `/sessions`
    /// lists them; `fido sessions --json` keeps its shape).
    #[serde(skip)]
    pub bookmarks: Vec<Bookmark>,
}

/// Every journal of the workspace, newest first. A journal that cannot be
/// read is listed as `unreadable` with its error, never hidden.
pub fn list(workspace: &Path) -> io::Result<Vec<SessionSummary>> {
    let mut sessions: Vec<(SystemTime, SessionSummary)> = journals(workspace)?
        .into_iter()
        .map(|(path, modified)| (modified, summarise(&path)))
        .collect();
    sessions.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.id.cmp(&a.1.id)));
    Ok(sessions.into_iter().map(|(_, s)| s).collect())
}

fn summarise(path: &Path) -> SessionSummary {
    let id = id_of(path);
    let running = is_running(path);
    let replayed = match fs::read(path) {
        Ok(bytes) => replay(&id, &bytes).map_err(|e| e.to_string()),
        Err(e) => Err(format!("cannot read it: {e}")),
    };
    match replayed {
        Ok(r) => SessionSummary {
            id,
            started_at: r.started_at,
            first_prompt: first_prompt(&r.messages),
            turns: r.turns,
            usage: r.usage,
            status: match (running, r.ended) {
                (true, _) => SessionStatus::Running,
                (false, true) => SessionStatus::Ended,
                (false, false) => SessionStatus::Interrupted,
            },
            error: None,
            bookmarks: r.bookmarks,
        },
        Err(error) => SessionSummary {
            id,
            started_at: String::new(),
            first_prompt: String::new(),
            turns: 0,
            usage: UsageTotals::default(),
            status: if running {
                SessionStatus::Running
            } else {
                SessionStatus::Unreadable
            },
            error: Some(error),
            bookmarks: Vec::new(),
        },
    }
}

/// The first prompt a person typed (not Fido's own notes), on one line.
pub fn first_prompt(messages: &[Message]) -> String {
    messages
        .iter()
        .find_map(Message::person_prompt)
        .map(|prompt| crate::text::summary(prompt, 60))
        .unwrap_or_default()
}

/// Removes journals not written for `days` days (never a running one).
/// Returns how many went.
pub fn prune(workspace: &Path, days: u32) -> io::Result<usize> {
    let Some(cutoff) =
        SystemTime::now().checked_sub(Duration::from_secs(u64::from(days) * 24 * 3600))
    else {
        return Ok(0);
    };
    let mut removed = 0;
    for (path, modified) in journals(workspace)? {
        if modified < cutoff && !is_running(&path) {
            fs::remove_file(&path)?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The first record of a journal.
fn header(id: &str, info: &SessionInfo, saved_from: Option<String>) -> JournalRecord {
    JournalRecord::Session {
        version: JOURNAL_VERSION,
        id: id.to_string(),
        started_at: now(),
        workspace: info.workspace.clone(),
        provider: info.provider.clone(),
        model: info.model.clone(),
        saved_from,
    }
}

/// The journal file `pick` names.
pub fn find(workspace: &Path, pick: Pick<'_>) -> Result<PathBuf, JournalError> {
    let all = journals(workspace).map_err(JournalError::List)?;
    match pick {
        Pick::Last => all
            .into_iter()
            .filter(|(path, _)| !is_running(path))
            .max_by_key(|(_, modified)| *modified)
            .map(|(path, _)| path)
            .ok_or(JournalError::NoEarlierSession),
        Pick::Id(wanted) => {
            if wanted.is_empty() || !wanted.chars().all(is_id_char) {
                return Err(JournalError::NotAnId(wanted.to_string()));
            }
            let matching: Vec<PathBuf> = all
                .into_iter()
                .map(|(path, _)| path)
                .filter(|path| id_of(path).starts_with(wanted))
                .collect();
            match matching.as_slice() {
                [one] => Ok(one.clone()),
                [] => Err(JournalError::NoSuchSession(wanted.to_string())),
                _ => Err(JournalError::Ambiguous {
                    wanted: wanted.to_string(),
                    count: matching.len(),
                }),
            }
        }
    }
}

/// Whether some process holds the session's lock (it is running).
pub fn is_running(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => lock(file, FlockArg::LockSharedNonblock).is_err(),
        Err(_) => false,
    }
}

fn journals(workspace: &Path) -> io::Result<Vec<(PathBuf, SystemTime)>> {
    let entries = match fs::read_dir(dir(workspace)) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    Ok(entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .filter_map(|path| {
            let modified = fs::metadata(&path).and_then(|m| m.modified()).ok()?;
            Some((path, modified))
        })
        .collect())
}

fn lock(file: File, how: FlockArg) -> Result<Flock<File>, nix::errno::Errno> {
    Flock::lock(file, how).map_err(|(_, errno)| errno)
}

fn create_unique(dir: &Path) -> io::Result<(String, File)> {
    loop {
        let id = new_id();
        match OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(dir.join(format!("{id}.jsonl")))
        {
            Ok(file) => return Ok((id, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
}

/// `20261201T111315-3fa9`: sortable by time, unique enough with the suffix
/// (creation retries on a clash).
fn new_id() -> String {
    let stamp: String = now()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .take(15)
        .collect();
    format!("{stamp}-{:04x}", fastrand::u16(..))
}

fn is_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

fn id_of(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests;
