//! One frame of the full-screen UI, above the layout and the widgets.
//!
//! Per frame, in this order: the widgets measure themselves ([`Measure`]),
//! the [layout](super::layout) is computed once from those measures at the
//! frame's size, the store learns what it needs from that layout (a view
//! scrolled up stays still as lines arrive below; the scroll limits the
//! keys use), and every widget draws into its area of that same layout.
//! Nothing lays the screen out anywhere else, so the keys page by exactly
//! what is on screen.
//!
//! [`Screen`] keeps what frames share: the transcript's rendered lines and
//! the plan panel's. The UI actor owns it; the store only marks what
//! changed.

use ratatui::Frame;
use ratatui::widgets::Paragraph;

use super::layout::{self, Areas, Measure, PlanPlacement};
use super::state::{ScrollLimit, ScrollLimits, Store};
use super::theme;
use super::widgets::plan_panel::{self, PlanLines};
use super::widgets::transcript::{self, LineCache};
use super::widgets::{approval, header, input_line, status_line, subagent_bar};

/// The body: the transcript and the plan panel, wherever it is.
fn body(areas: &Areas) -> ratatui::layout::Rect {
    match areas.plan {
        Some(plan) if areas.transcript.height == 0 => plan,
        Some(plan) => areas.transcript.union(plan),
        None => areas.transcript,
    }
}

/// The rendered lines kept from one frame to the next.
#[derive(Debug, Default)]
pub struct Screen {
    transcript: LineCache,
    plan: PlanLines,
    approval: approval::RowCache,
}

/// The widgets' measures of one store, for the layout.
struct Measures<'a> {
    store: &'a Store,
    screen: &'a mut Screen,
}

impl Measure for Measures<'_> {
    fn input_rows(&mut self, width: u16) -> u16 {
        input_line::height(self.store, width)
    }

    fn bar_rows(&mut self, width: u16, room: u16) -> u16 {
        subagent_bar::height(self.store, width, room)
    }

    fn plan_rows(&mut self, width: u16) -> usize {
        plan_panel::height(&mut self.screen.plan, self.store.plan.as_ref(), width)
    }

    fn transcript_lines(&mut self, width: u16) -> usize {
        transcript::height(&mut self.screen.transcript, self.store, width)
    }
}

/// The layout of `store` at its size, measured afresh (tests, tools).
pub fn layout_of(store: &Store) -> Areas {
    Screen::default().layout(store, store.size)
}

impl Screen {
    /// A screen whose transcript holds about `budget` lines off screen at
    /// most (see [`transcript::LINE_BUDGET`]).
    pub fn with_line_budget(budget: usize) -> Screen {
        Screen {
            transcript: LineCache::with_budget(budget),
            plan: PlanLines::default(),
            approval: approval::RowCache::default(),
        }
    }

    /// Draws one whole frame of `store` at the frame's size.
    pub fn draw(&mut self, frame: &mut Frame, store: &mut Store) {
        let area = frame.area();
        let areas = self.prepare(store, (area.width, area.height));
        self.render(frame, store, &areas);
    }

    /// The layout at `size`, from the widgets' measures.
    pub fn layout(&mut self, store: &Store, size: (u16, u16)) -> Areas {
        let mut measures = Measures {
            store,
            screen: self,
        };
        layout::compute(size, store.plan_overlay, &mut measures)
    }

    /// Lays out a frame at `size` and settles the store on it: while the
    /// transcript is scrolled up, lines that arrived below move the scroll
    /// position with them (the view stays still) and the "new output"
    /// marker shows; the scroll limits go to the store for the keys.
    pub fn prepare(&mut self, store: &mut Store, size: (u16, u16)) -> Areas {
        let areas = self.layout(store, size);
        let total = transcript::height(&mut self.transcript, store, areas.transcript.width);
        let top_shift = self.transcript.take_top_shift();
        let seen = store.seen_lines.saturating_add_signed(-top_shift);
        if store.transcript_scroll == 0 {
            store.new_output = false;
        } else if total > seen {
            store.transcript_scroll += total - seen;
            store.new_output = true;
        }
        store.seen_lines = total;
        store.scroll_limits = self.limits(store, &areas, total);
        approval::settle(store, body(&areas), &mut self.approval);
        areas
    }

    fn limits(&mut self, store: &Store, areas: &Areas, total: usize) -> ScrollLimits {
        let rows = areas.transcript.height;
        let transcript = ScrollLimit {
            page: usize::from(rows.saturating_sub(1)).max(1),
            max: transcript::max_scroll(total, rows),
        };
        let plan_overlay = match (store.plan_overlay, areas.plan) {
            (true, Some(plan)) => {
                let inner = plan_panel::inner(plan);
                let lines = self.plan.refresh(store.plan.as_ref(), inner.width).len();
                Some(ScrollLimit {
                    page: usize::from(inner.height.saturating_sub(2)).max(1),
                    max: plan_panel::max_scroll(lines, inner),
                })
            }
            _ => None,
        };
        ScrollLimits {
            transcript,
            plan_overlay,
        }
    }

    /// Draws every widget into its area of `areas` (without colours under
    /// `NO_COLOR`).
    pub fn render(&mut self, frame: &mut Frame, store: &Store, areas: &Areas) {
        if let Some(header) = areas.header {
            header::render(frame, header, store);
        }
        if let Some(bar) = areas.bar {
            subagent_bar::render(frame, bar, store);
        }
        if areas.transcript.height > 0 {
            transcript::render(frame, areas.transcript, store, &mut self.transcript);
        }
        if let Some(plan) = areas.plan {
            let overlay = areas.placement == PlanPlacement::Overlay;
            let (view, scroll) = (store.plan.as_ref(), store.plan_scroll);
            plan_panel::render(frame, plan, view, overlay, scroll, &mut self.plan);
        }
        // Over the whole body, plan included: nothing hides the request.
        if let Some(pending) = &store.approval {
            approval::render(frame, body(areas), pending, &mut self.approval);
        }
        if let Some(rule) = areas.rule {
            let line = "─".repeat(usize::from(rule.width));
            frame.render_widget(Paragraph::new(line).style(theme::dim()), rule);
        }
        if areas.input.height > 0 {
            let cursor = input_line::render(frame, areas.input, store);
            frame.set_cursor_position(cursor);
        }
        if let Some(status) = areas.status {
            status_line::render(frame, status, store);
        }
        if store.no_color {
            theme::strip_colours(frame.buffer_mut());
        }
    }

    /// Lines the transcript's cache holds now (its budget's measure).
    pub fn held_transcript_lines(&self) -> usize {
        self.transcript.held_lines()
    }
}
