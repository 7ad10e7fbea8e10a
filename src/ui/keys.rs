//! Key presses become store changes (editing, scrolling) and [`Action`]s
//! (what the actor must do: talk to the agent, run a local command, quit).
//!
//! Pure and synchronous: the caller passes `now`, so double-press timing is
//! testable without a clock.

use crate::protocol::op::{ChangesOp, ChangesVerb};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::approval::Outcome;
use super::state::{Direction, Store};

/// A second Ctrl+C within this window quits (when no turn runs).
pub const QUIT_WINDOW: Duration = Duration::from_millis(1500);

/// What a key asks the actor to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start a turn with this prompt (`Op::SubmitPrompt`).
    Submit(String),
    /// Interrupt the running turn, subagent included (`Op::Interrupt`).
    Interrupt,
    /// Cancel one running subagent (`Some(id)`: Esc on the focused row,
    /// `/cancel ID`) or all of them (`None`: `/cancel all`); the parent
    /// turn goes on with their cancelled results.
    CancelSubagent(Option<String>),
    /// `/subagents` (or `/agents`): every subagent of the session as the
    /// engine lists it (`Op::ListSubagents`), into the transcript.
    Subagents,
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
    /// `/suspend [NAME]`: bookmark the conversation.
    Suspend(Option<String>),
    /// `/recall [NAME]`: bring back a bookmark or a session (the plan stays).
    Recall(Option<String>),
    /// `/sessions`: list the sessions and their bookmarks.
    Sessions,
    /// `/changes [show|apply|discard ID]`: write subagents' change sets.
    Changes(crate::protocol::op::ChangesOp),
    /// `/help`: every key and command, into the transcript.
    Help,
    /// `/status`: model, provider, safety settings, instructions, usage.
    Status,
    /// `/compact`: compact the conversation now.
    Compact,
    /// `/model NAME`: use this model from the next request on.
    Model(String),
    /// `/diff`: the workspace's `git diff` as the engine runs it
    /// (`Op::Diff`), coloured.
    Diff,
    /// Leave Fido (`/quit`, Ctrl+C twice when idle, Ctrl+D on empty input).
    Quit,
}

/// Local commands typed on the input line.
const COMMANDS_HELP: &str = "local commands: /help, /status, /compact, /model NAME, /diff, /plan, /plan clear, /subagents, /cancel ID|all, /undo, /changes [show|apply|discard ID], /suspend [NAME], /recall [NAME], /sessions, /quit";

/// A paste longer than this many lines (or [`FOLD_PASTE_CHARS`]) shows
/// folded in the editor as one placeholder.
pub const FOLD_PASTE_LINES: usize = 5;
pub const FOLD_PASTE_CHARS: usize = 1000;
/// Lines the mouse wheel scrolls per notch.
pub const WHEEL_LINES: usize = 3;

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
    // A prompt takes only deliberate keys; the rest are typing, for the
    // input line as if no prompt were on screen.
    if let Outcome::Taken(decision) = super::approval::on_key(store, key, now) {
        return decision.map(Action::Approve);
    }
    if ctrl {
        return ctrl_key(store, key.code);
    }
    let alt = key.modifiers.contains(KeyModifiers::ALT);
    let shift = key.modifiers.contains(KeyModifiers::SHIFT);
    if key.code == KeyCode::Enter && (alt || shift) {
        store.input.newline();
        return None;
    }
    if alt {
        alt_key(store, key.code);
        return None;
    }
    if store.question.is_some()
        && let Some(answer) = answer_key(store, key.code)
    {
        return Some(answer);
    }
    match key.code {
        KeyCode::Enter => return enter(store),
        // On an empty prompt with lines queued, Esc drops the newest of
        // them before it means anything else.
        KeyCode::Esc if queue_in_reach(store) => drop_last_queued(store),
        KeyCode::Esc => {
            // The focused subagent only; without one Esc does nothing.
            let focused = store.focused_subagent()?.agent_id.clone();
            return Some(Action::CancelSubagent(Some(focused)));
        }
        KeyCode::F(2) => store.plan_overlay = !store.plan_overlay,
        KeyCode::Up if queue_in_reach(store) => edit_last_queued(store),
        // Inside a multi-line draft first, then through the history.
        KeyCode::Up if !store.input.up() => store.recall_history(Direction::Up),
        KeyCode::Down if !store.input.down() => store.recall_history(Direction::Down),
        KeyCode::PageUp => scroll(store, Direction::Up, None),
        KeyCode::PageDown => scroll(store, Direction::Down, None),
        KeyCode::Backspace => store.input.backspace(),
        KeyCode::Delete => store.input.delete(),
        KeyCode::Left => store.input.left(),
        KeyCode::Right => store.input.right(),
        KeyCode::Home => store.input.home(),
        KeyCode::End if store.transcript_scroll > 0 => follow(store),
        KeyCode::End => store.input.end(),
        KeyCode::Tab => store.input.insert('\t'),
        KeyCode::Char(c) => store.input.insert(c),
        _ => {}
    }
    None
}

