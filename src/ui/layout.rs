//! Measured layout: where each widget goes, computed from the terminal size
//! and how tall each widget wants to be at a width (codex's
//! `Renderable::desired_height` idea). The widgets measure themselves; the
//! [frame](super::frame) hands their measures in ([`Measure`]), computes
//! the layout once per frame, draws with it and keeps the scroll limits it
//! gives, so PageUp scrolls exactly what is on screen. This module knows
//! no widget and no store.
//!
//! ```text
//! header                                   (1 row)
//! SUBAGENT bar                             (0–5 rows: one per subagent, at most
//!                                           4, then `+N more`)
//! transcript            │ plan panel       (side by side from 100 columns;
//!                       │                   below the transcript when narrower;
//!                       │                   over the whole body with F2)
//! ─── rule ───                             (1 row)
//! ↳ queued messages, › input              (1 row, more for a multi-line
//!                                           draft and the queued messages, up
//!                                           to a third of the screen)
//! status / key hints                       (1 row)
//! ```
//!
//! Below 40×10 the screen is [compact](compact): transcript, rule, input
//! and status only, down to a 1×1 terminal.

use ratatui::layout::Rect;

/// Below this the screen is compact: no header, subagent bar or plan panel
/// (F2 still shows the plan over the body), the status line says what the
/// turn does; the transcript, the input and the status keep working down
/// to a single row.
pub const COMPACT_BELOW_WIDTH: u16 = 40;
pub const COMPACT_BELOW_HEIGHT: u16 = 10;
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
    /// `None` on a compact screen.
    pub header: Option<Rect>,
    pub bar: Option<Rect>,
    /// Zero height while the plan overlay covers the body.
    pub transcript: Rect,
    pub plan: Option<Rect>,
    pub placement: PlanPlacement,
    /// `None` when the screen is too short to spare the row.
    pub rule: Option<Rect>,
    pub input: Rect,
    /// `None` on a one-row screen.
    pub status: Option<Rect>,
}

/// How tall each widget wants to be: the widgets' own measures.
pub trait Measure {
    /// Rows the input editor wants at this width (at least one).
    fn input_rows(&mut self, width: u16) -> u16;
    /// Rows the subagent bar wants at this width, given at most `room`.
    fn bar_rows(&mut self, width: u16, room: u16) -> u16;
    /// Rows the plan panel wants at this width, its border included.
    fn plan_rows(&mut self, width: u16) -> usize;
    /// Lines the transcript has at this width.
    fn transcript_lines(&mut self, width: u16) -> usize;
}

/// The layout of a terminal of `size` (columns, rows), with the plan over
/// the whole body when `plan_overlay`.
pub fn compute(size: (u16, u16), plan_overlay: bool, measure: &mut dyn Measure) -> Areas {
    let (width, height) = size;
    if width < COMPACT_BELOW_WIDTH || height < COMPACT_BELOW_HEIGHT {
        return compact(size, plan_overlay, measure);
    }
    let row = |y: u16, h: u16| Rect::new(0, y, width, h);
    let header = row(0, 1);
    let status = row(height - 1, 1);
    // A multi-line draft takes up to a third of the screen.
    let input_cap = (height.saturating_sub(3) / 3).max(1);
    let input_rows = measure.input_rows(width).min(input_cap);
    // The bar takes at most half of what the header, rule, input and
    // status leave, so the transcript keeps rows on a short terminal.
    let spare = height.saturating_sub(3 + input_rows);
    let bar_height = measure.bar_rows(width, spare / 2);
    let bar = (bar_height > 0).then(|| row(1, bar_height));
    let body_top = 1 + bar_height;
    let input = row(height - 1 - input_rows, input_rows);
    let rule = row(input.y - 1, 1);
    let body = row(body_top, rule.y.saturating_sub(body_top));
    let (transcript, plan, placement) = if plan_overlay {
        (Rect::new(0, body.y, width, 0), body, PlanPlacement::Overlay)
    } else if width >= SIDE_PANEL_FROM_WIDTH {
        let panel = (width * 2 / 5).clamp(SIDE_PANEL_MIN, SIDE_PANEL_MAX);
        let left = Rect::new(0, body.y, width - panel, body.height);
        let right = Rect::new(width - panel, body.y, panel, body.height);
        (left, right, PlanPlacement::Side)
    } else {
        plan_below(body, measure)
    };
    Areas {
        header: Some(header),
        bar,
        transcript,
        plan: (plan.height > 0).then_some(plan),
        placement,
        rule: Some(rule),
        input,
        status: Some(status),
    }
}

