//! The invocation guard: who may run a tool that may do what.
//!
//! Identity and depth come from the runner that started the agent, never from
//! anything the model wrote. The main agent (depth 0) may run every tool; a
//! subagent (depth 1) may run what only reads, its commands inside its
//! sandbox, and (a write subagent) file changes inside its sandbox; the rest
//! is refused with `permission_denied`, and `delegate` with
//! `nested_delegation_forbidden`. The decision reads the tool's declared
//! [`Capability`], never its name. Refusals are normal tool results, so the
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

use super::{Capability, ToolOutput};

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

/// `Ok` when `ctx` may run `tool`, which may do what `capability` says;
/// else the refusal to return. `confined`: the subagent's commands run
/// inside its enforced sandbox, which keeps a read-only subagent from
/// changing anything and a write subagent inside its worktree.
pub fn check(
    tool: &str,
    capability: Capability,
    ctx: &InvocationContext,
    confined: bool,
) -> Result<(), ToolOutput> {
    if !ctx.is_subagent() {
        return Ok(());
    }
    if capability.starts_subagent {
        return Err(nested_refusal(ctx));
    }
    if subagent_may_run(&capability, ctx.mode, confined) {
        return Ok(());
    }
    Err(refusal(
        DelegateErrorCode::PermissionDenied,
        &format!(
            "{tool} is not available to a read-only subagent; nothing was changed. Inspect with list_files, read_file, ripgrep and bash_exec (read-only commands) and report your findings to the parent."
        ),
    ))
}

/// A subagent runs what only reads; its commands only inside its
/// sandbox; file changes only as a write subagent, inside its sandbox
/// (on its worktree). The person is the parent's; the plan a subagent
/// changes is its own, in its memory (`subagent::runner`), so its plan
/// tool runs like any other that only reads. What runs outside every
/// sandbox (an MCP server's tool) must only read.
fn subagent_may_run(capability: &Capability, mode: DelegateMode, confined: bool) -> bool {
    if capability.needs_person {
        return false;
    }
    if !capability.confined {
        return capability.only_reads();
    }
    let runs_confined = !capability.executes || confined;
    let writes_worktree = capability.writes.is_none() || (mode == DelegateMode::Write && confined);
    runs_confined && writes_worktree
}

