//! The text of `/help` and `/status`, built from the store and the
//! configuration the local commands report. (`/subagents` is the engine's
//! text, shown as it comes.)

use super::state::{Store, tokens};
use crate::protocol::UsageTotals;
use crate::protocol::op::StatusInfo;

/// Every key and command, one per line.
pub const HELP: &str = "\
Keys
  Enter                 send the prompt (queued while a turn runs; on an
                        empty prompt when idle, the next queued one)
  Alt+Enter, Shift+Enter, Ctrl+J   new line in the prompt
  Up / Down             move in a multi-line prompt, then walk the history
                        (Up on an empty prompt edits the last queued one)
  Ctrl+A / Ctrl+E       start / end of the line
  Ctrl+K / Ctrl+U       delete to the end / start of the line
  Ctrl+W                delete the word before the cursor
  Alt+B / Alt+F, Ctrl+Left / Ctrl+Right   word back / forward
  PgUp / PgDn, wheel    scroll the transcript (or the full-screen plan)
  End                   back to the newest output (when scrolled)
  Ctrl+O                expand / fold diffs and command output
  F2, Ctrl+P            full-screen plan
  Alt+Up / Alt+Down     move the focus between running subagents
  Esc                   drop the last queued message (empty prompt), else
                        cancel the focused subagent (or dismiss a question)
  Ctrl+C                interrupt the turn (the queue waits for Enter);
                        twice when idle quits
  Ctrl+D                quit on an empty prompt
  Shift+drag            select text to copy (the mouse wheel is captured)
Commands
  /help                 this list
  /status               model, provider, safety settings, usage
  /compact              compact the conversation now
  /model NAME           use another model from the next request on
  /diff                 the workspace's git diff
  /plan, /plan clear    print the plan, start a new one
  /subagents            every subagent of the session: status, usage, result
  /cancel ID|all        cancel one running subagent, or all of them
  /undo                 revert the last file change (or a whole change set)
  /changes [show|apply|discard ID]
                        write subagents' change sets: list, review, merge
  /suspend [NAME]       bookmark the conversation in the session journal
  /recall [NAME]        bring back a bookmark or a session
  /sessions             list sessions and their bookmarks
  /quit                 leave Fido";

/// `/status`.
pub fn status(store: &Store, info: &StatusInfo) -> String {
    let session = &store.session;
    fn or_unset(value: Option<impl std::fmt::Display>) -> String {
        value.map_or_else(|| "not configured (default)".into(), |v| v.to_string())
    }
    let instructions = if info.instruction_files.is_empty() {
        "none loaded".to_string()
    } else {
        info.instruction_files.join(", ")
    };
    let mut lines = vec![
        format!("model           {}", session.model),
        format!("provider        {}", session.provider),
        format!("workspace       {}", session.workspace),
        format!("sandbox mode    {}", or_unset(info.sandbox_mode)),
        format!("approval policy {}", or_unset(info.approval_policy)),
        format!("instructions    {instructions}"),
    ];
    let total =
        store
            .usage_by_identity
            .iter()
            .fold(UsageTotals::default(), |mut sum, (_, usage)| {
                sum.merge(*usage);
                sum
            });
    lines.push(format!("session usage   {}", usage_line(total)));
    for (identity, usage) in &store.usage_by_identity {
        lines.push(format!("  {identity:<14}{}", usage_line(*usage)));
    }
    lines.join("\n")
}

/// `3 requests · 12.0k in (75% cached) · 800 out`.
fn usage_line(usage: UsageTotals) -> String {
    let cached = (usage.cached_tokens * 100)
        .checked_div(usage.prompt_tokens)
        .unwrap_or(0);
    format!(
        "{} · {} in ({cached}% cached) · {} out",
        crate::text::counted(usage.requests, "request"),
        tokens(usage.prompt_tokens),
        tokens(usage.completion_tokens)
    )
}
