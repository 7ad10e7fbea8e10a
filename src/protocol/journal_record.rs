//! The session journal's records (contract:
//! `.fido-state/sessions/<id>.jsonl`): one JSON record per line, appended
//! as the session happens. Replaying the records in order rebuilds the
//! conversation exactly as it was sent. The file itself is
//! `store::journal`'s.

use serde::{Deserialize, Serialize};

use super::{Message, TurnStatus, UsageTotals};

/// The journal format this build writes and reads.
pub const JOURNAL_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum JournalRecord {
    /// The first line of every journal.
    Session {
        version: u32,
        id: String,
        started_at: String,
        workspace: String,
        provider: String,
        model: String,
        /// The session this one was copied from by the `/suspend` of
        /// earlier versions, if any (read, never written any more).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        saved_from: Option<String>,
    },
    /// One message appended to the conversation.
    Message { message: Message },
    /// The whole conversation was replaced (compaction, `/recall`):
    /// `messages[0]` is the system prompt.
    History { messages: Vec<Message> },
    /// A user turn ended.
    Turn {
        turn: u32,
        status: TurnStatus,
        usage: UsageTotals,
    },
    /// The session was continued by another process (`fido resume`).
    Resumed { at: String },
    /// The session's process ended cleanly.
    Ended { at: String },
    /// `/suspend [NAME]`: a named point in the conversation, written after
    /// the messages it marks; `/recall NAME` replays the journal up to it.
    Bookmark { name: String, at: String },
}
