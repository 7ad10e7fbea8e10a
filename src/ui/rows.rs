//! Rendered lines kept compactly: the text of all rows in one string, and
//! per row a few words (where it ends, its style runs), instead of a
//! `Line` of `Span`s that each own a string. A `Line` costs about 200 bytes
//! before its text; a row here costs 16 bytes and 8 per style run, so a
//! transcript's rendered rows stay a small multiple of its text. Lines are
//! made again only for the rows drawn.
//!
//! Adjacent spans of one style are kept as one run where that cannot
//! change what is drawn (both sides of the join plain ASCII, so no
//! grapheme cluster spans it): the cells are the same, the spans fewer.

use ratatui::layout::Alignment;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// Rows of styled text, appended in order, read by index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    /// The text of every row, one after the other.
    text: String,
    heads: Vec<Head>,
    runs: Vec<Run>,
    /// The distinct styles used, indexed by [`Run::style`] and
    /// [`Head::style`] (a handful per transcript entry).
    styles: Vec<Style>,
}

/// Where one row ends in `text` and `runs`, and its own style.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Head {
    text_end: u32,
    runs_end: u32,
    style: u32,
    alignment: Option<Alignment>,
}

/// A span: where it ends in `text`, and its style.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Run {
    end: u32,
    style: u32,
}

/// Offsets are `u32`: a transcript entry's rows are far below 4 GiB (its
/// source text is capped at 64 MiB); a longer one would be cut, not wrap.
fn offset(at: usize) -> u32 {
    u32::try_from(at).unwrap_or(u32::MAX)
}

impl Rows {
    /// No rows (a constant, for borrowing).
    pub const EMPTY: Rows = Rows {
        text: String::new(),
        heads: Vec::new(),
        runs: Vec::new(),
        styles: Vec::new(),
    };

    pub fn new() -> Rows {
        Rows::default()
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// Heap bytes held (what the rows cost).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity()
            + self.heads.capacity() * std::mem::size_of::<Head>()
            + self.runs.capacity() * std::mem::size_of::<Run>()
            + self.styles.capacity() * std::mem::size_of::<Style>()
    }

    /// Gives back the room grown for appending (once no row will come).
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.heads.shrink_to_fit();
        self.runs.shrink_to_fit();
    }

    fn style_index(&mut self, style: Style) -> u32 {
        if let Some(index) = self.styles.iter().rposition(|known| *known == style) {
            return offset(index);
        }
        self.styles.push(style);
        offset(self.styles.len() - 1)
    }

    /// Appends `line` as the last row.
    pub fn push(&mut self, line: &Line<'_>) {
        let row_start = self.text.len();
        let runs_start = self.runs.len();
        for span in &line.spans {
            self.push_span(span, row_start, runs_start);
        }
        if u32::try_from(self.text.len()).is_err() {
            // Past what offsets can say: the row is dropped whole.
            self.text.truncate(row_start);
            self.runs.truncate(runs_start);
        }
        let style = self.style_index(line.style);
        self.heads.push(Head {
            text_end: offset(self.text.len()),
            runs_end: offset(self.runs.len()),
            style,
            alignment: line.alignment,
        });
    }

    fn push_span(&mut self, span: &Span<'_>, row_start: usize, runs_start: usize) {
        let content = span.content.as_ref();
        if content.is_empty() {
            // Draws nothing.
            return;
        }
        let style = self.style_index(span.style);
        let joins = self.runs.len() > runs_start
            && self.runs.last().is_some_and(|run| run.style == style)
            && plain_join(&self.text[row_start..], content);
        self.text.push_str(content);
        let end = offset(self.text.len());
        match self.runs.last_mut() {
            Some(last) if joins => last.end = end,
            _ => self.runs.push(Run { end, style }),
        }
    }

    /// Appends every row of `other`.
    pub fn append(&mut self, other: &Rows) {
        if u32::try_from(self.text.len() + other.text.len()).is_err() {
            // Past what offsets can say (see `offset`): rows are dropped.
            return;
        }
        let styles: Vec<u32> = other.styles.iter().map(|s| self.style_index(*s)).collect();
        let restyle = |index: u32| styles.get(index as usize).copied().unwrap_or(0);
        let text_shift = offset(self.text.len());
        let runs_shift = offset(self.runs.len());
        self.text.push_str(&other.text);
        self.runs.extend(other.runs.iter().map(|run| Run {
            end: run.end + text_shift,
            style: restyle(run.style),
        }));
        self.heads.extend(other.heads.iter().map(|head| Head {
            text_end: head.text_end + text_shift,
            runs_end: head.runs_end + runs_shift,
            style: restyle(head.style),
            alignment: head.alignment,
        }));
    }

    /// Row `index` as a line (an empty line past the end).
    pub fn line(&self, index: usize) -> Line<'static> {
        let Some(head) = self.heads.get(index) else {
            return Line::default();
        };
        let (text_start, runs_start) = match index.checked_sub(1) {
            Some(previous) => {
                let previous = self.heads[previous];
                (previous.text_end as usize, previous.runs_end as usize)
            }
            None => (0, 0),
        };
        let mut at = text_start;
        let spans: Vec<Span<'static>> = self.runs[runs_start..head.runs_end as usize]
            .iter()
            .map(|run| {
                let content = self.text[at..run.end as usize].to_string();
                at = run.end as usize;
                Span::styled(content, self.style(run.style))
            })
            .collect();
        let mut line = Line::from(spans).style(self.style(head.style));
        line.alignment = head.alignment;
        line
    }

    fn style(&self, index: u32) -> Style {
        self.styles.get(index as usize).copied().unwrap_or_default()
    }

    /// Rows `from..to` (cut to the rows there are) as lines.
    pub fn lines(&self, from: usize, to: usize) -> impl Iterator<Item = Line<'static>> + '_ {
        (from..to.min(self.len())).map(|index| self.line(index))
    }

    /// Every row as a line.
    pub fn to_lines(&self) -> Vec<Line<'static>> {
        self.lines(0, self.len()).collect()
    }
}

