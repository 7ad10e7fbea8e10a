//! The plan panel: a persistent box (right rail, below the transcript on
//! narrow terminals, or over the whole body with F2) showing every item of
//! the current plan with every present field: id, title, status, details,
//! dependencies, next action, evidence. With no plan it says so.
//!
//! Nothing is dropped silently: when the items do not fit, the panel
//! scrolls and says how many items are above and below.
//!
//! The panel's lines are kept ([`PlanLines`], owned by the frame) and
//! wrapped again only when the plan or the width changes.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Clear, Padding, Paragraph};

use super::{CHROME, bold, dim};
use crate::ui::plan_view::{ItemStatus, PlanView};
use crate::ui::wrap::{wrap, wrap_plain};

const NO_PLAN: &str = "No plan yet.\n\nThe agent keeps one for multi-step work; it shows up here. /plan prints it, /plan clear starts over.";

fn block() -> Block<'static> {
    Block::bordered()
        .border_type(BorderType::Rounded)
        .border_style(Style::new().fg(CHROME))
        .padding(Padding::horizontal(1))
}

/// The inside of the panel's border.
pub fn inner(area: Rect) -> Rect {
    block().inner(area)
}

pub fn status_style(status: ItemStatus) -> Style {
    match status {
        ItemStatus::Pending => Style::new(),
        ItemStatus::InProgress => Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ItemStatus::Blocked => Style::new().fg(Color::Red),
        ItemStatus::Done => Style::new().fg(Color::Green),
        ItemStatus::Deferred => Style::new().fg(Color::DarkGray),
    }
}

/// The panel's lines at this inner width, and the line range of each item.
fn content(plan: Option<&PlanView>, width: u16) -> (Vec<Line<'static>>, Vec<(usize, usize)>) {
    let width = usize::from(width).max(1);
    let Some(plan) = plan else {
        return (wrap_plain(NO_PLAN, dim(), width, 0), Vec::new());
    };
    let mut lines = Vec::new();
    if let Some(reason) = &plan.reason {
        let italic = dim().add_modifier(Modifier::ITALIC);
        lines.extend(wrap_plain(reason, italic, width, 0));
    }
    if plan.items.is_empty() {
        lines.extend(wrap_plain("The plan is empty.", dim(), width, 0));
    }
    let mut ranges = Vec::with_capacity(plan.items.len());
    for item in &plan.items {
        let start = lines.len();
        let status = status_style(item.status);
        let status_text = format!(" · {}", item.status_text);
        lines.extend(wrap(
            &[
                (item.status.mark(), status),
                (" ", Style::new()),
                (&item.id, bold()),
                ("  ", Style::new()),
                (&item.title, Style::new()),
                (&status_text, status),
            ],
            width,
            4,
        ));
        for field in &item.fields {
            let label = format!("{}: ", field.label);
            lines.extend(wrap(
                &[
                    ("    ", Style::new()),
                    (&label, dim()),
                    (&field.text, Style::new()),
                ],
                width,
                6,
            ));
        }
        ranges.push((start, lines.len()));
    }
    if plan.deleted > 0 {
        let text = format!("({} deleted not shown)", plan.deleted);
        lines.extend(wrap_plain(&text, dim(), width, 0));
    }
    (lines, ranges)
}

/// The panel's lines for one plan at one inner width, kept until either
/// changes.
#[derive(Debug, Clone, Default)]
pub struct PlanLines {
    /// What the lines were wrapped for.
    key: Option<(Option<PlanView>, u16)>,
    lines: Vec<Line<'static>>,
    /// The line range of each item.
    ranges: Vec<(usize, usize)>,
}

