//! What crosses the delegation boundary as tool results: the
//! `subagent_bootstrap` result that opens a subagent's fork, and the
//! normalised `delegate_result` the parent receives (README "Delegation and the sandbox").

use serde::{Deserialize, Serialize};

use super::changes::ChangeSet;
use super::schema::{string_enum, tool_args};
use super::{Identity, UsageTotals};

tool_args! {
    /// What the subagent must do, from the `delegate` arguments.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct DelegateArgs {
        #[schema(description = "The investigation, self-contained.")]
        pub task: String,
        #[serde(default)]
        pub context: Option<String>,
        #[serde(default)]
        pub scope: Option<Scope>,
        #[serde(default)]
        pub mode: Option<DelegateMode>,
        #[schema(values = ["findings"])]
        #[serde(default)]
        pub output_contract: Option<String>,
        // Limits say their defaults in the schema: Qwen2.5-Coder-0.5B fills
        // every optional field, and without them sent `timeout_ms: 120`.
        #[schema(minimum = 1000, description = "Default 120000.")]
        #[serde(default)]
        pub timeout_ms: Option<u64>,
        /// Tokens (prompt + completion) the subagent may use.
        #[schema(
            minimum = 1,
            description = "Omit it. If set: 20000 or more."
        )]
        #[serde(default)]
        pub budget_tokens: Option<u64>,
        /// The plan item this investigation serves (shown in the UI only).
        #[schema(description = "The plan item id this serves.")]
        #[serde(default)]
        pub plan_item: Option<String>,
        /// The subagent profile to run (`.fido/agents/NAME.md`); the
        /// `delegate` tool advertises it, with the session's profile names,
        /// only when there are profiles. `agent` is its earlier name.
        #[schema(skip)]
        #[serde(default, alias = "agent")]
        pub profile: Option<String>,
    }
}

impl DelegateArgs {
    /// A call with only its task: every optional field left out.
    pub fn for_task(task: impl Into<String>) -> DelegateArgs {
        DelegateArgs {
            task: task.into(),
            context: None,
            scope: None,
            mode: None,
            output_contract: None,
            timeout_ms: None,
            budget_tokens: None,
            plan_item: None,
            profile: None,
        }
    }
}

string_enum! {
    /// What the subagent may do (`mode`): investigate, or (`write`) change
    /// its claimed paths in a worktree of its own.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum DelegateMode {
        ReadOnly = "read_only",
        Write = "write",
    }
}

tool_args! {
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Scope {
        /// A write delegation's claim: the workspace-relative files and
        /// folders it may change.
        #[schema(description = "For mode write: the files and folders it may change.")]
        #[serde(default)]
        pub paths: Vec<String>,
        #[serde(default)]
        pub symbols: Vec<String>,
    }
}

/// A subagent profile as the model sees it in the `delegate` spec; the fork
/// carries the session's list, so the child's catalog is the parent's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileOffer {
    pub name: String,
    pub description: String,
}

/// The `role` of a subagent's identity: on the wire always `subagent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubagentRole {
    Subagent,
}

/// The `parent_role` of a subagent's identity: on the wire always `main`
/// (a subagent never delegates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParentRole {
    Main,
}

/// Who produced a result. Assigned by the runner, never by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentIdentity {
    pub role: SubagentRole,
    pub agent_id: String,
    pub parent_role: ParentRole,
}

impl SubagentIdentity {
    pub fn new(agent_id: &str) -> Self {
        SubagentIdentity {
            role: SubagentRole::Subagent,
            agent_id: agent_id.into(),
            parent_role: ParentRole::Main,
        }
    }
}

/// The `type` of a bootstrap result: always `subagent_bootstrap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootstrapKind {
    SubagentBootstrap,
}

/// What the subagent's conversation starts from: always
/// `forked_parent_messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextMode {
    ForkedParentMessages,
}

/// The tool result that answers the parent's `delegate` call inside the
/// subagent's fork and tells the subagent who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentBootstrap {
    #[serde(rename = "type")]
    pub kind: BootstrapKind,
    pub identity: SubagentIdentity,
    pub context_mode: ContextMode,
    /// Messages of the parent in the fork, system message included.
    pub forked_message_count: usize,
    pub task: String,
    pub responsibility: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateStatus {
    Completed,
    Partial,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub file: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub claim: String,
    pub confidence: Confidence,
}

