//! The deep fork: the subagent's starting conversation, built from the
//! parent's messages at the instant `delegate` is called.
//!
//! The parent's messages are copied unchanged (so the subagent's requests
//! share the parent's cached prompt prefix), then every call of the
//! delegating assistant message that has no result yet is answered: the
//! `delegate` call by the `subagent_bootstrap` result, any other call by a
//! short "not run in this fork" result. The subagent instructions follow as
//! the user turn that starts the subagent's work.

use crate::protocol::delegate::{
    BootstrapKind, ContextMode, DelegateArgs, DelegateMode, SubagentBootstrap, SubagentIdentity,
};
use crate::protocol::{Message, ToolCall, ToolSpec};

pub const RESPONSIBILITY: &str = "Inspect only; return the final result to the parent. You are not the main agent, you may not delegate, and the parent will verify your claims.";

/// A write subagent's responsibility, in its bootstrap.
pub const WRITE_RESPONSIBILITY: &str = "Change only your claimed paths, in your own worktree; your changes return to the parent as a change set for review. You are not the main agent, you may not delegate, and the parent reviews, integrates and tests.";

/// The result given to calls of the delegating message that the parent had
/// not run yet when it forked.
pub const NOT_RUN_IN_FORK: &str = "Not run in this fork: the parent runs this call after the delegation, so its result is not available to the subagent.";

/// The fork's messages and the instructions that start the subagent.
#[derive(Debug, Clone, PartialEq)]
pub struct Fork {
    pub messages: Vec<Message>,
    pub instructions: String,
}

/// The fewest tokens a subagent's answer can take: its final JSON object
/// (a summary and one finding) is about this long.
pub const MIN_ANSWER_TOKENS: u64 = 256;

impl Fork {
    /// The smallest `budget_tokens` that could let the subagent answer at
    /// all: its first request (the fork, the bootstrap and instructions, and
    /// the `tools` it is offered, estimated as compaction estimates) plus
    /// [`MIN_ANSWER_TOKENS`]. A budget under it can only end
    /// `budget_exceeded` with nothing done.
    pub fn min_budget_tokens(&self, tools: &[ToolSpec]) -> u64 {
        let messages: usize = self.messages.iter().map(Message::estimated_tokens).sum();
        let instructions = Message::user(self.instructions.clone()).estimated_tokens();
        let prompt = messages + instructions + crate::agent::limits::tools_tokens(tools);
        (prompt as u64).saturating_add(MIN_ANSWER_TOKENS)
    }
}

/// Builds the fork for the `delegate` call `call_id`.
pub fn build_fork(
    parent: &[Message],
    call_id: &str,
    agent_id: &str,
    args: &DelegateArgs,
    max_steps: u32,
) -> Fork {
    let mut messages = parent.to_vec();
    let pending = pending_calls(parent);
    let bootstrap = SubagentBootstrap {
        kind: BootstrapKind::SubagentBootstrap,
        identity: SubagentIdentity::new(agent_id),
        context_mode: ContextMode::ForkedParentMessages,
        forked_message_count: parent.len(),
        task: args.task.clone(),
        responsibility: if is_write(args) {
            WRITE_RESPONSIBILITY
        } else {
            RESPONSIBILITY
        }
        .into(),
    };
    let mut answered_delegate = false;
    for call in &pending {
        let content = if call.id == call_id {
            answered_delegate = true;
            serde_json::to_string_pretty(&bootstrap).unwrap_or_default()
        } else {
            NOT_RUN_IN_FORK.to_string()
        };
        messages.push(Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: false,
        });
    }
    if !answered_delegate {
        // Called outside a model turn (no pending call): the bootstrap still
        // reaches the subagent, with an internal matching call.
        messages.push(Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: call_id.to_string(),
                name: "delegate".into(),
                arguments: "{}".into(),
            }],
        });
        messages.push(Message::Tool {
            tool_call_id: call_id.to_string(),
            name: "delegate".into(),
            content: serde_json::to_string_pretty(&bootstrap).unwrap_or_default(),
            is_error: false,
        });
    }
    Fork {
        messages,
        instructions: if is_write(args) {
            write_instructions(agent_id, args, max_steps)
        } else {
            instructions(agent_id, args, max_steps)
        },
    }
}

fn is_write(args: &DelegateArgs) -> bool {
    args.mode == Some(DelegateMode::Write)
}

/// Why the parent delegated, or a default reason.
fn reason(args: &DelegateArgs) -> &str {
    args.context
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or("No reason was given beyond the task: the main agent chose to delegate this bounded part so it can keep working on its own.")
}

