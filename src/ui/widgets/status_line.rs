//! The status/help line: a notice when there is one, else the key hints
//! that apply now (as many as fit), and session token usage on the right.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::wrap::{truncate, width};
use super::{bold, dim};
use crate::ui::store::Store;

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let max = usize::from(area.width);
    // Usage only where it does not crowd out the key hints.
    let usage = if max >= 100 { usage(store) } else { None };
    if let Some(notice) = &store.notice {
        let style = if notice.warning {
            Style::new().fg(Color::Yellow)
        } else {
            Style::new().fg(Color::Cyan)
        };
        let text = truncate(&format!(" {}", notice.text), max);
        frame.render_widget(Paragraph::new(Line::styled(text, style)), area);
        return;
    }
    let mut spans = vec![Span::raw(" ")];
    let mut used = 1;
    let room = max.saturating_sub(usage.as_ref().map_or(0, |u| width(u) + 1));
    for (i, (key, label)) in hints(store).into_iter().enumerate() {
        let gap = if i == 0 { "" } else { "  " };
        let needed = width(gap) + width(key) + 1 + width(label);
        if used + needed > room {
            break;
        }
        spans.push(Span::raw(gap));
        spans.push(Span::styled(key, bold()));
        spans.push(Span::styled(format!(" {label}"), dim()));
        used += needed;
    }
    if let Some(usage) = usage
        && used + width(&usage) < max
    {
        spans.push(Span::raw(" ".repeat(max - used - width(&usage))));
        spans.push(Span::styled(usage, dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn hints(store: &Store) -> Vec<(&'static str, &'static str)> {
    let subagent_running = store.subagent.as_ref().is_some_and(|s| !s.phase.is_final());
    // Most important first: narrow terminals show only the first few.
    let mut hints = Vec::new();
    if store.turn.is_busy() {
        hints.push(("Ctrl+C", "interrupt"));
        if subagent_running {
            hints.push(("Esc", "cancel subagent"));
        }
    } else {
        hints.push(("Enter", "send"));
        hints.push(("Ctrl+C×2", "quit"));
    }
    hints.push(("F2", "plan"));
    hints.push(("PgUp/PgDn", "scroll"));
    hints.push(("/plan", "print plan"));
    hints.push(("/plan clear", "reset plan"));
    hints
}

fn usage(store: &Store) -> Option<String> {
    let usage = store.usage;
    (usage.requests > 0).then(|| {
        format!(
            "{} in ({} cached) · {} out ",
            tokens(usage.prompt_tokens),
            tokens(usage.cached_tokens),
            tokens(usage.completion_tokens)
        )
    })
}

fn tokens(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else {
        format!("{:.1}k", n as f64 / 1000.0)
    }
}