/// Back to the tail of the transcript (End while scrolled, Ctrl+End).
fn follow(store: &mut Store) {
    store.transcript_scroll = 0;
    store.new_output = false;
}

/// Bracketed paste: the text goes into the editor with its newlines; a
/// large paste shows as one `[paste #N …]` placeholder, put back in place
/// when the prompt is sent.
pub fn handle_paste(store: &mut Store, text: &str) {
    super::approval::on_paste(store, store.now);
    store.quit_armed_at = None;
    store.notice = None;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines = text.lines().count();
    if lines > FOLD_PASTE_LINES || text.chars().count() > FOLD_PASTE_CHARS {
        store.pastes.push(text.clone());
        let placeholder = paste_placeholder(store.pastes.len(), &text);
        store.input.insert_str(&placeholder);
    } else {
        store.input.insert_str(&text);
    }
}

fn paste_placeholder(number: usize, text: &str) -> String {
    format!(
        "[paste #{number}: {} lines, {} chars]",
        text.lines().count(),
        text.chars().count()
    )
}

/// The draft with every paste placeholder still in it replaced by its text.
fn expand_pastes(store: &Store, draft: &str) -> String {
    let mut text = draft.to_string();
    for (index, paste) in store.pastes.iter().enumerate() {
        let placeholder = paste_placeholder(index + 1, paste);
        text = text.replace(&placeholder, paste);
    }
    text
}

/// The mouse wheel: a few lines up or down.
pub fn wheel(store: &mut Store, direction: Direction) {
    scroll(store, direction, Some(WHEEL_LINES));
}

fn ctrl_c(store: &mut Store, now: Instant) -> Option<Action> {
    if store.turn.is_busy() {
        store.quit_armed_at = None;
        // The queue stays, but waits for Enter once the turn is over.
        store.typeahead.hold();
        store.turn = super::state::TurnState::Interrupting;
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
        KeyCode::Char('k' | 'K') => store.input.kill_to_end(),
        KeyCode::Char('w' | 'W') => store.input.delete_word(),
        KeyCode::Char('j' | 'J') => store.input.newline(),
        KeyCode::Char('o' | 'O') => store.toggle_expanded(),
        KeyCode::Left => store.input.word_left(),
        KeyCode::Right => store.input.word_right(),
        KeyCode::End => follow(store),
        _ => {}
    }
    None
}

fn alt_key(store: &mut Store, code: KeyCode) {
    match code {
        KeyCode::Char('b' | 'B') | KeyCode::Left => store.input.word_left(),
        KeyCode::Char('f' | 'F') | KeyCode::Right => store.input.word_right(),
        KeyCode::Up => store.move_subagent_focus(Direction::Up),
        KeyCode::Down => store.move_subagent_focus(Direction::Down),
        _ => {}
    }
}

