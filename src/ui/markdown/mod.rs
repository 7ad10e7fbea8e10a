//! Markdown to styled, wrapped terminal lines (pulldown-cmark events in,
//! ratatui `Line`s out), after codex's `markdown_render.rs`.
//!
//! Headings, emphasis, strikethrough, nested lists (with task markers),
//! block quotes, links (text, then the URL), inline code, tables (aligned
//! when they fit, one `header: value` line per cell when not), rules and
//! fenced code with [`highlight`]ing. Every line is at most `width` cells
//! wide, measured by display width; a word longer than a line is broken
//! between grapheme clusters, never inside one.

mod highlight;
mod pieces;
mod table;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::rows::{LineSink, Rows};
use super::theme;
use super::wrap::{width as text_width, wrap_each};
pub use highlight::Highlighter;

/// `text` rendered at `width` cells.
pub fn render(text: &str, width: usize) -> Vec<Line<'static>> {
    render_into(text, width, Vec::new())
}

/// `text` rendered at `width` cells, kept compactly: the same lines as
/// [`render`], without ever holding them all as `Line`s.
pub fn render_rows(text: &str, width: usize) -> Rows {
    let mut rows = render_into(text, width, Rows::new());
    rows.shrink_to_fit();
    rows
}

fn render_into<S: LineSink>(text: &str, width: usize, out: S) -> S {
    let mut renderer = Renderer::new(width.max(1), out);
    pieces::parse(text, |event| renderer.event(event));
    renderer.finish()
}

/// The inline text of the block being built: its segments as the parser
/// gave them (the wrapper breaks between them), in one string. A paragraph
/// of a million short lines is two million segments: 8 bytes each here,
/// where a `(String, Style)` with its own allocation cost ten times that.
#[derive(Debug, Default)]
struct Inline {
    text: String,
    /// Per segment: where it ends in `text`, and its index in `styles`.
    segments: Vec<(u32, u32)>,
    styles: Vec<Style>,
}

impl Inline {
    fn push(&mut self, text: &str, style: Style) {
        let index = match self.styles.iter().rposition(|known| *known == style) {
            Some(index) => index,
            None => {
                self.styles.push(style);
                self.styles.len() - 1
            }
        };
        self.text.push_str(text);
        let end = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        self.segments.push((end, index));
    }

    fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Segment `index`'s text (empty past the end).
    fn text_of(&self, index: usize) -> &str {
        let start = match index.checked_sub(1) {
            Some(previous) => self.segments.get(previous).map_or(0, |s| s.0 as usize),
            None => 0,
        };
        let end = self.segments.get(index).map_or(start, |s| s.0 as usize);
        self.text.get(start..end).unwrap_or_default()
    }

    fn iter(&self) -> impl Iterator<Item = (&str, Style)> {
        self.segments.iter().enumerate().map(|(index, (_, style))| {
            let style = self.styles.get(*style as usize).copied();
            (self.text_of(index), style.unwrap_or_default())
        })
    }

    /// The text of the last `count` segments.
    fn tail(&self, count: usize) -> &str {
        let first = self.segments.len().saturating_sub(count);
        let start = match first.checked_sub(1) {
            Some(previous) => self.segments[previous].0 as usize,
            None => 0,
        };
        self.text.get(start..).unwrap_or_default()
    }
}

/// A block that prefixes the lines inside it.
#[derive(Debug, Clone)]
enum Container {
    Quote,
    /// A list item: its marker goes on its first line, spaces of the same
    /// width on the others.
    Item {
        marker: String,
        marker_shown: bool,
    },
}

#[derive(Debug)]
struct CodeBlock {
    highlighter: Highlighter,
    text: String,
}

struct Renderer<S> {
    width: usize,
    out: S,
    /// Inline text of the block being built.
    inline: Inline,
    /// Inline styles in force (emphasis, links, headings).
    styles: Vec<Style>,
    containers: Vec<Container>,
    /// Next number per open list (`None`: bullets).
    lists: Vec<Option<u64>>,
    links: Vec<String>,
    code: Option<CodeBlock>,
    table: Option<table::Table>,
    /// A blank line goes before the next block.
    gap: bool,
}

