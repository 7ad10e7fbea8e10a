//! The transcript: every entry's lines (see [`entry`](super::entry)), then
//! the assistant text still streaming in. Follows the tail unless scrolled
//! up; then the last row says how much is below, or that new output came.
//!
//! Rendering is cached ([`LineCache`]): an entry is rendered once per
//! width and again only when it changes, and streaming text renders only
//! its changing tail ([`LiveLines`]). A frame costs the visible lines, not
//! the transcript's length.

use std::cell::RefMut;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::entry;
use super::live::LiveLines;
use crate::ui::store::Store;
use crate::ui::theme;
use crate::ui::wrap::wrap_plain;

/// Columns left free on each side.
const MARGIN: u16 = 1;

const WELCOME: &str = "Type a prompt and press Enter (Alt+Enter or Ctrl+J for a new line). The plan panel shows the agent's plan. /help lists every key and command. Ctrl+C interrupts a turn; twice when idle quits.";

/// Rendered lines of the transcript at one width.
#[derive(Debug, Clone, Default)]
pub struct LineCache {
    width: usize,
    expanded: bool,
    entries: Vec<Option<Vec<Line<'static>>>>,
    /// The text still streaming in.
    live: LiveLines,
}

impl LineCache {
    pub fn invalidate(&mut self, index: usize) {
        if let Some(slot) = self.entries.get_mut(index) {
            *slot = None;
        }
    }

    pub fn invalidate_all(&mut self) {
        self.entries.clear();
        self.live.reset();
    }

    pub fn live_changed(&mut self) {
        self.live.changed();
    }

    /// The streamed text became entry `index`: its rendered lines become
    /// that entry's (when they are what a whole render gives).
    pub fn adopt_live(&mut self, index: usize) {
        if let Some(lines) = self.live.take_whole() {
            if self.entries.len() <= index {
                self.entries.resize(index + 1, None);
            }
            self.entries[index] = Some(lines);
        }
        self.live.reset();
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
        self.live
            .refresh(&store.live, width, store.transcript.is_empty());
    }

    fn total(&self) -> usize {
        let entries: usize = self.entries.iter().flatten().map(Vec::len).sum();
        entries + self.live.len()
    }

    /// Lines `from..to` (counted from the top) of the whole transcript.
    fn window(&self, from: usize, to: usize) -> Vec<Line<'static>> {
        let mut out = Vec::with_capacity(to.saturating_sub(from));
        let mut at = 0;
        let parts = self
            .entries
            .iter()
            .flatten()
            .map(Vec::as_slice)
            .chain(self.live.parts());
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
