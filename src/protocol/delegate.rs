//! What crosses the delegation boundary as tool results: the
//! `subagent_bootstrap` result that opens a subagent's fork, and the
//! normalised `delegate_result` the parent receives (contract: the seed's
//! result shapes).

use serde::{Deserialize, Serialize};

use super::UsageTotals;
use super::schema::tool_args;

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
        #[schema(values = ["read_only"])]
        #[serde(default)]
        pub mode: Option<String>,
        #[schema(values = ["findings"])]
        #[serde(default)]
        pub output_contract: Option<String>,
        // Limits say their defaults in the schema: Qwen2.5-Coder-0.5B fills
        // every optional field, and without them sent `timeout_ms: 120`.
        #[schema(minimum = 1000, description = "Default 120000.")]
        #[serde(default)]
        pub timeout_ms: Option<u64>,
        /// Tokens (prompt + completion) the subagent may use.
        #[schema(minimum = 1, description = "Default from the configuration.")]
        #[serde(default)]
        pub budget_tokens: Option<u64>,
        /// The plan item this investigation serves (shown in the UI only).
        #[schema(description = "The plan item id this serves.")]
        #[serde(default)]
        pub plan_item: Option<String>,
        /// The subagent profile to run (`.fido/agents/NAME.md`); the
        /// `delegate` tool advertises it, with the session's profile names,
        /// only when there are profiles.
        #[schema(skip)]
        #[serde(default)]
        pub agent: Option<String>,
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
            agent: None,
        }
    }
}

tool_args! {
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Scope {
        #[serde(default)]
        pub paths: Vec<String>,
        #[serde(default)]
        pub symbols: Vec<String>,
    }
}

/// A subagent profile as the model sees it in the `delegate` spec; the fork
/// carries the session's list, so the child's catalog is the parent's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentOffer {
    pub name: String,
    pub description: String,
}

/// Who produced a result. Assigned by the runner, never by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentIdentity {
    /// Always `subagent`.
    pub role: String,
    pub agent_id: String,
    /// Always `main`.
    pub parent_role: String,
}

impl SubagentIdentity {
    pub fn new(agent_id: &str) -> Self {
        SubagentIdentity {
            role: "subagent".into(),
            agent_id: agent_id.into(),
            parent_role: "main".into(),
        }
    }
}

/// The tool result that answers the parent's `delegate` call inside the
/// subagent's fork and tells the subagent who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentBootstrap {
    /// Always `subagent_bootstrap`.
    #[serde(rename = "type")]
    pub kind: String,
    pub identity: SubagentIdentity,
    /// Always `forked_parent_messages`.
    pub context_mode: String,
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

/// Why a delegation did not complete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateError {
    /// Stable code: `timeout`, `cancelled`, `nested_delegation_forbidden`,
    /// `sandbox_unavailable`, `spawn_failed`, `protocol_error`,
    /// `subagent_crashed`, `provider_error`, `model_loop` (the subagent's
    /// loop guard stopped its model repeating itself), `budget_exceeded`,
    /// `delegation_limit`, `invalid_arguments`, …
    pub code: String,
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

/// The normalised final output of a subagent: the only thing the parent's
/// conversation receives from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelegateResult {
    /// Always `delegate_result`.
    #[serde(rename = "type")]
    pub kind: String,
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
}

impl DelegateResult {
    /// A failed result with no findings.
    pub fn failed(agent_id: &str, code: &str, message: &str) -> Self {
        DelegateResult {
            kind: "delegate_result".into(),
            identity: SubagentIdentity::new(agent_id),
            status: DelegateStatus::Failed,
            summary: message.into(),
            findings: Vec::new(),
            recommended_next_steps: Vec::new(),
            tests_to_run: Vec::new(),
            uncertainties: Vec::new(),
            error: Some(DelegateError {
                code: code.into(),
                message: message.into(),
            }),
            usage: None,
        }
    }

    /// The seed's result for a subagent that calls `delegate`.
    pub fn nested_forbidden(agent_id: &str) -> Self {
        DelegateResult {
            summary: "Nested delegation is not allowed.".into(),
            recommended_next_steps: vec![
                "Continue the assigned task without calling delegate.".into(),
            ],
            ..DelegateResult::failed(
                agent_id,
                "nested_delegation_forbidden",
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
}
