//! The queued lines, dimmed above the editor: one row each, cut to the
//! width; past [`SHOWN`] lines, the newest few under a `+N more` row.

use ratatui::text::{Line, Span};

use crate::text::sanitize;
use crate::ui::state::Store;
use crate::ui::theme;
use crate::ui::wrap::truncate;

/// Most queued lines shown; the older ones are counted.
pub const SHOWN: usize = 3;
/// The mark before each queued line.
const MARK: &str = "↳ ";

/// Rows the queue takes above the editor.
pub fn height(store: &Store) -> u16 {
    let count = store.typeahead.len();
    (count.min(SHOWN) + usize::from(count > SHOWN)) as u16
}

/// The rows, oldest first, each at most `width` cells.
pub fn lines(store: &Store, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let queue = &store.typeahead;
    let hidden = queue.len().saturating_sub(SHOWN);
    let mut lines = Vec::with_capacity(SHOWN + 1);
    if hidden > 0 {
        let text = truncate(&format!("  +{hidden} more queued"), width);
        lines.push(Line::from(Span::styled(text, theme::dim())));
    }
    for line in queue.iter().skip(hidden) {
        // A multi-line message shows as one row; a paste may hold escapes.
        let text = truncate(&format!("{MARK}{}", sanitize(line, true)), width);
        lines.push(Line::from(Span::styled(text, theme::dim())));
    }
    lines
}
