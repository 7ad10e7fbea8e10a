//! Markdown tables: aligned columns when they fit the width, else each row
//! as `header: value` lines, so a narrow terminal never cuts a cell.

use pulldown_cmark::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::ui::theme;
use crate::ui::wrap::{width as text_width, wrap};

/// Cells are runs of styled text.
type Cell = Vec<(String, Style)>;

#[derive(Debug)]
pub struct Table {
    alignments: Vec<Alignment>,
    /// The header row first.
    rows: Vec<Vec<Cell>>,
}

impl Table {
    pub fn new(alignments: Vec<Alignment>) -> Table {
        Table {
            alignments,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self) {
        self.rows.push(Vec::new());
    }

    pub fn cell(&mut self) {
        if self.rows.is_empty() {
            self.row();
        }
        if let Some(row) = self.rows.last_mut() {
            row.push(Vec::new());
        }
    }

    pub fn text(&mut self, text: &str, style: Style) {
        if let Some(cell) = self.rows.last_mut().and_then(|row| row.last_mut()) {
            cell.push((text.replace('\n', " "), style));
        }
    }

    fn columns(&self) -> usize {
        self.rows.iter().map(Vec::len).max().unwrap_or(0)
    }

    fn column_widths(&self) -> Vec<usize> {
        let mut widths = vec![0; self.columns()];
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(cell_width(cell));
            }
        }
        widths
    }

    pub fn render(&self, width: usize) -> Vec<Line<'static>> {
        let widths = self.column_widths();
        let total = widths.iter().sum::<usize>() + 3 * widths.len().saturating_sub(1);
        if widths.is_empty() {
            return Vec::new();
        }
        if total <= width {
            self.aligned(&widths)
        } else {
            self.stacked(width)
        }
    }

    fn aligned(&self, widths: &[usize]) -> Vec<Line<'static>> {
        let mut out = Vec::new();
        for (index, row) in self.rows.iter().enumerate() {
            let mut spans = Vec::new();
            for (column, width) in widths.iter().enumerate() {
                if column > 0 {
                    spans.push(Span::styled(" │ ", theme::dim()));
                }
                let empty = Vec::new();
                let cell = row.get(column).unwrap_or(&empty);
                let pad = width - cell_width(cell);
                let (left, right) = match self.alignments.get(column) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    Some(Alignment::Left | Alignment::None) | None => (0, pad),
                };
                spans.push(Span::raw(" ".repeat(left)));
                for (text, style) in cell {
                    let style = if index == 0 {
                        style.patch(theme::bold())
                    } else {
                        *style
                    };
                    spans.push(Span::styled(text.clone(), style));
                }
                if column + 1 < widths.len() {
                    spans.push(Span::raw(" ".repeat(right)));
                }
            }
            out.push(Line::from(spans));
            if index == 0 {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                out.push(Line::styled(rule.join("─┼─"), theme::dim()));
            }
        }
        out
    }

    /// Too wide: every body row as `header: value` lines, rows apart.
    fn stacked(&self, width: usize) -> Vec<Line<'static>> {
        let Some((header, body)) = self.rows.split_first() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (index, row) in body.iter().enumerate() {
            if index > 0 {
                out.push(Line::default());
            }
            for (column, cell) in row.iter().enumerate() {
                let name: String = header
                    .get(column)
                    .map(|h| h.iter().map(|(t, _)| t.as_str()).collect())
                    .unwrap_or_default();
                let label = format!("{name}: ");
                let mut segments: Vec<(&str, Style)> = vec![(label.as_str(), theme::bold())];
                segments.extend(cell.iter().map(|(t, s)| (t.as_str(), *s)));
                out.extend(wrap(&segments, width, 2));
            }
        }
        out
    }
}

fn cell_width(cell: &Cell) -> usize {
    cell.iter().map(|(text, _)| text_width(text)).sum()
}
