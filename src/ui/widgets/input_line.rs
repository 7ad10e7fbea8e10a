//! The input line: a prompt marker and the text being typed, scrolled
//! sideways so the cursor stays visible. While a turn runs the text stays
//! editable but Enter does not send it.

use ratatui::Frame;
use ratatui::layout::{Position, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::wrap::width;
use super::{CHROME, dim};
use crate::ui::store::Store;

const PLACEHOLDER: &str = "Ask Fido… (Enter sends; /plan, /undo, /suspend, /recall, /quit)";
const SHORT_PLACEHOLDER: &str = "Ask Fido…";
const BUSY_PLACEHOLDER: &str = "Fido is working: type ahead, Enter sends once the turn ends";
const SHORT_BUSY_PLACEHOLDER: &str = "Fido is working…";

/// Draws the line and returns where the cursor goes.
pub fn render(frame: &mut Frame, area: Rect, store: &Store) -> Position {
    let busy = store.turn.is_busy();
    let marker = if busy {
        Span::styled("⋯ ", dim())
    } else {
        Span::styled("› ", Style::new().fg(CHROME).add_modifier(Modifier::BOLD))
    };
    let room = usize::from(area.width).saturating_sub(3).max(1);
    let input = &store.input;
    if input.is_empty() {
        let (long, short) = if busy {
            (BUSY_PLACEHOLDER, SHORT_BUSY_PLACEHOLDER)
        } else {
            (PLACEHOLDER, SHORT_PLACEHOLDER)
        };
        let placeholder = if width(long) <= room { long } else { short };
        let line = Line::from(vec![marker, Span::styled(placeholder, dim())]);
        frame.render_widget(Paragraph::new(line), area);
        return Position::new(area.x + 2, area.y);
    }
    let chars: Vec<char> = input.text().chars().collect();
    let cell = |c: &char| width(c.encode_utf8(&mut [0u8; 4]));
    // Scroll so the cursor fits: drop chars from the left as needed.
    let mut start = 0;
    let before = |start: usize| chars[start..input.cursor()].iter().map(cell).sum::<usize>();
    while start < input.cursor() && before(start) >= room {
        start += 1;
    }
    let mut shown = String::new();
    let mut used = 0;
    for c in &chars[start..] {
        let w = cell(c);
        if used + w > room {
            break;
        }
        shown.push(*c);
        used += w;
    }
    let cursor_x = 2 + before(start);
    let line = Line::from(vec![marker, Span::raw(shown)]);
    frame.render_widget(Paragraph::new(line), area);
    Position::new(
        area.x + cursor_x.min(usize::from(area.width)) as u16,
        area.y,
    )
}
