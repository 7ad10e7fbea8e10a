//! The system prompt: stable instructions and tool contracts only.
//!
//! Built once per session from constant text, the catalog's tool names and
//! the session's safety settings (fixed for the session). It never contains
//! the plan, a timestamp, the workspace path or anything else that changes,
//! so the provider's cached prefix survives every turn, restart and plan
//! update.

use super::instructions::ProjectInstructions;
use crate::protocol::{ApprovalPolicy, NetworkAccess, SafetySettings, SandboxMode};
use crate::tools::ToolCatalog;

const INSTRUCTIONS: &str = "\
You are Fido, a coding agent working in the user's workspace through tools.
- Read before you change; edit with patch in the user's style.
- Verify with bash_exec (tests, builds); never claim success without evidence.
- Paths are relative to the workspace root. Never touch .fido-* files (Fido's state).
- A result starting with \"Error:\" failed: fix the call, do not repeat it.
- Finish with a short summary: what you did, verified and left open.";

/// The plan's usage policy (README, "The plan"), for the `update_plan`
/// flavour. The tool's own description carries its rules.
const UPDATE_PLAN_POLICY: &str = "\
Planning (update_plan):
- Create a plan when a request has multiple meaningful steps, spans several files, or is likely to be interrupted; skip a formal plan for a small, obvious change.
- Update it at milestones, not after every tool call: to set the state, after a milestone, or when a blocker changes the next action.
- The latest update_plan tool result is the current plan, also after a restart; the plan is never in this system prompt.
- Keep zero or one item in_progress, preserve stable ids, record concise blockers, next actions and evidence.
- Never maintain the plan with a shell command or a file.";

/// The same policy for the `todo` flavour.
const TODO_POLICY: &str = "\
Planning (todo):
- Track multi-step work with the todo tool; skip it for a small, obvious change. Use ops batches to open or close several todos at once.
- The latest todo result is the current list, also after a restart or compaction; it is never in this system prompt.
- Complete a todo only with evidence, defer one only with a reason, and keep the list honest before you report the work as done.
- Never maintain the list with a shell command or a file.";

/// When (not) to delegate, for sessions that advertise `delegate`. What a
/// subagent may do is the tool's description, not repeated here.
const DELEGATION_POLICY: &str = "\
Delegation (delegate): only a bounded, read-only investigation independent of your next step (e.g. find every caller of a function), with a clear task. Do not delegate small lookups you can do in one or two tool calls, or anything that changes files. Check a subagent's findings in the files before relying on them.";

/// What the session's commands may do, stated as it is enforced.
fn safety_section(safety: &SafetySettings) -> String {
    let network = match safety.network {
        NetworkAccess::On => "may use the network",
        NetworkAccess::Off => "have no network",
        NetworkAccess::Allowlist => {
            "reach only the hosts the user allowed, through the proxy in $HTTPS_PROXY (a refusal says \"blocked by network allowlist\")"
        }
    };
    let sandbox = match safety.sandbox_mode {
        SandboxMode::ReadOnly => format!(
            "Sandbox (read-only): commands may read files but not credentials (~/.ssh, Fido's config), write nowhere, and {network}."
        ),
        SandboxMode::WorkspaceWrite => format!(
            "Sandbox (workspace-write): commands may write only in the workspace and $TMPDIR, cannot read credentials (~/.ssh, Fido's config), and {network}; \"Permission denied\" may mean the sandbox stopped one."
        ),
        SandboxMode::DangerFullAccess => {
            "Sandbox (danger-full-access): commands run unsandboxed, with the user's full rights. Be careful.".to_string()
        }
    };
    let approval = match (safety.approval_policy, safety.sandbox_mode) {
        (ApprovalPolicy::Untrusted, _) => {
            "Approvals (untrusted): the user approves every command and file change; a denial fails with their reason."
        }
        (ApprovalPolicy::OnRequest, SandboxMode::DangerFullAccess) => {
            "Approvals (on-request): commands and edits run without asking."
        }
        (ApprovalPolicy::OnRequest, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) => {
            "Approvals (on-request): commands run sandboxed without asking; one that needs more (network, writes outside) may set escalate: true with a justification, and the user decides."
        }
        (ApprovalPolicy::Never, _) => {
            "Approvals (never): nobody is asked and escalation is denied; report what you could not do."
        }
    };
    format!("{sandbox}\n{approval}")
}

/// What the model is told before its next prompt when the person switched
/// the session's settings (an editor's mode): the system prompt keeps
/// those the session started with, so its cached prefix stays.
pub fn safety_note(safety: &SafetySettings) -> String {
    format!(
        "[Fido: the user switched this session's sandbox and approvals; from now on:\n{}]",
        safety_section(safety)
    )
}

/// The system prompt for a session advertising `catalog` under `safety`,
/// with the project's `instructions` last. A pure function of the three:
/// the same inputs give the same bytes.
pub fn system_prompt(
    catalog: &ToolCatalog,
    safety: &SafetySettings,
    instructions: &ProjectInstructions,
) -> String {
    let names = catalog.names();
    let has = |name: &str| names.iter().any(|n| n == name);
    let mut prompt = INSTRUCTIONS.to_string();
    prompt.push_str("\n\n");
    prompt.push_str(&safety_section(safety));
    if has("update_plan") {
        prompt.push_str("\n\n");
        prompt.push_str(UPDATE_PLAN_POLICY);
    }
    if has("todo") {
        prompt.push_str("\n\n");
        prompt.push_str(TODO_POLICY);
    }
    if has("delegate") {
        prompt.push_str("\n\n");
        prompt.push_str(DELEGATION_POLICY);
    }
    if let Some(section) = instructions.prompt_section() {
        prompt.push_str("\n\n");
        prompt.push_str(&section);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PlanFlavour;

    fn safety(mode: SandboxMode, policy: ApprovalPolicy) -> SafetySettings {
        SafetySettings {
            sandbox_mode: mode,
            approval_policy: policy,
            network: NetworkAccess::Off,
        }
    }

    fn default_safety() -> SafetySettings {
        safety(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never)
    }

    #[test]
    fn the_prompt_states_the_real_sandbox_and_approval_policy() {
        let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
        for mode in SandboxMode::ALL {
            for policy in ApprovalPolicy::ALL {
                let prompt = system_prompt(
                    &catalog,
                    &safety(mode, policy),
                    &ProjectInstructions::default(),
                );
                assert!(prompt.contains(&format!("Sandbox ({mode})")), "{mode}");
                assert!(
                    prompt.contains(&format!("Approvals ({policy})")),
                    "{policy}"
                );
                assert!(!prompt.contains("nothing outside the workspace is reachable"));
            }
        }
        let open = SafetySettings {
            network: NetworkAccess::On,
            ..default_safety()
        };
        let open = system_prompt(&catalog, &open, &ProjectInstructions::default());
        assert!(open.contains("may use the network") && !open.contains("have no network"));
        let closed = system_prompt(&catalog, &default_safety(), &ProjectInstructions::default());
        assert!(closed.contains("have no network") && !closed.contains("may use the network"));
        let listed = SafetySettings {
            network: NetworkAccess::Allowlist,
            ..default_safety()
        };
        let listed = system_prompt(&catalog, &listed, &ProjectInstructions::default());
        assert!(
            listed.contains("only the hosts the user allowed")
                && !listed.contains("have no network")
        );
    }

    #[test]
    fn the_prompt_carries_the_plan_and_delegation_policies_and_no_state() {
        let prompt = system_prompt(
            &ToolCatalog::standard(PlanFlavour::UpdatePlan),
            &default_safety(),
            &ProjectInstructions::default(),
        );
        for needle in [
            "Create a plan when a request has multiple meaningful steps",
            "skip a formal plan for a small, obvious change",
            "latest update_plan tool result",
            "zero or one item in_progress",
            "preserve stable ids",
            "at milestones, not after every tool call",
            "Never maintain the plan with a shell command",
            "the plan is never in this system prompt",
            "Do not delegate small lookups",
        ] {
            assert!(prompt.contains(needle), "missing {needle:?}");
        }
        assert!(!prompt.contains("Planning (todo)"));
        assert_eq!(
            prompt,
            system_prompt(
                &ToolCatalog::standard(PlanFlavour::UpdatePlan),
                &default_safety(),
                &ProjectInstructions::default(),
            )
        );
        let todo = system_prompt(
            &ToolCatalog::standard(PlanFlavour::Todo),
            &default_safety(),
            &ProjectInstructions::default(),
        );
        assert!(todo.contains("Planning (todo)") && !todo.contains("Planning (update_plan)"));
    }

    /// Bytes per token of this text on a real tokenizer: Qwen2.5's, through
    /// llama.cpp's `/tokenize`, measured 4.5 for the prompt's prose, 3.3 to
    /// 4.0 for the tools' JSON and 3.8 for the two together. Dividing by 3.5
    /// overestimates, so a budget that holds here holds on the real server.
    const BYTES_PER_TOKEN_TENTHS: usize = 35;

    /// Estimated tokens the system prompt and the tools cost on every
    /// request: about 2,300 real tokens, so a 4k window keeps half for work
    /// (2,500 estimated until browse_url joined the catalog: about 120 more).
    const PREFIX_BUDGET_TOKENS: usize = 2_650;

    /// A tool as the OpenAI-compatible provider sends it.
    fn wire_tool(spec: &crate::protocol::ToolSpec) -> String {
        serde_json::json!({
            "type": "function",
            "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}
        })
        .to_string()
    }

    #[test]
    fn the_prompt_and_the_default_catalog_fit_a_small_window() {
        let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
        let tool_bytes: usize = catalog.specs().iter().map(|s| wire_tool(s).len()).sum();
        for mode in SandboxMode::ALL {
            for policy in ApprovalPolicy::ALL {
                for network in [
                    NetworkAccess::Off,
                    NetworkAccess::On,
                    NetworkAccess::Allowlist,
                ] {
                    let safety = SafetySettings {
                        network,
                        ..safety(mode, policy)
                    };
                    let prompt = system_prompt(&catalog, &safety, &ProjectInstructions::default());
                    let tokens = (prompt.len() + tool_bytes) * 10 / BYTES_PER_TOKEN_TENTHS;
                    assert!(
                        tokens <= PREFIX_BUDGET_TOKENS,
                        "{mode}/{policy}: about {tokens} tokens (prompt {} bytes, tools {tool_bytes} bytes), budget {PREFIX_BUDGET_TOKENS}",
                        prompt.len()
                    );
                }
            }
        }
    }
}
