//! Approvals: asking the person before a command or a file change, as the
//! session's `approval_policy` and `sandbox_mode` say (the decision table
//! is [`guard::command_gate`] and [`guard::file_change_gate`]).
//!
//! The tools call [`Approvals::command`] or [`Approvals::file_change`]
//! before they do anything. When the gate says to ask, the request goes to
//! the [`Approver`] (the terminal UI); without one (headless) the answer is
//! a clear denial. A denial is a normal failed tool result that carries the
//! person's reason, so the model hears it. "Approve for the session" is
//! remembered per exact command (or tool and path) for this session only.
//!
//! The user's hooks come first: a call a PreToolUse hook allowed
//! ([`CallScope::preapproved`]) is not asked about, and PermissionRequest
//! hooks may answer before the person is asked. Neither ever lets a
//! command leave the sandbox: an escalation is always the person's call.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use super::ToolOutput;
use super::guard::{self, Gate, WriteRefused};
use crate::hooks::Hooks;
use crate::hooks::points::{CallFacts, PermissionAnswer};
use crate::net::Target;
use crate::net::admission::{HostApproval, HostApprovalFuture, allow_hint};
use crate::net::fetch::HopRefused;
use crate::protocol::changes::{DelegateMerge, DelegateWrite, DelegationPolicy};
use crate::protocol::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, SafetySettings, SandboxMode,
};

tokio::task_local! {
    /// The tool call being run, set by the agent around each invocation:
    /// the approvals of a call are asked from inside the tool, which knows
    /// its request but not the call a hook needs to see.
    static CALL: CallScope;
}

/// The call whose approvals are asked while it runs.
#[derive(Debug, Clone)]
pub struct CallScope {
    pub tool_name: String,
    /// The arguments as the model sent them.
    pub arguments: String,
    pub tool_use_id: String,
    /// A PreToolUse hook allowed it (or the person approved what a hook
    /// asked about): its approval prompts are skipped, except escalation
    /// out of the sandbox, which only the person grants.
    pub preapproved: bool,
}

/// Runs `invocation` as the call `scope` describes.
pub async fn in_call<F: Future>(scope: CallScope, invocation: F) -> F::Output {
    CALL.scope(scope, invocation).await
}

fn current_call() -> Option<CallScope> {
    CALL.try_with(CallScope::clone).ok()
}

pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = Option<ApprovalDecision>> + Send + 'a>>;

/// The person who answers approval requests (the terminal UI).
pub trait Approver: Send + Sync {
    /// Shows `request` and waits; `None` when the UI is gone.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a>;
}

/// The person's review of a change set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    Apply,
    Discard { reason: Option<String> },
}

/// How an approved command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// In the session's sandbox.
    Sandboxed,
    /// Outside it, once (an approved escalation).
    Unsandboxed,
}

/// The session's safety settings, shared by every [`Approvals`] of the
/// session (the tools' and the browser's), so a mode switch (`Op::SwitchSafety`)
/// reaches them all at once: the next call is judged by the new settings.
#[derive(Debug, Clone)]
pub struct SettingsCell(Arc<RwLock<SafetySettings>>);

impl SettingsCell {
    pub fn new(settings: SafetySettings) -> SettingsCell {
        SettingsCell(Arc::new(RwLock::new(settings)))
    }

    /// The settings as they are now.
    pub fn get(&self) -> SafetySettings {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set(&self, settings: SafetySettings) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = settings;
    }
}

/// The approvals as the configuration sets them (`approval_policy`,
/// `delegate_write`, `delegate_merge`); each one unset leaves the front
/// end's default (on-request and ask in the TUI, never and manual for
/// `fido exec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApprovalSettings {
    pub approval_policy: Option<ApprovalPolicy>,
    pub delegate_write: Option<DelegateWrite>,
    pub delegate_merge: Option<DelegateMerge>,
}

impl ApprovalSettings {
    /// The configured approval policy, else `default`.
    pub fn policy_or(&self, default: ApprovalPolicy) -> ApprovalPolicy {
        self.approval_policy.unwrap_or(default)
    }

