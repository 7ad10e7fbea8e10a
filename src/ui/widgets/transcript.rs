//! The transcript: every entry's lines (see [`entry`](super::entry)), then
//! the assistant text still streaming in. Follows the tail unless scrolled
//! up; then the last row says how much is below, or that new output came.
//!
//! Rendering is cached ([`LineCache`]): an entry is rendered once per
//! width and again only when it changes, and streaming text is split at
//! its last finished block (a blank line outside a code fence), so each
//! frame renders only the changing tail. A frame costs the visible lines,
//! not the transcript's length.

use std::cell::RefMut;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::entry;
use super::wrap::wrap_plain;
use crate::ui::markdown;
use crate::ui::store::Store;
use crate::ui::theme;

/// Columns left free on each side.
const MARGIN: u16 = 1;

const WELCOME: &str = "Type a prompt and press Enter (Alt+Enter or Ctrl+J for a new line). The plan panel shows the agent's plan. /help lists every key and command. Ctrl+C interrupts a turn; twice when idle quits.";

/// Rendered lines of the transcript at one width.
#[derive(Debug, Clone, Default)]
pub struct LineCache {
    width: usize,
    expanded: bool,
    entries: Vec<Option<Vec<Line<'static>>>>,
    /// Streaming text: bytes of it rendered into `live_done` (whole blocks).
    live_done_bytes: usize,
    live_done: Vec<Line<'static>>,
    /// The blank line between the entries and the streaming text.
    live_gap: Vec<Line<'static>>,
    /// The unfinished tail, rendered; `None` after the text changed.
    live_tail: Option<Vec<Line<'static>>>,
}

impl LineCache {
    pub fn invalidate(&mut self, index: usize) {
        if let Some(slot) = self.entries.get_mut(index) {
            *slot = None;
        }
    }

    pub fn invalidate_all(&mut self) {
        self.entries.clear();
        self.live_changed();
        self.live_done_bytes = 0;
        self.live_done.clear();
    }

    pub fn live_changed(&mut self) {
        self.live_tail = None;
    }

    /// The streamed text became entry `index`: its rendered lines become
    /// that entry's (when they are up to date), and streaming starts over.
    pub fn adopt_live(&mut self, index: usize) {
        if let Some(tail) = self.live_tail.take() {
            let mut lines = std::mem::take(&mut self.live_gap);
            lines.append(&mut self.live_done);
            lines.extend(tail);
            if self.entries.len() <= index {
                self.entries.resize(index + 1, None);
            }
            self.entries[index] = Some(lines);
        }
        self.live_done_bytes = 0;
        self.live_done.clear();
        self.live_gap.clear();
    }

    /// Brings the cache up to date with `store` at `width`.
    fn refresh(&mut self, store: &Store, width: usize) {
        if self.width != width || self.expanded != store.expanded {
            self.invalidate_all();
            self.width = width;
            self.expanded = store.expanded;
        }
        self.entries.resize(store.transcript.len(), None);
        for (index, slot) in self.entries.iter_mut().enumerate() {
            if slot.is_none() {
                let entry = &store.transcript[index];
                *slot = Some(entry::lines(entry, width, index == 0, store.expanded));
            }
        }
        self.refresh_live(&store.live, width, store.transcript.is_empty());
    }

    fn refresh_live(&mut self, text: &str, width: usize, first: bool) {
        if text.len() < self.live_done_bytes || text.is_empty() {
            self.live_done_bytes = 0;
            self.live_done.clear();
            self.live_tail = None;
        }
        self.live_gap = if text.is_empty() || first {
            Vec::new()
        } else {
            vec![Line::default()]
        };
        if text.is_empty() || self.live_tail.is_some() {
            return;
        }
        if let Some(split) = finished_blocks(text, self.live_done_bytes) {
            let block = &text[self.live_done_bytes..split];
            if !block.trim().is_empty() {
                if !self.live_done.is_empty() {
                    self.live_done.push(Line::default());
                }
                self.live_done.extend(markdown::render(block, width));
            }
            self.live_done_bytes = split;
        }
        let tail = &text[self.live_done_bytes..];
        let mut lines = Vec::new();
        if !tail.trim().is_empty() {
            if !self.live_done.is_empty() {
                lines.push(Line::default());
            }
            lines.extend(markdown::render(tail, width));
        }
        self.live_tail = Some(lines);
    }