/// Enter answers the question on screen, Esc dismisses it; other keys edit.
fn answer_key(store: &mut Store, code: KeyCode) -> Option<Action> {
    match code {
        KeyCode::Enter => {
            let text = store.input.take().trim().to_string();
            store.answered(Some(&text));
            Some(Action::Answer(Some(text)))
        }
        KeyCode::Esc => {
            store.answered(None);
            Some(Action::Answer(None))
        }
        _ => None,
    }
}

fn enter(store: &mut Store) -> Option<Action> {
    let text = expand_pastes(store, store.input.text()).trim().to_string();
    if text.is_empty() {
        // Nothing typed: the next queued line, when nothing runs.
        if store.turn_open() {
            return None;
        }
        return send_next_queued(store);
    }
    if let Some(command) = text.strip_prefix('/') {
        let action = slash_command(store, command)?;
        accept(store, &text);
        return Some(action);
    }
    if store.turn_open() {
        return enqueue(store, text);
    }
    accept(store, &text);
    Some(Action::Submit(text))
}

/// The line entered leaves the editor for the history and the queue.
fn enqueue(store: &mut Store, line: String) -> Option<Action> {
    accept(store, &line);
    store.typeahead.push(line);
    None
}

/// Up and Esc reach the queue on an empty prompt.
fn queue_in_reach(store: &Store) -> bool {
    store.input.is_empty() && !store.typeahead.is_empty()
}

/// Up: the newest queued line back into the editor; Enter queues it again
/// (or sends it, if the turn ended meanwhile).
fn edit_last_queued(store: &mut Store) {
    if let Some(line) = store.typeahead.take_last() {
        store.history_pos = None;
        store.input.insert_str(&line);
    }
}

fn drop_last_queued(store: &mut Store) {
    let Some(line) = store.typeahead.take_last() else {
        return;
    };
    let shown = crate::text::short(&line.replace('\n', " "), 40);
    let left = store.typeahead.len();
    store.set_notice(
        format!("dropped the queued message \"{shown}\" ({left} still queued)"),
        false,
    );
}

/// The op the queue waited for was answered: the next queued line, as an
/// action to carry out now, unless Ctrl+C held the queue (then the person
/// is told how to send it).
pub fn release_queued(store: &mut Store) -> Option<Action> {
    if store.typeahead.take_hold() {
        store.queued_waiting_notice();
        return None;
    }
    queued_action(store)
}

/// Enter on an empty prompt: the next queued line goes (after an
/// interrupt, the way the queue starts again).
fn send_next_queued(store: &mut Store) -> Option<Action> {
    store.typeahead.take_hold();
    queued_action(store)
}

/// The oldest queued line, as the action it asks for: a prompt, or a
/// command that had to wait for the turn.
fn queued_action(store: &mut Store) -> Option<Action> {
    let line = store.typeahead.take_next()?;
    match line.strip_prefix('/') {
        Some(command) => slash_command(store, command),
        None => Some(Action::Submit(line)),
    }
}

/// The line entered leaves the editor for the history.
fn accept(store: &mut Store, text: &str) {
    store.input.take();
    store.pastes.clear();
    store.remember(text);
}

