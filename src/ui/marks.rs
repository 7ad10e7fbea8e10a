//! Visible marks for characters a terminal would not show as themselves,
//! so that text shown for approval is exactly the text that runs.
//!
//! The scheme, everywhere the approval prompt shows a request:
//!
//! | in the text                                   | on screen                   |
//! |-----------------------------------------------|-----------------------------|
//! | newline                                       | `⏎`, then a real line break |
//! | three or more newlines                        | `⏎×N`, then one line break  |
//! | tab, CR, ESC, other C0 controls, DEL          | `␉` `␍` `␛` `␀`…`␟` `␡`     |
//! | C1 controls, zero-width, bidi, odd spaces     | `⟨U+202E⟩`                  |
//! | a run of [`SPACE_RUN`] or more spaces         | `·×N`                       |
//! | the same marked character repeated           | its mark then `×N`          |
//!
//! Marks are drawn in their own style (reversed), so a literal `⏎` or `·`
//! in the text never looks like a mark. Rows are cut at the width only,
//! never at words and never with anything dropped: every cell of a row is
//! the text's or a mark's.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

use super::wrap::width;

/// Runs of this many spaces or more show as `·×N`.
pub const SPACE_RUN: usize = 5;
/// Runs of this many newlines or more show as one `⏎×N`.
const NEWLINE_RUN: usize = 3;

/// A piece of a marked line: the text as it is, or a mark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Mark(String),
}

/// The mark for a character that does not show as itself, if it is one.
pub fn mark_of(c: char) -> Option<String> {
    let code = u32::from(c);
    match c {
        '\u{7f}' => Some("␡".into()),
        // Control Pictures: U+2400 + the control's code.
        '\0'..='\u{1f}' => char::from_u32(0x2400 + code).map(String::from),
        c if is_invisible(c) => Some(format!("⟨U+{code:04X}⟩")),
        _ => None,
    }
}

/// C1 controls, zero-width and format characters, bidi controls, and
/// spaces that are not U+0020 (they look like a word break but are not
/// one to a shell).
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{80}'..='\u{9f}'
        | '\u{a0}' | '\u{ad}' | '\u{34f}' | '\u{61c}'
        | '\u{115f}' | '\u{1160}' | '\u{1680}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{2000}'..='\u{200f}'
        | '\u{2028}'..='\u{202f}'
        | '\u{205f}'..='\u{206f}'
        | '\u{3000}' | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}' | '\u{ffa0}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}'
    )
}

/// `text` as lines of pieces. A line break in the result is always a
/// newline in the text (marked `⏎` at the end of its line), and the text
/// has no newline that is not one. A final newline ends the last line
/// (no empty line follows it).
pub fn marked_lines(text: &str) -> Vec<Vec<Piece>> {
    let mut lines = vec![Vec::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let mut run = 1;
        while chars.peek() == Some(&c) {
            chars.next();
            run += 1;
        }
        let Some(line) = lines.last_mut() else {
            break;
        };
        match c {
            '\n' => {
                if run >= NEWLINE_RUN {
                    line.push(Piece::Mark(format!("⏎×{run}")));
                } else {
                    line.push(Piece::Mark("⏎".into()));
                    for _ in 1..run {
                        lines.push(vec![Piece::Mark("⏎".into())]);
                    }
                }
                if chars.peek().is_some() {
                    lines.push(Vec::new());
                }
            }
            ' ' if run >= SPACE_RUN => line.push(Piece::Mark(format!("·×{run}"))),
            c => match mark_of(c) {
                Some(mark) if run > 1 => line.push(Piece::Mark(format!("{mark}×{run}"))),
                Some(mark) => line.push(Piece::Mark(mark)),
                None => push_text(line, c, run),
            },
        }
    }
    lines
}

/// `text` marked on one line (a newline is its `⏎` only), for a note
/// that quotes it.
pub fn inline(text: &str) -> String {
    marked_lines(text)
        .iter()
        .flatten()
        .map(|piece| match piece {
            Piece::Text(text) | Piece::Mark(text) => text.as_str(),
        })
        .collect()
}

fn push_text(line: &mut Vec<Piece>, c: char, run: usize) {
    if !matches!(line.last(), Some(Piece::Text(_))) {
        line.push(Piece::Text(String::new()));
    }
    if let Some(Piece::Text(last)) = line.last_mut() {
        last.extend(std::iter::repeat_n(c, run));
    }
}

