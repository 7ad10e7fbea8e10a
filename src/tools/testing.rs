//! Shared helpers for the tools' unit tests (and the UI's and agent's that
//! drive a tool): a workspace environment and a way to drive a tool through
//! [`Tool::invoke`](super::Tool::invoke).

use std::path::Path;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::commit::CommitPoint;

use crate::store::undo::UndoLog;
use crate::tools::{Call, Invocation, InvocationContext, Tool, ToolEnv, ToolLimits, ToolOutput};
use crate::workspace::{DEFAULT_PLAN_FILE, Workspace};

/// The file lines a call's facts name, as `(path, line)`; none without
/// facts.
pub(crate) fn lines_shown(out: &ToolOutput) -> Vec<(String, u64)> {
    let lines = out
        .facts
        .as_deref()
        .map_or(&[][..], |facts| &facts.lines[..]);
    lines
        .iter()
        .map(|shown| (shown.path.clone(), shown.line))
        .collect()
}

pub(crate) fn env(root: &Path) -> ToolEnv {
    let workspace = Workspace::new(root).unwrap();
    let undo = UndoLog::new(&workspace.root);
    let plan = crate::plan::PlanStore::new(&workspace.root, workspace.root.join(DEFAULT_PLAN_FILE));
    ToolEnv {
        workspace,
        undo,
        plan,
        todos: crate::plan::todo::TodoStore::in_workspace(root),
        delegator: None,
        limits: ToolLimits::default(),
        user: None,
        sandbox: crate::sandbox::SandboxSlot::new(crate::sandbox::CommandSandbox::unconfined()),
        env_policy: crate::process::EnvPolicy::default(),
        approvals: crate::tools::approval::Approvals::new(
            crate::protocol::SafetySettings {
                sandbox_mode: crate::protocol::SandboxMode::DangerFullAccess,
                approval_policy: crate::protocol::ApprovalPolicy::Never,
                network: crate::protocol::NetworkAccess::On,
            },
            None,
        ),
        hooks: std::sync::Arc::new(crate::hooks::Hooks::none()),
        web: None,
        proxy: None,
        editor: None,
    }
}

pub(crate) async fn call(tool: &dyn Tool, env: &ToolEnv, args: Value) -> ToolOutput {
    call_with(tool, env, args, &CancellationToken::new()).await
}

pub(crate) async fn call_with(
    tool: &dyn Tool,
    env: &ToolEnv,
    args: Value,
    cancel: &CancellationToken,
) -> ToolOutput {
    call_committing(tool, env, args, (cancel, &CommitPoint::default())).await
}

/// A call whose commit point is `commit_point` (a test may cancel it first).
pub(crate) async fn call_committing(
    tool: &dyn Tool,
    env: &ToolEnv,
    args: Value,
    (cancel, commit_point): (&CancellationToken, &CommitPoint),
) -> ToolOutput {
    let ctx = InvocationContext::main();
    tool.invoke(Invocation {
        args,
        call: Call {
            call_id: "test-call",
            env,
            ctx: &ctx,
            cancel,
            commit_point,
            conversation: &[],
        },
    })
    .await
}
