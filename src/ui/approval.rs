//! The approval prompt's keys: they answer the [`ApprovalRequest`] on
//! screen (its state is the store's [`PendingApproval`]).
//!
//! Only deliberate keys answer ([`readiness`]): until the prompt has been on
//! screen for [`GRACE`] with no key typed, every key goes to the input line
//! as if no prompt were there, and any key the prompt has no use for does
//! too (and makes it wait again). Once ready: `y` approves once, `a`
//! approves this exact request for the session, `n` asks for an optional
//! reason (typed in the prompt, Enter sends it, Esc sends none), Esc
//! denies at once, `o` or Ctrl+O opens the full view (scrolled with the
//! arrows, PageUp/PageDown, Home/End; `o`, `q` or Esc closes it). `y` and
//! `a` count only once every row of the request has been on screen, in the
//! box or in the full view. Ctrl+C is not handled here: it interrupts the
//! turn, which drops the request (the tool call still gets its result).
//! Pure: keys change the store and return the decision; the caller passes
//! the instant each key arrived.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub use super::state::readiness::{GRACE, Readiness, Route};

use super::input::InputBuffer;
use super::marks;
use super::state::{Entry, PendingApproval, Store};
use crate::protocol::{ApprovalDecision, ApprovalRequest};

/// The longest quote of a command in the transcript's note (the prompt
/// shows all of it).
const SUMMARY_CHARS: usize = 200;

/// One line for the transcript, when the request appears.
fn summary(request: &ApprovalRequest) -> String {
    match request {
        ApprovalRequest::Command {
            command, escalated, ..
        } => {
            let how = if *escalated {
                " outside the sandbox"
            } else {
                ""
            };
            let shown = crate::text::short(&marks::inline(command), SUMMARY_CHARS);
            format!("approval needed to run{how}: {shown}")
        }
        ApprovalRequest::FileChange { tool, path, .. } => {
            format!("approval needed for {tool} {path}")
        }
        ApprovalRequest::McpCall { tool, server, .. } => {
            format!("approval needed to call {tool} (MCP server {server})")
        }
        ApprovalRequest::Browse { host, .. } => {
            format!("approval needed to browse {host}")
        }
        ApprovalRequest::WriteDelegation {
            agent_id, claim, ..
        } => format!(
            "approval needed for write subagent {agent_id} on {}",
            claim.join(", ")
        ),
        ApprovalRequest::ChangeSet {
            id,
            summary,
            control_files,
            ..
        } if !control_files.is_empty() => format!(
            "change set {id} to review: {summary}; it touches control files: {}",
            control_files.join(", ")
        ),
        ApprovalRequest::ChangeSet { id, summary, .. } => {
            format!("change set {id} to review: {summary}")
        }
        ApprovalRequest::HookAsk { tool, .. } => {
            format!("a hook asks for approval of {tool}")
        }
    }
}

/// Shows `request` (replacing an unanswered one, which the caller denies);
/// it appeared at `store.now`, and its keys wait for [`GRACE`] from there.
pub fn show(store: &mut Store, request: ApprovalRequest) {
    store.push(Entry::Info(summary(&request)));
    store.approval = Some(PendingApproval::new(request, store.now));
}

/// What became of a key while a request is on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The prompt took it; `Some` is the decision.
    Taken(Option<ApprovalDecision>),
    /// Not for the prompt: the input line handles it as usual.
    Composer,
}

/// A key that arrived at `now` while a request is on screen.
pub fn on_key(store: &mut Store, key: KeyEvent, now: Instant) -> Outcome {
    let Some(pending) = &mut store.approval else {
        return Outcome::Composer;
    };
    if let Some(reason) = &mut pending.reason {
        // `n` was a deliberate key: what follows is the reason.
        let decision = reason_key(reason, key);
        return taken(store, decision);
    }
    let wanted = wants(pending, key);
    match pending.readiness.key(now, wanted) {
        Route::Composer => Outcome::Composer,
        Route::Prompt => {
            let decision = prompt_key(store, key);
            taken(store, decision)
        }
    }
}

/// The prompt took a key; a decision clears it.
fn taken(store: &mut Store, decision: Option<ApprovalDecision>) -> Outcome {
    if let Some(decision) = &decision {
        answered(store, decision);
    }
    Outcome::Taken(decision)
}