    /// The configured write-delegation policies, each else `default`'s.
    pub fn delegation_or(&self, default: DelegationPolicy) -> DelegationPolicy {
        DelegationPolicy {
            write: self.delegate_write.unwrap_or(default.write),
            merge: self.delegate_merge.unwrap_or(default.merge),
        }
    }
}

/// The session's approval state.
pub struct Approvals {
    settings: SettingsCell,
    /// `delegate_write` and `delegate_merge`.
    delegation: DelegationPolicy,
    approver: Option<Arc<dyn Approver>>,
    /// Requests approved for the rest of the session.
    remembered: Mutex<HashSet<Memo>>,
    /// The user's PermissionRequest hooks run before a person is asked.
    hooks: Option<Arc<Hooks>>,
}

impl Approvals {
    pub fn new(settings: SafetySettings, approver: Option<Arc<dyn Approver>>) -> Approvals {
        Approvals::sharing(SettingsCell::new(settings), approver)
    }

    /// Approvals judged by `settings`, which others may share and change.
    pub fn sharing(settings: SettingsCell, approver: Option<Arc<dyn Approver>>) -> Approvals {
        Approvals {
            settings,
            delegation: DelegationPolicy::default(),
            approver,
            remembered: Mutex::new(HashSet::new()),
            hooks: None,
        }
    }

    /// The same approvals, running the session's PermissionRequest hooks.
    pub fn with_hooks(mut self, hooks: Arc<Hooks>) -> Approvals {
        self.hooks = Some(hooks);
        self
    }

    /// A PreToolUse hook answered `ask`: the person approves the call, as
    /// any other approval (denied in a headless run).
    pub async fn hook_ask(
        &self,
        tool: &str,
        arguments: &str,
        reason: Option<String>,
    ) -> Result<(), Refusal> {
        let request = ApprovalRequest::HookAsk {
            tool: tool.to_string(),
            arguments: crate::text::summary(arguments, 500),
            reason: reason.map(|r| crate::text::summary(&r, 300)),
        };
        let memo = Memo::HookAsk {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        };
        self.ask(request, memo).await
    }

    /// The settings as they are now (a mode switch may change them).
    pub fn settings(&self) -> SafetySettings {
        self.settings.get()
    }

    /// The shared settings, for whatever switches the session's mode.
    pub fn settings_cell(&self) -> SettingsCell {
        self.settings.clone()
    }

    /// The same approvals with the session's write-delegation policies.
    pub fn with_delegation(mut self, delegation: DelegationPolicy) -> Approvals {
        self.delegation = delegation;
        self
    }

    pub fn delegation(&self) -> DelegationPolicy {
        self.delegation
    }

    /// Whether a write subagent may start: `delegate_write`, and the
    /// person when it says ask. The refusal is the message for the model.
    pub async fn write_delegation(&self, request: ApprovalRequest) -> Result<(), WriteRefused> {
        match guard::write_delegation_gate(self.delegation.write) {
            Gate::Allow => return Ok(()),
            Gate::Deny(reason) => return Err(WriteRefused::Policy(reason)),
            Gate::Ask => {}
        }
        if self.approver.is_none() {
            return Err(WriteRefused::Headless);
        }
        self.ask(request, Memo::DelegateWrite)
            .await
            .map_err(|refusal| WriteRefused::Person(refusal.into_output().content))
    }

    /// What the person decided about a change set under
    /// `delegate_merge = "ask"`; `None` when nobody answered (it stays
    /// pending). "For the session" applies later clean ones unasked.
    pub async fn review_change_set(&self, request: ApprovalRequest) -> Option<Review> {
        // "Apply later ones" never covers control files: each such change
        // set is asked about (README: "Write-capable delegation").
        let touches_control = matches!(
            &request,
            ApprovalRequest::ChangeSet { control_files, .. } if !control_files.is_empty()
        );
        if self.is_remembered(&Memo::DelegateMerge) && !touches_control {
            return Some(Review::Apply);
        }
        let approver = self.approver.as_ref()?;
        match approver.approve(&request).await? {
            ApprovalDecision::Approved => Some(Review::Apply),
            ApprovalDecision::ApprovedForSession => {
                self.remember(Memo::DelegateMerge);
                Some(Review::Apply)
            }
            ApprovalDecision::Denied { reason } => Some(Review::Discard { reason }),
        }
    }

