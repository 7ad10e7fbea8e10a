//! The transcript's rendered lines, kept between frames by the frame (the
//! UI actor owns it; the store only marks what changed).
//!
//! Every entry is measured once per width (its height stays known), but
//! its lines are held only while they are near what is on screen: past
//! [`LINE_BUDGET`] held lines, the entries farthest from the view give
//! theirs up (down to 3/4 of the budget, so this is rare) and are rendered
//! again if scrolled back to. Memory is then the budget, the entries'
//! source text and a few words per entry, however long the session.

use ratatui::text::Line;

use super::super::entry;
use super::super::live::LiveLines;
use crate::ui::rows::Rows;
use crate::ui::state::Store;
use crate::ui::theme;
use crate::ui::wrap::wrap_plain;

static NO_ROWS: Rows = Rows::EMPTY;

/// Lines held at most, apart from the entries on screen (one entry taller
/// than the budget, on screen, is held whole).
pub const LINE_BUDGET: usize = 10_000;

#[derive(Debug, Clone, Default)]
struct Slot {
    /// The entry revision this slot was measured at (0: never).
    revision: u64,
    height: usize,
    /// `None` once given up for the budget.
    lines: Option<Rows>,
}

/// Rendered lines of the transcript at one width.
#[derive(Debug, Clone)]
pub struct LineCache {
    width: usize,
    expanded: bool,
    /// The session's entry number of `slots[0]`.
    base: usize,
    slots: Vec<Slot>,
    /// The transcript revision the slots were last checked against.
    checked: Option<u64>,
    /// Lines of all entries (measured), and of those held.
    entry_lines: usize,
    held: usize,
    budget: usize,
    /// Entry numbers on screen at the last window (kept from eviction).
    on_screen: Option<(usize, usize)>,
    /// The line saying how many entries were dropped, and that count.
    marker: Rows,
    marker_for: usize,
    /// Lines taken from the top (dropped entries) minus lines added there,
    /// since [`LineCache::take_top_shift`].
    top_shift: isize,
    /// The text still streaming in, and the revision it was rendered at.
    live: LiveLines,
    live_revision: Option<u64>,
}

impl Default for LineCache {
    fn default() -> Self {
        LineCache::with_budget(LINE_BUDGET)
    }
}

impl LineCache {
    /// A cache holding at most about `budget` lines off screen.
    pub fn with_budget(budget: usize) -> LineCache {
        LineCache {
            width: 0,
            expanded: false,
            base: 0,
            slots: Vec::new(),
            checked: None,
            entry_lines: 0,
            held: 0,
            budget,
            on_screen: None,
            marker: Rows::new(),
            marker_for: 0,
            top_shift: 0,
            live: LiveLines::default(),
            live_revision: None,
        }
    }

    /// Lines held now (the budget's measure).
    pub fn held_lines(&self) -> usize {
        self.held
    }

    /// Heap bytes of the rows held: the entries' and the streaming text's.
    pub fn held_bytes(&self) -> usize {
        let slots: usize = self
            .slots
            .iter()
            .filter_map(|slot| slot.lines.as_ref())
            .map(Rows::heap_bytes)
            .sum();
        let live: usize = self.live.parts().iter().map(|part| part.heap_bytes()).sum();
        slots + live + self.marker.heap_bytes() + self.slots.capacity() * size_of::<Slot>()
    }

    /// The whole transcript's lines at the width of the last sync.
    pub fn total(&self) -> usize {
        self.marker.len() + self.entry_lines + self.live.len()
    }

    /// Lines taken from the top since the last call (entries dropped from
    /// the front), less lines added there: a view counted from the bottom
    /// does not move for them.
    pub fn take_top_shift(&mut self) -> isize {
        std::mem::take(&mut self.top_shift)
    }

    /// Brings the cache up to date with `store` at `width`: renders what
    /// changed, and only that.
    pub fn sync(&mut self, store: &Store, width: usize) {
        let dropped = store.transcript.dropped();
        if self.width != width || self.expanded != store.expanded || dropped < self.base {
            self.reset(width, store.expanded, dropped);
        }
        self.align_base(dropped);
        self.sync_marker(store);
        if self.checked != Some(store.transcript.revision()) {
            self.sync_entries(store);
            self.checked = Some(store.transcript.revision());
        }
        if self.live_revision != Some(store.live_revision()) {
            self.live.changed();
            self.live_revision = Some(store.live_revision());
        }
        self.live
            .refresh(&store.live, width, store.transcript.is_untouched());
        self.keep_to_budget();
    }

