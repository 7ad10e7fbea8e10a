//! The transcript: every entry's lines (see [`entry`](super::entry)), then
//! the assistant text still streaming in. Follows the tail unless scrolled
//! up; then the last row says how much is below, or that new output came.
//!
//! Rendering is cached ([`LineCache`], which the frame owns): an entry is
//! rendered once per width and again only when it changes, and streaming
//! text renders only its changing tail ([`LiveLines`](super::live)). A
//! frame costs the visible lines, not the transcript's length; the lines
//! held stay within a budget however long the session.

mod lines;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

pub use lines::{LINE_BUDGET, LineCache};

use crate::ui::state::Store;
use crate::ui::theme;
use crate::ui::wrap::wrap_plain;

/// Columns left free on each side.
const MARGIN: u16 = 1;

const WELCOME: &str = "Type a prompt and press Enter (Alt+Enter or Ctrl+J for a new line). The plan panel shows the agent's plan. /help lists every key and command. Ctrl+C interrupts a turn; twice when idle quits.";

fn inner_width(area_width: u16) -> usize {
    usize::from(area_width.saturating_sub(2 * MARGIN)).max(1)
}

fn is_blank(store: &Store) -> bool {
    store.transcript.is_empty() && store.live.is_empty()
}

/// Its measure: how many lines the transcript has at this area width
/// (`cache` is brought up to date at that width).
pub fn height(cache: &mut LineCache, store: &Store, area_width: u16) -> usize {
    if is_blank(store) {
        return wrap_plain(WELCOME, theme::dim(), inner_width(area_width), 0).len();
    }
    cache.sync(store, inner_width(area_width));
    cache.total()
}

/// How far `total` lines can scroll up (from the bottom) in `rows` rows.
/// When scrolled, the last row is the "more below" line, hence the `+ 1`.
pub fn max_scroll(total: usize, rows: u16) -> usize {
    let height = usize::from(rows);
    if total <= height {
        0
    } else {
        total - height + 1
    }
}

pub fn render(frame: &mut Frame, area: Rect, store: &Store, cache: &mut LineCache) {
    let inner = Rect::new(
        area.x + MARGIN,
        area.y,
        area.width.saturating_sub(2 * MARGIN),
        area.height,
    );
    if is_blank(store) {
        let welcome = wrap_plain(WELCOME, theme::dim(), inner_width(area.width), 0);
        frame.render_widget(Paragraph::new(welcome), inner);
        return;
    }
    let total = height(cache, store, area.width);
    let height = usize::from(area.height);
    if total <= height {
        frame.render_widget(Paragraph::new(cache.window(store, 0, total)), inner);
        return;
    }
    let scroll = store.transcript_scroll.min(total - height + 1);
    let end = total - scroll;
    if scroll == 0 {
        let visible = cache.window(store, end - height, end);
        frame.render_widget(Paragraph::new(visible), inner);
        return;
    }
    // Scrolled up: the last row says what is below.
    let shown = height.saturating_sub(1);
    let mut visible = cache.window(store, end - shown, end);
    let text = if store.new_output {
        format!("↓ new output · {scroll} lines below · End follows")
    } else {
        format!("↓ {scroll} more lines below · PgDn, End")
    };
    visible.push(Line::styled(text, theme::marker()));
    frame.render_widget(Paragraph::new(visible), inner);
}
