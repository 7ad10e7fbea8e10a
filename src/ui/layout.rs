//! Measured layout: where each widget goes, computed from the terminal size
//! and how tall each widget wants to be at that width (codex's
//! `Renderable::desired_height` idea). Drawing and paging use the same
//! computation, so PageUp scrolls exactly what is on screen.
//!
//! ```text
//! header                                   (1 row)
//! SUBAGENT bar                             (0–5 rows: one per subagent, at most
//!                                           4, then `+N more`)
//! transcript            │ plan panel       (side by side from 100 columns;
//!                       │                   below the transcript when narrower;
//!                       │                   over the whole body with F2)
//! ─── rule ───                             (1 row)
//! › input                                  (1 row, more for a multi-line
//!                                           draft, up to a third of the screen)
//! status / key hints                       (1 row)
//! ```

use ratatui::layout::Rect;

use super::store::Store;
use super::widgets::{input_line, plan_panel, subagent_bar, transcript};

/// Below this the screen shows only "terminal too small".
pub const MIN_WIDTH: u16 = 40;
pub const MIN_HEIGHT: u16 = 10;
/// From this width the plan panel is a side rail on the right.
pub const SIDE_PANEL_FROM_WIDTH: u16 = 100;
const SIDE_PANEL_MIN: u16 = 40;
const SIDE_PANEL_MAX: u16 = 64;

/// Where the plan panel is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanPlacement {
    /// A rail on the right of the transcript.
    Side,
    /// Below the transcript (narrow terminals).
    Below,
    /// Over the whole body (F2 / Ctrl+P).
    Overlay,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub bar: Option<Rect>,
    /// Zero height while the plan overlay covers the body.
    pub transcript: Rect,
    pub plan: Option<Rect>,
    pub placement: PlanPlacement,
    pub rule: Rect,
    pub input: Rect,
    pub status: Rect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screen {
    TooSmall,
    Normal(Areas),
}

/// The layout of a terminal of `size` (columns, rows).
pub fn compute(size: (u16, u16), store: &Store) -> Screen {
    let (width, height) = size;
    if width < MIN_WIDTH || height < MIN_HEIGHT {
        return Screen::TooSmall;
    }
    let row = |y: u16, h: u16| Rect::new(0, y, width, h);
    let header = row(0, 1);
    let status = row(height - 1, 1);
    let input_rows = input_line::height(store, width, height);
    // The bar takes at most half of what the header, rule, input and
    // status leave, so the transcript keeps rows on a short terminal.
    let spare = height.saturating_sub(3 + input_rows);
    let bar_height = subagent_bar::height(store, width, spare / 2);
    let bar = (bar_height > 0).then(|| row(1, bar_height));
    let body_top = 1 + bar_height;
    let input = row(height - 1 - input_rows, input_rows);
    let rule = row(input.y - 1, 1);
    let body = row(body_top, rule.y.saturating_sub(body_top));

    let (transcript, plan, placement) = if store.plan_overlay {
        (Rect::new(0, body.y, width, 0), body, PlanPlacement::Overlay)
    } else if width >= SIDE_PANEL_FROM_WIDTH {
        let panel = (width * 2 / 5).clamp(SIDE_PANEL_MIN, SIDE_PANEL_MAX);
        let left = Rect::new(0, body.y, width - panel, body.height);
        let right = Rect::new(width - panel, body.y, panel, body.height);
        (left, right, PlanPlacement::Side)
    } else {
        // The plan gets what it needs, but leaves the transcript what it
        // needs too, or at least 55% of the body.
        let border = plan_panel::inner(Rect::new(0, 0, width, 10));
        let wanted = plan_panel::content_height(store.plan.as_ref(), border.width)
            + usize::from(10 - border.height);
        let body_rows = usize::from(body.height);
        let transcript_rows = transcript::total_lines(store, width);
        let room = (body_rows * 45 / 100).max(body_rows.saturating_sub(transcript_rows));
        let panel = wanted.min(room).max(3).min(body_rows) as u16;
        let top = Rect::new(0, body.y, width, body.height - panel);
        let bottom = Rect::new(0, body.y + top.height, width, panel);
        (top, bottom, PlanPlacement::Below)
    };
    Screen::Normal(Areas {
        header,
        bar,
        transcript,
        plan: (plan.height > 0).then_some(plan),
        placement,
        rule,
        input,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_fits_inside_the_terminal() {
        let store = Store::new((0, 0));
        for width in 0..=160u16 {
            for height in 0..=50u16 {
                let Screen::Normal(areas) = compute((width, height), &store) else {
                    assert!(width < MIN_WIDTH || height < MIN_HEIGHT);
                    continue;
                };
                for rect in [
                    areas.header,
                    areas.transcript,
                    areas.rule,
                    areas.input,
                    areas.status,
                ]
                .into_iter()
                .chain(areas.plan)
                .chain(areas.bar)
                {
                    assert!(rect.right() <= width && rect.bottom() <= height, "{rect:?}");
                }
            }
        }
    }
}