    fn reset(&mut self, width: usize, expanded: bool, base: usize) {
        *self = LineCache {
            width,
            expanded,
            base,
            // The marker goes with the rest (and comes back in its place).
            top_shift: self.top_shift + self.marker.len() as isize,
            ..LineCache::with_budget(self.budget)
        };
    }

    /// Forgets the slots of entries dropped from the front.
    fn align_base(&mut self, dropped: usize) {
        if dropped == self.base {
            return;
        }
        let cut = (dropped - self.base).min(self.slots.len());
        for slot in self.slots.drain(..cut) {
            self.entry_lines -= slot.height;
            self.held -= slot.lines.as_ref().map_or(0, Rows::len);
            self.top_shift += slot.height as isize;
        }
        self.base = dropped;
    }

    fn sync_marker(&mut self, store: &Store) {
        let dropped = store.transcript.dropped();
        if dropped == self.marker_for && (dropped == 0 || !self.marker.is_empty()) {
            return;
        }
        self.top_shift += self.marker.len() as isize;
        self.marker = if dropped == 0 {
            Rows::new()
        } else {
            let text = dropped_note(dropped, store.session.id.as_deref());
            Rows::from(wrap_plain(&text, theme::dim(), self.width, 0).as_slice())
        };
        self.top_shift -= self.marker.len() as isize;
        self.marker_for = dropped;
    }

    /// Renders every entry whose revision changed (or that is new).
    fn sync_entries(&mut self, store: &Store) {
        let entries = &store.transcript;
        // Entries never go but from the front (see `align_base`); this is
        // another store's transcript.
        for slot in self.slots.drain(entries.len().min(self.slots.len())..) {
            self.entry_lines -= slot.height;
            self.held -= slot.lines.as_ref().map_or(0, Rows::len);
        }
        self.slots.resize_with(entries.len(), Slot::default);
        for index in 0..entries.len() {
            let revision = entries.revision_of(index);
            if self.slots[index].revision == revision {
                continue;
            }
            let lines = self.adopted(store, index, revision).unwrap_or_else(|| {
                entry::rows(
                    &entries[index],
                    self.width,
                    self.base + index == 0,
                    store.expanded,
                )
            });
            self.set_lines(index, lines);
            self.slots[index].revision = revision;
            if self.held > self.budget {
                self.keep_to_budget();
            }
        }
    }

    /// The streamed lines, when entry `index` is the message they were
    /// rendered for.
    fn adopted(&mut self, store: &Store, index: usize, revision: u64) -> Option<Rows> {
        let adoption = store.adopted_live()?;
        let matches = adoption.entry == self.base + index
            && adoption.revision == revision
            && self.live_revision == Some(adoption.live_revision);
        if !matches {
            return None;
        }
        self.live_revision = None;
        self.live.take_whole()
    }

    fn set_lines(&mut self, index: usize, lines: Rows) {
        let slot = &mut self.slots[index];
        self.entry_lines = self.entry_lines - slot.height + lines.len();
        self.held = self.held - slot.lines.as_ref().map_or(0, Rows::len) + lines.len();
        slot.height = lines.len();
        slot.lines = Some(lines);
    }

    /// Gives up the lines of the entries farthest from the screen until at
    /// most 3/4 of the budget is held (never those on screen).
    fn keep_to_budget(&mut self) {
        if self.held <= self.budget || self.slots.is_empty() {
            return;
        }
        let target = self.budget / 4 * 3;
        let last = self.slots.len() - 1;
        let (keep_from, keep_to) = match self.on_screen {
            Some((from, to)) => (
                from.saturating_sub(self.base).min(last),
                to.saturating_sub(self.base).min(last),
            ),
            None => (last, last),
        };
        let (mut low, mut high) = (0, last);
        while self.held > target {
            let below = low < keep_from;
            let above = high > keep_to;
            let index = match (below, above) {
                (false, false) => break,
                (true, false) => low,
                (false, true) => high,
                (true, true) if keep_from - low >= high - keep_to => low,
                (true, true) => high,
            };
            if index == low {
                low += 1;
            } else {
                high -= 1;
            }
            if let Some(lines) = self.slots[index].lines.take() {
                self.held -= lines.len();
            }
        }
    }