impl PlanLines {
    /// Brings the lines up to date with `plan` at this inner width.
    pub fn refresh(&mut self, plan: Option<&PlanView>, width: u16) -> &PlanLines {
        let fresh = matches!(&self.key, Some((kept, at)) if kept.as_ref() == plan && *at == width);
        if !fresh {
            (self.lines, self.ranges) = content(plan, width);
            self.key = Some((plan.cloned(), width));
        }
        self
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// Its measure: rows the panel wants at this width, border included.
pub fn height(lines: &mut PlanLines, plan: Option<&PlanView>, width: u16) -> usize {
    let probe = Rect::new(0, 0, width, 10);
    let border = inner(probe);
    lines.refresh(plan, border.width).len() + usize::from(probe.height - border.height)
}

/// How far `total` lines can scroll in this inner area. When scrolled,
/// the first row says what is above, hence the `+ 1`.
pub fn max_scroll(total: usize, inner: Rect) -> usize {
    let height = usize::from(inner.height);
    if total <= height {
        0
    } else {
        total - height + 1
    }
}

/// Which lines are on screen and what the indicators say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    start: usize,
    len: usize,
    /// Items (partly) above the window, when scrolled.
    above: Option<usize>,
    /// Items (partly) below the window, when cut.
    below: Option<usize>,
}

fn window(total: usize, ranges: &[(usize, usize)], scroll: usize, height: usize) -> Window {
    if total <= height {
        return Window {
            start: 0,
            len: total,
            above: None,
            below: None,
        };
    }
    let start = scroll.min(total - height + 1);
    let mut len = height - usize::from(start > 0);
    let cut = start + len < total;
    if cut {
        len = len.saturating_sub(1);
    }
    let end = start + len;
    Window {
        start,
        len,
        above: (start > 0).then(|| ranges.iter().filter(|(s, _)| *s < start).count()),
        below: cut.then(|| ranges.iter().filter(|(_, e)| *e > end).count()),
    }
}

/// Draws the panel; `overlay`: over the whole body (F2), where it scrolls
/// by `scroll` lines.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    plan: Option<&PlanView>,
    overlay: bool,
    scroll: usize,
    lines: &mut PlanLines,
) {
    let title = match plan {
        Some(plan) => format!(" Plan {} ", plan.headline()),
        None => " Plan ".to_string(),
    };
    let mut block = block().title(Line::styled(title, bold().fg(CHROME)));
    if overlay {
        block = block
            .title_bottom(Line::styled(" F2 close · PgUp/PgDn scroll ", dim()).right_aligned());
    }
    let inner = block.inner(area);
    frame.render_widget(Clear, area);
    frame.render_widget(block, area);

    let content = lines.refresh(plan, inner.width);
    let scroll = if overlay { scroll } else { 0 };
    let view = window(
        content.lines.len(),
        &content.ranges,
        scroll,
        usize::from(inner.height),
    );
    let marker = Style::new().fg(Color::Black).bg(Color::DarkGray);
    let mut visible = Vec::with_capacity(usize::from(inner.height));
    if let Some(above) = view.above {
        visible.push(Line::styled(format!("↑ {above} more above · PgUp"), marker));
    }
    visible.extend(
        content
            .lines
            .iter()
            .skip(view.start)
            .take(view.len)
            .cloned(),
    );
    if let Some(below) = view.below {
        let hint = if overlay { "PgDn" } else { "F2 to expand" };
        let text = match below {
            0 => format!("↓ more below · {hint}"),
            n => format!("↓ {n} more below · {hint}"),
        };
        visible.push(Line::styled(text, marker));
    }
    frame.render_widget(Paragraph::new(visible), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_window_counts_the_items_it_hides() {
        // Three items of four lines each, five rows.
        let ranges = [(0, 4), (4, 8), (8, 12)];
        let top = window(12, &ranges, 0, 5);
        assert_eq!(
            (top.start, top.len, top.above, top.below),
            (0, 4, None, Some(2))
        );
        let middle = window(12, &ranges, 4, 5);
        assert_eq!(
            (middle.start, middle.len, middle.above, middle.below),
            (4, 3, Some(1), Some(2))
        );
        // The largest scroll shows the last line and no "below".
        let end = window(12, &ranges, 100, 5);
        assert_eq!(
            (end.start, end.len, end.above, end.below),
            (8, 4, Some(2), None)
        );
        assert_eq!(window(3, &ranges, 7, 5).len, 3);
    }
}