/// A `/command`: its action; or `None`, either queued (a command that
/// waits for the running turn) or with a notice saying why not (the line
/// then stays in the editor).
fn slash_command(store: &mut Store, command: &str) -> Option<Action> {
    let words: Vec<&str> = command.split_whitespace().collect();
    // Commands that need the conversation to themselves wait in the
    // queue while a turn runs; the others run at once.
    let busy = store.turn_open();
    match words.as_slice() {
        ["plan"] => Some(Action::ShowPlan),
        ["plan", "clear"] if busy => wait_for_the_turn(store, command),
        ["plan", "clear"] => Some(Action::ClearPlan),
        ["undo"] | ["suspend", ..] | ["recall", ..] if busy => wait_for_the_turn(store, command),
        ["undo"] => Some(Action::Undo),
        ["suspend"] => Some(Action::Suspend(None)),
        ["suspend", name] => Some(Action::Suspend(Some((*name).to_string()))),
        ["recall"] => Some(Action::Recall(None)),
        ["recall", name] => Some(Action::Recall(Some((*name).to_string()))),
        ["sessions"] => Some(Action::Sessions),
        ["changes"] => Some(Action::Changes(ChangesOp::List)),
        ["changes", "apply" | "discard", _] if busy => wait_for_the_turn(store, command),
        ["changes", verb, id] => match ChangesVerb::parse(verb) {
            Some(ChangesVerb::List) | None => notice(
                store,
                "/changes lists; /changes show|apply|discard ID works on one",
                false,
            ),
            Some(verb) => Some(Action::Changes(ChangesOp::on(verb, (*id).to_string()))),
        },
        ["help"] => Some(Action::Help),
        ["status"] => Some(Action::Status),
        ["diff"] => Some(Action::Diff),
        ["compact"] if busy => wait_for_the_turn(store, command),
        ["compact"] => Some(Action::Compact),
        ["model", name] => Some(Action::Model((*name).to_string())),
        ["model"] => {
            let text = format!(
                "the model is {}; /model NAME switches it",
                store.session.model
            );
            notice(store, text, false)
        }
        ["subagents"] | ["agents"] => Some(Action::Subagents),
        ["cancel", "all"] => cancel_all(store),
        ["cancel", wanted] => cancel_one(store, wanted),
        ["cancel"] => notice(
            store,
            "/cancel ID cancels one subagent, /cancel all every one",
            true,
        ),
        ["quit"] | ["exit"] => Some(Action::Quit),
        _ => {
            let shown = crate::text::short(command, 30);
            notice(
                store,
                format!("unknown command /{shown}; {COMMANDS_HELP}"),
                true,
            )
        }
    }
}

/// Shows `text` (as a warning when `warning`) and takes no action.
fn notice(store: &mut Store, text: impl Into<String>, warning: bool) -> Option<Action> {
    store.set_notice(text, warning);
    None
}

/// A command that must not run during a turn is queued, to run when its
/// turn comes.
fn wait_for_the_turn(store: &mut Store, command: &str) -> Option<Action> {
    enqueue(store, format!("/{command}"))
}

fn cancel_all(store: &mut Store) -> Option<Action> {
    if !store.subagents.iter().any(|s| s.is_live()) {
        return notice(store, "no subagent is running", true);
    }
    Some(Action::CancelSubagent(None))
}

fn cancel_one(store: &mut Store, wanted: &str) -> Option<Action> {
    match store.find_live_subagent(wanted) {
        Some(view) => Some(Action::CancelSubagent(Some(view.agent_id.clone()))),
        None => {
            let shown = crate::text::short(wanted, 30);
            let text = format!("no running subagent {shown}; /subagents lists them");
            notice(store, text, true)
        }
    }
}

/// PageUp/PageDown (or `lines` for the wheel): the plan when it is shown
/// over the body, else the transcript. Clamped to the content, as the last
/// frame measured it (the keys never lay out the screen): a page up moves
/// from what is on screen.
fn scroll(store: &mut Store, direction: Direction, lines: Option<usize>) {
    let limits = store.scroll_limits;
    if let (true, Some(plan)) = (store.plan_overlay, limits.plan_overlay) {
        let page = lines.unwrap_or(plan.page);
        store.plan_scroll = step(
            store.plan_scroll.min(plan.max),
            page,
            direction,
            plan.max,
            false,
        );
    } else {
        let limit = limits.transcript;
        let page = lines.unwrap_or(limit.page);
        // Transcript scroll counts up from the bottom; lines arriving from
        // the last frame on move the view (see `frame`).
        let before = store.transcript_scroll.min(limit.max);
        store.transcript_scroll = step(before, page, direction, limit.max, true);
        if store.transcript_scroll == 0 {
            store.new_output = false;
        }
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