    /// Whether `bash_exec` may run `command`, and how.
    pub async fn command(
        &self,
        command: &str,
        cwd: &str,
        escalate: bool,
        justification: Option<&str>,
    ) -> Result<RunAs, Refusal> {
        let settings = self.settings();
        let escalated = escalate && settings.sandbox_mode != SandboxMode::DangerFullAccess;
        let run_as = if escalated {
            RunAs::Unsandboxed
        } else {
            RunAs::Sandboxed
        };
        let request = || ApprovalRequest::Command {
            command: command.to_string(),
            cwd: cwd.to_string(),
            justification: justification.map(|j| crate::text::summary(j, 500)),
            escalated,
        };
        let memo = Memo::Command {
            escalated,
            command: command.to_string(),
        };
        let gate = guard::command_gate(&settings, escalated);
        self.gated(gate, request, memo).await.map(|()| run_as)
    }

    /// Whether `tool` may change `path`; `describe` gives the diff or the
    /// description shown to the person (computed only when asking).
    pub async fn file_change(
        &self,
        tool: &str,
        path: &str,
        describe: impl FnOnce() -> String,
    ) -> Result<(), Refusal> {
        let request = || ApprovalRequest::FileChange {
            tool: tool.to_string(),
            path: path.to_string(),
            diff: describe(),
        };
        let memo = Memo::FileChange {
            tool: tool.to_string(),
            path: path.to_string(),
        };
        let gate = guard::file_change_gate(&self.settings());
        self.gated(gate, request, memo).await
    }

    /// Whether the main agent may call `tool` of the MCP server `server`
    /// (not read-only) with `arguments`; "for the session" covers the tool.
    pub async fn mcp_call(&self, tool: &str, server: &str, arguments: &str) -> Result<(), Refusal> {
        let request = || ApprovalRequest::McpCall {
            tool: tool.to_string(),
            server: server.to_string(),
            arguments: crate::text::summary(arguments, 500),
        };
        let gate = guard::mcp_call_gate(&self.settings());
        self.gated(gate, request, Memo::McpTool(tool.to_string()))
            .await
    }

    /// Whether `browse_url` (or a command through the allowlist proxy) may
    /// reach `host`, which is in neither host list, for `url`; "for the
    /// session" covers the host and port. Headless, the refusal says how
    /// to list the host.
    pub async fn browse(&self, host: &Target, url: &str) -> Result<(), Refusal> {
        let memo = Memo::Host(host.clone());
        let gate = match guard::browse_gate(&self.settings(), host) {
            Gate::Ask if self.approver.is_none() && !self.is_remembered(&memo) => {
                Gate::Deny(format!(
                    "{host} is not in network_allow, and nobody can approve browsing it in a headless run, so nothing was fetched. Tell the user what you wanted to read: they can allow the host with {} in a trusted fido.toml or their user config",
                    allow_hint(host)
                ))
            }
            gate => gate,
        };
        let request = || ApprovalRequest::Browse {
            host: host.to_string(),
            url: crate::text::short(url, 500),
        };
        self.gated(gate, request, memo).await
    }

    /// What `gate` says, asking (`request`, built only then) when it says
    /// ask.
    async fn gated(
        &self,
        gate: Gate,
        request: impl FnOnce() -> ApprovalRequest,
        memo: Memo,
    ) -> Result<(), Refusal> {
        match gate {
            Gate::Allow => Ok(()),
            Gate::Deny(reason) => Err(Refusal::Policy(reason)),
            Gate::Ask => self.ask(request(), memo).await,
        }
    }