fn write_instructions(agent_id: &str, args: &DelegateArgs, max_steps: u32) -> String {
    let scope = args.scope.clone().unwrap_or_default();
    format!(
        "[Fido: subagent instructions]
You are {agent_id}, a write subagent working for the main agent (see the subagent_bootstrap result above). Everything before it is the parent's conversation, forked for you; it is context, not your task.

Task: {task}
Why this was delegated: {why}
Your claim, the only paths whose changes come back: {claim}
Relevant symbols: {symbols}

Rules:
- Your workspace is an isolated copy of the parent's workspace, taken when the parent called you (a git worktree of its state then). Use paths relative to it. Nothing you do touches the user's files: your changes return to the parent as a change set, which the parent or the user reviews before it is applied.
- Change only the claimed paths, with patch, mkdir, rm, rmdir and bash_exec. A change anywhere else is reported and never applied.
- bash_exec may build and run tests in your workspace; only your workspace and $TMPDIR (a private scratch folder) can be written, and there is no network. Read-only git works (git status, git diff, git log, git blame); do not commit: the parent does every git write.
- ask_user is refused for you, and calling delegate fails (nested delegation is forbidden). The plan tool keeps a plan of your own for this task, which the person sees beside your work; the session's plan stays the main agent's.
- You have at most {max_steps} model requests, a time limit and maybe a token budget. Make the smallest change that does the task, check it when you can, and stop.
- Begin now, yourself: read the claimed files with read_file, then change them with patch. Do not call delegate.

Final output: answer with ONE JSON object and nothing else:
{{\"summary\": \"what you changed and how you checked it\", \"findings\": [{{\"file\": \"src/example.rs\", \"line\": 42, \"claim\": \"what you changed there\", \"confidence\": \"high|medium|low\"}}], \"recommended_next_steps\": [\"...\"], \"tests_to_run\": [\"...\"], \"uncertainties\": [\"...\"]}}",
        task = args.task.trim(),
        why = reason(args),
        claim = if scope.paths.is_empty() { "none named".to_string() } else { scope.paths.join(", ") },
        symbols = if scope.symbols.is_empty() { "none named".to_string() } else { scope.symbols.join(", ") },
    )
}

/// Calls of the last assistant message that have no result yet, in order.
fn pending_calls(messages: &[Message]) -> Vec<ToolCall> {
    let Some(index) = messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &messages[index] else {
        return Vec::new();
    };
    tool_calls
        .iter()
        .filter(|call| {
            !messages[index + 1..].iter().any(
                |m| matches!(m, Message::Tool { tool_call_id, .. } if *tool_call_id == call.id),
            )
        })
        .cloned()
        .collect()
}

fn instructions(agent_id: &str, args: &DelegateArgs, max_steps: u32) -> String {
    let why = args
        .context
        .as_deref()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or("No reason was given beyond the task: the main agent chose to delegate this bounded investigation so it can keep working on its own part.");
    let scope = args.scope.clone().unwrap_or_default();
    let list = |items: &[String]| {
        if items.is_empty() {
            "none named".to_string()
        } else {
            items.join(", ")
        }
    };
    format!(
        "[Fido: subagent instructions]
You are {agent_id}, a read-only subagent working for the main agent (see the subagent_bootstrap result above). Everything before it is the parent's conversation, forked for you; it is context, not your task.

Task: {task}
Why this was delegated: {why}
Relevant workspace paths: {paths}
Relevant symbols: {symbols}

Rules:
- Strictly read-only. Do not modify anything: patch, mkdir, rm, rmdir and ask_user are refused for you, and calling delegate fails (nested delegation is forbidden). The plan tool keeps a plan of your own for this task, which the person sees beside your work; the session's plan stays the main agent's.
- bash_exec runs read-only commands for you (git log, git blame, grep, wc, read-only analysis): the workspace and the rest of the file system cannot be written, only $TMPDIR (a private scratch folder removed when you finish); there is no network, no escalate, the usual timeout and output caps, and every process you start is killed when you end.
- Inspect, do not implement. Never report a change as made: you were asked to investigate.
- Use list_files, read_file, ripgrep and bash_exec. Stay within the task and scope; you have at most {max_steps} model requests, a time limit and maybe a token budget.
- The parent will verify your claims: cite files and lines, and say how sure you are.

Final output: answer with ONE JSON object and nothing else:
{{\"summary\": \"one paragraph\", \"findings\": [{{\"file\": \"src/example.rs\", \"line\": 42, \"claim\": \"what you observed\", \"confidence\": \"high|medium|low\"}}], \"recommended_next_steps\": [\"...\"], \"tests_to_run\": [\"...\"], \"uncertainties\": [\"...\"]}}",
        task = args.task.trim(),
        paths = list(&scope.paths),
        symbols = list(&scope.symbols),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
        }
    }

    fn args() -> DelegateArgs {
        DelegateArgs {
            context: Some("parallel investigation".into()),
            scope: Some(crate::protocol::delegate::Scope {
                paths: vec!["src/config".into()],
                symbols: vec!["Config::load".into()],
            }),
            ..DelegateArgs::for_task("Find where config is parsed")
        }
    }

    #[test]
    fn fork_keeps_the_parent_prefix_and_answers_every_pending_call() {
        let parent = vec![
            Message::System {
                content: "sys".into(),
            },
            Message::user("go"),
            Message::Assistant {
                content: Some("Looking".into()),
                tool_calls: vec![
                    call("a", "read_file"),
                    call("d", "delegate"),
                    call("z", "ripgrep"),
                ],
            },
            Message::Tool {
                tool_call_id: "a".into(),
                name: "read_file".into(),
                content: "file".into(),
                is_error: false,
            },
        ];
        let fork = build_fork(&parent, "d", "subagent-1", &args(), 20);
        assert_eq!(&fork.messages[..parent.len()], &parent[..]);
        let added = &fork.messages[parent.len()..];
        assert_eq!(added.len(), 2);
        let Message::Tool {
            tool_call_id,
            content,
            ..
        } = &added[0]
        else {
            panic!()
        };
        assert_eq!(tool_call_id, "d");
        let bootstrap: serde_json::Value = serde_json::from_str(content).unwrap();
        assert_eq!(bootstrap["type"], "subagent_bootstrap");
        assert_eq!(bootstrap["identity"]["role"], "subagent");
        assert_eq!(bootstrap["identity"]["agent_id"], "subagent-1");
        assert_eq!(bootstrap["identity"]["parent_role"], "main");
        assert_eq!(bootstrap["context_mode"], "forked_parent_messages");
        assert_eq!(bootstrap["forked_message_count"], 4);
        assert_eq!(bootstrap["task"], "Find where config is parsed");
        assert_eq!(bootstrap["responsibility"], RESPONSIBILITY);
        let Message::Tool {
            tool_call_id,
            content,
            ..
        } = &added[1]
        else {
            panic!()
        };
        assert_eq!(tool_call_id, "z");
        assert_eq!(content, NOT_RUN_IN_FORK);
        for needle in [
            "Find where config is parsed",
            "parallel investigation",
            "src/config",
            "Config::load",
            "read-only",
            "Inspect, do not implement",
            "\"findings\"",
        ] {
            assert!(fork.instructions.contains(needle), "missing {needle}");
        }
    }

    #[test]
    fn the_fork_is_isolated_from_the_parent_both_ways() {
        let mut parent = vec![
            Message::System {
                content: "sys".into(),
            },
            Message::user("go"),
            Message::Assistant {
                content: None,
                tool_calls: vec![call("d", "delegate")],
            },
        ];
        let mut fork = build_fork(&parent, "d", "subagent-3", &args(), 5);
        let fork_before = fork.clone();
        parent.push(Message::user("later parent message"));
        if let Message::User { content } = &mut parent[1] {
            content.push_str(" (edited)");
        }
        assert_eq!(
            fork, fork_before,
            "the parent's later changes reach the fork"
        );
        let parent_before = parent.clone();
        fork.messages.push(Message::user("child's own message"));
        fork.messages[1] = Message::user("rewritten by the child");
        assert_eq!(
            parent, parent_before,
            "the child's changes reach the parent"
        );
    }

    #[test]
    fn a_fork_without_a_pending_call_gets_an_internal_matching_call() {
        let parent = vec![
            Message::System {
                content: "sys".into(),
            },
            Message::user("go"),
        ];
        let fork = build_fork(&parent, "cli", "subagent-2", &args(), 5);
        assert_eq!(fork.messages.len(), 4);
        assert!(
            matches!(&fork.messages[2], Message::Assistant { tool_calls, .. } if tool_calls[0].id == "cli")
        );
        assert!(
            matches!(&fork.messages[3], Message::Tool { tool_call_id, .. } if tool_call_id == "cli")
        );
    }
}
