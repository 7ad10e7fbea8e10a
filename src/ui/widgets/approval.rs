//! The approval prompt, drawn over the bottom of the body (transcript and
//! plan): what would run (command, directory, justification) or change
//! (the diff), and the keys that answer; or, after `o`, the full view of
//! the request over the whole body, scrolled like the plan overlay.
//!
//! Every line of the request is [marked](crate::ui::marks) and cut into
//! rows at the width, never truncated: a newline, a control or invisible
//! character or a long run of spaces shows as a mark, so the rows on
//! screen are exactly the text that runs. When the rows do not fit, the
//! box keeps the first ones and says how many more there are and that `o`
//! shows them all; the frame notes when every row has been on screen
//! ([`settle`]), which `y` and `a` wait for.
//!
//! On a small body (under 4 rows or 12 columns) the box has no border: a
//! title row (the short title when the long one does not fit), the first
//! rows of the request, and one row saying how to see the rest.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{bold, entry};
use crate::protocol::ApprovalRequest;
use crate::ui::state::{PendingApproval, ScrollLimit, Store};
use crate::ui::wrap::{truncate, width};
use crate::ui::{diff, marks};

/// Whether a body this size gets a bordered box (else title and footer
/// rows only, to leave the request its rows).
fn bordered(body: Rect) -> bool {
    body.height >= 4 && body.width >= 12
}

/// The rows of the request at `width`: the box's (a change set folded)
/// or the full view's.
pub fn body_rows(pending: &PendingApproval, full: bool, width: usize) -> Vec<Line<'static>> {
    let is_diff = matches!(
        pending.request,
        ApprovalRequest::FileChange { .. } | ApprovalRequest::ChangeSet { .. }
    );
    let lines = if full {
        pending.full_body()
    } else {
        pending.body()
    };
    let mut rows = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        // A file change's body is its name, then the unified diff.
        let style = if !is_diff {
            Style::default()
        } else if index == 0 {
            bold()
        } else {
            entry::diff_style(&diff::classify(line))
        };
        let mark = style.add_modifier(Modifier::REVERSED);
        rows.extend(marks::rows(line, width, style, mark));
    }
    rows
}

/// The rows of the request on screen, kept from frame to frame: a
/// 10,000-line patch is marked and cut once per width, not per frame.
#[derive(Debug, Default)]
pub struct RowCache {
    /// The box's rows, then the full view's.
    slots: [Option<Slot>; 2],
}

#[derive(Debug)]
struct Slot {
    request: ApprovalRequest,
    width: usize,
    rows: Vec<Line<'static>>,
    /// The box holds the whole request (a change set's diff unfolded).
    unfolded: bool,
}

impl RowCache {
    /// The rows of `pending` at `width` (the full view's when `full`),
    /// and whether they are the whole request.
    fn rows(
        &mut self,
        pending: &PendingApproval,
        full: bool,
        width: usize,
    ) -> (&[Line<'static>], bool) {
        let slot = &mut self.slots[usize::from(full)];
        let fresh = slot
            .as_ref()
            .is_some_and(|s| s.width == width && s.request == pending.request);
        if !fresh {
            *slot = None;
        }
        let slot = slot.get_or_insert_with(|| Slot {
            request: pending.request.clone(),
            width,
            rows: body_rows(pending, full, width),
            unfolded: full
                || !matches!(pending.request, ApprovalRequest::ChangeSet { .. })
                || pending.body() == pending.full_body(),
        });
        (&slot.rows, slot.unfolded)
    }
}

/// The rows below the request: the reason being typed, then the keys.
fn footer_rows(pending: &PendingApproval) -> usize {
    1 + usize::from(pending.typing_reason())
}

/// Where the box goes and what it holds.
struct BoxPlan {
    area: Rect,
    bordered: bool,
    /// Rows of the request in the box, of `total`.
    shown: usize,
    total: usize,
}

impl BoxPlan {
    fn more(&self) -> usize {
        self.total - self.shown
    }
}

/// The width inside the box or the full view over `body`.
fn inner_width(body: Rect) -> usize {
    usize::from(
        body.width
            .saturating_sub(if bordered(body) { 2 } else { 0 }),
    )
}

fn plan_box(body: Rect, pending: &PendingApproval, rows: usize) -> BoxPlan {
    let bordered = bordered(body);
    // Borders, or the title row when there are none.
    let chrome = footer_rows(pending) + if bordered { 2 } else { 1 };
    let height = (rows + chrome).min(usize::from(body.height));
    let shown = rows.min(height.saturating_sub(chrome));
    let height = height as u16;
    let area = Rect {
        y: body.y + body.height - height,
        height,
        ..body
    };
    BoxPlan {
        area,
        bordered,
        shown,
        total: rows,
    }
}

/// The full view over the whole body.
struct FullPlan {
    bordered: bool,
    total: usize,
    top: usize,
    page: usize,
}

impl FullPlan {
    fn limit(&self) -> ScrollLimit {
        ScrollLimit {
            page: self.page,
            max: self.total.saturating_sub(self.page),
        }
    }