/// A subagent's `delegate` call: `nested_delegation_forbidden`.
fn nested_refusal(ctx: &InvocationContext) -> ToolOutput {
    let mut refused = crate::protocol::delegate::DelegateResult::nested_forbidden(&ctx.identity);
    if ctx.mode == DelegateMode::Write {
        // A small model copies the delegating call it sees at the end of
        // its fork; say what to do instead.
        refused.recommended_next_steps = vec![
            "You are the write subagent: do the task yourself now. Read your claimed files with read_file, then change them with patch.".into(),
        ];
    }
    super::delegate::output(&refused)
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

    /// The capability the standard catalog's tool `name` declares.
    fn declared(name: &str) -> Capability {
        crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan)
            .capability_of(name)
            .unwrap_or_else(|| panic!("{name} is not in the catalog"))
    }

    fn writer() -> InvocationContext {
        InvocationContext {
            mode: DelegateMode::Write,
            ..subagent()
        }
    }

    const SHELL: Capability = Capability {
        executes: true,
        ..Capability::NONE
    };

    #[test]
    fn a_write_subagent_may_change_its_worktree_and_nothing_else() {
        for tool in ["patch", "mkdir", "rm", "rmdir", "bash_exec"] {
            assert!(
                check(tool, declared(tool), &writer(), true).is_ok(),
                "{tool}"
            );
            // Only inside a fully enforced sandbox.
            assert!(
                check(tool, declared(tool), &writer(), false).is_err(),
                "{tool}"
            );
        }
        assert!(check("mcp__fs__write", Capability::OUTSIDE, &writer(), true).is_err());
        assert!(check("ask_user", declared("ask_user"), &writer(), true).is_err());
        let nested = check("delegate", declared("delegate"), &writer(), true).unwrap_err();
        assert!(
            nested.content.contains("You are the write subagent"),
            "{}",
            nested.content
        );
    }

    #[test]
    fn main_agent_may_run_every_kind() {
        let catalog = crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan);
        let declared = catalog
            .specs()
            .iter()
            .filter_map(|spec| catalog.capability_of(&spec.name));
        for capability in declared.chain([Capability::OUTSIDE, Capability::OUTSIDE_READ_ONLY]) {
            assert!(check("x", capability, &InvocationContext::main(), false).is_ok());
        }
    }

    #[test]
    fn subagent_is_read_only() {
        for tool in ["read_file", "list_files", "ripgrep", "browse_url"] {
            assert!(
                check(tool, declared(tool), &subagent(), false).is_ok(),
                "{tool}"
            );
        }
        assert!(
            check(
                "mcp__docs__search",
                Capability::OUTSIDE_READ_ONLY,
                &subagent(),
                false
            )
            .is_ok()
        );
        for tool in ["patch", "mkdir", "rm", "rmdir", "ask_user"] {
            let refused = check(tool, declared(tool), &subagent(), true).unwrap_err();
            assert!(!refused.ok);
            assert_eq!(
                refused.details.as_ref().unwrap()["error"]["code"],
                "permission_denied",
                "{tool}"
            );
        }
        let nested = check("delegate", declared("delegate"), &subagent(), true).unwrap_err();
        assert_eq!(
            nested.details.unwrap()["error"]["code"],
            "nested_delegation_forbidden"
        );
    }

    #[test]
    fn a_tool_with_the_shells_capability_is_the_shell_whatever_its_name() {
        assert_eq!(declared("bash_exec"), SHELL);
        assert!(check("run_tests", SHELL, &subagent(), true).is_ok());
        assert!(check("run_tests", SHELL, &subagent(), false).is_err());
    }

    #[test]
    fn a_tool_named_like_the_shell_that_writes_files_is_a_file_tool() {
        let writes = Capability {
            writes: Some(super::super::capability::Writes::Files),
            ..SHELL
        };
        let refused = check("bash_exec", writes, &subagent(), true).unwrap_err();
        assert_eq!(
            refused.details.unwrap()["error"]["code"],
            "permission_denied"
        );
        assert!(check("bash_exec", writes, &writer(), true).is_ok());
        // A shell that runs outside every sandbox is never a subagent's.
        let outside = Capability {
            confined: false,
            ..SHELL
        };
        assert!(check("bash_exec", outside, &writer(), true).is_err());
    }

    #[test]
    fn the_person_stays_the_parents_and_a_subagents_plan_is_its_own() {
        let person = Capability {
            needs_person: true,
            ..Capability::NONE
        };
        assert!(check("read_file", person, &writer(), true).is_err());
        // The plan tools keep a subagent's own plan, in its memory,
        // whether or not its commands are confined.
        for ctx in [subagent(), writer()] {
            for tool in ["update_plan", "todo"] {
                let plan = crate::tools::ToolCatalog::standard(flavour_of(tool))
                    .capability_of(tool)
                    .unwrap();
                assert!(check(tool, plan, &ctx, true).is_ok(), "{tool}");
                assert!(check(tool, plan, &ctx, false).is_ok(), "{tool}");
            }
        }
        // Whatever else a plan tool declares is judged as ever: a plan
        // tool that runs a command outside every sandbox is refused.
        let outside = Capability {
            changes_plan: true,
            ..Capability::OUTSIDE
        };
        assert!(check("update_plan", outside, &writer(), true).is_err());
    }

    fn flavour_of(tool: &str) -> crate::plan::PlanFlavour {
        match tool {
            "todo" => crate::plan::PlanFlavour::Todo,
            _ => crate::plan::PlanFlavour::UpdatePlan,
        }
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
        assert!(check("rm", declared("rm"), &ctx, true).is_err());
    }

    #[test]
    fn a_subagent_may_run_its_shell_only_inside_its_sandbox() {
        let shell = declared("bash_exec");
        assert!(check("bash_exec", shell, &subagent(), true).is_ok());
        let refused = check("bash_exec", shell, &subagent(), false).unwrap_err();
        assert_eq!(
            refused.details.unwrap()["error"]["code"],
            "permission_denied"
        );
    }
}