    fn total(&self) -> usize {
        let entries: usize = self.entries.iter().flatten().map(Vec::len).sum();
        entries
            + self.live_gap.len()
            + self.live_done.len()
            + self.live_tail.as_ref().map_or(0, Vec::len)
    }

    /// Lines `from..to` (counted from the top) of the whole transcript.
    fn window(&self, from: usize, to: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(to.saturating_sub(from));
        let mut at = 0;
        let parts = self
            .entries
            .iter()
            .flatten()
            .chain([&self.live_gap, &self.live_done])
            .chain(self.live_tail.as_ref());
        for part in parts {
            let end = at + part.len();
            if end > from && at < to {
                let start = from.saturating_sub(at);
                let stop = (to - at).min(part.len());
                out.extend(part[start..stop].iter().cloned());
            }
            at = end;
            if at >= to {
                break;
            }
        }
        out
    }
}

/// The end of the last finished block after `done` in streaming text: the
/// last blank line, unless a code fence is still open before it.
fn finished_blocks(text: &str, done: usize) -> Option<usize> {
    let split = text[done..].rfind("\n\n").map(|at| done + at)?;
    let fences = text[done..split]
        .lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with("```") || line.starts_with("~~~")
        })
        .count();
    (split > done && fences % 2 == 0).then_some(split)
}

fn inner_width(area_width: u16) -> usize {
    usize::from(area_width.saturating_sub(2 * MARGIN)).max(1)
}

fn cache(store: &Store, area_width: u16) -> RefMut<'_, LineCache> {
    let mut cache = store.cache.borrow_mut();
    cache.refresh(store, inner_width(area_width));
    cache
}

/// How many lines the transcript has at this area width.
pub fn total_lines(store: &Store, area_width: u16) -> usize {
    if store.transcript.is_empty() && store.live.is_empty() {
        return wrap_plain(WELCOME, theme::dim(), inner_width(area_width), 0).len();
    }
    cache(store, area_width).total()
}

/// How far the transcript in `area` can scroll up (lines from the bottom).
/// When scrolled, the last row is the "more below" line, hence the `+ 1`.
pub fn max_scroll(store: &Store, area: Rect) -> usize {
    let total = total_lines(store, area.width);
    let height = usize::from(area.height);
    if total <= height {
        0
    } else {
        total - height + 1
    }
}

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let inner = Rect::new(
        area.x + MARGIN,
        area.y,
        area.width.saturating_sub(2 * MARGIN),
        area.height,
    );
    if store.transcript.is_empty() && store.live.is_empty() {
        let welcome = wrap_plain(WELCOME, theme::dim(), inner_width(area.width), 0);
        frame.render_widget(Paragraph::new(welcome), inner);
        return;
    }
    let cache = cache(store, area.width);
    let total = cache.total();
    let height = usize::from(area.height);
    if total <= height {
        frame.render_widget(Paragraph::new(cache.window(0, total)), inner);
        return;
    }
    let scroll = store.transcript_scroll.min(total - height + 1);
    let end = total - scroll;
    if scroll == 0 {
        frame.render_widget(Paragraph::new(cache.window(end - height, end)), inner);
        return;
    }
    // Scrolled up: the last row says what is below.
    let shown = height.saturating_sub(1);
    let mut visible = cache.window(end - shown, end);
    let text = if store.new_output {
        format!("↓ new output · {scroll} lines below · End follows")
    } else {
        format!("↓ {scroll} more lines below · PgDn, End")
    };
    visible.push(Line::styled(text, theme::marker()));
    frame.render_widget(Paragraph::new(visible), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_text_splits_only_outside_code_fences() {
        assert_eq!(finished_blocks("a\n\nb", 0), Some(1));
        assert_eq!(finished_blocks("```\ncode\n\nmore", 0), None);
        assert_eq!(finished_blocks("```\ncode\n```\n\nafter", 0), Some(12));
        assert_eq!(finished_blocks("a\n\nb", 1), None, "nothing new after done");
    }
}
