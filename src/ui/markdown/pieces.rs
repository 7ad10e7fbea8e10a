//! Parsing a long text in pieces, with the events one whole parse gives.
//!
//! pulldown-cmark builds a tree of the whole text before the first event:
//! about 50 bytes per line and inline item, so a 5 MB answer of a million
//! short lines took some 150 MB just to parse. Here the text is cut, where
//! that provably changes no event, into pieces of about [`PIECE_BYTES`]
//! parsed one after the other; the renderer sees one stream.
//!
//! The only cuts made are between two lines of a top-level paragraph whose
//! every line is *plain*: it starts with a letter or digit (no list marker),
//! ends without a space, and holds none of the characters that start an
//! inline construct or a table (`` *_~`[]!<>&\| ``). Nothing can then span
//! the cut or change the paragraph's meaning from its far end (no emphasis,
//! code span, link, hard break, setext underline or table row), so the
//! whole parse gives `Text(last line) SoftBreak Text(next line)` there, and
//! the pieces give `Text(last line) End(Paragraph)` then
//! `Start(Paragraph) Text(next line)`: the stream is spliced back.
//!
//! That the paragraph is top level (not inside a fenced code or HTML block
//! left open above it) is checked on the piece's own events before they go
//! out; when not, the rest is parsed in one go. A text with a link
//! reference definition (`]:`) is never cut: definitions hold across the
//! whole text.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// About this many bytes are parsed at once when a text can be cut.
pub const PIECE_BYTES: usize = 64 * 1024;

pub fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// Hands every event of `text` to `sink`, as one parse of the whole text
/// would give them.
pub fn parse<'a>(text: &'a str, mut sink: impl FnMut(Event<'a>)) {
    let mut start = 0;
    let mut continues = false;
    for cut in cuts(text) {
        let events: Vec<Event<'a>> = Parser::new_ext(&text[start..cut], options()).collect();
        if !ends_in_top_level_paragraph(&events) {
            break;
        }
        splice(events, continues, true, &mut sink);
        continues = true;
        start = cut;
    }
    let rest = Parser::new_ext(&text[start..], options());
    splice(rest, continues, false, &mut sink);
}

/// Passes `events` on, joined to the paragraph the last piece left open
/// (`continues`) and leaving theirs open (`open`).
fn splice<'a>(
    events: impl IntoIterator<Item = Event<'a>>,
    continues: bool,
    open: bool,
    sink: &mut impl FnMut(Event<'a>),
) {
    let mut events = events.into_iter().peekable();
    if continues {
        match events.peek() {
            Some(Event::Start(Tag::Paragraph)) => {
                events.next();
                sink(Event::SoftBreak);
            }
            // Not what the cut promised: close the paragraph at least.
            _ => sink(Event::End(TagEnd::Paragraph)),
        }
    }
    while let Some(event) = events.next() {
        if open && events.peek().is_none() && event == Event::End(TagEnd::Paragraph) {
            break;
        }
        sink(event);
    }
}

/// The piece ends inside a paragraph at the top level: its last event
/// closes a paragraph that opened with nothing else open.
fn ends_in_top_level_paragraph(events: &[Event<'_>]) -> bool {
    if events.last() != Some(&Event::End(TagEnd::Paragraph)) {
        return false;
    }
    let Some(opened) = events
        .iter()
        .rposition(|event| *event == Event::Start(Tag::Paragraph))
    else {
        return false;
    };
    let depth: isize = events[..opened]
        .iter()
        .map(|event| match event {
            Event::Start(_) => 1,
            Event::End(_) => -1,
            _ => 0,
        })
        .sum();
    depth == 0
}

/// Where `text` may be cut: line starts inside runs of plain lines between
/// blank lines, about [`PIECE_BYTES`] apart.
fn cuts(text: &str) -> Vec<usize> {
    let mut cuts = Vec::new();
    if text.len() <= PIECE_BYTES || text.contains("]:") {
        return cuts;
    }
    // Cuts in the run of lines being read, kept if every line is plain.
    let mut pending: Vec<usize> = Vec::new();
    let mut in_run = false;
    let mut run_plain = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let line_start = at;
        at += line.len();
        let body = line.strip_suffix('\n').unwrap_or(line);
        if is_blank(body) {
            if run_plain {
                cuts.append(&mut pending);
            }
            pending.clear();
            in_run = false;
            continue;
        }
        let plain = is_plain(body);
        if !in_run {
            (in_run, run_plain) = (true, plain);
            continue;
        }
        run_plain &= plain;
        let last = pending.last().or(cuts.last()).copied().unwrap_or(0);
        if run_plain && line_start - last >= PIECE_BYTES {
            pending.push(line_start);
        }
    }
    if run_plain {
        cuts.append(&mut pending);
    }
    cuts
}

fn is_blank(line: &str) -> bool {
    line.chars().all(|c| matches!(c, ' ' | '\t' | '\r'))
}

/// A line that starts no block, ends no paragraph in a hard break, and
/// holds nothing an inline construct or a table is made of.
fn is_plain(line: &str) -> bool {
    let Some(first) = line.chars().next() else {
        return false;
    };
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let list_number = digits > 0 && matches!(line[digits..].chars().next(), Some('.' | ')'));
    first.is_alphanumeric()
        && !list_number
        && !line.ends_with(' ')
        && !line
            .chars()
            .any(|c| c.is_control() || "*_~`[]!<>&\\|".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(text: &str) -> Vec<Event<'_>> {
        Parser::new_ext(text, options()).collect()
    }

    fn in_pieces(text: &str) -> Vec<Event<'_>> {
        let mut events = Vec::new();
        parse(text, |event| events.push(event));
        events
    }

    fn lines(count: usize, line: impl Fn(usize) -> String) -> String {
        (0..count).map(|n| line(n) + "\n").collect()
    }

    #[test]
    fn a_long_plain_paragraph_is_cut_and_parses_as_a_whole() {
        let text = lines(100_000, |n| format!("{:04}", n % 10_000)) + "last line";
        assert!(cuts(&text).len() > 5, "{:?}", cuts(&text).len());
        assert_eq!(in_pieces(&text), whole(&text));
    }

    #[test]
    fn what_a_cut_could_change_is_never_cut() {
        let plain = lines(20_000, |n| format!("word {n} and more"));
        let cases = [
            // Emphasis, code spans and links spanning the whole paragraph.
            format!("*{plain}*"),
            format!("`{plain}`"),
            format!("[{plain}](https://example.org)"),
            // A setext underline or a table row at the far end.
            format!("{plain}==="),
            format!("{plain}---"),
            format!("a | b\n{plain}|---|---|\n"),
            // Inside a fence or an HTML comment left open above.
            format!("```\ncode\n\n{plain}"),
            format!("<!--\n\n{plain}\n-->\n"),
            // A list item's lazy lines, a quote's.
            format!("- item\n{plain}"),
            format!("> quote\n{plain}"),
            // A reference defined after its use.
            format!("[x]\n\n{plain}\n[x]: https://example.org\n"),
            format!("1. one\n\n{plain}\n\n2. two\n"),
            format!("{plain}\n\n{plain}\n\n    indented\n{plain}"),
        ];
        for text in &cases {
            assert_eq!(in_pieces(text), whole(text), "{}", &text[..40]);
        }
        assert!(cuts(&cases[6]).len() > 1, "the fence case is one to check");
    }
}
