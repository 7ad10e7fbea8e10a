//! The header row: Fido, the workspace, provider/model and the turn status.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{CHROME, bold};
use crate::protocol::TurnStatus;
use crate::ui::state::{Store, TurnState};
use crate::ui::wrap::{truncate, width};

pub fn render(frame: &mut Frame, area: Rect, store: &Store) {
    let chrome = Style::new().fg(Color::Black).bg(CHROME);
    let (status, status_style) = status(store);
    let status = format!(" {status} ");
    let brand = " Fido ";
    let room = usize::from(area.width).saturating_sub(width(brand) + width(&status));
    let session = &store.session;
    let model = match (session.provider.is_empty(), session.model.is_empty()) {
        (true, _) => String::new(),
        (false, true) => session.provider.clone(),
        (false, false) => format!("{}/{}", session.provider, session.model),
    };
    // The workspace gives way first (cut from the left: its tail names it),
    // then the model.
    let mut middle = format!(" {} │ {model} ", session.workspace);
    if width(&middle) > room {
        let keep = room.saturating_sub(width(&model) + 5);
        if keep >= 8 {
            middle = format!(" {} │ {model} ", left_cut(&session.workspace, keep));
        } else {
            middle = format!(" {} ", truncate(&session.workspace, room.saturating_sub(2)));
        }
    }
    let middle = truncate(&middle, room);
    let pad = room.saturating_sub(width(&middle));
    // The bar is black on every terminal, so its text is set light (the
    // terminal's own foreground would vanish on a light theme).
    let line = Line::from(vec![
        Span::styled(brand, chrome.patch(bold())),
        Span::styled(middle, Style::new().fg(Color::White)),
        Span::raw(" ".repeat(pad)),
        Span::styled(status, status_style.patch(bold())),
    ]);
    frame.render_widget(
        Paragraph::new(line).style(Style::new().bg(Color::Black)),
        area,
    );
}

/// Keeps the end of `text` within `max` cells, marking the cut with `…`.
fn left_cut(text: &str, max: usize) -> String {
    if width(text) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::new();
    let mut used = 1;
    for &c in chars.iter().rev() {
        let w = width(c.encode_utf8(&mut [0u8; 4]));
        if used + w > max {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out.iter().rev().collect()
}

fn status(store: &Store) -> (String, Style) {
    let running = Style::new().fg(Color::Black).bg(Color::Yellow);
    match store.turn {
        TurnState::Submitted => ("sending…".into(), running),
        TurnState::Running { turn } => (format!("turn {turn} · working…"), running),
        TurnState::Interrupting => ("interrupting…".into(), running),
        TurnState::Idle => {
            let ready = Style::new().fg(Color::Black).bg(Color::Green);
            let warn = Style::new().fg(Color::White).bg(Color::Red);
            match store.last_turn {
                None | Some((_, TurnStatus::Completed)) => ("ready".into(), ready),
                Some((turn, TurnStatus::Interrupted)) => {
                    (format!("ready · turn {turn} interrupted"), ready)
                }
                Some((turn, TurnStatus::Failed)) => (format!("ready · turn {turn} failed"), warn),
                Some((turn, TurnStatus::MaxSteps)) => {
                    (format!("ready · turn {turn} hit max steps"), warn)
                }
            }
        }
    }
}
