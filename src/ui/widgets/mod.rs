//! The widgets of the full-screen UI. Each draws from `&Store` into its area
//! of the [`layout`](super::layout); none holds a channel or any state of
//! its own. [`draw`] composes one whole frame.

pub mod approval;
pub mod entry;
pub mod header;
pub mod input_line;
pub mod live;
pub mod plan_panel;
pub mod status_line;
pub mod subagent_bar;
pub mod transcript;

use ratatui::Frame;
use ratatui::widgets::Paragraph;

use super::layout;
use super::store::Store;
use super::theme;
pub use super::theme::{CHROME, SUBAGENT_ACCENT, SUBAGENT_TEXT, bold, dim};

/// Draws the whole screen (without colours under `NO_COLOR`).
pub fn draw(frame: &mut Frame, store: &Store) {
    draw_widgets(frame, store);
    if store.no_color {
        theme::strip_colours(frame.buffer_mut());
    }
}

/// Before a frame: while the transcript is scrolled up, lines that arrived
/// below move the scroll position with them (the view stays still) and the
/// "new output" marker shows.
pub fn before_frame(store: &mut Store) {
    let areas = layout::compute(store.size, store);
    let total = transcript::total_lines(store, areas.transcript.width);
    if store.transcript_scroll == 0 {
        store.new_output = false;
    } else if total > store.seen_lines {
        store.transcript_scroll += total - store.seen_lines;
        store.new_output = true;
    }
    store.seen_lines = total;
}

fn draw_widgets(frame: &mut Frame, store: &Store) {
    let area = frame.area();
    let areas = layout::compute((area.width, area.height), store);
    if let Some(header) = areas.header {
        header::render(frame, header, store);
    }
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
    if let Some(rule) = areas.rule {
        frame.render_widget(
            Paragraph::new("─".repeat(usize::from(rule.width))).style(dim()),
            rule,
        );
    }
    if areas.input.height > 0 {
        let cursor = input_line::render(frame, areas.input, store);
        frame.set_cursor_position(cursor);
    }
    if let Some(status) = areas.status {
        status_line::render(frame, status, store);
    }
}