/// `text`, marked and cut into rows at most `max_width` cells wide (a
/// single character wider than that gets a row of its own).
pub fn rows(text: &str, max_width: usize, style: Style, mark: Style) -> Vec<Line<'static>> {
    let max_width = max_width.max(1);
    let mut rows = Vec::new();
    for line in marked_lines(text) {
        let mut row = RowBuilder::default();
        for piece in &line {
            let (text, piece_style) = match piece {
                Piece::Text(text) => (text, style),
                Piece::Mark(text) => (text, mark),
            };
            for grapheme in text.graphemes(true) {
                let cells = width(grapheme);
                if row.used + cells > max_width && row.used > 0 {
                    rows.push(row.finish());
                }
                row.add(grapheme, cells, piece_style);
            }
        }
        rows.push(row.finish());
    }
    rows
}

/// The row being filled: spans merged while their style stays the same.
#[derive(Default)]
struct RowBuilder {
    spans: Vec<Span<'static>>,
    used: usize,
}

impl RowBuilder {
    fn add(&mut self, grapheme: &str, cells: usize, style: Style) {
        self.used += cells;
        match self.spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push_str(grapheme),
            _ => self.spans.push(Span::styled(grapheme.to_string(), style)),
        }
    }

    fn finish(&mut self) -> Line<'static> {
        self.used = 0;
        Line::from(std::mem::take(&mut self.spans))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Modifier;

    fn shown(text: &str, width: usize) -> Vec<String> {
        rows(text, width, Style::new(), Style::new())
            .iter()
            .map(|line| line.to_string())
            .collect()
    }

    #[test]
    fn a_newline_is_marked_and_breaks_the_line() {
        assert_eq!(
            shown("npm test -- --reporter=dot\nid > /tmp/x", 80),
            ["npm test -- --reporter=dot⏎", "id > /tmp/x"]
        );
        assert_eq!(shown("make\n", 80), ["make⏎"], "no empty line after");
        assert_eq!(shown("a\n\nb", 80), ["a⏎", "⏎", "b"]);
        assert_eq!(shown("a\n\n\n\nb", 80), ["a⏎×4", "b"]);
        assert_eq!(shown("", 80), [""]);
    }

    #[test]
    fn long_space_runs_are_counted_and_the_tail_stays_in_view() {
        let command = format!("npm test{}; id > /tmp/x", " ".repeat(300));
        assert_eq!(shown(&command, 80), ["npm test·×300; id > /tmp/x"]);
        assert_eq!(shown("a    b", 80), ["a    b"], "four spaces stay spaces");
        assert_eq!(shown("a     b", 80), ["a·×5b"]);
    }

    #[test]
    fn controls_and_invisible_characters_get_marks() {
        assert_eq!(shown("a\tb\rc\u{1b}[31md\u{7f}e\0", 80), ["a␉b␍c␛[31md␡e␀"]);
        assert_eq!(
            shown("ls \u{202e}txt.exe\u{200b}\u{feff}\u{9b}\u{a0}x", 80),
            ["ls ⟨U+202E⟩txt.exe⟨U+200B⟩⟨U+FEFF⟩⟨U+009B⟩⟨U+00A0⟩x"]
        );
        assert_eq!(shown(&"\u{200b}".repeat(1000), 80), ["⟨U+200B⟩×1000"]);
        assert_eq!(
            shown("\u{2066}\u{2069}\u{2028}", 80),
            ["⟨U+2066⟩⟨U+2069⟩⟨U+2028⟩"]
        );
    }

    #[test]
    fn rows_are_cut_at_the_width_with_nothing_dropped() {
        let text = "echo one two three four five six seven eight nine ten";
        let rows = shown(text, 12);
        assert!(rows.iter().all(|row| width(row) <= 12), "{rows:?}");
        assert_eq!(rows.concat(), text, "every character, in order");
        let wide = shown("日本語テキスト", 5);
        assert!(wide.iter().all(|row| width(row) <= 5), "{wide:?}");
        assert_eq!(wide.concat(), "日本語テキスト");
    }

    #[test]
    fn inline_keeps_one_line() {
        assert_eq!(inline("a\nb   \u{1b}"), "a⏎b   ␛");
    }

    #[test]
    fn marks_have_their_own_style() {
        let mark = Style::new().add_modifier(Modifier::REVERSED);
        let rows = rows("a⏎\nb", 80, Style::new(), mark);
        let first = &rows[0].spans;
        assert_eq!(first[0].content, "a⏎", "a literal ⏎ is text");
        assert_eq!(first[0].style, Style::new());
        assert_eq!((first[1].content.as_ref(), first[1].style), ("⏎", mark));
    }
}
