//! The SUBAGENT activity bar: a fixed row below the header on the violet
//! accent, shown while a subagent works and kept with its outcome until the
//! next prompt. It shows only sanitised lifecycle metadata: the short
//! agent id, the phase, elapsed time, the pid and a short detail.
//!
//! One subagent gets one row, or two on a narrow terminal: the detail moves
//! to a second row and is cut; then the pid, the plan item, the tokens and
//! the elapsed time give way. The agent id and the phase always stay.
//!
//! Several subagents get one row each (live ones first), at most
//! [`MAX_ROWS`], then `+N more`; the focused row (Alt+Up / Alt+Down, what
//! Esc cancels) is marked `›` and drawn reversed, and is always shown.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{SUBAGENT_ACCENT, SUBAGENT_TEXT};
use crate::ui::state::{Phase, Store, SubagentView, tokens};
use crate::ui::wrap::{truncate, width};

const BADGE: &str = " SUBAGENT ";
/// Longest agent id shown in full.
const ID_CHARS: usize = 20;

pub fn bar_style() -> Style {
    Style::new().fg(SUBAGENT_TEXT).bg(SUBAGENT_ACCENT)
}

/// Subagent rows shown at most; past them one `+N more` row.
pub const MAX_ROWS: usize = 4;

/// Rows the bar needs at this width, given at most `room` rows: 0 without
/// a subagent; 1 or 2 for one subagent; one per subagent (at most
/// [`MAX_ROWS`], then `+N more`) for several.
pub fn height(store: &Store, width: u16, room: u16) -> u16 {
    lines(store, usize::from(width), usize::from(room)).len() as u16
}

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let lines = lines(store, usize::from(area.width), usize::from(area.height));
    if lines.is_empty() {
        return;
    }
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

pub use crate::text::elapsed as format_elapsed;

/// The bar's lines for at most `room` rows.
fn lines(store: &Store, max: usize, room: usize) -> Vec<Line<'static>> {
    let order = store.bar_order();
    if order.is_empty() || room == 0 {
        return Vec::new();
    }
    if let [view] = order.as_slice() {
        let mut lines = single(view, max);
        lines.truncate(room);
        return lines;
    }
    let focus = store.focused_subagent().map(|s| s.agent_id.as_str());
    let count = order.len();
    let fits = count <= room.min(MAX_ROWS);
    // Rows of subagents, leaving one for `+N more` when they do not all fit.
    let shown = if fits {
        count
    } else {
        room.min(MAX_ROWS + 1).saturating_sub(1).max(1)
    };
    // The focused row is always among those shown.
    let focus_at = order
        .iter()
        .position(|s| Some(s.agent_id.as_str()) == focus)
        .unwrap_or(0);
    let first = (focus_at + 1).saturating_sub(shown);
    let mut out: Vec<Line<'static>> = order
        .iter()
        .skip(first)
        .take(shown)
        .map(|view| {
            let focused = Some(view.agent_id.as_str()) == focus;
            let text = parts(view, true).join(" · ");
            row(&text, max, Some(focused))
        })
        .collect();
    let hidden = count - out.len();
    if hidden > 0 && out.len() < room {
        let indent = " ".repeat(width(BADGE) + 1);
        out.push(Line::from(truncate(
            &format!("{indent}+{hidden} more · /subagents lists them"),
            max,
        )));
    }
    out
}

/// What a row says, most important first: id, phase, elapsed, tokens,
/// its own plan's steps done, the plan item it serves, pid, and the detail
/// when `detail` is set.
fn parts(view: &SubagentView, detail: bool) -> Vec<String> {
    let mut parts = vec![
        truncate(&view.agent_id, ID_CHARS),
        format!("{} {}", icon(&view.phase), view.phase.label()),
        format_elapsed(view.shown_elapsed_ms()),
        format!("{} tok", tokens(view.tokens)),
    ];
    parts.extend(
        view.own_plan
            .map(|(done, all)| format!("{done}/{all} steps")),
    );
    parts.extend(view.plan_item.as_ref().map(|item| format!("plan: {item}")));
    parts.extend(view.pid.map(|pid| format!("pid {pid}")));
    if detail && !view.detail.is_empty() {
        parts.push(view.detail.clone());
    }
    parts
}

/// One subagent: one row when it fits, else the detail on a second row.
fn single(view: &SubagentView, max: usize) -> Vec<Line<'static>> {
    let id = truncate(&view.agent_id, ID_CHARS);
    let phase = format!("{} {}", icon(&view.phase), view.phase.label());
    let elapsed = format_elapsed(view.shown_elapsed_ms());
    let detail = (!view.detail.is_empty()).then(|| view.detail.clone());

    // Everything on one row when it fits.
    let head = parts(view, false).join(" · ");
    let one_row = match &detail {
        Some(detail) => format!("{head} · {detail}"),
        None => head.clone(),
    };
    if width(BADGE) + 1 + width(&one_row) <= max {
        return vec![row(&one_row, max, None)];
    }
    // The first row keeps the id and the phase; the rest gives way.
    let room = max.saturating_sub(width(BADGE) + 1);
    let used = format!("{} tok", tokens(view.tokens));
    let candidates = [
        head,
        [id.as_str(), &phase, &elapsed, &used].join(" · "),
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
    let mut out = vec![row(&first, max, None)];
    if let Some(detail) = detail {
        let indent = " ".repeat(width(BADGE) + 1);
        let text = truncate(&detail, max.saturating_sub(width(&indent)));
        out.push(Line::from(format!("{indent}{text}")));
    }
    out
}

/// One bar row; `focused` is `None` when there is nothing to choose from,
/// else whether this row has the focus (a `›` mark and reversed text).
fn row(text: &str, max: usize, focused: Option<bool>) -> Line<'static> {
    let badge = Style::new()
        .fg(SUBAGENT_ACCENT)
        .bg(SUBAGENT_TEXT)
        .add_modifier(Modifier::BOLD);
    let text = truncate(text, max.saturating_sub(width(BADGE) + 1));
    let (mark, style) = match focused {
        Some(true) => (
            "›",
            Style::new().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ),
        Some(false) => (" ", Style::new()),
        None => (" ", Style::new().add_modifier(Modifier::BOLD)),
    };
    Line::from(vec![
        Span::styled(BADGE, badge),
        Span::raw(mark),
        Span::styled(text, style),
    ])
}
