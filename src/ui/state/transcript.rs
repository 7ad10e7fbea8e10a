//! The transcript's entries, and what a renderer needs to keep its lines
//! up to date without the store knowing about rendering: every change to
//! an entry gives it a new revision, and entries dropped from the front
//! are counted.
//!
//! Memory stays bounded: past [`Transcript::cap_bytes`] of source text
//! the oldest entries are dropped (down to 7/8 of the cap, so drops are
//! rare); the screen says how many, and the session journal still has
//! them. Rendered lines are not kept here at all.

use std::ops::Deref;

use super::views::{Entry, ToolDetail};
use crate::protocol::ToolFacts;
use crate::ui::diff::DiffLine;

/// Source text the transcript keeps by default: far more than a day's
/// session, far less than a machine's memory.
pub const DEFAULT_CAP_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct Transcript {
    entries: Vec<Entry>,
    /// One per entry: its revision, new at each change.
    revisions: Vec<u64>,
    /// The latest revision given out (0: none yet).
    revision: u64,
    /// Entries dropped from the front: `entries[i]` is the session's
    /// entry number `dropped + i`.
    dropped: usize,
    /// Source bytes of the entries kept.
    bytes: usize,
    /// Past this many source bytes the oldest entries are dropped.
    pub cap_bytes: usize,
    /// What every frame asks of all the entries, kept as they change.
    tally: Tally,
}

/// Counts over the entries kept, so a frame need not scan them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    /// Tool calls showing a diff or output (Ctrl+O folds them).
    with_detail: usize,
    /// Tool calls without a result yet.
    unfinished: usize,
}

impl Tally {
    fn of(entry: &Entry) -> Tally {
        match entry {
            Entry::Tool { result, detail, .. } => Tally {
                with_detail: usize::from(detail.is_some()),
                unfinished: usize::from(result.is_none()),
            },
            _ => Tally::default(),
        }
    }

    fn add(&mut self, entry: &Entry) {
        let more = Tally::of(entry);
        self.with_detail += more.with_detail;
        self.unfinished += more.unfinished;
    }

    fn remove(&mut self, entry: &Entry) {
        let less = Tally::of(entry);
        self.with_detail -= less.with_detail;
        self.unfinished -= less.unfinished;
    }
}

impl Default for Transcript {
    fn default() -> Self {
        Transcript {
            entries: Vec::new(),
            revisions: Vec::new(),
            revision: 0,
            dropped: 0,
            bytes: 0,
            cap_bytes: DEFAULT_CAP_BYTES,
            tally: Tally::default(),
        }
    }
}

/// Read access to the entries as a slice (`transcript.last()`, indexing).
impl Deref for Transcript {
    type Target = [Entry];

    fn deref(&self) -> &[Entry] {
        &self.entries
    }
}

impl Transcript {
    /// Appends an entry; returns its revision.
    pub fn push(&mut self, entry: Entry) -> u64 {
        self.bytes += source_bytes(&entry);
        self.tally.add(&entry);
        self.entries.push(entry);
        let revision = self.next_revision();
        self.revisions.push(revision);
        self.keep_under_cap();
        revision
    }

    /// Changes entry `index` in place (its lines are rendered again).
    pub fn update<R>(&mut self, index: usize, change: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let entry = self.entries.get_mut(index)?;
        let before = source_bytes(entry);
        self.tally.remove(entry);
        let result = change(entry);
        self.tally.add(entry);
        let after = source_bytes(entry);
        self.bytes = self.bytes - before + after;
        self.revision += 1;
        self.revisions[index] = self.revision;
        self.keep_under_cap();
        Some(result)
    }

    /// What the result of call `id` says it did, once it arrived.
    pub fn facts_of(&self, id: &str) -> Option<&ToolFacts> {
        self.entries.iter().rev().find_map(|entry| match entry {
            Entry::Tool {
                id: call,
                result: Some(result),
                ..
            } if call == id => result.facts.as_deref(),
            _ => None,
        })
    }

    fn next_revision(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }

    /// The revision of entry `index` (a renderer compares it with the
    /// one it rendered).
    pub fn revision_of(&self, index: usize) -> u64 {
        self.revisions.get(index).copied().unwrap_or(0)
    }

    /// The latest revision of any entry: unchanged means no entry changed.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// How many of the oldest entries were dropped to stay under the cap.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Source bytes of the entries kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Some tool call shows a diff or output (which Ctrl+O folds).
    pub fn has_tool_detail(&self) -> bool {
        self.tally.with_detail > 0
    }

    /// The name of the newest tool call without a result.
    pub fn unfinished_tool(&self) -> Option<&str> {
        if self.tally.unfinished == 0 {
            return None;
        }
        self.entries.iter().rev().find_map(|entry| match entry {
            Entry::Tool {
                name, result: None, ..
            } => Some(name.as_str()),
            _ => None,
        })
    }

    /// No entry yet, and none dropped.
    pub fn is_untouched(&self) -> bool {
        self.entries.is_empty() && self.dropped == 0
    }