    /// Its last row is on screen.
    fn at_end(&self) -> bool {
        self.page > 0 && self.top + self.page >= self.total
    }
}

fn plan_full(body: Rect, pending: &PendingApproval, rows: usize) -> FullPlan {
    let bordered = bordered(body);
    let chrome = footer_rows(pending) + if bordered { 2 } else { 1 };
    let page = usize::from(body.height).saturating_sub(chrome);
    let max = rows.saturating_sub(page);
    FullPlan {
        bordered,
        top: pending.full_view.unwrap_or(0).min(max),
        total: rows,
        page,
    }
}

/// What the frame about to be drawn over `body` shows of the request:
/// the full view's scroll is clamped and its limits kept for the keys,
/// and the request is noted as seen whole when all of it is on screen
/// (a change set's box folds its diff, so only the full view shows it
/// whole then).
pub fn settle(store: &mut Store, body: Rect, cache: &mut RowCache) {
    let Some(pending) = store.approval.as_mut() else {
        return;
    };
    if body.height == 0 || body.width == 0 {
        return;
    }
    let full = pending.full_view.is_some();
    let (rows, unfolded) = cache.rows(pending, full, inner_width(body));
    let rows = rows.len();
    if full {
        let plan = plan_full(body, pending, rows);
        pending.full_view = Some(plan.top);
        pending.full_view_limit = plan.limit();
        pending.seen_whole |= plan.at_end();
        return;
    }
    let plan = plan_box(body, pending, rows);
    pending.seen_whole |= plan.more() == 0 && unfolded;
}

/// Draws the box, or the full view, over `body`.
pub fn render(frame: &mut Frame, body: Rect, pending: &PendingApproval, cache: &mut RowCache) {
    if body.height == 0 || body.width == 0 {
        return;
    }
    let full = pending.full_view.is_some();
    let (rows, _) = cache.rows(pending, full, inner_width(body));
    if full {
        render_full(frame, body, pending, rows);
    } else {
        render_box(frame, body, pending, rows);
    }
}

fn render_box(frame: &mut Frame, body: Rect, pending: &PendingApproval, rows: &[Line<'static>]) {
    let plan = plan_box(body, pending, rows.len());
    let inner = usize::from(plan.area.width.saturating_sub(2 * u16::from(plan.bordered)));
    let more = plan.more();
    let mut lines: Vec<Line> = rows[..plan.shown].to_vec();
    lines.extend(footer(
        pending,
        inner,
        (!plan.bordered && more > 0).then_some(more),
    ));
    let note = (plan.bordered && more > 0).then(|| more_note(more, inner));
    draw(
        frame,
        plan.area,
        plan.bordered,
        title(pending, inner),
        note,
        lines,
    );
}

fn render_full(frame: &mut Frame, body: Rect, pending: &PendingApproval, rows: &[Line<'static>]) {
    let plan = plan_full(body, pending, rows.len());
    let inner = inner_width(body);
    let end = (plan.top + plan.page).min(rows.len());
    let mut lines: Vec<Line> = rows[plan.top..end].to_vec();
    // Keep the footer at the bottom when the request is shorter.
    lines.resize(plan.page, Line::default());
    lines.extend(footer(pending, inner, None));
    let place = format!(
        "full view, rows {}–{end} of {}",
        (plan.top + 1).min(end),
        rows.len()
    );
    let heading = format!("{} — {place}", title(pending, inner));
    let heading = if width(&heading) + 2 <= inner {
        heading
    } else {
        place
    };
    draw(frame, body, plan.bordered, heading, None, lines);
}

/// The title, short when the long one does not fit `inner`.
fn title(pending: &PendingApproval, inner: usize) -> String {
    let long = pending.title();
    if width(long) + 2 <= inner {
        long.to_string()
    } else {
        pending.short_title().to_string()
    }
}

/// How many rows the box could not show, and how to see them.
fn more_note(more: usize, inner: usize) -> String {
    let long = format!("… {more} more lines — o: full view");
    if width(&long) + 2 <= inner {
        return long;
    }
    truncate(&format!("+{more} — o: full view"), inner.saturating_sub(2))
}

/// The reason row (while typing one) and the key hints, dim until the
/// prompt is ready; `more` replaces the hints on a borderless box.
fn footer(pending: &PendingApproval, inner: usize, more: Option<usize>) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(reason) = &pending.reason {
        let text = format!("why not: {}▏", reason.text());
        lines.push(Line::styled(tail(&text, inner), bold()));
    }
    let hint = match more {
        Some(more) => Line::styled(more_note(more, inner + 2), bold().fg(Color::Yellow)),
        None if pending.readiness.shows_ready() || pending.typing_reason() => {
            Line::styled(truncate(pending.hint(), inner), bold())
        }
        None => Line::styled(
            truncate(pending.hint(), inner),
            Style::new().fg(Color::DarkGray),
        ),
    };
    lines.push(hint);
    lines
}

/// The end of `text` that fits `max` cells (the reason's cursor stays in
/// view).
fn tail(text: &str, max: usize) -> String {
    let mut kept: Vec<char> = Vec::new();
    let mut used = 0;
    for c in text.chars().rev() {
        let cells = width(c.encode_utf8(&mut [0; 4]));
        if used + cells > max {
            break;
        }
        used += cells;
        kept.push(c);
    }
    kept.into_iter().rev().collect()
}

/// The box or the full view: a yellow border with the title (and a note
/// at the bottom), or, without a border, the title as the first row.
fn draw(
    frame: &mut Frame,
    area: Rect,
    bordered: bool,
    title: String,
    note: Option<String>,
    mut lines: Vec<Line<'static>>,
) {
    let inner = usize::from(area.width.saturating_sub(2));
    let title_style = bold().fg(Color::Yellow);
    frame.render_widget(Clear, area);
    if !bordered {
        let heading = truncate(&title, usize::from(area.width));
        lines.insert(0, Line::styled(heading, title_style));
        frame.render_widget(Paragraph::new(lines), area);
        return;
    }
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Yellow))
        .title(Line::styled(
            truncate(&format!(" {title} "), inner),
            title_style,
        ));
    if let Some(note) = note {
        block = block.title_bottom(Line::styled(format!(" {note} "), title_style));
    }
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
