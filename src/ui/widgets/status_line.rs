//! The status line: a notice when there is one; else what the turn is
//! doing (idle, thinking, streaming, running a tool, waiting for
//! subagents) with its elapsed time and how many lines are queued, the
//! keys that apply now (as many as fit), and session token usage on the
//! right.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::ui::state::{Activity, Store, tokens};
use crate::ui::theme;
use crate::ui::wrap::{truncate, width};

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let max = usize::from(area.width);
    // Usage only where it does not crowd out the key hints.
    let usage = if max >= 100 { usage(store) } else { None };
    if let Some(notice) = &store.notice {
        let style = if notice.warning {
            theme::warning()
        } else {
            theme::info()
        };
        let text = truncate(&format!(" {}", notice.text), max);
        frame.render_widget(Paragraph::new(Line::styled(text, style)), area);
        return;
    }
    let state = truncate(&format!(" {} ", state(store)), max);
    let state_style = if store.turn.is_busy() {
        theme::warning().patch(theme::bold())
    } else {
        theme::success()
    };
    let mut used = width(&state);
    let mut spans = vec![Span::styled(state, state_style)];
    let room = max.saturating_sub(usage.as_ref().map_or(0, |u| width(u) + 1));
    for (key, label) in hints(store) {
        let needed = 2 + width(key) + 1 + width(label);
        if used + needed > room {
            break;
        }
        spans.push(Span::raw("  "));
        spans.push(Span::styled(key, theme::bold()));
        spans.push(Span::styled(format!(" {label}"), theme::dim()));
        used += needed;
    }
    if let Some(usage) = usage
        && used + width(&usage) < max
    {
        spans.push(Span::raw(" ".repeat(max - used - width(&usage))));
        spans.push(Span::styled(usage, theme::dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `streaming · 12s`, `running bash_exec · 3s · 2 queued`, `idle`.
fn state(store: &Store) -> String {
    let state = activity(store);
    match store.typeahead.len() {
        0 => state,
        queued => format!("{state} · {queued} queued"),
    }
}

fn activity(store: &Store) -> String {
    let activity = match store.activity() {
        Activity::Idle => return "idle".into(),
        Activity::Thinking => "thinking".to_string(),
        Activity::Streaming => "streaming".to_string(),
        Activity::Tool(name) => format!("running {name}"),
        Activity::Subagents(1) => "waiting for 1 subagent".to_string(),
        Activity::Subagents(n) => format!("waiting for {n} subagents"),
        Activity::Interrupting => "interrupting".to_string(),
        Activity::WaitingForApproval => "waiting for approval".to_string(),
    };
    match store.elapsed() {
        Some(elapsed) => format!("{activity} · {}s", elapsed.as_secs()),
        None => activity,
    }
}

/// The keys that apply now, most important first (narrow terminals show
/// only the first few).
fn hints(store: &Store) -> Vec<(&'static str, &'static str)> {
    let live = store.subagents.iter().filter(|s| s.is_live()).count();
    let mut hints = Vec::new();
    if store.approval.is_some() {
        // The prompt's own keys come first: they are what applies now.
        return vec![
            ("y", "approve"),
            ("a", "for the session"),
            ("n", "deny with a reason"),
            ("Esc", "deny"),
            ("Ctrl+C", "interrupt"),
        ];
    }
    if store.transcript_scroll > 0 {
        hints.push(("End", "follow"));
    }
    // Up and Esc reach the queue on an empty prompt (before a subagent).
    let queue_keys = store.input.is_empty() && !store.typeahead.is_empty();
    if store.turn.is_busy() {
        hints.push(("Ctrl+C", "interrupt"));
        if queue_keys {
            hints.push(("↑", "edit queued"));
            hints.push(("Esc", "drop queued"));
        } else if live > 0 {
            hints.push(("Esc", "cancel subagent"));
        }
        if live > 1 {
            hints.push(("Alt+↑/↓", "focus"));
        }
    } else if queue_keys {
        hints.push(("Enter", "send next queued"));
        hints.push(("↑", "edit queued"));
        hints.push(("Esc", "drop queued"));
    } else {
        hints.push(("Enter", "send"));
        hints.push(("Alt+Enter", "new line"));
    }
    if store.transcript.has_tool_detail() {
        hints.push(("Ctrl+O", if store.expanded { "fold" } else { "expand" }));
    }
    hints.push(("PgUp/PgDn", "scroll"));
    hints.push(("F2", "plan"));
    hints.push(("/help", "keys"));
    if !store.turn.is_busy() {
        hints.push(("Ctrl+C×2", "quit"));
    }
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
