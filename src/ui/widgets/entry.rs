//! One transcript entry as lines at a width: prompts, Markdown answers,
//! one line per tool call (with a folded diff or output tail under `patch`
//! and `bash_exec`), plan lines, notes, errors, local command output.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

use crate::protocol::tool_facts::CommandExit;
use crate::ui::diff::{self, DiffLine};
use crate::ui::markdown;
use crate::ui::rows::Rows;
use crate::ui::state::{Entry, ToolDetail, ToolResultView};
use crate::ui::theme;
use crate::ui::wrap::{truncate, wrap, wrap_plain};

/// Lines of a diff or output shown while folded.
pub const FOLDED_LINES: usize = 12;
/// Lines of `bash_exec` output shown while folded.
pub const FOLDED_OUTPUT_LINES: usize = 4;
/// The key that opens folded output (said in the fold line).
pub const EXPAND_KEY: &str = "Ctrl+O";

/// The lines of `entry` at `width`, kept compactly (what the transcript
/// holds): the same lines as [`lines`], and a long answer is never held as
/// `Line`s whole.
pub fn rows(entry: &Entry, width: usize, first: bool, expanded: bool) -> Rows {
    let Entry::Assistant(text) = entry else {
        return Rows::from(lines(entry, width, first, expanded).as_slice());
    };
    let answer = markdown::render_rows(text, width);
    if first {
        return answer;
    }
    let mut rows = Rows::new();
    rows.push(&Line::default());
    rows.append(&answer);
    rows
}

/// The lines of `entry` at `width`; `first` is the transcript's first
/// entry (no blank line before it).
pub fn lines(entry: &Entry, width: usize, first: bool, expanded: bool) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let gap = !first && matches!(entry, Entry::User(_) | Entry::Assistant(_));
    if gap {
        out.push(Line::default());
    }
    match entry {
        Entry::User(text) => out.extend(wrap(
            &[("› ", theme::accent()), (text, theme::bold())],
            width,
            2,
        )),
        Entry::Assistant(text) => out.extend(markdown::render(text, width)),
        Entry::Tool {
            name,
            summary,
            result,
            detail,
            ..
        } => {
            // A command's output says itself why it failed, below.
            let says_why = !matches!(detail, Some(ToolDetail::Output { .. }));
            out.extend(tool_line(name, summary, result.as_ref(), says_why, width));
            match detail {
                Some(ToolDetail::Diff(lines)) => {
                    out.extend(diff_lines(lines, width, expanded, FOLDED_LINES));
                }
                Some(ToolDetail::Output { exit, text }) => {
                    out.extend(output_lines(exit.as_ref(), text, width, expanded));
                }
                None => {}
            }
        }
        Entry::Diff(lines) => out.extend(diff_lines(lines, width, true, usize::MAX)),
        Entry::Plan(text) => out.extend(wrap(
            &[("≡ ", theme::plan_line()), (text, theme::plan_line())],
            width,
            2,
        )),
        Entry::Info(text) => {
            out.extend(wrap(
                &[("· ", theme::dim()), (text, theme::dim())],
                width,
                2,
            ));
        }
        Entry::Error(text) => out.extend(wrap(
            &[("✗ ", theme::error()), (text, theme::error())],
            width,
            2,
        )),
        Entry::Local(text) => out.extend(wrap_plain(text.trim_end(), Style::new(), width, 0)),
    }
    out
}

/// `→ read_file notes.txt ✓`, or `✗` and what failed, in red.
fn tool_line(
    name: &str,
    summary: &str,
    result: Option<&ToolResultView>,
    says_why: bool,
    width: usize,
) -> Vec<Line<'static>> {
    let mut segments = vec![("→ ", theme::dim()), (name, theme::bold())];
    if !summary.is_empty() {
        segments.push((" ", Style::new()));
        segments.push((summary, Style::new()));
    }
    let failure;
    match result {
        None => segments.push((" …", theme::dim())),
        Some(result) if result.ok => segments.push((" ✓", theme::success())),
        Some(_) if !says_why => segments.push((" ✗", theme::error())),
        Some(result) => {
            failure = format!(" ✗ {}", result.summary);
            segments.push((failure.as_str(), theme::error()));
        }
    }
    wrap(&segments, width, 2)
}

/// A diff, coloured, folded to `folded` lines unless `expanded`.
pub fn diff_lines(
    lines: &[DiffLine],
    width: usize,
    expanded: bool,
    folded: usize,
) -> Vec<Line<'static>> {
    let room = width.saturating_sub(2).max(1);
    let shown = if expanded {
        lines.len()
    } else {
        folded.min(lines.len())
    };
    let mut out: Vec<Line<'static>> = lines[..shown]
        .iter()
        .map(|line| {
            let (sign, text) = match line {
                DiffLine::File(text) | DiffLine::Hunk(text) | DiffLine::Note(text) => ("", text),
                DiffLine::Context(text) => (" ", text),
                DiffLine::Added(text) => ("+", text),
                DiffLine::Removed(text) => ("-", text),
            };
            let text = truncate(&format!("{sign}{text}"), room);
            Line::from(vec![Span::raw("  "), Span::styled(text, diff_style(line))])
        })
        .collect();
    if shown < lines.len() {
        let (added, removed) = diff::counts(&lines[shown..]);
        let more = format!(
            "  … {} more lines (+{added} -{removed}) · {EXPAND_KEY} expands",
            lines.len() - shown
        );
        out.push(Line::styled(truncate(&more, width), theme::dim()));
    }
    out
}

/// How a diff line looks, in the transcript and the approval prompt.
pub fn diff_style(line: &DiffLine) -> Style {
    match line {
        DiffLine::File(_) => theme::bold(),
        DiffLine::Hunk(_) => theme::diff_hunk(),
        DiffLine::Context(_) | DiffLine::Note(_) => theme::dim(),
        DiffLine::Added(_) => theme::diff_added(),
        DiffLine::Removed(_) => theme::diff_removed(),
    }
}

/// A `bash_exec` output tail: how the command ended (from the tool's
/// facts, never from its text: a command may print anything), then the
/// last lines (all of them when expanded).
fn output_lines(
    exit: Option<&CommandExit>,
    text: &str,
    width: usize,
    expanded: bool,
) -> Vec<Line<'static>> {
    let all: Vec<&str> = text.lines().collect();
    let room = width.saturating_sub(4).max(1);
    let mut out = Vec::new();
    if let Some(exit) = exit {
        let style = if exit.success() {
            theme::dim()
        } else {
            theme::error()
        };
        out.push(Line::from(vec![
            Span::raw("  "),
            Span::styled(exit.to_string(), style),
        ]));
    }
    let keep = if expanded {
        all.len()
    } else {
        FOLDED_OUTPUT_LINES.min(all.len())
    };
    let hidden = all.len() - keep;
    if hidden > 0 {
        out.push(Line::styled(
            truncate(
                &format!("  … {hidden} earlier lines · {EXPAND_KEY} expands"),
                width,
            ),
            theme::dim(),
        ));
    }
    for line in &all[all.len() - keep..] {
        out.push(Line::from(vec![
            Span::styled("  │ ", theme::dim()),
            Span::raw(truncate(line, room)),
        ]));
    }
    out
}
