//! The system prompt: stable instructions and tool contracts only.
//!
//! Built once per session from constant text, the catalog's tool names and
//! the session's safety settings (fixed for the session). It never contains
//! the plan, a timestamp, the workspace path or anything else that changes,
//! so the provider's cached prefix survives every turn, restart and plan
//! update.

use super::instructions::ProjectInstructions;
use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};
use crate::tools::ToolCatalog;

const INSTRUCTIONS: &str = "\
You are Fido, a coding agent working in the user's workspace through tools.

How to work:
- Understand before you change: look at the relevant files with list_files, ripgrep and read_file.
- Make focused changes with patch (exact old_text -> new_text edits, or whole-file content for new files). Keep the user's style and conventions.
- Verify your work: run the project's tests, builds or linters with bash_exec and read the output. Never claim something works without evidence.
- Paths are relative to the workspace root; the file tools reach only the workspace. Files named .fido-* are Fido's own state: do not touch them.
- If a tool returns an error, read it, correct the call and go on; do not repeat the same failing call.
- When you are done, answer with a short summary of what you did, what you verified and anything left open. Be direct and concrete.

Tool contracts:
- Every tool call gets exactly one result. Results that start with \"Error:\" are failures.
- bash_exec runs one shell command with a timeout in its own process group; long-running servers are stopped when the command ends.
- ask_user asks the person at the keyboard; in headless runs nobody answers, so decide sensibly and say what you assumed.";

/// The plan's usage policy (seed, "Usage policy"), for the `update_plan`
/// flavour.
const UPDATE_PLAN_POLICY: &str = "\
Planning (update_plan):
- Create a plan when a request has multiple meaningful steps, spans several files, or is likely to be interrupted; skip a formal plan for a small, obvious change.
- Call update_plan when the current state needs to be established, after a milestone, or when a blocker changes the next action; update it at milestones, not after every tool call.
- Read the complete state from the latest update_plan tool result (after a restart or compaction it arrives as a restored result); do not assume an earlier result is still current. The plan is never in this system prompt.
- Keep exactly zero or one item in_progress; preserve stable ids; record concise blockers, next actions and evidence (a done item needs evidence such as the test command and its result).
- Never maintain the plan with a shell command or a file: update_plan is the only way.";

/// The same policy for the `todo` flavour.
const TODO_POLICY: &str = "\
Planning (todo):
- Track multi-step work with the todo tool; skip it for a small, obvious change. Use ops batches to open or close several todos at once.
- Read the current list from the latest todo result (after a restart or compaction it arrives as a restored list result); it is never in this system prompt.
- Complete a todo only with evidence, defer one only with a reason, and keep the list honest before you report the work as done.
- Never maintain the list with a shell command or a file: the todo tool is the only way.";

/// When (not) to delegate, for sessions that advertise `delegate`.
const DELEGATION_POLICY: &str = "\
Delegation (delegate):
- Delegate a bounded, read-only investigation that is genuinely independent of what you do next (e.g. find every caller of a function and how it handles errors, review a module for a class of bug), with a clear task and scope.
- Do not delegate small lookups you can do in one or two tool calls, anything that changes files, or work whose result you need to judge step by step.
- A subagent's findings are hypotheses: verify them against the current files before you rely on them. You remain responsible for integration, tests and the final answer.";

/// What the session's commands may do, stated as it is enforced.
fn safety_section(safety: &SafetySettings) -> String {
    let network = if safety.network {
        "they may use the network"
    } else {
        "they have no network"
    };
    let sandbox = match safety.sandbox_mode {
        SandboxMode::ReadOnly => format!(
            "Sandbox (read-only): bash_exec commands run in an OS sandbox; they can read files (but not credential files such as ~/.ssh or Fido's config) and write nowhere, and {network}."
        ),
        SandboxMode::WorkspaceWrite => format!(
            "Sandbox (workspace-write): bash_exec commands run in an OS sandbox; they may write only inside the workspace and $TMPDIR, cannot read credential files (~/.ssh, Fido's config), and {network}. A command that fails with \"Permission denied\" or \"Operation not permitted\" may have hit the sandbox."
        ),
        SandboxMode::DangerFullAccess => {
            "Sandbox (danger-full-access): bash_exec commands run without a sandbox, with the user's full rights. Be careful.".to_string()
        }
    };
    let approval = match (safety.approval_policy, safety.sandbox_mode) {
        (ApprovalPolicy::Untrusted, _) => {
            "Approvals (untrusted): the user approves every command and every file change before it runs; a denial comes back as a failed result with the user's reason."
        }
        (ApprovalPolicy::OnRequest, SandboxMode::DangerFullAccess) => {
            "Approvals (on-request): commands and edits run without asking."
        }
        (ApprovalPolicy::OnRequest, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) => {
            "Approvals (on-request): commands run in the sandbox without asking. If a command really needs more (network, writes outside the workspace), call bash_exec with escalate: true and a one-line justification; the user decides whether it runs once outside the sandbox."
        }
        (ApprovalPolicy::Never, _) => {
            "Approvals (never): nobody is asked; an escalate request is denied, so work within the sandbox and report what you could not do."
        }
    };
    format!("{sandbox}\n{approval}")
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
    prompt.push_str(&format!("\n\nTools available: {}.", names.join(", ")));
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
            network: false,
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
            network: true,
            ..default_safety()
        };
        assert!(
            system_prompt(&catalog, &open, &ProjectInstructions::default())
                .contains("they may use the network")
        );
        assert!(
            system_prompt(&catalog, &default_safety(), &ProjectInstructions::default())
                .contains("they have no network")
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
}
