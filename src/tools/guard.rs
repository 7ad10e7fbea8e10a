//! The invocation guard: who may run which kind of tool.
//!
//! Identity and depth come from the runner that started the agent, never from
//! anything the model wrote. The main agent (depth 0) may run every tool; a
//! subagent (depth 1) is read-only: mutating, interactive and plan tools are
//! refused with `permission_denied`, and `delegate` with
//! `nested_delegation_forbidden`. Refusals are normal tool results, so the
//! conversation stays valid and no side effect happens.
//!
//! For the main agent, [`command_gate`] and [`file_change_gate`] decide
//! from the session's `approval_policy` and `sandbox_mode` whether a
//! command or a file change runs, needs the person's approval
//! ([`super::approval`]) or is denied. The catalog never changes with the
//! policy: `bash_exec` always advertises `escalate` and `justification`.

use serde_json::json;

use crate::net::Target;
use crate::net::admission::allow_hint;
use crate::protocol::changes::DelegateWrite;
use crate::protocol::delegate::{DelegateErrorCode, DelegateMode};
use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};

use super::{ToolKind, ToolOutput};

/// Who is running the agent loop.
pub use crate::protocol::Identity;

/// Assigned by the runner when an agent loop starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationContext {
    pub identity: Identity,
    pub delegation_depth: u32,
    /// What a subagent was delegated to do: `write` lets its file tools
    /// and shell change its own worktree (which its sandbox confines it
    /// to). The main agent is nobody's delegate: `read_only`, which no
    /// check of its calls reads.
    pub mode: DelegateMode,
}

impl InvocationContext {
    pub fn main() -> Self {
        InvocationContext {
            identity: Identity::Main,
            delegation_depth: 0,
            mode: DelegateMode::ReadOnly,
        }
    }

    pub fn is_subagent(&self) -> bool {
        match self.identity {
            Identity::Main => self.delegation_depth > 0,
            Identity::Subagent { .. } => true,
        }
    }
}

/// The one mutating tool a subagent may run: its shell, which runs inside
/// the subagent's own sandbox (read-only but for a scratch `TMPDIR`, no
/// network), so it cannot change anything the parent sees.
pub const SUBAGENT_SHELL: &str = super::names::BASH_EXEC;

/// The file tools a write subagent may run, inside its sandbox, on its
/// worktree. Never an MCP tool: those run outside every sandbox.
pub const WORKTREE_TOOLS: [&str; 4] = [
    super::names::PATCH,
    super::names::MKDIR,
    super::names::RM,
    super::names::RMDIR,
];

/// `Ok` when `ctx` may run a tool of `kind`; else the refusal to return.
/// `shell_confined`: the commands run inside a subagent's enforced sandbox
/// (only then may a subagent use [`SUBAGENT_SHELL`]).
pub fn check(
    tool: &str,
    kind: ToolKind,
    ctx: &InvocationContext,
    shell_confined: bool,
) -> Result<(), ToolOutput> {
    if !ctx.is_subagent() {
        return Ok(());
    }
    match kind {
        ToolKind::ReadOnly => Ok(()),
        ToolKind::Mutating if tool == SUBAGENT_SHELL && shell_confined => Ok(()),
        ToolKind::Mutating
            if ctx.mode == DelegateMode::Write
                && shell_confined
                && WORKTREE_TOOLS.contains(&tool) =>
        {
            Ok(())
        }
        ToolKind::Mutating | ToolKind::Interactive | ToolKind::PlanState => Err(refusal(
            DelegateErrorCode::PermissionDenied,
            &format!(
                "{tool} is not available to a read-only subagent; nothing was changed. Inspect with list_files, read_file, ripgrep and bash_exec (read-only commands) and report your findings to the parent."
            ),
        )),
        ToolKind::Delegation => {
            let mut refused =
                crate::protocol::delegate::DelegateResult::nested_forbidden(&ctx.identity);
            if ctx.mode == DelegateMode::Write {
                // A small model copies the delegating call it sees at the
                // end of its fork; say what to do instead.
                refused.recommended_next_steps = vec![
                    "You are the write subagent: do the task yourself now. Read your claimed files with read_file, then change them with patch.".into(),
                ];
            }
            Err(super::delegate::output(&refused))
        }
    }
}

/// What the policy says about one action of the main agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Allow,
    /// Ask the person first.
    Ask,
    /// Refuse, for this reason (told to the model).
    Deny(String),
}

/// Why a write subagent may not start; each is the sentence for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteRefused {
    /// `delegate_write` refuses it.
    #[error("{0}")]
    Policy(String),
    /// `delegate_write` is ask, and nobody is there to answer.
    #[error(
        "delegate_write is ask, and nobody can approve in a headless run; nothing was started. The user can allow write delegation with `fido exec --allow-write-delegation` or FIDO_DELEGATE_WRITE=allow"
    )]
    Headless,
    /// The person (or a hook) refused it; the refusal as told to the model.
    #[error("{0}")]
    Person(String),
}

