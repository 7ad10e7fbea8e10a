//! Why a journal could not be found, opened, replayed or bookmarked: one
//! sentence each for the person (`--resume`, `/recall`, `/suspend`).

use std::io;

/// Why the bytes of a journal do not replay to a session.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the journal of session {session} has no session header")]
    NoHeader { session: String },
    #[error("the journal of session {session} does not start with a session header (line {line})")]
    HeaderNotFirst { session: String, line: usize },
    #[error("the journal of session {session} has a second session header at line {line}")]
    SecondHeader { session: String, line: usize },
    #[error(
        "the journal of session {session} has format version {version}; this Fido reads up to {supported}"
    )]
    NewerVersion {
        session: String,
        version: u32,
        supported: u32,
    },
    #[error(
        "the journal of session {session} is corrupt at line {line}: {source}; it was not loaded (repair or remove that line)"
    )]
    Corrupt {
        session: String,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("the journal of session {session} holds no conversation")]
    NoConversation { session: String },
    #[error("the journal of session {session} does not start with a system prompt")]
    NoSystemPrompt { session: String },
}

/// Why a session or a bookmark could not be found, resumed or named.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot list the sessions: {0}")]
    List(#[source] io::Error),
    #[error("there is no earlier session in this workspace to resume")]
    NoEarlierSession,
    #[error("{0:?} is not a session id")]
    NotAnId(String),
    #[error("no session {0} in this workspace (`fido sessions` lists them)")]
    NoSuchSession(String),
    #[error("{wanted} matches {count} sessions; give more of the id")]
    Ambiguous { wanted: String, count: usize },
    #[error("cannot open the journal of session {session}: {source}")]
    Open {
        session: String,
        #[source]
        source: io::Error,
    },
    #[error("session {session} is in use by another Fido process; end that one first")]
    InUse { session: String },
    #[error("cannot read the journal of session {session}: {source}")]
    Read {
        session: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot drop the torn line of session {session}: {source}")]
    DropTornLine {
        session: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot write to the journal of session {session}: {source}")]
    Write {
        session: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the journal writer: {0}")]
    StartWriter(#[source] io::Error),
    #[error(transparent)]
    Replay(#[from] ReplayError),
    #[error(transparent)]
    BookmarkName(#[from] BookmarkNameError),
    #[error("this session already has a bookmark named {0}; choose another name")]
    BookmarkTaken(String),
    /// The bookmark record to look for cannot be encoded.
    #[error(transparent)]
    BookmarkRecord(serde_json::Error),
}

/// Why a name cannot name a bookmark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookmarkNameError {
    #[error("a bookmark name has 1 to {max} characters; {name:?} does not")]
    Length { name: String, max: usize },
    #[error("a bookmark name is letters, digits, '-', '_' and '.'; {0:?} is not")]
    Characters(String),
}
