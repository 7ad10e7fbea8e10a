//! Word wrapping of styled text into lines of a given width, so widgets know
//! their height before drawing (ratatui's own wrapping cannot be measured).
//!
//! Widths are terminal cells by display width (wide characters count two,
//! combining marks none, an emoji sequence as the terminal draws it). Words longer than
//! a line are broken; explicit newlines are kept; continuation lines start
//! with `indent` spaces.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_segmentation::UnicodeSegmentation;

/// Display width of a string in terminal cells.
pub fn width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// Cuts `text` to at most `max` cells, ending with `…` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for grapheme in text.graphemes(true) {
        let w = width(grapheme);
        if used + w > max - 1 {
            break;
        }
        out.push_str(grapheme);
        used += w;
    }
    out.push('…');
    out
}

/// Wraps styled segments into lines at most `width` cells wide.
pub fn wrap(segments: &[(&str, Style)], max_width: usize, indent: usize) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    wrap_each(segments.iter().copied(), max_width, indent, |line| {
        lines.push(line);
    });
    lines
}

/// Wraps styled segments as [`wrap`] does, handing each line to `emit` as
/// soon as it is done: a long paragraph never holds all its lines at once.
pub fn wrap_each<'a>(
    segments: impl IntoIterator<Item = (&'a str, Style)>,
    max_width: usize,
    indent: usize,
    mut emit: impl FnMut(Line<'static>),
) {
    let mut out = Wrapper::new(max_width.max(1), indent.min(max_width / 2));
    for (text, style) in segments {
        for (i, paragraph) in text.split('\n').enumerate() {
            if i > 0 {
                out.break_line(false);
            }
            out.push_text(paragraph, style);
            for line in out.lines.drain(..) {
                emit(line);
            }
        }
    }
    emit(out.finish());
}

/// Wraps plain text in one style.
pub fn wrap_plain(text: &str, style: Style, max_width: usize, indent: usize) -> Vec<Line<'static>> {
    wrap(&[(text, style)], max_width, indent)
}

struct Wrapper {
    width: usize,
    indent: usize,
    lines: Vec<Line<'static>>,
    current: Vec<Span<'static>>,
    used: usize,
    /// Nothing but the indent on the current line yet.
    at_start: bool,
    /// The current line continues a wrapped one (not after a newline).
    soft: bool,
}

impl Wrapper {
    fn new(width: usize, indent: usize) -> Self {
        Wrapper {
            width,
            indent,
            lines: Vec::new(),
            current: Vec::new(),
            used: 0,
            at_start: true,
            soft: false,
        }
    }

    fn break_line(&mut self, soft: bool) {
        if soft {
            // A wrapped line does not end in the space it wrapped at.
            while let Some(last) = self.current.last_mut() {
                let trimmed = last.content.trim_end_matches(' ');
                if trimmed.is_empty() {
                    self.current.pop();
                    continue;
                }
                if trimmed.len() != last.content.len() {
                    last.content = trimmed.to_string().into();
                }
                break;
            }
        }
        let spans = std::mem::take(&mut self.current);
        self.lines.push(Line::from(spans));
        self.soft = soft;
        self.used = 0;
        if soft {
            self.current.push(Span::raw(" ".repeat(self.indent)));
            self.used = self.indent;
        }
        self.at_start = true;
    }

    fn add(&mut self, text: &str, style: Style, text_width: usize) {
        self.current.push(Span::styled(text.to_string(), style));
        self.used += text_width;
        self.at_start = false;
    }

    fn push_text(&mut self, text: &str, style: Style) {
        for piece in pieces(text) {
            let piece_width = width(piece);
            if piece.starts_with(' ') {
                // Spaces at the start of a wrapped line are dropped; leading
                // spaces of a paragraph are kept (indentation).
                if self.at_start && self.soft {
                    continue;
                }
                if self.used + piece_width <= self.width {
                    self.add(piece, style, piece_width);
                } else {
                    self.break_line(true);
                }
                continue;
            }
            if self.used + piece_width <= self.width {
                self.add(piece, style, piece_width);
                continue;
            }
            if !self.at_start && self.indent + piece_width <= self.width {
                self.break_line(true);
                self.add(piece, style, piece_width);
                continue;
            }
            // A word longer than a line: break it where it must, between
            // grapheme clusters (an emoji sequence or a letter with its
            // combining marks is never split).
            let mut chunk = String::new();
            let mut chunk_width = 0;
            for grapheme in piece.graphemes(true) {
                let w = width(grapheme);
                if self.used + chunk_width + w > self.width && (chunk_width > 0 || !self.at_start) {
                    if !chunk.is_empty() {
                        self.add(&chunk, style, chunk_width);
                    }
                    chunk.clear();
                    chunk_width = 0;
                    self.break_line(true);
                }
                chunk.push_str(grapheme);
                chunk_width += w;
            }
            if !chunk.is_empty() {
                self.add(&chunk, style, chunk_width);
            }
        }
    }

    /// The last line (the others went to `lines` as they were done).
    fn finish(mut self) -> Line<'static> {
        Line::from(std::mem::take(&mut self.current))
    }
}

/// Splits text into runs of spaces and runs of non-spaces.
fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let space = first == ' ';
        let end = rest
            .char_indices()
            .find(|&(_, c)| (c == ' ') != space)
            .map_or(rest.len(), |(i, _)| i);
        let (piece, after) = rest.split_at(end);
        rest = after;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn words_wrap_with_a_hanging_indent() {
        let lines = wrap_plain("alpha beta gamma delta", Style::new(), 12, 2);
        assert_eq!(plain(&lines), ["alpha beta", "  gamma", "  delta"]);
        for line in &lines {
            assert!(line.width() <= 12);
        }
    }

    #[test]
    fn long_words_break_and_newlines_are_kept() {
        let lines = wrap_plain("abcdefghij\n  xy", Style::new(), 4, 0);
        assert_eq!(plain(&lines), ["abcd", "efgh", "ij", "  xy"]);
        assert_eq!(plain(&wrap_plain("", Style::new(), 4, 0)), [""]);
    }

    #[test]
    fn nothing_is_ever_wider_than_the_line() {
        for text in [
            "日本語のテキストです",
            "a  b   c",
            " lead",
            "x\n\ny",
            "ééé ééé",
        ] {
            for w in 4..12 {
                for line in wrap_plain(text, Style::new(), w, 3) {
                    assert!(line.width() <= w, "{text:?} at {w}: {line:?}");
                }
            }
        }
    }

    #[test]
    fn graphemes_are_never_split_and_are_measured_as_drawn() {
        let family = "👩\u{200d}👩\u{200d}👧";
        assert_eq!(width(family), 2);
        assert_eq!(width("e\u{301}"), 1);
        let text = format!("{family}{family}e\u{301}e\u{301}日本");
        for w in 2..8 {
            for line in wrap_plain(&text, Style::new(), w, 0) {
                assert!(line.width() <= w, "{line:?}");
                let shown = line.to_string();
                assert!(!shown.starts_with('\u{301}') && !shown.starts_with('\u{200d}'));
            }
        }
        let joined: String = wrap_plain(&text, Style::new(), 3, 0)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(joined, text, "nothing lost or split");
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abc", 4), "abc");
        assert_eq!(truncate("abc", 0), "");
    }
}