/// A `bash_exec` command, run in the sandbox or (`escalated`) outside it.
pub fn command_gate(settings: &SafetySettings, escalated: bool) -> Gate {
    match (settings.approval_policy, escalated) {
        (ApprovalPolicy::Untrusted, _) | (ApprovalPolicy::OnRequest, true) => Gate::Ask,
        (ApprovalPolicy::OnRequest, false) | (ApprovalPolicy::Never, false) => Gate::Allow,
        (ApprovalPolicy::Never, true) => Gate::Deny(format!(
            "this session's approval_policy is never, so a command cannot run outside the {} sandbox. Run it without escalate (it may work within the sandbox), or tell the user what you need: they can allow it with approval_policy = \"on-request\" (the terminal UI's default) or sandbox_mode = \"danger-full-access\"",
            settings.sandbox_mode
        )),
    }
}

/// A `delegate` call with `mode: "write"`, under `delegate_write`.
pub fn write_delegation_gate(write: DelegateWrite) -> Gate {
    match write {
        DelegateWrite::Allow => Gate::Allow,
        DelegateWrite::Ask => Gate::Ask,
        DelegateWrite::Never => Gate::Deny(
            "this session's delegate_write policy is never, so no subagent may write; nothing was started. Make the change yourself, delegate a read_only investigation, or tell the user: they can allow write delegation with `fido exec --allow-write-delegation`, FIDO_DELEGATE_WRITE=allow, or delegate_write = \"ask\" (the terminal UI's default) or \"allow\" in their config".to_string(),
        ),
    }
}

/// A change by patch, mkdir, rm or rmdir. In `read-only` the sandbox
/// forbids writes, so a change needs the person's approval.
pub fn file_change_gate(settings: &SafetySettings) -> Gate {
    match (settings.approval_policy, settings.sandbox_mode) {
        (ApprovalPolicy::Untrusted, _) => Gate::Ask,
        (ApprovalPolicy::OnRequest, SandboxMode::ReadOnly) => Gate::Ask,
        (ApprovalPolicy::Never, SandboxMode::ReadOnly) => Gate::Deny(
            "this session's sandbox_mode is read-only and its approval_policy is never, so no file may be changed. Report the change you would make instead".to_string(),
        ),
        (
            ApprovalPolicy::OnRequest | ApprovalPolicy::Never,
            SandboxMode::WorkspaceWrite | SandboxMode::DangerFullAccess,
        ) => Gate::Allow,
    }
}

/// A tool of an MCP server that is not `read_only`: it runs outside every
/// sandbox, so `untrusted` asks first; the server was configured by the
/// person (trusted config only), so the other policies let it run.
pub fn mcp_call_gate(settings: &SafetySettings) -> Gate {
    match settings.approval_policy {
        ApprovalPolicy::Untrusted => Gate::Ask,
        ApprovalPolicy::OnRequest | ApprovalPolicy::Never => Gate::Allow,
    }
}

/// A call a user hook refused (`event`: the hook's event): the model reads
/// the hook's reason, and that nothing ran.
pub fn hook_refusal(event: &str, reason: &str) -> ToolOutput {
    refusal(
        DelegateErrorCode::HookDenied,
        &hook_refusal_message(event, reason),
    )
}

/// The sentence of [`hook_refusal`].
pub fn hook_refusal_message(event: &str, reason: &str) -> String {
    format!(
        "a {event} hook of the user refused this call, so nothing was run or changed. The hook said: {reason}"
    )
}

/// A `browse_url` hop to a host in neither `network_allow` nor
/// `network_deny`: the policies that ask the person before a command ask
/// here too; `never` refuses, saying how to list the host.
pub fn browse_gate(settings: &SafetySettings, host: &Target) -> Gate {
    match settings.approval_policy {
        ApprovalPolicy::Untrusted | ApprovalPolicy::OnRequest => Gate::Ask,
        ApprovalPolicy::Never => Gate::Deny(format!(
            "{host} is not in network_allow and this session's approval_policy is never, so nothing was fetched. Tell the user what you wanted to read: they can allow the host with {} in a trusted fido.toml or their user config",
            allow_hint(host)
        )),
    }
}