    /// Drops the oldest entries while over the cap, down to 7/8 of it,
    /// always keeping the newest.
    fn keep_under_cap(&mut self) {
        if self.bytes <= self.cap_bytes {
            return;
        }
        let target = self.cap_bytes / 8 * 7;
        let mut cut = 0;
        let mut bytes = self.bytes;
        while bytes > target && cut + 1 < self.entries.len() {
            bytes -= source_bytes(&self.entries[cut]);
            self.tally.remove(&self.entries[cut]);
            cut += 1;
        }
        self.entries.drain(..cut);
        self.revisions.drain(..cut);
        self.bytes = bytes;
        self.dropped += cut;
        // A drop changes what the renderer shows first.
        self.revision += 1;
    }
}

/// What an entry costs in memory, roughly: its text and its own size.
pub fn source_bytes(entry: &Entry) -> usize {
    let text = match entry {
        Entry::User(text)
        | Entry::Assistant(text)
        | Entry::Plan(text)
        | Entry::Info(text)
        | Entry::Error(text)
        | Entry::Local(text) => text.len(),
        Entry::Tool {
            id,
            name,
            summary,
            result,
            detail,
        } => {
            let detail = match detail {
                Some(ToolDetail::Diff(lines)) => diff_bytes(lines),
                Some(ToolDetail::Output { text, .. }) => text.len(),
                None => 0,
            };
            id.len()
                + name.len()
                + summary.len()
                + result.as_ref().map_or(0, |r| r.summary.len())
                + detail
        }
        Entry::Diff(lines) => diff_bytes(lines),
    };
    text + std::mem::size_of::<Entry>()
}

fn diff_bytes(lines: &[DiffLine]) -> usize {
    lines
        .iter()
        .map(|line| match line {
            DiffLine::File(text)
            | DiffLine::Hunk(text)
            | DiffLine::Context(text)
            | DiffLine::Added(text)
            | DiffLine::Removed(text)
            | DiffLine::Note(text) => text.len() + std::mem::size_of::<DiffLine>(),
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::super::views::ToolResultView;
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_entries_go_and_are_counted() {
        let mut transcript = Transcript {
            cap_bytes: 10_000,
            ..Transcript::default()
        };
        for n in 0..1000 {
            transcript.push(Entry::Info(format!("note {n:04} {}", "x".repeat(80))));
            assert!(transcript.bytes() <= 10_000, "{}", transcript.bytes());
        }
        assert!(transcript.dropped() > 900, "{}", transcript.dropped());
        assert_eq!(transcript.dropped() + transcript.len(), 1000);
        let Some(Entry::Info(last)) = transcript.last() else {
            panic!("the newest entry is kept");
        };
        assert!(last.starts_with("note 0999"));
        let Some(Entry::Info(first)) = transcript.first() else {
            panic!("entries are kept");
        };
        let first_number = format!("note {:04}", transcript.dropped());
        assert!(first.starts_with(&first_number), "{first}");
    }

    fn tool(id: &str) -> Entry {
        Entry::Tool {
            id: id.into(),
            name: format!("tool-{id}"),
            summary: String::new(),
            result: None,
            detail: None,
        }
    }

    #[test]
    fn the_tool_counts_follow_every_change_and_drop() {
        let mut transcript = Transcript {
            cap_bytes: 2_000,
            ..Transcript::default()
        };
        transcript.push(tool("a"));
        transcript.push(tool("b"));
        assert_eq!(transcript.unfinished_tool(), Some("tool-b"));
        assert!(!transcript.has_tool_detail());
        transcript.update(1, |entry| {
            if let Entry::Tool { result, detail, .. } = entry {
                *result = Some(ToolResultView {
                    ok: true,
                    summary: String::new(),
                    facts: None,
                });
                *detail = Some(ToolDetail::Output {
                    exit: Some(crate::protocol::tool_facts::CommandExit::Code { code: 0 }),
                    text: "ok".into(),
                });
            }
        });
        assert_eq!(transcript.unfinished_tool(), Some("tool-a"));
        assert!(transcript.has_tool_detail());
        // Enough notes to drop both tool calls.
        for n in 0..40 {
            transcript.push(Entry::Info(format!("note {n}")));
        }
        assert!(transcript.dropped() >= 2, "{}", transcript.dropped());
        assert_eq!(transcript.unfinished_tool(), None);
        assert!(!transcript.has_tool_detail());
    }

    #[test]
    fn every_change_gives_the_entry_a_new_revision() {
        let mut transcript = Transcript::default();
        let first = transcript.push(Entry::Info("a".into()));
        let second = transcript.push(Entry::Info("b".into()));
        assert!(second > first);
        assert_eq!(transcript.revision_of(0), first);
        transcript.update(0, |entry| *entry = Entry::Info("a, changed".into()));
        assert!(transcript.revision_of(0) > second);
        assert_eq!(transcript.revision(), transcript.revision_of(0));
        assert_eq!(transcript.revision_of(1), second);
    }
}
