//! `delegate`: one bounded, synchronous investigation (or, `mode: "write"`,
//! one change in a worktree of its own) in a subagent process. The tool
//! only parses and checks the arguments; the
//! [`Delegator`] in the tool environment (the supervisor) runs the subagent.
//! Inside a subagent the invocation guard answers first, with the
//! `nested_delegation_forbidden` result, so no process and no provider
//! request is ever made for a nested call.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Capability;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::Message;
pub use crate::protocol::delegate::ProfileOffer;
use crate::protocol::delegate::{DelegateArgs, DelegateErrorCode, DelegateResult};
use crate::protocol::schema::{ToolArgs, string_enum_schema};

/// One delegation, as handed to the supervisor.
pub struct DelegationRequest<'a> {
    /// The id of the model's `delegate` call.
    pub call_id: &'a str,
    pub args: DelegateArgs,
    /// The parent's messages at the instant of the call.
    pub parent_messages: &'a [Message],
    /// The parent turn's cancellation (Ctrl+C, SIGINT, SIGTERM).
    pub cancel: &'a CancellationToken,
    /// The parent's tools: approvals, undo journal and workspace, which a
    /// write delegation needs (`None` outside a session's tool call).
    pub tools: Option<&'a super::ToolEnv>,
}

pub type DelegationFuture<'a> = Pin<Box<dyn Future<Output = DelegateResult> + Send + 'a>>;

/// Runs subagents for the main agent.
pub trait Delegator: Send + Sync {
    fn delegate<'a>(&'a self, request: DelegationRequest<'a>) -> DelegationFuture<'a>;
    /// Cancels every running and queued subagent; each parent call goes on
    /// with its cancelled result.
    fn cancel_running(&self);
    /// Cancels one subagent by id (the TUI's Esc on the focused row,
    /// `/cancel ID`); nothing happens when no such subagent runs or waits.
    fn cancel_subagent(&self, agent_id: &str);
    /// A new parent turn starts: the per-turn count of subagents restarts.
    fn begin_turn(&self) {}
    /// Every subagent started in this session, in start order (`/agents`).
    fn session_subagents(&self) -> Vec<crate::protocol::control::SessionSubagent> {
        Vec::new()
    }
}

/// The `delegate` tool, with the subagent profiles of the session (fixed at
/// session start, so its spec never changes mid-session).
#[derive(Debug, Clone, Default)]
pub struct Delegate {
    profiles: Vec<ProfileOffer>,
}

impl Delegate {
    pub fn new(profiles: Vec<ProfileOffer>) -> Delegate {
        Delegate { profiles }
    }

    fn check_profile(&self, profile: Option<&str>) -> Result<(), UnknownProfile> {
        let Some(name) = profile else {
            return Ok(());
        };
        if self.profiles.iter().any(|a| a.name == name) {
            return Ok(());
        }
        let name = name.to_string();
        let known: Vec<&str> = self.profiles.iter().map(|a| a.name.as_str()).collect();
        Err(match known.as_slice() {
            [] => UnknownProfile::NoneOffered { name },
            _ => UnknownProfile::NotOffered {
                name,
                known: known.join(", "),
            },
        })
    }
}

/// A call named a profile the session does not offer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum UnknownProfile {
    #[error("there is no subagent profile {name:?}: this session has none; leave `profile` out")]
    NoneOffered { name: String },
    #[error("there is no subagent profile {name:?}; the profiles are {known}")]
    NotOffered { name: String, known: String },
}

/// The seed's facts (fork, identity, read-only rules, stable catalog,
/// nested-call failure, return path, parent's responsibility), said once.
/// When to delegate is the system prompt's policy.
const DESCRIPTION: &str = "\
Run one bounded, synchronous subagent; only its final normalized result returns. It starts from a private fork of your messages; a bootstrap tool result gives its identity (role: \"subagent\", a unique agent_id, parent_role: \"main\"). Its output becomes this call's delegate_result; its transcript never reaches you. mode read_only (default): it cannot write files, use the network or ask the user; bash_exec runs read-only. mode write: it works in an isolated copy of the workspace taken at call time and only its claimed scope.paths come back, as a change set for review (changes), not as edits to the user's files. A nested delegate call fails with nested_delegation_forbidden. timeout_ms, budget_tokens or a cancel give a partial or failed result. You review, integrate and test.";

impl TypedTool for Delegate {
    const NAME: &'static str = super::names::DELEGATE;
    const CAPABILITY: Capability = Capability {
        starts_subagent: true,
        ..Capability::NONE
    };
    type Args = DelegateArgs;

