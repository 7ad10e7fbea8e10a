//! The approval prompt, drawn over the bottom of the transcript: what
//! would run (command, directory, justification) or change (the diff),
//! and the keys that answer. Diff lines are coloured; a body taller than
//! the room keeps its first lines and says how many more there are.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{bold, entry};
use crate::protocol::ApprovalRequest;
use crate::ui::diff;
use crate::ui::store::PendingApproval;
use crate::ui::wrap::truncate;

/// Where the prompt goes inside `area` (the transcript), bottom-aligned.
pub fn area_for(area: Rect, pending: &PendingApproval) -> Rect {
    // Body, a hint line and the two borders.
    let wanted = pending.body().len() as u16 + 3;
    let height = wanted.min(area.height);
    Rect {
        y: area.y + area.height - height,
        height,
        ..area
    }
}

pub fn render(frame: &mut Frame, area: Rect, pending: &PendingApproval) {
    if area.height < 3 || area.width < 8 {
        return;
    }
    let inner_width = usize::from(area.width.saturating_sub(2));
    let room = usize::from(area.height.saturating_sub(3));
    let body = pending.body();
    let is_diff = matches!(
        pending.request,
        ApprovalRequest::FileChange { .. } | ApprovalRequest::ChangeSet { .. }
    );
    let mut lines: Vec<Line> = body
        .iter()
        .take(room)
        .enumerate()
        .map(|(index, line)| {
            // A file change's body is its name, then the unified diff.
            let style = if !is_diff {
                Style::default()
            } else if index == 0 {
                bold()
            } else {
                entry::diff_style(&diff::classify(line))
            };
            Line::styled(truncate(line, inner_width), style)
        })
        .collect();
    if body.len() > room && room > 0 {
        lines.pop();
        lines.push(Line::styled(
            format!("… {} more lines", body.len() - room + 1),
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines.push(Line::styled(truncate(pending.hint(), inner_width), bold()));
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::new().fg(Color::Yellow))
        .title(Line::styled(
            truncate(&format!(" {} ", pending.title()), inner_width),
            bold().fg(Color::Yellow),
        ));
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