/// The plan gets what it needs, but leaves the transcript what it needs
/// too, or at least 55% of the body.
fn plan_below(body: Rect, measure: &mut dyn Measure) -> (Rect, Rect, PlanPlacement) {
    let width = body.width;
    let wanted = measure.plan_rows(width);
    let body_rows = usize::from(body.height);
    let transcript_rows = measure.transcript_lines(width);
    let room = (body_rows * 45 / 100).max(body_rows.saturating_sub(transcript_rows));
    let panel = wanted.min(room).max(3).min(body_rows) as u16;
    let top = Rect::new(0, body.y, width, body.height - panel);
    let bottom = Rect::new(0, body.y + top.height, width, panel);
    (top, bottom, PlanPlacement::Below)
}

/// A small terminal (20×6, a split pane): the transcript's last lines, a
/// rule while there are rows to spare, the input (up to half the screen
/// for a multi-line draft) and the status line, in that order of giving
/// way.
fn compact(size: (u16, u16), plan_overlay: bool, measure: &mut dyn Measure) -> Areas {
    let (width, height) = size;
    let row = |y: u16, h: u16| Rect::new(0, y, width, h);
    let status_rows = u16::from(height >= 2);
    let cap = (height.saturating_sub(status_rows + 1) / 2).max(1);
    let input_rows = measure.input_rows(width).min(cap).min(height);
    let rest = height - status_rows - input_rows;
    let rule_rows = u16::from(rest >= 3);
    let body = row(0, rest - rule_rows);
    let input = row(body.height + rule_rows, input_rows);
    let (transcript, plan) = if plan_overlay && body.height >= 3 {
        (row(0, 0), Some(body))
    } else {
        (body, None)
    };
    Areas {
        header: None,
        bar: None,
        transcript,
        plan,
        placement: PlanPlacement::Overlay,
        rule: (rule_rows > 0).then(|| row(body.height, 1)),
        input,
        status: (status_rows > 0).then(|| row(height - 1, 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Measures of a store with a draft of this many lines and no
    /// subagent.
    struct Draft(u16);

    impl Measure for Draft {
        fn input_rows(&mut self, _width: u16) -> u16 {
            self.0
        }
        fn bar_rows(&mut self, _width: u16, _room: u16) -> u16 {
            0
        }
        fn plan_rows(&mut self, _width: u16) -> usize {
            6
        }
        fn transcript_lines(&mut self, _width: u16) -> usize {
            1
        }
    }

    fn rects(areas: &Areas) -> Vec<Rect> {
        [areas.transcript, areas.input]
            .into_iter()
            .chain(areas.header)
            .chain(areas.bar)
            .chain(areas.plan)
            .chain(areas.rule)
            .chain(areas.status)
            .collect()
    }

    #[test]
    fn every_size_fits_inside_the_terminal_without_overlaps() {
        for overlay in [false, true] {
            for width in 0..=160u16 {
                for height in 0..=50u16 {
                    let areas = compute((width, height), overlay, &mut Draft(4));
                    let rects = rects(&areas);
                    for rect in &rects {
                        assert!(rect.right() <= width && rect.bottom() <= height, "{rect:?}");
                    }
                    let rows: u16 = rects
                        .iter()
                        .filter(|rect| rect.x == 0)
                        .map(|rect| rect.height)
                        .sum();
                    assert!(rows <= height, "{width}×{height}: {areas:?}");
                    if height > 0 {
                        assert_eq!(areas.input.height.min(1), 1, "{width}×{height}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_terminal_keeps_transcript_rule_input_and_status() {
        let areas = compute((20, 6), false, &mut Draft(1));
        assert_eq!(areas.header, None);
        assert_eq!(areas.plan, None);
        assert_eq!(areas.transcript, Rect::new(0, 0, 20, 3));
        assert_eq!(areas.rule, Some(Rect::new(0, 3, 20, 1)));
        assert_eq!(areas.input, Rect::new(0, 4, 20, 1));
        assert_eq!(areas.status, Some(Rect::new(0, 5, 20, 1)));
        let one_row = compute((20, 1), false, &mut Draft(1));
        assert_eq!((one_row.input.height, one_row.status), (1, None));
    }
}
