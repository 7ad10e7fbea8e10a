//! Reading a journal back: every record replayed in order. A torn last
//! line (the process died while writing it) is dropped with a note; any
//! other line that does not parse is an error naming it, never a silent cut.

use super::error::ReplayError;
use crate::protocol::journal_record::{JOURNAL_VERSION, JournalRecord};
use crate::protocol::{Message, TurnStatus, UsageTotals};

/// A journal replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    pub id: String,
    pub started_at: String,
    pub model: String,
    /// The conversation as last sent: `messages[0]` is the system prompt.
    pub messages: Vec<Message>,
    /// Completed user turns.
    pub turns: u32,
    pub usage: UsageTotals,
    pub last_status: Option<TurnStatus>,
    /// The last record is `ended` (no process died in the middle).
    pub ended: bool,
    /// Bytes of whole, valid lines: where appending goes on.
    pub valid_len: u64,
    /// Why the tail was dropped, when it was.
    pub note: Option<String>,
    /// The `/suspend` bookmarks replayed, oldest first.
    pub bookmarks: Vec<Bookmark>,
}

/// A named point of a journal (`/suspend NAME`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bookmark {
    pub name: String,
    pub at: String,
}

/// Where a replay ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until<'a> {
    /// The last whole line.
    End,
    /// The bookmark of this name (its record included).
    Bookmark(&'a str),
}

/// Replays `bytes`, the content of the journal `name` (for messages).
pub fn replay(name: &str, bytes: &[u8]) -> Result<Replayed, ReplayError> {
    replay_until(name, bytes, Until::End)
}

/// Replays `bytes` up to the bookmark `bookmark`: the conversation as it
/// was when it was set. `Ok(None)`: the journal has no such bookmark.
pub fn replay_to_bookmark(
    name: &str,
    bytes: &[u8],
    bookmark: &str,
) -> Result<Option<Replayed>, ReplayError> {
    let replayed = replay_until(name, bytes, Until::Bookmark(bookmark))?;
    let reached = replayed
        .bookmarks
        .last()
        .is_some_and(|b| b.name == bookmark);
    Ok(reached.then_some(replayed))
}

fn replay_until(name: &str, bytes: &[u8], until: Until<'_>) -> Result<Replayed, ReplayError> {
    let mut replayed: Option<Replayed> = None;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    while offset < bytes.len() {
        line_no += 1;
        let end = bytes[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| offset + i);
        let line = &bytes[offset..end.unwrap_or(bytes.len())];
        let next = end.map_or(bytes.len(), |e| e + 1);
        match serde_json::from_slice::<JournalRecord>(line) {
            Ok(record) => apply(&mut replayed, record, name, line_no)?,
            Err(_) if end.is_none() => {
                let state = replayed.as_mut().ok_or_else(|| empty(name))?;
                state.note = Some(format!(
                    "the journal of session {name} ended in a torn line {line_no} (the process died while writing it); it was dropped"
                ));
                break;
            }
            Err(_) if line.iter().all(u8::is_ascii_whitespace) => {}
            Err(source) => {
                return Err(ReplayError::Corrupt {
                    session: name.to_string(),
                    line: line_no,
                    source,
                });
            }
        }
        offset = next;
        if let Some(state) = replayed.as_mut() {
            state.valid_len = offset as u64;
            if reached(state, until) {
                break;
            }
        }
    }
    let mut replayed = replayed.ok_or_else(|| empty(name))?;
    if replayed.messages.is_empty() {
        return Err(ReplayError::NoConversation {
            session: name.to_string(),
        });
    }
    if !matches!(replayed.messages.first(), Some(Message::System { .. })) {
        return Err(ReplayError::NoSystemPrompt {
            session: name.to_string(),
        });
    }
    // An unterminated but valid last line: appending starts on a new line.
    if until == Until::End
        && !bytes.ends_with(b"\n")
        && replayed.note.is_none()
        && !bytes.is_empty()
    {
        replayed.valid_len = bytes.len() as u64;
    }
    Ok(replayed)
}

/// Whether the record just replayed is the bookmark the replay stops at.
fn reached(state: &Replayed, until: Until<'_>) -> bool {
    match until {
        Until::End => false,
        Until::Bookmark(wanted) => state.bookmarks.last().is_some_and(|b| b.name == wanted),
    }
}

fn empty(name: &str) -> ReplayError {
    ReplayError::NoHeader {
        session: name.to_string(),
    }
}

fn apply(
    state: &mut Option<Replayed>,
    record: JournalRecord,
    name: &str,
    line_no: usize,
) -> Result<(), ReplayError> {
    let Some(replayed) = state.as_mut() else {
        return start(state, record, name, line_no);
    };
    match record {
        JournalRecord::Session { .. } => {
            return Err(ReplayError::SecondHeader {
                session: name.to_string(),
                line: line_no,
            });
        }
        JournalRecord::Message { message } => replayed.messages.push(message),
        JournalRecord::History { messages } => replayed.messages = messages,
        JournalRecord::Turn {
            turn,
            status,
            usage,
        } => {
            replayed.turns = replayed.turns.max(turn);
            replayed.usage.merge(usage);
            replayed.last_status = Some(status);
        }
        JournalRecord::Resumed { .. } => replayed.ended = false,
        JournalRecord::Ended { .. } => replayed.ended = true,
        JournalRecord::Bookmark { name, at } => replayed.bookmarks.push(Bookmark { name, at }),
    }
    Ok(())
}

fn start(
    state: &mut Option<Replayed>,
    record: JournalRecord,
    name: &str,
    line_no: usize,
) -> Result<(), ReplayError> {
    let JournalRecord::Session {
        version,
        id,
        started_at,
        model,
        ..
    } = record
    else {
        return Err(ReplayError::HeaderNotFirst {
            session: name.to_string(),
            line: line_no,
        });
    };
    if version > JOURNAL_VERSION {
        return Err(ReplayError::NewerVersion {
            session: name.to_string(),
            version,
            supported: JOURNAL_VERSION,
        });
    }
    *state = Some(Replayed {
        id,
        started_at,
        model,
        messages: Vec::new(),
        turns: 0,
        usage: UsageTotals::default(),
        last_status: None,
        ended: false,
        valid_len: 0,
        note: None,
        bookmarks: Vec::new(),
    });
    Ok(())
}