/// The stable code of why a delegation did not complete (`error.code`),
/// and of a tool the read-only subagent was refused.
///
/// Reading is lenient: a code this build does not know (from a newer or a
/// hostile peer) reads as `protocol_error`, so a bad code never fails the
/// decoding of the whole result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelegateErrorCode {
    /// The time limit ran out.
    Timeout,
    /// Esc, `/cancel`, `fido cancel`, an interrupted turn or the shutdown.
    Cancelled,
    /// The subagent's or the session's token budget was spent.
    BudgetExceeded,
    /// The turn already started `delegate_max_per_turn` subagents.
    DelegationLimit,
    /// A subagent called `delegate`.
    NestedDelegationForbidden,
    /// The sandbox the settings require could not be put in force.
    SandboxUnavailable,
    /// The subagent's own turn failed on a model request.
    ProviderError,
    /// The subagent process could not be started.
    SpawnFailed,
    /// The subagent process (or the parent's run of it) died.
    SubagentCrashed,
    /// The subagent's loop guard stopped its model repeating itself.
    ModelLoop,
    /// The `delegate` call's arguments were refused.
    InvalidArguments,
    /// A mutating or interactive tool was refused to a subagent.
    PermissionDenied,
    /// No supervisor runs (no session, or it stopped).
    Unavailable,
    /// A write delegation the session's `delegate_write` policy (or the
    /// person) refused.
    WriteNotAllowed,
    /// A write delegation whose claim overlaps a live write subagent's.
    WriteConflict,
    /// A write delegation outside a git repository.
    NotAGitRepository,
    /// A user hook (PreToolUse or PermissionRequest) refused the call.
    HookDenied,
    /// The child broke the IPC protocol; also any code not known here
    /// (serde needs this catch-all last).
    #[serde(other)]
    ProtocolError,
}

impl DelegateErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DelegateErrorCode::Timeout => "timeout",
            DelegateErrorCode::Cancelled => "cancelled",
            DelegateErrorCode::BudgetExceeded => "budget_exceeded",
            DelegateErrorCode::DelegationLimit => "delegation_limit",
            DelegateErrorCode::NestedDelegationForbidden => "nested_delegation_forbidden",
            DelegateErrorCode::SandboxUnavailable => "sandbox_unavailable",
            DelegateErrorCode::ProviderError => "provider_error",
            DelegateErrorCode::SpawnFailed => "spawn_failed",
            DelegateErrorCode::SubagentCrashed => "subagent_crashed",
            DelegateErrorCode::ProtocolError => "protocol_error",
            DelegateErrorCode::ModelLoop => "model_loop",
            DelegateErrorCode::InvalidArguments => "invalid_arguments",
            DelegateErrorCode::PermissionDenied => "permission_denied",
            DelegateErrorCode::Unavailable => "unavailable",
            DelegateErrorCode::WriteNotAllowed => "write_not_allowed",
            DelegateErrorCode::WriteConflict => "write_conflict",
            DelegateErrorCode::NotAGitRepository => "not_a_git_repository",
            DelegateErrorCode::HookDenied => "hook_denied",
        }
    }
}

impl std::fmt::Display for DelegateErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a delegation did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateError {
    pub code: DelegateErrorCode,
    pub message: String,
}

/// Token usage of the subagent's model requests, and its wall time. On the
/// wire the counters sit beside `wall_ms`, as they always did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateUsage {
    #[serde(flatten)]
    pub totals: UsageTotals,
    /// From the spawn to the reap, in milliseconds.
    #[serde(default)]
    pub wall_ms: u64,
}

impl DelegateUsage {
    /// What a budget counts: prompt and completion tokens.
    pub fn budget_tokens(&self) -> u64 {
        self.totals
            .prompt_tokens
            .saturating_add(self.totals.completion_tokens)
    }
}

/// The `type` of a result: always `delegate_result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultKind {
    DelegateResult,
}