    async fn ask(&self, request: ApprovalRequest, memo: Memo) -> Result<(), Refusal> {
        if self.is_remembered(&memo) {
            return Ok(());
        }
        // Leaving the sandbox is the person's call alone.
        let escalation = matches!(
            request,
            ApprovalRequest::Command {
                escalated: true,
                ..
            }
        );
        if !escalation {
            let call = current_call();
            if call.as_ref().is_some_and(|call| call.preapproved) {
                return Ok(());
            }
            match self.permission_hooks(call, &request).await {
                PermissionAnswer::Allow => return Ok(()),
                PermissionAnswer::Deny(reason) => return Err(Refusal::Hook(reason)),
                PermissionAnswer::Ask => {}
            }
        }
        let Some(approver) = &self.approver else {
            return Err(Refusal::Policy(headless_refusal(
                &request,
                &self.settings(),
            )));
        };
        match approver.approve(&request).await {
            Some(ApprovalDecision::Approved) => Ok(()),
            Some(ApprovalDecision::ApprovedForSession) => {
                self.remember(memo);
                Ok(())
            }
            Some(ApprovalDecision::Denied { reason }) => Err(Refusal::Person(reason)),
            None => Err(Refusal::Policy(
                "the approval prompt closed before the user answered".into(),
            )),
        }
    }

    /// What the PermissionRequest hooks say about `request` (`Ask`: ask
    /// the person, as without hooks).
    async fn permission_hooks(
        &self,
        call: Option<CallScope>,
        request: &ApprovalRequest,
    ) -> PermissionAnswer {
        let Some(hooks) = &self.hooks else {
            return PermissionAnswer::Ask;
        };
        let call = call.unwrap_or_else(|| CallScope {
            tool_name: request_tool(request),
            arguments: String::new(),
            tool_use_id: String::new(),
            preapproved: false,
        });
        let facts = CallFacts {
            tool_name: &call.tool_name,
            arguments: &call.arguments,
            tool_use_id: &call.tool_use_id,
        };
        let request = serde_json::to_value(request).unwrap_or_default();
        hooks.permission_request(facts, request).await
    }

    fn is_remembered(&self, memo: &Memo) -> bool {
        self.remembered
            .lock()
            .map(|remembered| remembered.contains(memo))
            .unwrap_or(false)
    }

    fn remember(&self, memo: Memo) {
        if let Ok(mut remembered) = self.remembered.lock() {
            remembered.insert(memo);
        }
    }
}

impl HostApproval for Approvals {
    fn approve_host<'a>(&'a self, target: &'a Target, url: &'a str) -> HostApprovalFuture<'a> {
        Box::pin(async move {
            self.browse(target, url)
                .await
                .map_err(|r| HopRefused(r.message()))
        })
    }
}

/// What "approved for the session" covers: one per kind of request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Memo {
    /// The exact call a PreToolUse hook asked about.
    HookAsk {
        tool: String,
        arguments: String,
    },
    DelegateWrite,
    DelegateMerge,
    /// The exact command, in or out of the sandbox.
    Command {
        escalated: bool,
        command: String,
    },
    FileChange {
        tool: String,
        path: String,
    },
    /// Every call of one MCP tool.
    McpTool(String),
    /// A host and port for `browse_url` and the proxy.
    Host(Target),
}

/// Why a call was not approved: typed until the tool that asked renders
/// it ([`Refusal::into_output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The session's policy refuses it, or nobody is there to ask.
    Policy(String),
    /// A PermissionRequest hook of the user refused it, saying this.
    Hook(String),
    /// The person said no, and maybe why.
    Person(Option<String>),
}

impl Refusal {
    /// The refusal as one sentence for the model.
    pub fn message(&self) -> String {
        match self {
            Refusal::Policy(reason) => format!("not approved: {reason}"),
            Refusal::Hook(reason) => guard::hook_refusal_message("PermissionRequest", reason),
            Refusal::Person(reason) => match reason.as_deref().map(str::trim) {
                Some(reason) if !reason.is_empty() => format!(
                    "the user denied this and said: {}. Nothing was run or changed.",
                    crate::text::sanitize(reason, false)
                ),
                _ => "the user denied this. Nothing was run or changed; do not retry it unchanged."
                    .into(),
            },
        }
    }

