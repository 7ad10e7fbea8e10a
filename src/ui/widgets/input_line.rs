//! The prompt editor: a marker and the draft, wrapped by display width and
//! scrolled so the cursor's row stays visible. It grows with a multi-line
//! draft up to [`MAX_ROWS`] (and a third of the screen). While a turn runs
//! Enter queues the draft; the [queued](super::queued) lines show above
//! it, in the rows the draft leaves.

use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::queued;
use crate::ui::state::Store;
use crate::ui::theme;
use crate::ui::wrap::width;

/// Most rows the editor takes.
pub const MAX_ROWS: usize = 8;
/// Columns before the text (the marker).
const MARKER_WIDTH: usize = 2;

const PLACEHOLDER: &str = "Ask Fido… (Enter sends, Alt+Enter new line, /help)";
const SHORT_PLACEHOLDER: &str = "Ask Fido…";
const BUSY_PLACEHOLDER: &str = "Fido is working: Enter queues your message";
const SHORT_BUSY_PLACEHOLDER: &str = "Fido is working…";
const QUEUED_PLACEHOLDER: &str = "Enter sends the next queued message, Esc drops the last";
const SHORT_QUEUED_PLACEHOLDER: &str = "Enter: next queued";

/// One screen row of the draft: the chars `start..end` of the text.
struct Row {
    start: usize,
    end: usize,
}

/// The draft cut into rows of at most `room` cells: at each newline, and
/// where a line is full (never inside a char).
fn rows(chars: &[char], room: usize) -> Vec<Row> {
    let mut rows = Vec::new();
    let (mut start, mut used) = (0, 0);
    for (at, c) in chars.iter().enumerate() {
        if *c == '\n' {
            rows.push(Row { start, end: at });
            start = at + 1;
            used = 0;
            continue;
        }
        let w = width(c.encode_utf8(&mut [0u8; 4]));
        if used + w > room && at > start {
            rows.push(Row { start, end: at });
            start = at;
            used = 0;
        }
        used += w;
    }
    rows.push(Row {
        start,
        end: chars.len(),
    });
    rows
}

fn room(area_width: u16) -> usize {
    usize::from(area_width)
        .saturating_sub(MARKER_WIDTH + 1)
        .max(1)
}

/// Its measure: rows the draft takes at this width, at least one and at
/// most [`MAX_ROWS`], plus the queued lines' (the layout may give it
/// fewer).
pub fn height(store: &Store, width: u16) -> u16 {
    draft_height(store, width) + queued::height(store)
}

fn draft_height(store: &Store, width: u16) -> u16 {
    let chars: Vec<char> = store.input.text().chars().collect();
    rows(&chars, room(width)).len().clamp(1, MAX_ROWS) as u16
}

/// The row holding the cursor and the cursor's column in it.
fn cursor_place(chars: &[char], rows: &[Row], cursor: usize) -> (usize, usize) {
    let index = rows
        .iter()
        .rposition(|row| row.start <= cursor)
        .unwrap_or(0);
    let row = &rows[index];
    let column = chars[row.start..cursor.min(row.end).max(row.start)]
        .iter()
        .map(|c| width(c.encode_utf8(&mut [0u8; 4])))
        .sum();
    (index, column)
}

/// Draws the queued lines and the editor; returns where the cursor goes.
/// The draft's rows come first; the queue gets the rows left above it,
/// its newest lines last.
pub fn render(frame: &mut Frame, area: Rect, store: &Store) -> Position {
    let draft_rows = draft_height(store, area.width).min(area.height).max(1);
    let queue_rows = area.height.saturating_sub(draft_rows);
    if queue_rows > 0 {
        let lines = queued::lines(store, area.width);
        let skip = lines.len().saturating_sub(usize::from(queue_rows));
        let shown: Vec<_> = lines.into_iter().skip(skip).collect();
        let used = shown.len() as u16;
        let top = Rect::new(area.x, area.y + queue_rows - used, area.width, used);
        frame.render_widget(Paragraph::new(shown), top);
    }
    let draft = Rect::new(
        area.x,
        area.y + queue_rows,
        area.width,
        draft_rows.min(area.height),
    );
    render_draft(frame, draft, store)
}

fn render_draft(frame: &mut Frame, area: Rect, store: &Store) -> Position {
    let busy = store.turn_open();
    let marker = |first: bool| match (first, busy) {
        (false, _) => Span::raw("  "),
        (true, true) => Span::styled("⋯ ", theme::dim()),
        (true, false) => Span::styled("› ", theme::accent()),
    };
    let room = room(area.width);
    let input = &store.input;
    if input.is_empty() {
        let (long, short) = if busy {
            (BUSY_PLACEHOLDER, SHORT_BUSY_PLACEHOLDER)
        } else if !store.typeahead.is_empty() {
            (QUEUED_PLACEHOLDER, SHORT_QUEUED_PLACEHOLDER)
        } else {
            (PLACEHOLDER, SHORT_PLACEHOLDER)
        };
        let placeholder = if width(long) <= room { long } else { short };
        let line = Line::from(vec![marker(true), Span::styled(placeholder, theme::dim())]);
        frame.render_widget(Paragraph::new(line), area);
        let x = (MARKER_WIDTH as u16).min(area.width.saturating_sub(1));
        return Position::new(area.x + x, area.y);
    }
    let chars: Vec<char> = input.text().chars().collect();
    let rows = rows(&chars, room);
    let (cursor_row, cursor_column) = cursor_place(&chars, &rows, input.cursor());
    let height = usize::from(area.height).max(1);
    let top = (cursor_row + 1).saturating_sub(height);
    let lines: Vec<Line> = rows
        .iter()
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(index, row)| {
            let text: String = chars[row.start..row.end].iter().collect();
            Line::from(vec![marker(index == 0), Span::raw(text)])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), area);
    let x = (MARKER_WIDTH + cursor_column).min(usize::from(area.width.saturating_sub(1)));
    Position::new(area.x + x as u16, area.y + (cursor_row - top) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_break_at_newlines_and_full_lines_without_splitting_chars() {
        let chars: Vec<char> = "ab\n日本語x".chars().collect();
        let cut: Vec<(usize, usize)> = rows(&chars, 4).iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(cut, [(0, 2), (3, 5), (5, 7)]);
        assert_eq!(cursor_place(&chars, &rows(&chars, 4), 7), (2, 3));
        assert_eq!(cursor_place(&chars, &rows(&chars, 4), 2), (0, 2));
    }
}