impl<S: LineSink> Renderer<S> {
    fn new(width: usize, out: S) -> Renderer<S> {
        Renderer {
            width,
            out,
            inline: Inline::default(),
            styles: Vec::new(),
            containers: Vec::new(),
            lists: Vec::new(),
            links: Vec::new(),
            code: None,
            table: None,
            gap: false,
        }
    }

    fn style(&self) -> Style {
        self.styles
            .iter()
            .fold(Style::new(), |style, next| style.patch(*next))
    }

    fn text(&mut self, text: &str) {
        if let Some(code) = &mut self.code {
            code.text.push_str(text);
            return;
        }
        let style = self.style();
        if let Some(table) = &mut self.table {
            table.text(text, style);
            return;
        }
        self.inline.push(text, style);
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                let style = self.style().patch(theme::inline_code());
                match &mut self.table {
                    Some(table) => table.text(&code, style),
                    None => self.inline.push(&code, style),
                }
            }
            Event::SoftBreak => self.text(" "),
            Event::HardBreak => self.text("\n"),
            Event::Rule => {
                self.flush();
                self.block_start();
                let rule = "─".repeat(self.width.saturating_sub(self.prefix_width()).max(1));
                self.emit([(rule.as_str(), theme::dim())], 0);
                self.gap = true;
            }
            Event::TaskListMarker(done) => {
                let marker = if done { "[x] " } else { "[ ] " };
                self.inline.push(marker, theme::dim());
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                self.inline.push(html.trim_end_matches('\n'), theme::dim());
            }
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block_start(),
            Tag::Heading { level, .. } => {
                self.block_start();
                self.styles.push(theme::heading(heading_level(level)));
            }
            Tag::BlockQuote(_) => self.start_quote(),
            Tag::CodeBlock(kind) => self.start_code_block(kind),
            Tag::List(start) => self.start_list(start),
            Tag::Item => self.start_item(),
            Tag::Emphasis => self.push_modifier(Modifier::ITALIC),
            Tag::Strong => self.push_modifier(Modifier::BOLD),
            Tag::Strikethrough => self.push_modifier(Modifier::CROSSED_OUT),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.styles.push(theme::link());
                self.links.push(dest_url.to_string());
            }
            Tag::Table(alignments) => self.start_table(alignments),
            Tag::TableHead | Tag::TableRow => self.in_table(table::Table::row),
            Tag::TableCell => self.in_table(table::Table::cell),
            Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn push_modifier(&mut self, modifier: Modifier) {
        self.styles.push(Style::new().add_modifier(modifier));
    }

    fn start_quote(&mut self) {
        self.flush();
        self.block_start();
        self.containers.push(Container::Quote);
    }

    fn start_code_block(&mut self, kind: CodeBlockKind<'_>) {
        self.flush();
        self.block_start();
        let lang = match kind {
            CodeBlockKind::Fenced(info) => info.to_string(),
            CodeBlockKind::Indented => String::new(),
        };
        self.code = Some(CodeBlock {
            highlighter: Highlighter::new(&lang),
            text: String::new(),
        });
    }

    fn start_list(&mut self, start: Option<u64>) {
        self.flush();
        if self.lists.is_empty() {
            self.block_start();
        }
        self.lists.push(start);
    }

    /// A list item: its number in an ordered list, else a bullet by depth.
    fn start_item(&mut self) {
        self.flush();
        let marker = match self.lists.last_mut() {
            Some(Some(number)) => {
                let marker = format!("{number}. ");
                *number += 1;
                marker
            }
            _ => match self.lists.len() {
                1 => "• ".to_string(),
                2 => "◦ ".to_string(),
                _ => "▪ ".to_string(),
            },
        };
        self.containers.push(Container::Item {
            marker,
            marker_shown: false,
        });
    }

    fn start_table(&mut self, alignments: Vec<pulldown_cmark::Alignment>) {
        self.flush();
        self.block_start();
        self.table = Some(table::Table::new(alignments));
    }

    fn in_table(&mut self, step: fn(&mut table::Table)) {
        if let Some(table) = &mut self.table {
            step(table);
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock => {
                self.flush();
                self.gap = true;
            }
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush();
                self.gap = true;
            }
            TagEnd::BlockQuote(_) => {
                self.flush();
                self.containers.pop();
                self.gap = true;
            }
            TagEnd::CodeBlock => {
                if let Some(code) = self.code.take() {
                    self.code_block(code);
                }
                self.gap = true;
            }
            TagEnd::List(_) => {
                self.flush();
                self.lists.pop();
                self.gap = true;
            }
            TagEnd::Item => {
                self.flush();
                self.containers.pop();
                // Items of a list follow each other without a blank line.
                self.gap = false;
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => {
                self.styles.pop();
            }
            TagEnd::Link | TagEnd::Image => {
                self.styles.pop();
                if let Some(url) = self.links.pop() {
                    self.link_url(url);
                }
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    let width = self.width.saturating_sub(self.prefix_width()).max(1);
                    for line in table.render(width) {
                        self.emit_line(line.spans, true);
                    }
                }
                self.gap = true;
            }
            TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    /// ` (url)` after a link's text, unless the text is the URL.
    fn link_url(&mut self, url: String) {
        let shown = self.inline.tail(4);
        if url.is_empty() || shown.ends_with(&url) || url.starts_with('#') {
            return;
        }
        let piece = (format!(" ({url})"), theme::dim());
        match &mut self.table {
            Some(table) => table.text(&piece.0, piece.1),
            None => self.inline.push(&piece.0, piece.1),
        }
    }

    /// Before a new block: the blank line that separates it from the last.
    fn block_start(&mut self) {
        if self.gap && !self.out.is_empty() {
            self.emit_line(Vec::new(), true);
        }
        self.gap = false;
    }

    fn code_block(&mut self, mut code: CodeBlock) {
        let text = code.text.strip_suffix('\n').unwrap_or(&code.text);
        for line in text.split('\n') {
            let pieces = code.highlighter.line(line);
            let segments = pieces.iter().map(|(text, style)| (text.as_str(), *style));
            self.emit(std::iter::once(("  ", Style::new())).chain(segments), 2);
        }
    }

    /// Wraps the inline text of the block built so far into lines.
    fn flush(&mut self) {
        if self.inline.is_empty() {
            return;
        }
        let inline = std::mem::take(&mut self.inline);
        // Trailing spaces of a block (before a list item's sublist) go.
        self.emit(inline.iter(), 0);
    }

    fn prefix_width(&self) -> usize {
        self.containers
            .iter()
            .map(|container| match container {
                Container::Quote => 2,
                Container::Item { marker, .. } => text_width(marker),
            })
            .sum()
    }

    /// The prefix of the next line: quote bars and list markers (each
    /// marker once, on its item's first text line; `fill` lines — blank
    /// lines, tables — get spaces instead and leave the marker for later).
    fn prefix(&mut self, fill: bool) -> Vec<Span<'static>> {
        let mut spans = Vec::new();
        for container in &mut self.containers {
            match container {
                Container::Quote => spans.push(Span::styled("│ ", theme::quote())),
                Container::Item {
                    marker,
                    marker_shown,
                } => {
                    if *marker_shown || fill {
                        spans.push(Span::raw(" ".repeat(text_width(marker))));
                    } else {
                        *marker_shown = true;
                        spans.push(Span::styled(marker.clone(), theme::accent()));
                    }
                }
            }
        }
        spans
    }

    fn emit<'a>(&mut self, segments: impl IntoIterator<Item = (&'a str, Style)>, indent: usize) {
        let width = self.width.saturating_sub(self.prefix_width()).max(1);
        wrap_each(segments, width, indent, |line| {
            self.emit_line(line.spans, false);
        });
    }

    /// One line with the containers' prefix.
    fn emit_line(&mut self, spans: Vec<Span<'static>>, fill: bool) {
        let mut line = self.prefix(fill);
        if spans.is_empty() {
            // A blank line keeps its quote bars, not trailing spaces.
            while line
                .last()
                .is_some_and(|span| span.content.trim().is_empty())
            {
                line.pop();
            }
        }
        line.extend(spans);
        self.out.push_line(Line::from(line));
    }

    fn finish(mut self) -> S {
        if let Some(code) = self.code.take() {
            // An unclosed fence (mid-stream): show what there is.
            self.code_block(code);
        }
        self.flush();
        if self.out.is_empty() {
            self.out.push_line(Line::default());
        }
        self.out
    }
}

fn heading_level(level: HeadingLevel) -> usize {
    match level {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

#[cfg(test)]
mod tests;