/// A paste at `now`: typing, so the prompt waits again.
pub fn on_paste(store: &mut Store, now: Instant) {
    if let Some(pending) = &mut store.approval {
        pending.readiness.typed(now);
    }
}

/// Time passed: whether the prompt became ready (redraw it).
pub fn poll(store: &mut Store, now: Instant) -> bool {
    store
        .approval
        .as_mut()
        .is_some_and(|pending| pending.readiness.poll(now))
}

/// When to [`poll`] next, while a prompt waits to be ready.
pub fn wake_at(store: &Store) -> Option<Instant> {
    store.approval.as_ref()?.readiness.wake_at()
}

/// Whether the prompt has a use for `key` now. Only plain keys (Shift
/// aside) answer: Ctrl+A must not approve anything.
fn wants(pending: &PendingApproval, key: KeyEvent) -> bool {
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl || key.modifiers.contains(KeyModifiers::ALT) {
        return ctrl && matches!(key.code, KeyCode::Char('o' | 'O'));
    }
    let answers = matches!(
        key.code,
        KeyCode::Char('y' | 'Y' | 'a' | 'A' | 'n' | 'N' | 'o' | 'O') | KeyCode::Esc
    );
    let scrolls = matches!(
        key.code,
        KeyCode::Up
            | KeyCode::Down
            | KeyCode::PageUp
            | KeyCode::PageDown
            | KeyCode::Home
            | KeyCode::End
            | KeyCode::Char('q' | 'Q')
    );
    answers || (scrolls && pending.full_view.is_some())
}

/// A key [`wants`] accepted, on a ready prompt.
fn prompt_key(store: &mut Store, key: KeyEvent) -> Option<ApprovalDecision> {
    let pending = store.approval.as_mut()?;
    match key.code {
        KeyCode::Char('y' | 'Y') => approve(store, ApprovalDecision::Approved),
        KeyCode::Char('a' | 'A') => approve(store, ApprovalDecision::ApprovedForSession),
        KeyCode::Char('n' | 'N') => {
            pending.reason = Some(InputBuffer::default());
            None
        }
        KeyCode::Esc if pending.full_view.is_none() => {
            Some(ApprovalDecision::Denied { reason: None })
        }
        KeyCode::Char('o' | 'O') | KeyCode::Esc | KeyCode::Char('q' | 'Q') => {
            pending.full_view = match pending.full_view {
                Some(_) => None,
                None => Some(0),
            };
            None
        }
        code => {
            scroll_full_view(pending, code);
            None
        }
    }
}

/// `y` or `a`: the decision, once all of the request has been on screen;
/// before that, a notice saying how to see it.
fn approve(store: &mut Store, decision: ApprovalDecision) -> Option<ApprovalDecision> {
    if store.approval.as_ref().is_some_and(|p| p.seen_whole) {
        return Some(decision);
    }
    store.set_notice(
        "not all of the request was on screen: o opens the full view; y and a work once its end has been shown",
        true,
    );
    None
}

/// The arrows, PageUp/PageDown, Home/End in the full view, within what
/// the last frame measured (End goes to the very end; the frame clamps).
fn scroll_full_view(pending: &mut PendingApproval, code: KeyCode) {
    let Some(top) = pending.full_view else {
        return;
    };
    let limit = pending.full_view_limit;
    let top = top.min(limit.max);
    pending.full_view = Some(match code {
        KeyCode::Up => top.saturating_sub(1),
        KeyCode::Down => (top + 1).min(limit.max),
        KeyCode::PageUp => top.saturating_sub(limit.page.max(1)),
        KeyCode::PageDown => (top + limit.page.max(1)).min(limit.max),
        KeyCode::Home => 0,
        KeyCode::End => usize::MAX,
        _ => top,
    });
}

/// A key while the reason is typed: Enter sends the denial with it, Esc
/// without; the others edit it.
fn reason_key(reason: &mut InputBuffer, key: KeyEvent) -> Option<ApprovalDecision> {
    if key
        .modifiers
        .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
    {
        return None;
    }
    match key.code {
        KeyCode::Enter => {
            let text = reason.take().trim().to_string();
            Some(ApprovalDecision::Denied {
                reason: (!text.is_empty()).then_some(text),
            })
        }
        KeyCode::Esc => Some(ApprovalDecision::Denied { reason: None }),
        KeyCode::Backspace => {
            reason.backspace();
            None
        }
        KeyCode::Left => {
            reason.left();
            None
        }
        KeyCode::Right => {
            reason.right();
            None
        }
        KeyCode::Char(c) => {
            reason.insert(c);
            None
        }
        _ => None,
    }
}