    fn description(&self) -> Cow<'static, str> {
        if self.profiles.is_empty() {
            return DESCRIPTION.into();
        }
        let offers: Vec<String> = self
            .profiles
            .iter()
            .map(|a| format!("- {}: {}", a.name, a.description))
            .collect();
        format!(
            "{DESCRIPTION}\n\nSubagent profiles (set `profile` to run one; its instructions, model and limits apply):\n{}",
            offers.join("\n")
        )
        .into()
    }

    /// `DelegateArgs`' schema, with `profile` when the session has profiles.
    fn parameters(&self) -> Value {
        let mut parameters = DelegateArgs::parameters();
        if !self.profiles.is_empty() {
            let names: Vec<&str> = self.profiles.iter().map(|a| a.name.as_str()).collect();
            let mut profile = string_enum_schema(&names);
            profile.insert("description".into(), "The subagent profile to run.".into());
            parameters["properties"]["profile"] = Value::Object(profile);
        }
        parameters
    }

    fn run<'a>(&'a self, args: DelegateArgs, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let invalid = |message: &str| {
                output(&DelegateResult::failed(
                    "none",
                    DelegateErrorCode::InvalidArguments,
                    message,
                ))
            };
            if args.task.trim().is_empty() {
                return invalid("`task` must say what to investigate");
            }
            if let Err(unknown) = self.check_profile(args.profile.as_deref()) {
                return invalid(&unknown.to_string());
            }
            if args
                .output_contract
                .as_deref()
                .is_some_and(|c| c != "findings")
            {
                return invalid("only output_contract \"findings\" exists");
            }
            let Some(delegator) = &call.env.delegator else {
                return output(&DelegateResult::failed(
                    "none",
                    DelegateErrorCode::Unavailable,
                    "delegation needs a running session (fido or fido exec); nothing was started",
                ));
            };
            let result = delegator
                .delegate(DelegationRequest {
                    call_id: call.call_id,
                    args,
                    parent_messages: call.conversation,
                    cancel: call.cancel,
                    tools: Some(call.env),
                })
                .await;
            output(&result)
        })
    }
}

/// The tool output for a result: its JSON as content and details; a failed
/// delegation is a failed tool result.
pub fn output(result: &DelegateResult) -> ToolOutput {
    let value = serde_json::to_value(result).unwrap_or_default();
    ToolOutput {
        ok: result.status != crate::protocol::delegate::DelegateStatus::Failed,
        content: serde_json::to_string_pretty(&value).unwrap_or_default(),
        details: Some(value),
        plan: None,
        facts: None,
    }
}

#[cfg(test)]
mod profile_tests {
    use super::*;
    use crate::tools::Tool;

    #[test]
    fn profiles_are_offered_in_the_spec_and_checked() {
        let plain = Delegate::default().spec();
        assert_eq!(plain.description, DESCRIPTION);
        assert!(plain.parameters["properties"].get("profile").is_none());

        let with = Delegate::new(vec![ProfileOffer {
            name: "reviewer".into(),
            description: "Reviews a diff".into(),
        }]);
        let spec = with.spec();
        assert!(spec.description.ends_with("- reviewer: Reviews a diff"));
        assert_eq!(
            spec.parameters["properties"]["profile"]["enum"][0],
            "reviewer"
        );
        assert_eq!(
            spec.parameters["properties"]["task"],
            plain.parameters["properties"]["task"]
        );
        assert!(with.check_profile(Some("reviewer")).is_ok());
        assert!(with.check_profile(None).is_ok());
        let err = with.check_profile(Some("nope")).unwrap_err().to_string();
        assert!(err.contains("the profiles are reviewer"), "{err}");
        let err = Delegate::default()
            .check_profile(Some("x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("has none"), "{err}");
    }

    /// An unknown mode is an error result that names the modes, and
    /// `read_only` and `write` pass the checks (here to the missing
    /// supervisor).
    #[tokio::test]
    async fn both_modes_pass_the_mode_check() {
        let dir = tempfile::tempdir().unwrap();
        let env = crate::tools::testing::env(dir.path());
        let tool = Delegate::default();
        let call = |mode: &str| {
            let args = serde_json::json!({"task": "look", "mode": mode});
            crate::tools::testing::call(&tool, &env, args)
        };
        let unknown = call("admin").await;
        assert!(!unknown.ok);
        assert!(
            unknown.content.contains("invalid arguments for delegate"),
            "{}",
            unknown.content
        );
        assert!(unknown.content.contains("read_only"), "{}", unknown.content);
        for mode in ["read_only", "write"] {
            let passed = call(mode).await;
            assert_eq!(
                passed.details.unwrap()["error"]["code"],
                "unavailable",
                "past the checks, no supervisor runs here"
            );
        }
    }
}