impl From<&[Line<'_>]> for Rows {
    fn from(lines: &[Line<'_>]) -> Rows {
        let mut rows = Rows::new();
        for line in lines {
            rows.push(line);
        }
        rows
    }
}

/// Whether `before` then `after` in one span draws as they do in two:
/// a join of two printable ASCII characters is always a grapheme break.
fn plain_join(before: &str, after: &str) -> bool {
    let printable = |c: char| c.is_ascii() && !c.is_ascii_control();
    before.chars().next_back().is_some_and(printable) && after.chars().next().is_some_and(printable)
}

/// Where rendered lines go: a `Vec` of lines, or compact [`Rows`].
pub trait LineSink {
    fn push_line(&mut self, line: Line<'static>);
    fn is_empty(&self) -> bool;
}

impl LineSink for Vec<Line<'static>> {
    fn push_line(&mut self, line: Line<'static>) {
        self.push(line);
    }

    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

impl LineSink for Rows {
    fn push_line(&mut self, line: Line<'static>) {
        self.push(&line);
    }

    fn is_empty(&self) -> bool {
        Rows::is_empty(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::theme;

    fn cells(line: &Line<'_>) -> Vec<(String, Style)> {
        line.styled_graphemes(Style::new())
            .map(|g| (g.symbol.to_string(), g.style))
            .collect()
    }

    #[test]
    fn lines_come_back_drawing_the_same_cells() {
        let lines = vec![
            Line::from(vec![
                Span::raw("  "),
                Span::styled("fn", theme::bold()),
                Span::raw(" main"),
                Span::raw("()"),
            ]),
            Line::default(),
            Line::styled("dim line", theme::dim()).right_aligned(),
            Line::from(vec![
                Span::raw("e"),
                Span::raw("\u{301}"),
                Span::raw("日本"),
            ]),
            Line::from(vec![Span::raw(""), Span::styled("x", theme::error())]),
        ];
        let rows = Rows::from(lines.as_slice());
        assert_eq!(rows.len(), lines.len());
        for (index, line) in lines.iter().enumerate() {
            let back = rows.line(index);
            assert_eq!(cells(&back), cells(line), "row {index}");
            assert_eq!(back.style, line.style);
            assert_eq!(back.alignment, line.alignment);
        }
        assert_eq!(
            rows.line(0).spans.len(),
            3,
            "plain ASCII of one style joins"
        );
        assert_eq!(rows.line(3).spans.len(), 3, "a combining mark stays apart");
        assert_eq!(rows.line(99), Line::default());
    }

    #[test]
    fn appended_rows_keep_their_text_and_styles() {
        let first = Rows::from(&[Line::styled("one", theme::dim()), Line::raw("two")][..]);
        let second = Rows::from(
            &[
                Line::from(vec![Span::styled("three", theme::error()), Span::raw("!")]),
                Line::styled("four", theme::dim()),
            ][..],
        );
        let mut all = first.clone();
        all.append(&second);
        let expected: Vec<Line<'static>> = first
            .to_lines()
            .into_iter()
            .chain(second.to_lines())
            .collect();
        assert_eq!(all.to_lines(), expected);
        assert_eq!(all.line(2).spans[0].style, theme::error());
    }

    #[test]
    fn a_row_costs_its_text_and_a_few_words() {
        let mut rows = Rows::new();
        let words: Vec<Span<'static>> = (0..20)
            .flat_map(|n| [Span::raw(format!("word{n}")), Span::raw(" ")])
            .collect();
        let line = Line::from(words);
        for _ in 0..1000 {
            rows.push(&line);
        }
        rows.shrink_to_fit();
        let text = line.to_string().len() * 1000;
        assert!(
            rows.heap_bytes() < text + 1000 * 32,
            "{}",
            rows.heap_bytes()
        );
    }
}
