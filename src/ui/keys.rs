//! Key presses become store changes (editing, scrolling) and [`Action`]s
//! (what the actor must do: talk to the agent, run a local command, quit).
//!
//! Pure and synchronous: the caller passes `now`, so double-press timing is
//! testable without a clock.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::layout::{self, Screen};
use super::store::Store;
use super::widgets::{plan_panel, transcript};

/// A second Ctrl+C within this window quits (when no turn runs).
pub const QUIT_WINDOW: Duration = Duration::from_millis(1500);

/// What a key asks the actor to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a turn with this prompt (`AgentMessage::SubmitPrompt`).
    Submit(String),
    /// Interrupt the running turn, subagent included (`AgentMessage::Interrupt`).
    Interrupt,
    /// Cancel only the running subagent; the parent turn goes on (Esc).
    CancelSubagent,
    /// `/plan`: print the plan into the transcript.
    ShowPlan,
    /// `/plan clear`: start a new, empty plan.
    ClearPlan,
    /// The answer to the `ask_user` question on screen (`None`: dismissed
    /// with Esc).
    Answer(Option<String>),
    /// The answer to the approval request on screen.
    Approve(crate::protocol::ApprovalDecision),
    /// `/undo`: revert the last file change.
    Undo,
    /// `/suspend`: save the conversation.
    Suspend,
    /// `/recall [NAME]`: bring back a saved conversation (the plan stays).
    Recall(Option<String>),
    /// `/sessions`: list saved conversations.
    Sessions,
    /// Leave Fido (`/quit`, Ctrl+C twice when idle, Ctrl+D on empty input).
    Quit,
}

/// Local commands typed on the input line.
const COMMANDS_HELP: &str =
    "local commands: /plan, /plan clear, /undo, /suspend, /recall [NAME], /sessions, /quit";

/// Handles one key; returns the action it asks for, if any. Every key may
/// change the store, so the caller redraws after each.
pub fn handle_key(store: &mut Store, key: KeyEvent, now: Instant) -> Option<Action> {
    match key.kind {
        KeyEventKind::Press | KeyEventKind::Repeat => {}
        KeyEventKind::Release => return None,
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let is_ctrl_c = ctrl && matches!(key.code, KeyCode::Char('c' | 'C'));
    if !is_ctrl_c {
        // Any other key disarms the double Ctrl+C and clears old notices.
        store.quit_armed_at = None;
        store.notice = None;
    }
    if is_ctrl_c {
        return ctrl_c(store, now);
    }
    if store.approval.is_some() {
        // Only plain keys answer: Ctrl+A must not approve anything.
        if ctrl || key.modifiers.contains(KeyModifiers::ALT) {
            return None;
        }
        return super::approval::handle_key(store, key).map(Action::Approve);
    }
    if ctrl {
        return ctrl_key(store, key.code);
    }
    if store.question.is_some() {
        match key.code {
            KeyCode::Enter => {
                let text = store.input.take().trim().to_string();
                store.answered(Some(&text));
                return Some(Action::Answer(Some(text)));
            }
            KeyCode::Esc => {
                store.answered(None);
                return Some(Action::Answer(None));
            }
            _ => {}
        }
    }
    match key.code {
        KeyCode::Enter => return enter(store),
        KeyCode::Esc if store.subagent.as_ref().is_some_and(|s| !s.phase.is_final()) => {
            return Some(Action::CancelSubagent);
        }
        KeyCode::F(2) => store.plan_overlay = !store.plan_overlay,
        KeyCode::Up => store.recall_history(Direction::Up),
        KeyCode::Down => store.recall_history(Direction::Down),
        KeyCode::PageUp => scroll(store, Direction::Up),
        KeyCode::PageDown => scroll(store, Direction::Down),
        KeyCode::Backspace => store.input.backspace(),
        KeyCode::Delete => store.input.delete(),
        KeyCode::Left => store.input.left(),
        KeyCode::Right => store.input.right(),
        KeyCode::Home => store.input.home(),
        KeyCode::End => store.input.end(),
        KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::ALT) => store.input.insert(c),
        _ => {}
    }
    None
}

/// Bracketed paste: the text goes into the input line (one line).
pub fn handle_paste(store: &mut Store, text: &str) {
    store.quit_armed_at = None;
    store.notice = None;
    store.input.insert_str(text);
}

