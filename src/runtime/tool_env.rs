//! The tools' environment in the configured workspace.

use std::sync::Arc;

use crate::config::Config;
use crate::plan::PlanStore;
use crate::protocol::{ApprovalPolicy, SafetySettings};
use crate::sandbox::CommandSandbox;
use crate::store::undo::UndoLog;
use crate::tools::ToolEnv;
use crate::tools::approval::{Approvals, Approver};
use crate::tools::web::Browser;
use crate::workspace::Workspace;

/// The tool environment of a session in the configured workspace, with
/// the approval policy `approval` and the person `approver` (if any).
pub fn tool_env(
    config: &Config,
    approval: ApprovalPolicy,
    approver: Option<Arc<dyn Approver>>,
) -> Result<ToolEnv, String> {
    let workspace = Workspace::new(&config.workspace)
        .map_err(|err| format!("workspace {}: {err}", config.workspace.display()))?;
    let sandbox = CommandSandbox::prepare(&super::policy::command_policy(config)).map_err(|err| {
        format!(
            "sandbox_mode {}: {}; set sandbox_mode = \"danger-full-access\" to run commands without a sandbox",
            config.safety.sandbox_mode,
            crate::sandbox::child::error_chain(&err)
        )
    })?;
    let settings = SafetySettings {
        sandbox_mode: config.safety.sandbox_mode,
        approval_policy: approval,
        network: config.safety.network.is_direct(),
    };
    let browser = Browser::new(
        config.safety.network_rules.clone(),
        Approvals::new(settings.clone(), approver.clone()),
    );
    Ok(ToolEnv {
        undo: UndoLog::new(&workspace.root),
        plan: PlanStore::new(config.plan_file.clone()),
        workspace,
        limits: config.tools.clone(),
        user: None,
        delegator: None,
        sandbox: Arc::new(sandbox),
        approvals: Approvals::new(settings, approver),
        web: Some(Arc::new(browser)),
    })
}
