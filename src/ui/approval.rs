//! The approval prompt's keys: they answer the [`ApprovalRequest`] on
//! screen (its state is the store's [`PendingApproval`]).
//!
//! `y` approves once, `a` approves this exact request for the session,
//! `n` asks for an optional reason (typed on the input line, Enter sends
//! it, Esc sends none), Esc denies at once. Ctrl+C is not handled here: it
//! interrupts the turn, which drops the request (the tool call still gets
//! its result). Pure: keys change the store and return the decision.

use crossterm::event::{KeyCode, KeyEvent};

use super::store::{Entry, PendingApproval, Store};
use crate::protocol::{ApprovalDecision, ApprovalRequest};

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
            format!("approval needed to run{how}: {command}")
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

/// Shows `request` (replacing an unanswered one, which the caller denies).
pub fn show(store: &mut Store, request: ApprovalRequest) {
    store.push(Entry::Info(summary(&request)));
    store.approval = Some(PendingApproval {
        request,
        typing_reason: false,
    });
}

/// Handles a key while a request is on screen; `Some` is the decision.
/// Keys that do not answer (editing the reason) return `None`.
pub fn handle_key(store: &mut Store, key: KeyEvent) -> Option<ApprovalDecision> {
    let typing = store.approval.as_ref().is_some_and(|p| p.typing_reason);
    let decision = if typing {
        match key.code {
            KeyCode::Enter => {
                let reason = store.input.take().trim().to_string();
                Some(ApprovalDecision::Denied {
                    reason: (!reason.is_empty()).then_some(reason),
                })
            }
            KeyCode::Esc => Some(ApprovalDecision::Denied { reason: None }),
            KeyCode::Backspace => {
                store.input.backspace();
                None
            }
            KeyCode::Left => {
                store.input.left();
                None
            }
            KeyCode::Right => {
                store.input.right();
                None
            }
            KeyCode::Char(c) => {
                store.input.insert(c);
                None
            }
            _ => None,
        }
    } else {
        match key.code {
            KeyCode::Char('y' | 'Y') => Some(ApprovalDecision::Approved),
            KeyCode::Char('a' | 'A') => Some(ApprovalDecision::ApprovedForSession),
            KeyCode::Char('n' | 'N') => {
                if let Some(pending) = &mut store.approval {
                    pending.typing_reason = true;
                }
                None
            }
            KeyCode::Esc => Some(ApprovalDecision::Denied { reason: None }),
            KeyCode::Char('o' | 'O') => {
                open_in_full(store);
                None
            }
            _ => None,
        }
    };
    if let Some(decision) = &decision {
        answered(store, decision);
    }
    decision
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

/// `o` on a change set: its whole diff goes into the transcript (which
/// scrolls), and the prompt stays for the answer.
fn open_in_full(store: &mut Store) {
    let Some(PendingApproval {
        request: ApprovalRequest::ChangeSet { id, diff, .. },
        ..
    }) = &store.approval
    else {
        return;
    };
    let text = format!("change set {id}, in full:\n{diff}");
    store.push(Entry::Info(text));
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
    use crossterm::event::KeyModifiers;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn command() -> ApprovalRequest {
        ApprovalRequest::Command {
            command: "rm -rf build".into(),
            cwd: ".".into(),
            justification: Some("clean build".into()),
            escalated: true,
        }
    }

    #[test]
    fn y_and_a_approve_esc_denies() {
        for (code, expected) in [
            (KeyCode::Char('y'), ApprovalDecision::Approved),
            (KeyCode::Char('a'), ApprovalDecision::ApprovedForSession),
            (KeyCode::Esc, ApprovalDecision::Denied { reason: None }),
        ] {
            let mut store = Store::new((80, 24));
            show(&mut store, command());
            assert_eq!(handle_key(&mut store, key(code)), Some(expected));
            assert!(store.approval.is_none());
        }
    }

    #[test]
    fn n_takes_a_reason_that_reaches_the_decision() {
        let mut store = Store::new((80, 24));
        show(&mut store, command());
        assert_eq!(handle_key(&mut store, key(KeyCode::Char('n'))), None);
        assert!(store.approval.as_ref().unwrap().typing_reason);
        for c in "use make clean".chars() {
            assert_eq!(handle_key(&mut store, key(KeyCode::Char(c))), None);
        }
        // 'y' while typing is part of the reason, not an approval.
        assert_eq!(
            handle_key(&mut store, key(KeyCode::Enter)),
            Some(ApprovalDecision::Denied {
                reason: Some("use make clean".into())
            })
        );
    }

    #[test]
    fn the_body_shows_command_cwd_and_justification_or_the_diff() {
        let pending = PendingApproval {
            request: command(),
            typing_reason: false,
        };
        assert_eq!(
            pending.body(),
            ["$ rm -rf build", "in .", "why: clean build"]
        );
        assert!(pending.title().contains("OUTSIDE"));
        let patch = PendingApproval {
            request: ApprovalRequest::FileChange {
                tool: "patch".into(),
                path: "a.txt".into(),
                diff: "--- a.txt\n+++ a.txt\n-old\n+new\n".into(),
            },
            typing_reason: false,
        };
        assert_eq!(patch.body()[0], "patch a.txt");
        assert!(patch.body().contains(&"+new".to_string()));
    }

    #[test]
    fn a_browse_request_names_the_host_and_the_url() {
        let request = ApprovalRequest::Browse {
            host: "docs.example.com:443".into(),
            url: "https://docs.example.com/guide".into(),
        };
        let mut store = Store::new((80, 24));
        show(&mut store, request.clone());
        let pending = store.approval.clone().unwrap();
        assert_eq!(pending.title(), "Allow browsing this host?");
        assert_eq!(pending.body()[0], "browse_url wants docs.example.com:443");
        assert_eq!(pending.body()[1], "url: https://docs.example.com/guide");
        assert_eq!(
            summary(&request),
            "approval needed to browse docs.example.com:443"
        );
        assert_eq!(
            handle_key(&mut store, key(KeyCode::Char('a'))),
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
        let mut store = Store::new((80, 24));
        show(&mut store, request.clone());
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
            handle_key(&mut store, key(KeyCode::Char('a'))),
            Some(ApprovalDecision::ApprovedForSession)
        );
    }

    #[test]
    fn a_change_set_opens_in_full_and_its_answer_says_apply_or_discard() {
        let request = || ApprovalRequest::ChangeSet {
            id: "subagent-1".into(),
            task: "t".into(),
            summary: "1 file (+1 -1)".into(),
            files: vec!["modified a.rs +1 -1".into()],
            outside_claim: Vec::new(),
            diff: "diff --git a/a.rs b/a.rs\n-old\n+new\n".into(),
            control_files: Vec::new(),
        };
        let mut store = Store::new((80, 24));
        show(&mut store, request());
        assert_eq!(handle_key(&mut store, key(KeyCode::Char('o'))), None);
        assert!(store.approval.is_some(), "the prompt stays for the answer");
        let text = format!("{:?}", &store.transcript[..]);
        assert!(
            text.contains("change set subagent-1, in full") && text.contains("+new"),
            "{text}"
        );
        assert_eq!(
            handle_key(&mut store, key(KeyCode::Char('y'))),
            Some(ApprovalDecision::Approved)
        );
        assert!(format!("{:?}", &store.transcript[..]).contains("apply the change set"));
        show(&mut store, request());
        handle_key(&mut store, key(KeyCode::Esc));
        assert!(format!("{:?}", &store.transcript[..]).contains("discard the change set"));
    }
}