/// The normalised final output of a subagent: the only thing the parent's
/// conversation receives from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateResult {
    #[serde(rename = "type")]
    pub kind: ResultKind,
    pub identity: SubagentIdentity,
    pub status: DelegateStatus,
    pub summary: String,
    pub findings: Vec<Finding>,
    pub recommended_next_steps: Vec<String>,
    pub tests_to_run: Vec<String>,
    pub uncertainties: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<DelegateError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<DelegateUsage>,
    /// A write subagent's change set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<ChangeSet>,
}

impl DelegateResult {
    /// A result with no findings yet, of `status`.
    pub fn empty(agent_id: &str, status: DelegateStatus) -> Self {
        DelegateResult {
            kind: ResultKind::DelegateResult,
            identity: SubagentIdentity::new(agent_id),
            status,
            summary: String::new(),
            findings: Vec::new(),
            recommended_next_steps: Vec::new(),
            tests_to_run: Vec::new(),
            uncertainties: Vec::new(),
            error: None,
            usage: None,
            changes: None,
        }
    }

    /// A failed result with no findings.
    pub fn failed(agent_id: &str, code: DelegateErrorCode, message: &str) -> Self {
        DelegateResult {
            summary: message.into(),
            error: Some(DelegateError {
                code,
                message: message.into(),
            }),
            ..DelegateResult::empty(agent_id, DelegateStatus::Failed)
        }
    }