    /// Lines `from..to` (counted from the top) of the whole transcript;
    /// entries among them whose lines were given up are rendered again.
    pub fn window(&mut self, store: &Store, from: usize, to: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(to.saturating_sub(from));
        copy_part(&self.marker, 0, from, to, &mut out);
        let start = self.marker.len();
        let end = start + self.entry_lines;
        if from < end && to > start {
            let (mut index, mut at) = self.slot_at(from.max(start) - start);
            at += start;
            let first = index;
            while index < self.slots.len() && at < to {
                let lines = self.slot_lines(store, index);
                copy_part(lines, at, from, to, &mut out);
                at += self.slots[index].height;
                index += 1;
            }
            self.on_screen = Some((self.base + first, self.base + index.saturating_sub(1)));
        }
        let mut at = end;
        for part in self.live.parts() {
            copy_part(part, at, from, to, &mut out);
            at += part.len();
        }
        self.keep_to_budget();
        out
    }

    /// The slot holding entry line `line` (counted from the first entry's
    /// first line) and where it starts; scans from the nearer end.
    fn slot_at(&self, line: usize) -> (usize, usize) {
        if line < self.entry_lines / 2 {
            let mut at = 0;
            for (index, slot) in self.slots.iter().enumerate() {
                if at + slot.height > line {
                    return (index, at);
                }
                at += slot.height;
            }
            (self.slots.len(), at)
        } else {
            let mut at = self.entry_lines;
            for (index, slot) in self.slots.iter().enumerate().rev() {
                at -= slot.height;
                if at <= line {
                    return (index, at);
                }
            }
            (0, 0)
        }
    }

    /// The lines of slot `index`, rendered again if they were given up.
    fn slot_lines(&mut self, store: &Store, index: usize) -> &Rows {
        if self.slots[index].lines.is_none() {
            let lines = match store.transcript.get(index) {
                Some(entry) => {
                    entry::rows(entry, self.width, self.base + index == 0, store.expanded)
                }
                None => Rows::new(),
            };
            self.set_lines(index, lines);
        }
        self.slots[index].lines.as_ref().unwrap_or(&NO_ROWS)
    }
}

/// Appends the lines of `part` (which starts at line `at`) that fall in
/// `from..to`.
fn copy_part(part: &Rows, at: usize, from: usize, to: usize, out: &mut Vec<Line<'static>>) {
    let end = at + part.len();
    if end > from && at < to {
        let start = from.saturating_sub(at);
        let stop = (to - at).min(part.len());
        out.extend(part.lines(start, stop));
    }
}

/// The first line of a transcript whose oldest entries were dropped.
fn dropped_note(dropped: usize, session: Option<&str>) -> String {
    let journal = match session {
        Some(id) => format!(" (.fido-state/sessions/{id}.jsonl)"),
        None => String::new(),
    };
    format!("… {dropped} earlier entries not kept in memory; see the session journal{journal}")
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use ratatui::text::Line;

    use super::*;
    use crate::protocol::EventKind;

    /// What `lines` cost as `Line`s with their own spans (how the cache
    /// held them before it held [`Rows`]).
    fn as_lines_bytes(lines: &[Line<'_>]) -> usize {
        lines
            .iter()
            .map(|line| {
                size_of::<Line>()
                    + line.spans.capacity() * size_of::<ratatui::text::Span>()
                    + line.spans.iter().map(|s| s.content.len()).sum::<usize>()
            })
            .sum()
    }

    #[test]
    fn a_streamed_answer_of_short_lines_is_held_in_about_its_own_size() {
        let text: String = (0..200_000)
            .map(|n| format!("{:04}\n", n % 10_000))
            .collect();
        let mut store = Store::new((120, 40));
        let mut cache = LineCache::default();
        store.begin_turn("answer");
        let now = Instant::now();
        for piece in text.as_bytes().chunks(3000) {
            let piece = String::from_utf8_lossy(piece).into_owned();
            store.apply(&EventKind::AssistantDelta { text: piece }, now);
            cache.sync(&store, 118);
            let total = cache.total();
            cache.window(&store, total.saturating_sub(40), total);
        }
        store.apply(&EventKind::AssistantText { text: text.clone() }, now);
        cache.sync(&store, 118);
        let total = cache.total();
        let shown = cache.window(&store, total - 40, total);
        let last = shown.last().map(|l| l.to_string()).unwrap_or_default();
        assert!(last.ends_with("9997 9998 9999"), "{last}");
        let held = cache.held_bytes();
        assert!(
            held < 2 * text.len(),
            "{held} bytes held for {} of text",
            text.len()
        );
        // The same lines as `Line`s cost many times their text.
        let lines = crate::ui::markdown::render(&text, 118);
        assert!(as_lines_bytes(&lines) > 10 * text.len());
    }
}
