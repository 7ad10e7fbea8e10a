//! Hooks and the approvals: what a PreToolUse `allow` or `ask` and a
//! PermissionRequest hook do to the approval prompts.

use std::sync::{Arc, Mutex};

use super::*;
use crate::protocol::event_queue::channel;
use crate::protocol::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, SafetySettings, SandboxMode,
};
use crate::tools::approval::{ApprovalFuture, Approvals, Approver, CallScope, in_call};

/// Denies every request, and records it.
#[derive(Default)]
struct Denier(Mutex<Vec<ApprovalRequest>>);

impl Approver for Denier {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        self.0.lock().unwrap().push(request.clone());
        Box::pin(async { Some(ApprovalDecision::Denied { reason: None }) })
    }
}

fn untrusted(approver: Option<Arc<dyn Approver>>) -> Approvals {
    let settings = SafetySettings {
        sandbox_mode: SandboxMode::WorkspaceWrite,
        approval_policy: ApprovalPolicy::Untrusted,
        network: crate::protocol::NetworkAccess::Off,
    };
    Approvals::new(settings, approver)
}

fn scope(tool: &str, preapproved: bool) -> CallScope {
    CallScope {
        tool_name: tool.into(),
        arguments: r#"{"path":"a"}"#.into(),
        tool_use_id: "call_1".into(),
        preapproved,
    }
}

fn hooks(text: &str) -> Arc<Hooks> {
    let table: toml::Table = text.parse().unwrap();
    let mut config = HooksConfig::default();
    config::read_layer(table["hooks"].clone(), &mut config).unwrap();
    let (sink, _events) = channel();
    Arc::new(Hooks::new(
        config,
        std::env::temp_dir(),
        crate::process::EnvPolicy::default(),
        sink,
    ))
}

#[tokio::test]
async fn a_preapproved_call_skips_its_prompts_but_never_an_escalation() {
    let denier = Arc::new(Denier::default());
    let approvals = untrusted(Some(denier.clone()));
    let change = approvals.file_change("rm", "a", || "remove a".into());
    assert!(in_call(scope("rm", true), change).await.is_ok());
    assert!(denier.0.lock().unwrap().is_empty(), "nobody was asked");

    let escalation = approvals.command("make", ".", true, Some("needs the network"));
    assert!(in_call(scope("bash_exec", true), escalation).await.is_err());
    let asked = denier.0.lock().unwrap().clone();
    assert!(
        matches!(
            &asked[..],
            [ApprovalRequest::Command {
                escalated: true,
                ..
            }]
        ),
        "{asked:?}"
    );

    let change = approvals.file_change("rm", "a", || "remove a".into());
    assert!(
        in_call(scope("rm", false), change).await.is_err(),
        "asked and denied"
    );
}

#[tokio::test]
async fn permission_request_hooks_answer_before_the_person_is_asked() {
    let approvals = untrusted(None).with_hooks(hooks(
        "[[hooks.PermissionRequest]]\nmatcher = \"rm\"\ncommand = \"echo '{\\\"decision\\\":\\\"allow\\\"}'\"\n[[hooks.PermissionRequest]]\nmatcher = \"mkdir\"\ncommand = \"echo 'not here' >&2; exit 2\"\n",
    ));
    let asked = |tool: &'static str| {
        let approvals = &approvals;
        async move {
            let change = approvals.file_change(tool, "a", || "change a".into());
            in_call(scope(tool, false), change).await
        }
    };
    assert!(asked("rm").await.is_ok(), "the hook allowed it, headless");
    let denied = asked("mkdir").await.unwrap_err().into_output();
    assert!(
        denied.content.contains("hook_denied") && denied.content.contains("not here"),
        "{}",
        denied.content
    );
    let headless = asked("rmdir").await.unwrap_err().into_output();
    assert!(
        headless.content.contains("headless"),
        "{}",
        headless.content
    );
}

#[tokio::test]
async fn a_hooks_ask_is_denied_headless_and_asked_in_the_terminal() {
    let refused = untrusted(None)
        .hook_ask("read_file", r#"{"path":"a"}"#, Some("secrets?".into()))
        .await
        .unwrap_err()
        .into_output();
    assert!(
        refused.content.contains("PreToolUse hook asked"),
        "{}",
        refused.content
    );

    let denier = Arc::new(Denier::default());
    let approvals = untrusted(Some(denier.clone()));
    assert!(
        approvals
            .hook_ask("read_file", "{}", Some("secrets?".into()))
            .await
            .is_err()
    );
    let asked = denier.0.lock().unwrap().clone();
    assert_eq!(
        asked,
        [ApprovalRequest::HookAsk {
            tool: "read_file".into(),
            arguments: "{}".into(),
            reason: Some("secrets?".into()),
        }]
    );
}