    /// The result for a subagent, `caller`, that calls `delegate`.
    pub fn nested_forbidden(caller: &Identity) -> Self {
        DelegateResult {
            summary: "Nested delegation is not allowed.".into(),
            recommended_next_steps: vec![
                "Continue the assigned task without calling delegate.".into(),
            ],
            ..DelegateResult::failed(
                caller.label(),
                DelegateErrorCode::NestedDelegationForbidden,
                "A subagent cannot call delegate; no nested subagent was created.",
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result as the parent's conversation receives it, byte for byte
    /// (recorded when `DelegateUsage` still spelled out its own counters).
    const RESULT: &str = r#"{"type":"delegate_result","identity":{"role":"subagent","agent_id":"subagent-0badcafe","parent_role":"main"},"status":"partial","summary":"half done","findings":[{"file":"src/a.rs","line":3,"claim":"c","confidence":"high"}],"recommended_next_steps":["go on"],"tests_to_run":[],"uncertainties":[],"error":{"code":"timeout","message":"ran out of time"},"usage":{"requests":3,"prompt_tokens":100,"cached_tokens":40,"completion_tokens":7,"wall_ms":1234}}"#;

    /// The profile argument is `profile`; a model that learned `agent`,
    /// its earlier name, still gets its profile, and an unknown key is
    /// still refused.
    #[test]
    fn a_profile_is_named_by_profile_or_its_earlier_name() {
        let parse = |text: &str| serde_json::from_str::<DelegateArgs>(text);
        let named = parse(r#"{"task": "t", "profile": "reviewer"}"#).unwrap();
        let earlier = parse(r#"{"task": "t", "agent": "reviewer"}"#).unwrap();
        assert_eq!(named.profile.as_deref(), Some("reviewer"));
        assert_eq!(earlier.profile.as_deref(), Some("reviewer"));
        assert!(parse(r#"{"task": "t", "persona": "reviewer"}"#).is_err());
    }

    #[test]
    fn a_delegate_result_keeps_its_wire_format() {
        let result: DelegateResult = serde_json::from_str(RESULT).unwrap();
        assert_eq!(serde_json::to_string(&result).unwrap(), RESULT);
        let usage = result.usage.unwrap();
        assert_eq!(usage.budget_tokens(), 107);
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"requests":3,"prompt_tokens":100,"cached_tokens":40,"completion_tokens":7,"wall_ms":1234}"#
        );
        // Usage written before the wall time was recorded still reads.
        let older: DelegateUsage = serde_json::from_str(
            r#"{"requests":1,"prompt_tokens":2,"cached_tokens":0,"completion_tokens":3}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&older).unwrap(),
            r#"{"requests":1,"prompt_tokens":2,"cached_tokens":0,"completion_tokens":3,"wall_ms":0}"#
        );
        assert_eq!(
            serde_json::to_string(&DelegateUsage::default()).unwrap(),
            r#"{"requests":0,"prompt_tokens":0,"cached_tokens":0,"completion_tokens":0,"wall_ms":0}"#
        );
    }

    /// Every code keeps the wire string it had as a `String`, reads back
    /// as itself, and `as_str` is that string.
    #[test]
    fn error_codes_keep_their_wire_strings() {
        let codes = [
            (DelegateErrorCode::Timeout, "timeout"),
            (DelegateErrorCode::Cancelled, "cancelled"),
            (DelegateErrorCode::BudgetExceeded, "budget_exceeded"),
            (DelegateErrorCode::DelegationLimit, "delegation_limit"),
            (
                DelegateErrorCode::NestedDelegationForbidden,
                "nested_delegation_forbidden",
            ),
            (DelegateErrorCode::SandboxUnavailable, "sandbox_unavailable"),
            (DelegateErrorCode::ProviderError, "provider_error"),
            (DelegateErrorCode::SpawnFailed, "spawn_failed"),
            (DelegateErrorCode::SubagentCrashed, "subagent_crashed"),
            (DelegateErrorCode::ProtocolError, "protocol_error"),
            (DelegateErrorCode::ModelLoop, "model_loop"),
            (DelegateErrorCode::InvalidArguments, "invalid_arguments"),
            (DelegateErrorCode::PermissionDenied, "permission_denied"),
            (DelegateErrorCode::Unavailable, "unavailable"),
            (DelegateErrorCode::WriteNotAllowed, "write_not_allowed"),
            (DelegateErrorCode::WriteConflict, "write_conflict"),
            (DelegateErrorCode::NotAGitRepository, "not_a_git_repository"),
        ];
        for (code, wire) in codes {
            let json = format!("\"{wire}\"");
            assert_eq!(serde_json::to_string(&code).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<DelegateErrorCode>(&json).unwrap(),
                code
            );
            assert_eq!(code.as_str(), wire);
        }
    }

    /// A code this build does not know (a hostile or newer peer) does not
    /// fail the result: it reads as `protocol_error`, the rest intact.
    #[test]
    fn an_unknown_error_code_reads_as_protocol_error() {
        let hostile = RESULT.replace(r#""code":"timeout""#, r#""code":"rm -rf /\u001b[2J""#);
        let result: DelegateResult = serde_json::from_str(&hostile).unwrap();
        let error = result.error.unwrap();
        assert_eq!(error.code, DelegateErrorCode::ProtocolError);
        assert_eq!(error.message, "ran out of time");
        assert_eq!(result.summary, "half done");
        // A code that is not a string at all is still malformed.
        let malformed = RESULT.replace(r#""code":"timeout""#, r#""code":7"#);
        assert!(serde_json::from_str::<DelegateResult>(&malformed).is_err());
    }

    /// The constant tags are their one wire string, and nothing else reads.
    #[test]
    fn constant_tags_read_only_their_string() {
        let bootstrap = SubagentBootstrap {
            kind: BootstrapKind::SubagentBootstrap,
            identity: SubagentIdentity::new("subagent-1"),
            context_mode: ContextMode::ForkedParentMessages,
            forked_message_count: 2,
            task: "t".into(),
            responsibility: "r".into(),
        };
        let line = serde_json::to_string(&bootstrap).unwrap();
        assert_eq!(
            line,
            r#"{"type":"subagent_bootstrap","identity":{"role":"subagent","agent_id":"subagent-1","parent_role":"main"},"context_mode":"forked_parent_messages","forked_message_count":2,"task":"t","responsibility":"r"}"#
        );
        assert!(
            serde_json::from_str::<SubagentBootstrap>(&line.replace("\"main\"", "\"root\""))
                .is_err()
        );
        assert!(
            serde_json::from_str::<DelegateResult>(&RESULT.replace("delegate_result", "other"))
                .is_err()
        );
    }

    /// `mode` is `read_only` or `write`; any other string is refused when
    /// the arguments are read (the tool turns that into an error result).
    #[test]
    fn delegate_modes_are_read_only_and_write() {
        let args = |mode: &str| {
            serde_json::from_value::<DelegateArgs>(serde_json::json!({"task": "t", "mode": mode}))
        };
        assert_eq!(
            args("read_only").unwrap().mode,
            Some(DelegateMode::ReadOnly)
        );
        assert_eq!(args("write").unwrap().mode, Some(DelegateMode::Write));
        assert!(args("admin").is_err());
    }
}