/// What the answer to a change set's review did.
fn reviewed(decision: &ApprovalDecision) -> String {
    match decision {
        ApprovalDecision::Approved => "apply the change set (a three-way merge)".into(),
        ApprovalDecision::ApprovedForSession => {
            "apply the change set, and later clean ones without asking".into()
        }
        ApprovalDecision::Denied {
            reason: Some(reason),
        } => format!("discard the change set: {reason}"),
        ApprovalDecision::Denied { reason: None } => "discard the change set".into(),
    }
}

/// Clears the prompt and notes the answer in the transcript.
pub fn answered(store: &mut Store, decision: &ApprovalDecision) {
    let review = matches!(
        store.approval.take(),
        Some(PendingApproval {
            request: ApprovalRequest::ChangeSet { .. },
            ..
        })
    );
    if review {
        store.push(Entry::Info(reviewed(decision)));
        return;
    }
    store.push(Entry::Info(match decision {
        ApprovalDecision::Approved => "approved once".to_string(),
        ApprovalDecision::ApprovedForSession => "approved for this session".to_string(),
        ApprovalDecision::Denied {
            reason: Some(reason),
        } => format!("denied: {reason}"),
        ApprovalDecision::Denied { reason: None } => "denied".to_string(),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::frame::Screen;
    use crate::ui::keys::{Action, handle_key};
    use std::time::Duration;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn command(text: &str) -> ApprovalRequest {
        ApprovalRequest::Command {
            command: text.into(),
            cwd: ".".into(),
            justification: Some("clean build".into()),
            escalated: true,
        }
    }

    /// Shows `request` at `t0` and draws a frame, as the actor does.
    fn shown(size: (u16, u16), request: ApprovalRequest, t0: Instant) -> Store {
        let mut store = Store::new(size);
        store.now = t0;
        show(&mut store, request);
        frame(&mut store);
        store
    }

    fn frame(store: &mut Store) {
        let size = store.size;
        Screen::default().prepare(store, size);
    }

    /// After the grace period, with no key typed.
    fn later(t0: Instant) -> Instant {
        t0 + GRACE + Duration::from_millis(1)
    }

    fn press(store: &mut Store, code: KeyCode, at: Instant) -> Option<ApprovalDecision> {
        match handle_key(store, key(code), at) {
            Some(Action::Approve(decision)) => Some(decision),
            None => None,
            Some(other) => panic!("not an answer: {other:?}"),
        }
    }

    #[test]
    fn y_and_a_approve_esc_denies_after_the_grace_period() {
        for (code, expected) in [
            (KeyCode::Char('y'), ApprovalDecision::Approved),
            (KeyCode::Char('a'), ApprovalDecision::ApprovedForSession),
            (KeyCode::Esc, ApprovalDecision::Denied { reason: None }),
        ] {
            let t0 = Instant::now();
            let mut store = shown((80, 24), command("rm -rf build"), t0);
            assert_eq!(press(&mut store, code, later(t0)), Some(expected));
            assert!(store.approval.is_none());
        }
    }

    #[test]
    fn keys_typed_as_the_prompt_appears_go_to_the_input_line() {
        let t0 = Instant::now();
        let mut store = Store::new((80, 24));
        store.input.insert_str("fix it ");
        store.now = t0;
        show(&mut store, command("rm -rf build"));
        frame(&mut store);
        // "and more", 80 ms apart: the a, the n and the o are typing.
        for (i, c) in "and more".chars().enumerate() {
            let at = t0 + Duration::from_millis(20 + 80 * i as u64);
            assert_eq!(press(&mut store, KeyCode::Char(c), at), None, "{c}");
        }
        assert_eq!(store.input.text(), "fix it and more");
        let pending = store.approval.as_ref().unwrap();
        assert!(!pending.typing_reason() && pending.full_view.is_none());
        assert!(!pending.readiness.shows_ready());
        assert!(
            pending
                .hint()
                .contains("what you type goes to the input line")
        );
        // Quiet for the grace period: now y answers, and the draft stays.
        let end = t0 + Duration::from_millis(20 + 80 * 7);
        assert!(poll(&mut store, end + GRACE));
        assert!(
            store
                .approval
                .as_ref()
                .unwrap()
                .hint()
                .contains("y approve once")
        );
        let at = end + GRACE + Duration::from_millis(1);
        assert_eq!(
            press(&mut store, KeyCode::Char('y'), at),
            Some(ApprovalDecision::Approved)
        );
        assert_eq!(store.input.text(), "fix it and more");
    }

    #[test]
    fn ctrl_a_never_approves_it_edits_the_input_line() {
        let t0 = Instant::now();
        let mut store = shown((80, 24), command("make"), t0);
        store.input.insert_str("draft");
        let ctrl_a = KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL);
        assert_eq!(handle_key(&mut store, ctrl_a, later(t0)), None);
        assert_eq!(store.input.cursor(), 0, "Ctrl+A went to the editor");
        assert!(store.approval.is_some());
    }

    #[test]
    fn n_takes_a_reason_in_the_prompt_and_the_draft_stays() {
        let t0 = Instant::now();
        let mut store = shown((80, 24), command("rm -rf build"), t0);
        store.input.insert_str("my next message");
        let at = later(t0);
        assert_eq!(press(&mut store, KeyCode::Char('n'), at), None);
        assert!(store.approval.as_ref().unwrap().typing_reason());
        // Typed at once, without a pause: a reason is typing by design.
        for c in "use make clean, y".chars() {
            assert_eq!(press(&mut store, KeyCode::Char(c), at), None);
        }
        assert_eq!(
            press(&mut store, KeyCode::Enter, at),
            Some(ApprovalDecision::Denied {
                reason: Some("use make clean, y".into())
            })
        );
        assert_eq!(store.input.text(), "my next message");
    }

    #[test]
    fn a_command_that_does_not_fit_needs_the_full_view_before_y() {
        let text = (1..=40)
            .map(|i| format!("echo line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let t0 = Instant::now();
        let mut store = shown((80, 24), command(&text), t0);
        let at = later(t0);
        assert_eq!(press(&mut store, KeyCode::Char('y'), at), None);
        assert!(
            store
                .notice
                .as_ref()
                .unwrap()
                .text
                .contains("o opens the full view")
        );
        assert_eq!(press(&mut store, KeyCode::Char('a'), at), None);
        assert!(store.approval.is_some());
        // The full view at its top does not show the end either.
        assert_eq!(press(&mut store, KeyCode::Char('o'), at), None);
        frame(&mut store);
        assert_eq!(press(&mut store, KeyCode::Char('y'), at), None);
        assert_eq!(press(&mut store, KeyCode::End, at), None);
        frame(&mut store);
        let pending = store.approval.as_ref().unwrap();
        assert!(pending.seen_whole, "{pending:?}");
        assert_eq!(pending.full_view, Some(pending.full_view_limit.max));
        assert_eq!(
            press(&mut store, KeyCode::Char('y'), at),
            Some(ApprovalDecision::Approved)
        );
    }

    #[test]
    fn the_full_view_scrolls_and_closes_without_answering() {
        let diff: String = (1..=60).map(|i| format!("+line {i}\n")).collect();
        let request = ApprovalRequest::FileChange {
            tool: "patch".into(),
            path: "a.txt".into(),
            diff,
        };
        let t0 = Instant::now();
        let mut store = shown((80, 24), request, t0);
        let at = later(t0);
        let ctrl_o = KeyEvent::new(KeyCode::Char('o'), KeyModifiers::CONTROL);
        assert_eq!(handle_key(&mut store, ctrl_o, at), None);
        frame(&mut store);
        let top = |store: &Store| store.approval.as_ref().unwrap().full_view;
        assert_eq!(top(&store), Some(0));
        press(&mut store, KeyCode::Down, at);
        assert_eq!(top(&store), Some(1));
        press(&mut store, KeyCode::PageDown, at);
        let page = store.approval.as_ref().unwrap().full_view_limit.page;
        assert_eq!(top(&store), Some(1 + page));
        press(&mut store, KeyCode::Home, at);
        assert_eq!(top(&store), Some(0));
        // Esc closes the view; the next Esc denies.
        assert_eq!(press(&mut store, KeyCode::Esc, at), None);
        assert_eq!(top(&store), None);
        assert_eq!(
            press(&mut store, KeyCode::Esc, at),
            Some(ApprovalDecision::Denied { reason: None })
        );
    }

    #[test]
    fn the_body_shows_command_cwd_and_justification_or_the_diff() {
        let pending = PendingApproval::new(command("rm -rf build"), Instant::now());
        assert_eq!(
            pending.body(),
            ["$ rm -rf build", "in .", "why: clean build"]
        );
        assert!(pending.title().contains("OUTSIDE"));
        let patch = PendingApproval::new(
            ApprovalRequest::FileChange {
                tool: "patch".into(),
                path: "a.txt".into(),
                diff: "--- a.txt\n+++ a.txt\n-old\n+new\n".into(),
            },
            Instant::now(),
        );
        assert_eq!(patch.body()[0], "patch a.txt");
        assert!(patch.body().contains(&"+new".to_string()));
    }

    #[test]
    fn a_browse_request_names_the_host_and_the_url() {
        let request = ApprovalRequest::Browse {
            host: "docs.example.com:443".into(),
            url: "https://docs.example.com/guide".into(),
        };
        let t0 = Instant::now();
        let mut store = shown((80, 24), request.clone(), t0);
        let pending = store.approval.clone().unwrap();
        assert_eq!(pending.title(), "Allow browsing this host?");
        assert_eq!(pending.body()[0], "browse_url wants docs.example.com:443");
        assert_eq!(pending.body()[1], "url: https://docs.example.com/guide");
        assert_eq!(
            summary(&request),
            "approval needed to browse docs.example.com:443"
        );
        assert_eq!(
            press(&mut store, KeyCode::Char('a'), later(t0)),
            Some(ApprovalDecision::ApprovedForSession)
        );
    }

    #[test]
    fn an_mcp_call_shows_the_tool_its_arguments_and_its_server() {
        let request = ApprovalRequest::McpCall {
            tool: "mcp__fs__write".into(),
            server: "fs".into(),
            arguments: r#"{"path":"a"}"#.into(),
        };
        let t0 = Instant::now();
        let mut store = shown((80, 24), request.clone(), t0);
        let pending = store.approval.clone().unwrap();
        assert_eq!(pending.title(), "Call this MCP tool?");
        assert_eq!(
            pending.body(),
            [r#"mcp__fs__write {"path":"a"}"#, "on MCP server fs"]
        );
        assert_eq!(
            summary(&request),
            "approval needed to call mcp__fs__write (MCP server fs)"
        );
        assert_eq!(
            press(&mut store, KeyCode::Char('a'), later(t0)),
            Some(ApprovalDecision::ApprovedForSession)
        );
    }

    #[test]
    fn a_folded_change_set_is_applied_only_after_its_full_view_and_says_apply_or_discard() {
        let diff: String = std::iter::once("diff --git a/a.rs b/a.rs\n".to_string())
            .chain((1..=30).map(|i| format!("+line {i}\n")))
            .collect();
        let request = || ApprovalRequest::ChangeSet {
            id: "subagent-1".into(),
            task: "t".into(),
            summary: "1 file (+30 -0)".into(),
            files: vec!["modified a.rs +30 -0".into()],
            outside_claim: Vec::new(),
            diff: diff.clone(),
            control_files: Vec::new(),
        };
        let t0 = Instant::now();
        let mut store = shown((80, 50), request(), t0);
        let at = later(t0);
        let pending = store.approval.as_ref().unwrap();
        assert!(
            pending
                .body()
                .iter()
                .any(|l| l.contains("more lines of this file"))
        );
        assert!(!pending.seen_whole, "the box folds the diff");
        assert_eq!(press(&mut store, KeyCode::Char('y'), at), None);
        assert_eq!(press(&mut store, KeyCode::Char('o'), at), None);
        frame(&mut store);
        assert!(
            store.approval.as_ref().unwrap().seen_whole,
            "50 rows hold it"
        );
        assert_eq!(
            press(&mut store, KeyCode::Char('y'), at),
            Some(ApprovalDecision::Approved)
        );
        assert!(format!("{:?}", &store.transcript[..]).contains("apply the change set"));
        let mut store = shown((80, 50), request(), t0);
        press(&mut store, KeyCode::Esc, at);
        assert!(format!("{:?}", &store.transcript[..]).contains("discard the change set"));
    }
}