fn ctrl_c(store: &mut Store, now: Instant) -> Option<Action> {
    if store.turn.is_busy() {
        store.quit_armed_at = None;
        store.turn = super::store::TurnState::Interrupting;
        store.set_notice("interrupting the turn…", false);
        return Some(Action::Interrupt);
    }
    if let Some(armed) = store.quit_armed_at
        && now.saturating_duration_since(armed) <= QUIT_WINDOW
    {
        return Some(Action::Quit);
    }
    store.quit_armed_at = Some(now);
    store.set_notice("press Ctrl+C again to quit", false);
    None
}

fn ctrl_key(store: &mut Store, code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Char('d' | 'D') => {
            if store.input.is_empty() {
                return Some(Action::Quit);
            }
            store.input.delete();
        }
        KeyCode::Char('p' | 'P') => store.plan_overlay = !store.plan_overlay,
        KeyCode::Char('a' | 'A') => store.input.home(),
        KeyCode::Char('e' | 'E') => store.input.end(),
        KeyCode::Char('u' | 'U') => store.input.delete_to_start(),
        KeyCode::Char('w' | 'W') => store.input.delete_word(),
        _ => {}
    }
    None
}

fn enter(store: &mut Store) -> Option<Action> {
    let text = store.input.text().trim().to_string();
    if text.is_empty() {
        return None;
    }
    if let Some(command) = text.strip_prefix('/') {
        let words: Vec<&str> = command.split_whitespace().collect();
        let action = match words.as_slice() {
            ["plan"] => Action::ShowPlan,
            ["plan", "clear"] => {
                if store.turn.is_busy() {
                    store.set_notice(
                        "a turn is running: wait for it to end (or Ctrl+C) before /plan clear",
                        true,
                    );
                    return None;
                }
                Action::ClearPlan
            }
            ["undo"] | ["suspend"] | ["recall", ..] if store.turn.is_busy() => {
                store.set_notice(
                    format!(
                        "a turn is running: wait for it to end (or Ctrl+C) before /{}",
                        words[0]
                    ),
                    true,
                );
                return None;
            }
            ["undo"] => Action::Undo,
            ["suspend"] => Action::Suspend,
            ["recall"] => Action::Recall(None),
            ["recall", name] => Action::Recall(Some((*name).to_string())),
            ["sessions"] => Action::Sessions,
            ["quit"] | ["exit"] => Action::Quit,
            _ => {
                store.set_notice(
                    format!(
                        "unknown command /{}; {COMMANDS_HELP}",
                        crate::text::short(command, 30)
                    ),
                    true,
                );
                return None;
            }
        };
        store.input.take();
        store.remember(&text);
        return Some(action);
    }
    if store.turn.is_busy() {
        store.set_notice(
            "a turn is running: your input is kept; press Enter when it ends, or Ctrl+C to interrupt",
            true,
        );
        return None;
    }
    store.input.take();
    store.remember(&text);
    Some(Action::Submit(text))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
/// Which way a key moves through the transcript, the plan or the history.
pub enum Direction {
    Up,
    Down,
}

/// PageUp/PageDown: the plan when it is shown over the body, else the
/// transcript. Clamped to the content, measured at the current size.
fn scroll(store: &mut Store, direction: Direction) {
    let Screen::Normal(areas) = layout::compute(store.size, store) else {
        return;
    };
    if let (true, Some(plan)) = (store.plan_overlay, areas.plan) {
        let inner = plan_panel::inner(plan);
        let page = usize::from(inner.height.saturating_sub(2)).max(1);
        let max = plan_panel::max_scroll(store.plan.as_ref(), inner);
        store.plan_scroll = step(store.plan_scroll.min(max), page, direction, max, false);
    } else {
        let page = usize::from(areas.transcript.height.saturating_sub(1)).max(1);
        let max = transcript::max_scroll(store, areas.transcript);
        // Transcript scroll counts up from the bottom.
        store.transcript_scroll =
            step(store.transcript_scroll.min(max), page, direction, max, true);
    }
}

fn step(current: usize, page: usize, direction: Direction, max: usize, from_bottom: bool) -> usize {
    let up = direction == Direction::Up;
    if up == from_bottom {
        (current + page).min(max)
    } else {
        current.saturating_sub(page)
    }
}