fn refusal(code: DelegateErrorCode, message: &str) -> ToolOutput {
    let body = json!({
        "type": "tool_error",
        "status": "failed",
        "error": { "code": code, "message": message },
    });
    ToolOutput {
        ok: false,
        content: body.to_string(),
        details: Some(body),
        plan: None,
        facts: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subagent() -> InvocationContext {
        InvocationContext {
            identity: Identity::Subagent {
                agent_id: "subagent-1".into(),
            },
            delegation_depth: 1,
            mode: DelegateMode::ReadOnly,
        }
    }

    #[test]
    fn a_write_subagent_may_change_its_worktree_and_nothing_else() {
        let writer = InvocationContext {
            mode: DelegateMode::Write,
            ..subagent()
        };
        for tool in WORKTREE_TOOLS.into_iter().chain([SUBAGENT_SHELL]) {
            assert!(
                check(tool, ToolKind::Mutating, &writer, true).is_ok(),
                "{tool}"
            );
            // Only inside a fully enforced sandbox.
            assert!(
                check(tool, ToolKind::Mutating, &writer, false).is_err(),
                "{tool}"
            );
        }
        assert!(check("mcp__fs__write", ToolKind::Mutating, &writer, true).is_err());
        assert!(check("ask_user", ToolKind::Interactive, &writer, true).is_err());
        assert!(check("update_plan", ToolKind::PlanState, &writer, true).is_err());
        let nested = check("delegate", ToolKind::Delegation, &writer, true).unwrap_err();
        assert!(
            nested.content.contains("You are the write subagent"),
            "{}",
            nested.content
        );
    }

    #[test]
    fn main_agent_may_run_every_kind() {
        for kind in [
            ToolKind::ReadOnly,
            ToolKind::Mutating,
            ToolKind::Interactive,
            ToolKind::PlanState,
            ToolKind::Delegation,
        ] {
            assert!(check("x", kind, &InvocationContext::main(), false).is_ok());
        }
    }

    #[test]
    fn subagent_is_read_only() {
        assert!(check("read_file", ToolKind::ReadOnly, &subagent(), true).is_ok());
        for kind in [
            ToolKind::Mutating,
            ToolKind::Interactive,
            ToolKind::PlanState,
        ] {
            let refused = check("patch", kind, &subagent(), true).unwrap_err();
            assert!(!refused.ok);
            assert_eq!(
                refused.details.as_ref().unwrap()["error"]["code"],
                "permission_denied"
            );
        }
        let nested = check("delegate", ToolKind::Delegation, &subagent(), true).unwrap_err();
        assert_eq!(
            nested.details.unwrap()["error"]["code"],
            "nested_delegation_forbidden"
        );
    }

    #[test]
    fn side_effecting_mcp_tools_are_asked_for_only_under_untrusted() {
        let gate = |policy| {
            mcp_call_gate(&SafetySettings {
                sandbox_mode: SandboxMode::WorkspaceWrite,
                approval_policy: policy,
                network: crate::protocol::NetworkAccess::Off,
            })
        };
        assert_eq!(gate(ApprovalPolicy::Untrusted), Gate::Ask);
        assert_eq!(gate(ApprovalPolicy::OnRequest), Gate::Allow);
        assert_eq!(gate(ApprovalPolicy::Never), Gate::Allow);
    }

    #[test]
    fn browsing_an_unlisted_host_asks_unless_never_which_says_how_to_list_it() {
        let gate = |policy, host: &str, port| {
            browse_gate(
                &SafetySettings {
                    sandbox_mode: SandboxMode::WorkspaceWrite,
                    approval_policy: policy,
                    network: crate::protocol::NetworkAccess::Off,
                },
                &Target::new(host, port),
            )
        };
        assert_eq!(
            gate(ApprovalPolicy::Untrusted, "example.com", 443),
            Gate::Ask
        );
        assert_eq!(
            gate(ApprovalPolicy::OnRequest, "example.com", 443),
            Gate::Ask
        );
        let Gate::Deny(reason) = gate(ApprovalPolicy::Never, "example.com", 443) else {
            panic!("never must refuse")
        };
        assert!(
            reason.contains("network_allow = [\"example.com\"]"),
            "{reason}"
        );
        let Gate::Deny(reason) = gate(ApprovalPolicy::Never, "example.com", 8080) else {
            panic!("never must refuse")
        };
        assert!(
            reason.contains("network_allow = [\"example.com:8080\"]"),
            "{reason}"
        );
        assert_eq!(
            allow_hint(&Target::new("[::1]", 80)),
            "network_allow = [\"[::1]\"]"
        );
    }

    #[test]
    fn depth_alone_makes_a_subagent_whatever_the_identity_claims() {
        let ctx = InvocationContext {
            identity: Identity::Main,
            delegation_depth: 1,
            mode: DelegateMode::ReadOnly,
        };
        assert!(check("rm", ToolKind::Mutating, &ctx, true).is_err());
    }

    #[test]
    fn a_subagent_may_run_its_shell_only_inside_its_sandbox() {
        assert!(check(SUBAGENT_SHELL, ToolKind::Mutating, &subagent(), true).is_ok());
        let refused = check(SUBAGENT_SHELL, ToolKind::Mutating, &subagent(), false).unwrap_err();
        assert_eq!(
            refused.details.unwrap()["error"]["code"],
            "permission_denied"
        );
        for tool in ["patch", "mkdir", "rm", "rmdir"] {
            assert!(check(tool, ToolKind::Mutating, &subagent(), true).is_err());
        }
        assert!(check("ask_user", ToolKind::Interactive, &subagent(), true).is_err());
    }
}
