//! The widgets of the full-screen UI. Each draws from `&Store` into its area
//! of the [`layout`](super::layout); none holds a channel or any state of
//! its own. [`draw`] composes one whole frame.

pub mod approval;
pub mod header;
pub mod input_line;
pub mod plan_panel;
pub mod status_line;
pub mod subagent_bar;
pub mod transcript;
pub mod wrap;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Paragraph, Wrap};

use super::layout::{self, MIN_HEIGHT, MIN_WIDTH, Screen};
use super::store::Store;

/// The subagent bar's accent (violet, `#a78bfa`): never used elsewhere.
pub const SUBAGENT_ACCENT: Color = Color::Rgb(0xa7, 0x8b, 0xfa);
/// Dark text on the accent (indigo, `#1e1b4b`): contrast ratio above 7:1.
pub const SUBAGENT_TEXT: Color = Color::Rgb(0x1e, 0x1b, 0x4b);
/// The main chrome: header, borders, prompt marker.
pub const CHROME: Color = Color::Cyan;

pub fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame, store: &Store) {
    let area = frame.area();
    let areas = match layout::compute((area.width, area.height), store) {
        Screen::TooSmall => return too_small(frame, area),
        Screen::Normal(areas) => areas,
    };
    header::render(frame, areas.header, store);
    if let Some(bar) = areas.bar {
        subagent_bar::render(frame, bar, store);
    }
    if areas.transcript.height > 0 {
        transcript::render(frame, areas.transcript, store);
        if let Some(pending) = &store.approval {
            approval::render(
                frame,
                approval::area_for(areas.transcript, pending),
                pending,
            );
        }
    }
    if let Some(plan) = areas.plan {
        plan_panel::render(frame, plan, areas.placement, store);
    }
    frame.render_widget(
        Paragraph::new("─".repeat(usize::from(areas.rule.width))).style(dim()),
        areas.rule,
    );
    let cursor = input_line::render(frame, areas.input, store);
    frame.set_cursor_position(cursor);
    status_line::render(frame, areas.status, store);
}

fn too_small(frame: &mut Frame, area: Rect) {
    let text = format!(
        "Terminal too small ({}×{}): Fido needs at least {MIN_WIDTH}×{MIN_HEIGHT}. Ctrl+C twice quits.",
        area.width, area.height
    );
    frame.render_widget(
        Paragraph::new(text)
            .style(Style::new().fg(Color::Yellow))
            .wrap(Wrap { trim: true }),
        area,
    );
}
