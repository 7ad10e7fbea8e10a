//! `/suspend [NAME]` bookmarks: named points in a session's journal, and
//! finding one again for `/recall NAME`. Everything here reads files: call
//! it off the async runtime.

use std::fs;
use std::path::Path;

use super::error::{BookmarkNameError, JournalError};
use super::read::{Bookmark, replay_to_bookmark};
use super::{id_of, journals, read_journal};
use crate::protocol::Message;
use crate::protocol::journal_record::JournalRecord;

/// Longest bookmark name: it is typed back in `/recall NAME`.
const MAX_NAME: usize = 40;

/// Words of the generated names (`amber-otter`): short, distinct, easy to
/// type back.
const ADJECTIVES: [&str; 16] = [
    "amber", "brisk", "calm", "deft", "eager", "fair", "glad", "hazel", "ivory", "jolly", "keen",
    "lucid", "mellow", "noble", "olive", "proud",
];
const NOUNS: [&str; 16] = [
    "otter", "heron", "maple", "cedar", "falcon", "badger", "willow", "lynx", "raven", "birch",
    "marten", "finch", "aspen", "bison", "crane", "tern",
];

/// A bookmark found for `/recall NAME`.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The session whose journal holds it.
    pub session: String,
    /// The conversation as it was at the bookmark.
    pub messages: Vec<Message>,
}

/// Why `name` cannot name a bookmark, if it cannot.
pub fn check_name(name: &str) -> Result<(), BookmarkNameError> {
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(BookmarkNameError::Length {
            name: name.to_string(),
            max: MAX_NAME,
        });
    }
    if !name.chars().all(is_name_char) {
        return Err(BookmarkNameError::Characters(name.to_string()));
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The name the next bookmark of the journal at `path` gets: `requested`
/// once checked and free in that session, or a generated one.
pub fn name_for(path: &Path, requested: Option<&str>) -> Result<String, JournalError> {
    let taken = bookmarks_of(path)?;
    let is_taken = |name: &str| taken.iter().any(|b| b.name == name);
    match requested {
        Some(name) => {
            check_name(name)?;
            if is_taken(name) {
                return Err(JournalError::BookmarkTaken(name.to_string()));
            }
            Ok(name.to_string())
        }
        None => Ok(generated(is_taken)),
    }
}

/// A readable name no bookmark of the session has: two words, with a
/// number once every pair is taken.
fn generated(is_taken: impl Fn(&str) -> bool) -> String {
    let start = fastrand::usize(..ADJECTIVES.len() * NOUNS.len());
    let pairs = (0..ADJECTIVES.len() * NOUNS.len()).map(|i| {
        let pick = (start + i) % (ADJECTIVES.len() * NOUNS.len());
        format!(
            "{}-{}",
            ADJECTIVES[pick / NOUNS.len()],
            NOUNS[pick % NOUNS.len()]
        )
    });
    let numbered = (2u32..).map(|n| format!("mark-{n}"));
    pairs
        .chain(numbered)
        .find(|name| !is_taken(name))
        .unwrap_or_else(|| "mark".into())
}

/// The bookmarks of the journal at `path`, oldest first. Only its
/// bookmark records matter here: a session that has no message yet (or
/// a torn last line) can still be bookmarked.
fn bookmarks_of(path: &Path) -> Result<Vec<Bookmark>, JournalError> {
    let bytes = read_journal(path, &id_of(path))?;
    Ok(bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let Ok(JournalRecord::Bookmark { name, at }) = serde_json::from_slice(line) else {
                return None;
            };
            Some(Bookmark { name, at })
        })
        .collect())
}

/// The bookmark `name` in the workspace's journals, newest session first:
/// the conversation replayed up to it. `Ok(None)`: no journal has one.
/// A journal that cannot be read is skipped (`/sessions` shows why).
pub fn find(workspace: &Path, name: &str) -> Result<Option<Found>, JournalError> {
    if check_name(name).is_err() {
        return Ok(None);
    }
    let mut all = journals(workspace).map_err(JournalError::List)?;
    all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    let marker = marker(name)?;
    for (path, _) in all {
        let Ok(bytes) = fs::read(&path) else {
            continue;
        };
        // Most journals hold no such bookmark: only those with its exact
        // record text are replayed.
        if !contains(&bytes, &marker) {
            continue;
        }
        let session = id_of(&path);
        if let Ok(Some(replayed)) = replay_to_bookmark(&session, &bytes, name) {
            return Ok(Some(Found {
                session,
                messages: replayed.messages,
            }));
        }
    }
    Ok(None)
}

/// The start of the bookmark record `name`, exactly as the writer puts it.
fn marker(name: &str) -> Result<Vec<u8>, JournalError> {
    let record = JournalRecord::Bookmark {
        name: name.to_string(),
        at: String::new(),
    };
    let mut text = serde_json::to_vec(&record).map_err(JournalError::BookmarkRecord)?;
    // Up to the `at` field, whose value differs.
    let cut = text.len().saturating_sub(br#","at":""}"#.len());
    text.truncate(cut);
    Ok(text)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
#[path = "bookmark_tests.rs"]
mod tests;
