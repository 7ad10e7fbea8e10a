//! The one theme: every colour and text style the UI uses, by role.
//!
//! Readable on light and dark terminals: text is the terminal's own
//! foreground, colours are the standard ANSI ones (each terminal tunes
//! them to its background), and a background colour is only ever set
//! together with the foreground drawn on it. `NO_COLOR` (any non-empty
//! value) turns every colour off after drawing ([`strip_colours`]); bold,
//! italic, underline and reverse remain, so structure stays visible.

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier, Style};

/// The main chrome: header, borders, prompt marker.
pub const CHROME: Color = Color::Cyan;
/// The subagent bar's accent (violet, `#a78bfa`): never used elsewhere.
pub const SUBAGENT_ACCENT: Color = Color::Rgb(0xa7, 0x8b, 0xfa);
/// Dark text on the accent (indigo, `#1e1b4b`): contrast ratio above 7:1.
pub const SUBAGENT_TEXT: Color = Color::Rgb(0x1e, 0x1b, 0x4b);

pub fn plain() -> Style {
    Style::new()
}

pub fn dim() -> Style {
    Style::new().fg(Color::DarkGray)
}

pub fn bold() -> Style {
    Style::new().add_modifier(Modifier::BOLD)
}

pub fn error() -> Style {
    Style::new().fg(Color::Red)
}

pub fn success() -> Style {
    Style::new().fg(Color::Green)
}

pub fn warning() -> Style {
    Style::new().fg(Color::Yellow)
}

pub fn info() -> Style {
    Style::new().fg(Color::Cyan)
}

pub fn plan_line() -> Style {
    Style::new().fg(Color::Blue)
}

/// The prompt marker and other accents of the main chrome.
pub fn accent() -> Style {
    Style::new().fg(CHROME).add_modifier(Modifier::BOLD)
}

/// A bar drawn over the transcript (the "more below" marker).
pub fn marker() -> Style {
    Style::new().fg(Color::Black).bg(Color::Gray)
}

/// Headings by level (1 is the strongest).
pub fn heading(level: usize) -> Style {
    let style = Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD);
    match level {
        1 => style.add_modifier(Modifier::UNDERLINED),
        2 => style,
        _ => bold(),
    }
}

pub fn inline_code() -> Style {
    Style::new().fg(Color::Magenta)
}

pub fn link() -> Style {
    Style::new()
        .fg(Color::Blue)
        .add_modifier(Modifier::UNDERLINED)
}

pub fn quote() -> Style {
    Style::new().fg(Color::Green)
}

pub fn diff_added() -> Style {
    Style::new().fg(Color::Green)
}

pub fn diff_removed() -> Style {
    Style::new().fg(Color::Red)
}

pub fn diff_hunk() -> Style {
    Style::new().fg(Color::Cyan)
}

/// Syntax highlighting roles for fenced code.
pub fn code_keyword() -> Style {
    Style::new().fg(Color::Magenta).add_modifier(Modifier::BOLD)
}

pub fn code_string() -> Style {
    Style::new().fg(Color::Green)
}

pub fn code_comment() -> Style {
    Style::new()
        .fg(Color::DarkGray)
        .add_modifier(Modifier::ITALIC)
}

pub fn code_number() -> Style {
    Style::new().fg(Color::Yellow)
}

pub fn code_plain() -> Style {
    Style::new()
}

/// Whether the environment asks for no colour (`NO_COLOR`, any non-empty
/// value, as no-color.org defines it).
pub fn no_color_from_env() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty())
}

/// Resets every cell's colours, keeping the modifiers.
pub fn strip_colours(buffer: &mut Buffer) {
    for cell in &mut buffer.content {
        cell.fg = Color::Reset;
        cell.bg = Color::Reset;
    }
}