    /// The failed tool result the model gets (a hook's refusal is the
    /// typed `hook_denied` error, as a PreToolUse hook's is).
    pub fn into_output(self) -> ToolOutput {
        match self {
            Refusal::Hook(reason) => guard::hook_refusal("PermissionRequest", &reason),
            other => ToolOutput::error(other.message()),
        }
    }
}

/// The tool a request is about, when no call is in scope.
fn request_tool(request: &ApprovalRequest) -> String {
    match request {
        ApprovalRequest::Command { .. } => super::names::BASH_EXEC.to_string(),
        ApprovalRequest::FileChange { tool, .. }
        | ApprovalRequest::McpCall { tool, .. }
        | ApprovalRequest::HookAsk { tool, .. } => tool.clone(),
        ApprovalRequest::WriteDelegation { .. } | ApprovalRequest::ChangeSet { .. } => {
            super::names::DELEGATE.to_string()
        }
        ApprovalRequest::Browse { .. } => super::names::BROWSE_URL.to_string(),
    }
}

/// Why a request is refused in a headless run, with how to allow it.
fn headless_refusal(request: &ApprovalRequest, settings: &SafetySettings) -> String {
    match request {
        ApprovalRequest::HookAsk { .. } => "a PreToolUse hook asked for the user's approval of this call, and nobody can approve in a headless run. Nothing was run or changed".into(),
        ApprovalRequest::Command { .. }
        | ApprovalRequest::FileChange { .. }
        | ApprovalRequest::McpCall { .. }
        | ApprovalRequest::Browse { .. }
        | ApprovalRequest::WriteDelegation { .. }
        | ApprovalRequest::ChangeSet { .. } => format!(
            "approval_policy {} requires the user's approval, and nobody can approve in a headless run. Nothing was run or changed; the user can allow it with `fido exec --approval never` (or --full-auto), or run the session in the terminal UI",
            settings.approval_policy
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ApprovalPolicy;

    fn settings(mode: SandboxMode, policy: ApprovalPolicy) -> SafetySettings {
        SafetySettings {
            sandbox_mode: mode,
            approval_policy: policy,
            network: crate::protocol::NetworkAccess::Off,
        }
    }

    /// Answers every request with the next scripted decision, and records
    /// what it was asked.
    struct Scripted {
        answers: Mutex<Vec<Option<ApprovalDecision>>>,
        asked: Mutex<Vec<ApprovalRequest>>,
    }

    impl Approver for Scripted {
        fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
            self.asked.lock().unwrap().push(request.clone());
            let answer = self.answers.lock().unwrap().remove(0);
            Box::pin(async move { answer })
        }
    }

    fn scripted(answers: Vec<Option<ApprovalDecision>>) -> Arc<Scripted> {
        Arc::new(Scripted {
            answers: Mutex::new(answers),
            asked: Mutex::new(Vec::new()),
        })
    }

    /// "Apply later ones" (`a` on a change set) applies later clean change
    /// sets unasked, but never one that touches control files: the person
    /// is asked about each of those.
    #[tokio::test]
    async fn apply_later_ones_never_covers_control_files() {
        let request = |control_files: Vec<String>| ApprovalRequest::ChangeSet {
            id: "subagent-1".into(),
            task: "t".into(),
            summary: "1 file (+1 -0)".into(),
            files: vec!["modified x +1 -0".into()],
            outside_claim: Vec::new(),
            diff: String::new(),
            control_files,
        };
        let person = scripted(vec![
            Some(ApprovalDecision::ApprovedForSession),
            Some(ApprovalDecision::Denied { reason: None }),
        ]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest),
            Some(person.clone()),
        );
        let first = approvals.review_change_set(request(Vec::new())).await;
        assert!(matches!(first, Some(Review::Apply)));
        let clean = approvals.review_change_set(request(Vec::new())).await;
        assert!(matches!(clean, Some(Review::Apply)));
        assert_eq!(person.asked.lock().unwrap().len(), 1, "a for the session");
        let control = approvals
            .review_change_set(request(vec!["fido.toml".into()]))
            .await;
        assert!(
            matches!(control, Some(Review::Discard { .. })),
            "asked again"
        );
        assert_eq!(person.asked.lock().unwrap().len(), 2);
    }

    /// `delegate_write`: allow runs, never refuses saying how to allow it,
    /// and ask asks the person once per session with `a`, and is refused
    /// headless.
    #[tokio::test]
    async fn write_delegation_follows_delegate_write() {
        use crate::protocol::changes::{DelegateWrite, DelegationPolicy};
        let request = || ApprovalRequest::WriteDelegation {
            agent_id: "subagent-1".into(),
            task: "t".into(),
            claim: vec!["src".into()],
            base: "abc".into(),
        };
        let with = |write, approver: Option<Arc<dyn Approver>>| {
            Approvals::new(
                settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never),
                approver,
            )
            .with_delegation(DelegationPolicy {
                write,
                ..DelegationPolicy::HEADLESS
            })
        };
        assert!(
            with(DelegateWrite::Allow, None)
                .write_delegation(request())
                .await
                .is_ok()
        );
        let never = with(DelegateWrite::Never, None)
            .write_delegation(request())
            .await;
        let never = never.unwrap_err();
        assert!(matches!(never, WriteRefused::Policy(_)), "{never}");
        assert!(never.to_string().contains("--allow-write-delegation"));
        let headless = with(DelegateWrite::Ask, None)
            .write_delegation(request())
            .await;
        assert_eq!(headless, Err(WriteRefused::Headless));
        assert!(WriteRefused::Headless.to_string().contains("headless"));
        let person = scripted(vec![Some(ApprovalDecision::ApprovedForSession)]);
        let asking = with(DelegateWrite::Ask, Some(person.clone()));
        assert!(asking.write_delegation(request()).await.is_ok());
        assert!(asking.write_delegation(request()).await.is_ok());
        assert_eq!(person.asked.lock().unwrap().len(), 1, "a for the session");
    }

    #[tokio::test]
    async fn side_effecting_mcp_calls_are_asked_under_untrusted_and_remembered_per_tool() {
        let person = scripted(vec![
            Some(ApprovalDecision::ApprovedForSession),
            Some(ApprovalDecision::Denied { reason: None }),
        ]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Untrusted),
            Some(person.clone()),
        );
        for args in ["{\"a\":1}", "{\"a\":2}"] {
            assert!(
                approvals
                    .mcp_call("mcp__fs__write", "fs", args)
                    .await
                    .is_ok()
            );
        }
        let other = approvals.mcp_call("mcp__fs__delete", "fs", "{}").await;
        assert!(
            other
                .unwrap_err()
                .message()
                .contains("the user denied this")
        );
        assert_eq!(person.asked.lock().unwrap().len(), 2);

        let never = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never),
            None,
        );
        assert!(never.mcp_call("mcp__fs__write", "fs", "{}").await.is_ok());
    }

    #[tokio::test]
    async fn browsing_asks_per_host_and_port_and_headless_says_how_to_allow() {
        let person = scripted(vec![
            Some(ApprovalDecision::ApprovedForSession),
            Some(ApprovalDecision::Denied {
                reason: Some("not that one".into()),
            }),
        ]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest),
            Some(person.clone()),
        );
        let docs = Target::new("docs.example.com", 443);
        for path in ["a", "b"] {
            let url = format!("https://docs.example.com/{path}");
            assert!(approvals.browse(&docs, &url).await.is_ok());
        }
        let other = Target::new("docs.example.com", 8443);
        let out = approvals
            .browse(&other, "https://docs.example.com:8443/")
            .await;
        assert!(out.unwrap_err().message().contains("not that one"));
        let asked = person.asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 2);
        assert!(matches!(
            &asked[0],
            ApprovalRequest::Browse { host, url } if host == "docs.example.com:443" && url == "https://docs.example.com/a"
        ));

        let headless = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest),
            None,
        );
        let out = headless.browse(&docs, "https://docs.example.com/").await;
        let message = out.unwrap_err().message();
        assert!(message.contains("headless"), "{message}");
        assert!(
            message.contains("network_allow = [\"docs.example.com\"]"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn untrusted_asks_and_remembers_session_approvals_per_exact_command() {
        let person = scripted(vec![
            Some(ApprovalDecision::ApprovedForSession),
            Some(ApprovalDecision::Approved),
        ]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Untrusted),
            Some(person.clone()),
        );
        for _ in 0..3 {
            let run = approvals.command("make test", ".", false, None).await;
            assert_eq!(run.unwrap(), RunAs::Sandboxed);
        }
        let other = approvals.command("make clean", ".", false, None).await;
        assert_eq!(other.unwrap(), RunAs::Sandboxed);
        assert_eq!(person.asked.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_denial_carries_the_reason_to_the_model() {
        let person = scripted(vec![Some(ApprovalDecision::Denied {
            reason: Some("use the staging database".into()),
        })]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Untrusted),
            Some(person),
        );
        let out = approvals.command("psql prod", ".", false, None).await;
        let refusal = out.unwrap_err();
        assert_eq!(
            refusal,
            Refusal::Person(Some("use the staging database".into()))
        );
        let out = refusal.into_output();
        assert!(!out.ok);
        assert!(
            out.content.contains("use the staging database"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn on_request_runs_sandboxed_silently_and_asks_only_to_escalate() {
        let person = scripted(vec![Some(ApprovalDecision::Approved)]);
        let approvals = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest),
            Some(person.clone()),
        );
        assert_eq!(
            approvals.command("ls", ".", false, None).await.unwrap(),
            RunAs::Sandboxed
        );
        assert!(person.asked.lock().unwrap().is_empty());
        let run = approvals
            .command("cargo fetch", ".", true, Some("needs the network"))
            .await;
        assert_eq!(run.unwrap(), RunAs::Unsandboxed);
        let asked = person.asked.lock().unwrap();
        assert!(matches!(
            &asked[0],
            ApprovalRequest::Command { escalated: true, justification: Some(j), .. } if j == "needs the network"
        ));
    }

    #[tokio::test]
    async fn never_denies_escalation_and_headless_untrusted_denies_everything() {
        let never = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Never),
            None,
        );
        let out = never
            .command("curl x", ".", true, Some("j"))
            .await
            .unwrap_err();
        assert!(out.message().contains("approval_policy"), "{out:?}");
        assert_eq!(
            never.command("ls", ".", false, None).await.unwrap(),
            RunAs::Sandboxed
        );
        let headless = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Untrusted),
            None,
        );
        let out = headless.command("ls", ".", false, None).await.unwrap_err();
        assert!(out.message().contains("headless"), "{out:?}");
        let out = headless
            .file_change("patch", "a.txt", || "diff".into())
            .await
            .unwrap_err();
        assert!(out.message().contains("Nothing was run or changed"));
    }

    #[tokio::test]
    async fn escalation_is_moot_without_a_sandbox() {
        let approvals = Approvals::new(
            settings(SandboxMode::DangerFullAccess, ApprovalPolicy::Never),
            None,
        );
        let run = approvals.command("curl x", ".", true, None).await;
        assert_eq!(run.unwrap(), RunAs::Sandboxed);
    }

    #[tokio::test]
    async fn read_only_asks_before_file_changes_unless_never() {
        let person = scripted(vec![Some(ApprovalDecision::Approved)]);
        let approvals = Approvals::new(
            settings(SandboxMode::ReadOnly, ApprovalPolicy::OnRequest),
            Some(person.clone()),
        );
        approvals
            .file_change("mkdir", "src/new", || "create directory src/new".into())
            .await
            .unwrap();
        assert_eq!(person.asked.lock().unwrap().len(), 1);
        let never = Approvals::new(settings(SandboxMode::ReadOnly, ApprovalPolicy::Never), None);
        let out = never
            .file_change("rm", "a", || unreachable!("not asked"))
            .await
            .unwrap_err();
        assert!(out.message().contains("read-only"), "{out:?}");
        let writable = Approvals::new(
            settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::OnRequest),
            None,
        );
        writable
            .file_change("rm", "a", || unreachable!("not asked"))
            .await
            .unwrap();
    }
}
