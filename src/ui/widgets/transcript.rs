//! The transcript: user prompts, assistant text, one line per tool call
//! (`→ read_file notes.txt ✓`), one line per plan update (never the plan),
//! errors and local command output. Follows the tail unless scrolled up.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

use super::wrap::{wrap, wrap_plain};
use super::{CHROME, bold, dim};
use crate::ui::store::{Entry, Store};

/// Columns left free on each side.
const MARGIN: u16 = 1;

const WELCOME: &str = "Type a prompt and press Enter. The plan panel shows the agent's plan; /plan prints it here, /plan clear starts a new one. Ctrl+C interrupts a turn; twice when idle quits.";

/// Every line of the transcript at this area width.
pub fn lines(store: &Store, area_width: u16) -> Vec<Line<'static>> {
    let width = usize::from(area_width.saturating_sub(2 * MARGIN)).max(1);
    if store.transcript.is_empty() {
        return wrap_plain(WELCOME, dim(), width, 0);
    }
    let mut out = Vec::new();
    for (index, entry) in store.transcript.iter().enumerate() {
        match entry {
            Entry::User(text) => {
                if index > 0 {
                    out.push(Line::default());
                }
                let marker = Style::new().fg(CHROME).add_modifier(Modifier::BOLD);
                out.extend(wrap(&[("› ", marker), (text, bold())], width, 2));
            }
            Entry::Assistant(text) => out.extend(wrap_plain(text, Style::new(), width, 0)),
            Entry::Tool {
                name,
                summary,
                result,
                ..
            } => {
                let mut segments = vec![("→ ", dim()), (name.as_str(), bold())];
                if !summary.is_empty() {
                    segments.push((" ", Style::new()));
                    segments.push((summary.as_str(), Style::new()));
                }
                let failure;
                match result {
                    None => segments.push((" …", dim())),
                    Some(result) if result.ok => {
                        segments.push((" ✓", Style::new().fg(Color::Green)));
                    }
                    Some(result) => {
                        failure = format!(" ✗ {}", result.summary);
                        segments.push((failure.as_str(), Style::new().fg(Color::Red)));
                    }
                }
                out.extend(wrap(&segments, width, 2));
            }
            Entry::Plan(text) => out.extend(wrap(
                &[
                    ("≡ ", Style::new().fg(Color::Blue)),
                    (text, Style::new().fg(Color::Blue)),
                ],
                width,
                2,
            )),
            Entry::Info(text) => out.extend(wrap(&[("· ", dim()), (text, dim())], width, 2)),
            Entry::Error(text) => {
                let red = Style::new().fg(Color::Red);
                out.extend(wrap(&[("✗ ", red), (text, red)], width, 2));
            }
            Entry::Local(text) => {
                out.extend(wrap_plain(text.trim_end(), Style::new(), width, 0));
            }
        }
    }
    out
}

/// How far the transcript in `area` can scroll up (lines from the bottom).
/// When scrolled, the last row is the "more below" line, hence the `+ 1`.
pub fn max_scroll(store: &Store, area: Rect) -> usize {
    let total = lines(store, area.width).len();
    let height = usize::from(area.height);
    if total <= height {
        0
    } else {
        total - height + 1
    }
}

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let all = lines(store, area.width);
    let height = usize::from(area.height);
    let inner = Rect::new(
        area.x + MARGIN,
        area.y,
        area.width.saturating_sub(2 * MARGIN),
        area.height,
    );
    if all.len() <= height {
        frame.render_widget(Paragraph::new(all), inner);
        return;
    }
    let max_scroll = all.len() - height + 1;
    let scroll = store.transcript_scroll.min(max_scroll);
    let end = all.len() - scroll;
    if scroll == 0 {
        frame.render_widget(Paragraph::new(all[end - height..end].to_vec()), inner);
        return;
    }
    // Scrolled up: the last row says how much is below.
    let shown = height.saturating_sub(1);
    let mut visible = all[end - shown..end].to_vec();
    visible.push(Line::styled(
        format!("↓ {scroll} more lines below · PgDn"),
        Style::new().fg(Color::Black).bg(Color::DarkGray),
    ));
    frame.render_widget(Paragraph::new(visible), inner);
}
