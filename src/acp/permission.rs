//! Fido's approval requests as `session/request_permission`, and the
//! client's choice back as Fido's decision. "Reject always" has no
//! counterpart in Fido's approvals: the session remembers the request and
//! refuses it again without asking.

use agent_client_protocol::v1::schema::{
    ContentBlock, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::json;

use crate::protocol::{ApprovalDecision, ApprovalRequest};
use crate::tools::capability::{Capabilities, Writes};

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// What the client chose, as Fido takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub decision: ApprovalDecision,
    /// "Reject always": refuse this request again without asking.
    pub remember_rejection: bool,
}

/// The request for `request`, shown on the tool call `tool_call_id`;
/// `tools`: what each of the session's tools may do.
pub fn request(
    session_id: &str,
    tool_call_id: &str,
    request: &ApprovalRequest,
    tools: &Capabilities,
) -> RequestPermissionRequest {
    let (title, kind, detail) = describe(request, tools);
    let mut fields = ToolCallUpdateFields::new()
        .title(title)
        .kind(kind)
        .status(ToolCallStatus::Pending)
        .raw_input(serde_json::to_value(request).unwrap_or_else(|_| json!({})));
    if !detail.is_empty() {
        fields = fields.content(vec![ToolCallContent::Content(
            agent_client_protocol::v1::schema::Content::new(ContentBlock::from(detail)),
        )]);
    }
    let options = vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Allow for this session",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            "Reject for this session",
            PermissionOptionKind::RejectAlways,
        ),
    ];
    RequestPermissionRequest::new(
        session_id.to_string(),
        ToolCallUpdate::new(tool_call_id.to_string(), fields),
        options,
    )
}

/// The decision for the client's answer (`None`: the request failed, the
/// client is gone or the turn was cancelled).
pub fn choice(outcome: Option<&RequestPermissionOutcome>) -> Choice {
    let denied = |reason: &str, remember: bool| Choice {
        decision: ApprovalDecision::Denied {
            reason: Some(reason.to_string()),
        },
        remember_rejection: remember,
    };
    let allowed = |decision| Choice {
        decision,
        remember_rejection: false,
    };
    match outcome {
        Some(RequestPermissionOutcome::Selected(selected)) => match &*selected.option_id.0 {
            ALLOW_ONCE => allowed(ApprovalDecision::Approved),
            ALLOW_ALWAYS => allowed(ApprovalDecision::ApprovedForSession),
            REJECT_ALWAYS => denied("rejected in the editor for this session", true),
            _ => denied("rejected in the editor", false),
        },
        Some(RequestPermissionOutcome::Cancelled) => denied("the turn was cancelled", false),
        _ => denied("the editor did not answer", false),
    }
}

/// The key a "reject always" is remembered by: the whole request.
pub fn rejection_key(request: &ApprovalRequest) -> String {
    serde_json::to_string(request).unwrap_or_default()
}

/// A title, a kind and the text to review (a diff, a command).
fn describe(request: &ApprovalRequest, tools: &Capabilities) -> (String, ToolKind, String) {
    match request {
        ApprovalRequest::Command {
            command,
            cwd,
            justification,
            escalated,
        } => {
            let title = if *escalated {
                format!("Run outside the sandbox: {command}")
            } else {
                format!("Run: {command}")
            };
            let why = justification
                .as_deref()
                .map(|j| format!("\nwhy: {j}"))
                .unwrap_or_default();
            (title, ToolKind::Execute, format!("in {cwd}{why}"))
        }
        ApprovalRequest::FileChange { tool, path, diff } => (
            format!("{tool} {path}"),
            match tools.of(tool).and_then(|capability| capability.writes) {
                Some(Writes::Removes) => ToolKind::Delete,
                Some(Writes::Files) | None => ToolKind::Edit,
            },
            diff.clone(),
        ),
        ApprovalRequest::McpCall {
            tool,
            server,
            arguments,
        } => (
            format!("MCP {server}: {tool}"),
            ToolKind::Other,
            arguments.clone(),
        ),
        ApprovalRequest::Browse { host, url } => {
            (format!("Fetch from {host}"), ToolKind::Fetch, url.clone())
        }
        ApprovalRequest::WriteDelegation { task, claim, .. } => (
            format!("Start a write subagent: {task}"),
            ToolKind::Edit,
            format!("may change: {}", claim.join(", ")),
        ),
        ApprovalRequest::ChangeSet {
            task,
            summary,
            diff,
            ..
        } => (
            format!("Apply the change set of \"{task}\" ({summary})"),
            ToolKind::Edit,
            diff.clone(),
        ),
        ApprovalRequest::HookAsk {
            tool,
            arguments,
            reason,
        } => (
            format!("A hook asks about {tool}"),
            ToolKind::Other,
            format!("{arguments}\n{}", reason.as_deref().unwrap_or_default()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;

    #[test]
    fn a_file_change_is_a_delete_when_its_tool_removes_files() {
        let tools = crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan)
            .capabilities();
        let kind = |tool: &str| {
            let change = ApprovalRequest::FileChange {
                tool: tool.into(),
                path: "a.txt".into(),
                diff: String::new(),
            };
            let asked = serde_json::to_value(request("s", "c", &change, &tools)).unwrap();
            asked["toolCall"]["kind"].clone()
        };
        assert_eq!(kind("rm"), "delete");
        assert_eq!(kind("rmdir"), "delete");
        assert_eq!(kind("patch"), "edit");
        assert_eq!(kind("mkdir"), "edit");
        assert_eq!(kind("mcp__fs__write"), "edit");
    }

    #[test]
    fn every_option_maps_to_a_decision() {
        let pick = |id: &str| {
            choice(Some(&RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(id.to_string()),
            )))
        };
        assert_eq!(pick(ALLOW_ONCE).decision, ApprovalDecision::Approved);
        assert_eq!(
            pick(ALLOW_ALWAYS).decision,
            ApprovalDecision::ApprovedForSession
        );
        assert!(!pick(REJECT_ONCE).remember_rejection);
        assert!(pick(REJECT_ALWAYS).remember_rejection);
        let cancelled = choice(Some(&RequestPermissionOutcome::Cancelled));
        assert!(matches!(
            cancelled.decision,
            ApprovalDecision::Denied { .. }
        ));
        assert!(matches!(
            choice(None).decision,
            ApprovalDecision::Denied { .. }
        ));
    }
}
