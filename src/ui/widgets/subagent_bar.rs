//! The SUBAGENT activity bar: a fixed row below the header on the violet
//! accent, shown while a subagent works and kept with its outcome until the
//! next prompt. It shows only sanitised lifecycle metadata: the short
//! agent id, the phase, elapsed time, the pid and a short detail.
//!
//! Narrow terminals: the detail moves to a second row and is cut; then the
//! pid and the elapsed time give way. The agent id and the phase always
//! stay on the first row.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::wrap::{truncate, width};
use super::{SUBAGENT_ACCENT, SUBAGENT_TEXT};
use crate::ui::store::{Phase, Store, SubagentView};

const BADGE: &str = " SUBAGENT ";
/// Longest agent id shown in full.
const ID_CHARS: usize = 20;

pub fn bar_style() -> Style {
    Style::new().fg(SUBAGENT_TEXT).bg(SUBAGENT_ACCENT)
}

/// Rows the bar needs at this width: 0 without a subagent, else 1 or 2.
pub fn height(store: &Store, width: u16) -> u16 {
    store
        .subagent
        .as_ref()
        .map_or(0, |view| lines(view, usize::from(width)).len() as u16)
}

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let Some(view) = &store.subagent else {
        return;
    };
    let lines = lines(view, usize::from(area.width));
    frame.render_widget(Paragraph::new(lines).style(bar_style()), area);
}

fn icon(phase: &Phase) -> &'static str {
    match phase {
        Phase::Starting | Phase::Reasoning | Phase::Tool(_) => "▶",
        Phase::NestedDelegationRejected => "!",
        Phase::Completed => "✓",
        Phase::Partial => "◐",
        Phase::Failed => "✗",
        Phase::Cancelled => "■",
    }
}

pub fn format_elapsed(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

fn lines(view: &SubagentView, max: usize) -> Vec<Line<'static>> {
    let id = truncate(&view.agent_id, ID_CHARS);
    let phase = format!("{} {}", icon(&view.phase), view.phase.label());
    let elapsed = format_elapsed(view.shown_elapsed_ms());
    let pid = view.pid.map(|pid| format!("pid {pid}"));
    let detail = (!view.detail.is_empty()).then(|| view.detail.clone());

    // Everything on one row when it fits.
    let mut parts = vec![id.clone(), phase.clone(), elapsed.clone()];
    parts.extend(pid.clone());
    let head = parts.join(" · ");
    let one_row = match &detail {
        Some(detail) => format!("{head} · {detail}"),
        None => head.clone(),
    };
    if width(BADGE) + 1 + width(&one_row) <= max {
        return vec![row(&one_row, max)];
    }
    // The first row keeps the id and the phase; pid and time give way.
    let room = max.saturating_sub(width(BADGE) + 1);
    let candidates = [
        head,
        [id.as_str(), &phase, &elapsed].join(" · "),
        [id.as_str(), &phase].join(" · "),
    ];
    let first = candidates
        .iter()
        .find(|c| width(c) <= room)
        .cloned()
        .unwrap_or_else(|| {
            // Very narrow: cut the id, never the phase.
            let id_room = room.saturating_sub(width(&phase) + 3).max(4);
            truncate(&format!("{} · {phase}", truncate(&id, id_room)), room)
        });
    let mut out = vec![row(&first, max)];
    if let Some(detail) = detail {
        let indent = " ".repeat(width(BADGE) + 1);
        let text = truncate(&detail, max.saturating_sub(width(&indent)));
        out.push(Line::from(format!("{indent}{text}")));
    }
    out
}

fn row(text: &str, max: usize) -> Line<'static> {
    let badge = Style::new()
        .fg(SUBAGENT_ACCENT)
        .bg(SUBAGENT_TEXT)
        .add_modifier(Modifier::BOLD);
    let text = truncate(text, max.saturating_sub(width(BADGE) + 1));
    Line::from(vec![
        Span::styled(BADGE, badge),
        Span::raw(" "),
        Span::styled(text, Style::new().add_modifier(Modifier::BOLD)),
    ])
}
