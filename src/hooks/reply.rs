//! What a hook's exit and stdout mean, as Claude Code and Codex read them:
//! exit 0 goes on (a JSON reply may decide), exit 2 blocks with stderr as
//! the reason, anything else is an error shown to the user that blocks
//! nothing.
//!
//! Two reply shapes are read: Claude Code's `{"hookSpecificOutput":
//! {"permissionDecision": "allow"|"deny"|"ask", "permissionDecisionReason",
//! "additionalContext"}}` (and its `PermissionRequest` form
//! `{"decision": {"behavior": "allow"|"deny", "message"}}` inside it), and
//! the simple one, `{"decision": "block"|"deny"|"approve"|"allow"|"ask",
//! "reason"}`.

use serde_json::Value;

use super::HookEvent;
use super::runner::HookRun;
use crate::protocol::hook::{HookDecision, HookStatus};

/// Longest reason or added context taken from one hook, in characters.
const TEXT_CAP: usize = 8_000;

/// What one hook said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub decision: HookDecision,
    /// Why it decided so (for the model, and the user's notice).
    pub reason: Option<String>,
    /// Text added to the conversation for the model.
    pub context: Option<String>,
    /// `systemMessage`: a line for the person, never the model.
    pub notice: Option<String>,
    /// It failed (a non-blocking error), saying how.
    pub failure: Option<String>,
}

/// Reads one run of a hook of `event`.
pub fn interpret(event: HookEvent, run: &HookRun) -> Reply {
    match (run.status, run.code) {
        (HookStatus::Exited, Some(0)) => exit_zero(event, &run.stdout.text()),
        (HookStatus::Exited, Some(2)) => {
            let stderr = run.stderr.text();
            Reply {
                decision: HookDecision::Deny,
                reason: Some(if stderr.is_empty() {
                    "the hook exited with 2 and gave no reason".into()
                } else {
                    clean(&stderr)
                }),
                ..Reply::default()
            }
        }
        (status, code) => failed(status, code, run),
    }
}

fn failed(status: HookStatus, code: Option<i32>, run: &HookRun) -> Reply {
    let how = match status {
        HookStatus::Exited => format!("exited with {}", code.unwrap_or(-1)),
        HookStatus::TimedOut => format!(
            "ran past its timeout ({} ms) and was killed with its process group",
            run.elapsed.as_millis()
        ),
        HookStatus::Killed => format!("was killed by signal {}", code.unwrap_or(0)),
        HookStatus::SpawnFailed => format!(
            "could not start: {}",
            run.spawn_error.as_deref().unwrap_or("unknown error")
        ),
    };
    let stderr = run.stderr.text();
    let failure = if stderr.is_empty() {
        how
    } else {
        format!("{how}; stderr: {}", crate::text::summary(&stderr, 300))
    };
    Reply {
        failure: Some(failure),
        ..Reply::default()
    }
}

fn exit_zero(event: HookEvent, stdout: &str) -> Reply {
    let trimmed = stdout.trim();
    if trimmed.starts_with('{')
        && let Ok(value @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed)
    {
        return json_reply(&value);
    }
    let plain_is_context = match event {
        HookEvent::UserPromptSubmit | HookEvent::SessionStart => true,
        HookEvent::PreToolUse
        | HookEvent::PostToolUse
        | HookEvent::PermissionRequest
        | HookEvent::SubagentStart
        | HookEvent::SubagentStop
        | HookEvent::PreCompact
        | HookEvent::Stop => false,
    };
    Reply {
        context: (plain_is_context && !trimmed.is_empty()).then(|| clean(trimmed)),
        ..Reply::default()
    }
}

/// A JSON reply in either shape; a decision word it does not know is a
/// failure, never a guess.
fn json_reply(value: &Value) -> Reply {
    let specific = value.get("hookSpecificOutput");
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(clean)
            .filter(|t| !t.is_empty())
    };
    let (word, reason) = if let Some(word) = specific.and_then(|s| s.get("permissionDecision")) {
        (
            Some(word),
            text(specific.and_then(|s| s.get("permissionDecisionReason"))),
        )
    } else if let Some(decision) = specific.and_then(|s| s.get("decision")) {
        (decision.get("behavior"), text(decision.get("message")))
    } else {
        (value.get("decision"), text(value.get("reason")))
    };
    let context = text(specific.and_then(|s| s.get("additionalContext")));
    let notice = text(value.get("systemMessage"));
    let decision = match word.map(|w| w.as_str().unwrap_or("?")) {
        None => HookDecision::None,
        Some("allow" | "approve") => HookDecision::Allow,
        Some("ask") => HookDecision::Ask,
        Some("deny" | "block") => HookDecision::Deny,
        Some(other) => {
            return Reply {
                context,
                notice,
                failure: Some(format!(
                    "replied with the unknown decision {:?} (expected allow, deny, ask, block or approve); it was ignored",
                    crate::text::summary(other, 40)
                )),
                ..Reply::default()
            };
        }
    };
    Reply {
        decision,
        reason,
        context,
        notice,
        failure: None,
    }
}

/// A hook's text as the model may read it: control characters out, cut.
fn clean(text: &str) -> String {
    crate::text::short(crate::text::sanitize(text, false).trim(), TEXT_CAP)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::hooks::runner::Captured;

    fn ran(code: i32, stdout: &str, stderr: &str) -> HookRun {
        HookRun {
            status: HookStatus::Exited,
            code: Some(code),
            stdout: Captured {
                bytes: stdout.as_bytes().to_vec(),
                cut: false,
            },
            stderr: Captured {
                bytes: stderr.as_bytes().to_vec(),
                cut: false,
            },
            elapsed: Duration::from_millis(3),
            spawn_error: None,
        }
    }

    #[test]
    fn exit_two_denies_with_stderr_and_other_codes_fail_without_blocking() {
        let reply = interpret(
            HookEvent::PreToolUse,
            &ran(2, "{\"decision\":\"allow\"}", "no edits to main.rs\n"),
        );
        assert_eq!(reply.decision, HookDecision::Deny);
        assert_eq!(reply.reason.as_deref(), Some("no edits to main.rs"));
        let reply = interpret(HookEvent::PreToolUse, &ran(1, "", "boom"));
        assert_eq!(reply.decision, HookDecision::None);
        assert_eq!(
            reply.failure.as_deref(),
            Some("exited with 1; stderr: boom")
        );
    }

    #[test]
    fn both_reply_shapes_map_onto_allow_deny_ask() {
        let claude = r#"{"systemMessage":"guard ran","hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not today","additionalContext":"see CONTRIBUTING"}}"#;
        let reply = interpret(HookEvent::PreToolUse, &ran(0, claude, ""));
        assert_eq!(
            reply,
            Reply {
                decision: HookDecision::Deny,
                reason: Some("not today".into()),
                context: Some("see CONTRIBUTING".into()),
                notice: Some("guard ran".into()),
                failure: None,
            }
        );
        for (json, decision) in [
            (r#"{"decision":"block","reason":"r"}"#, HookDecision::Deny),
            (r#"{"decision":"approve"}"#, HookDecision::Allow),
            (r#"{"decision":"allow"}"#, HookDecision::Allow),
            (r#"{"decision":"ask"}"#, HookDecision::Ask),
            (r#"{"decision":"deny"}"#, HookDecision::Deny),
            (
                r#"{"hookSpecificOutput":{"decision":{"behavior":"allow"}}}"#,
                HookDecision::Allow,
            ),
            (r#"{"suppressOutput":true}"#, HookDecision::None),
        ] {
            assert_eq!(
                interpret(HookEvent::PreToolUse, &ran(0, json, "")).decision,
                decision,
                "{json}"
            );
        }
        let odd = interpret(
            HookEvent::PreToolUse,
            &ran(0, r#"{"decision":"maybe"}"#, ""),
        );
        assert_eq!(odd.decision, HookDecision::None);
        assert!(odd.failure.unwrap().contains("unknown decision"));
    }

    #[test]
    fn plain_stdout_is_context_for_prompt_and_session_hooks_only() {
        let reply = interpret(HookEvent::UserPromptSubmit, &ran(0, "branch: main\n", ""));
        assert_eq!(reply.context.as_deref(), Some("branch: main"));
        let reply = interpret(HookEvent::PreToolUse, &ran(0, "branch: main\n", ""));
        assert_eq!(reply, Reply::default());
    }
}
