//! The tools' environment in the configured workspace.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::Config;
use crate::net::proxy::{Proxy, ProxyLimits};
use crate::plan::PlanStore;
use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};
use crate::sandbox::child::error_chain;
use crate::sandbox::{CommandSandbox, SandboxError, SandboxSlot};
use crate::store::undo::UndoLog;
use crate::tools::ToolEnv;
use crate::tools::approval::{Approvals, Approver, SettingsCell};
use crate::tools::web::Browser;
use crate::workspace::Workspace;

/// Why the tools of a session cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ToolEnvError {
    /// The workspace folder cannot be opened.
    #[error("workspace {}: {source}", path.display())]
    Workspace {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The command sandbox of the configured mode cannot be had here.
    #[error(
        "sandbox_mode {mode}: {}; set sandbox_mode = \"danger-full-access\" to run commands without a sandbox",
        error_chain(.source)
    )]
    Sandbox {
        mode: SandboxMode,
        #[source]
        source: SandboxError,
    },
    /// `network = "allowlist"`: the proxy cannot listen.
    #[error("network = \"allowlist\": cannot start the proxy: {0}")]
    Proxy(#[source] io::Error),
    /// `network = "allowlist"`: commands cannot be kept to the proxy.
    #[error("network = \"allowlist\": {}; set network = false or true", error_chain(.0))]
    ProxySandbox(#[source] SandboxError),
}

/// The tool environment of a session in the configured workspace, with
/// the approval policy `approval` and the person `approver` (if any).
pub fn tool_env(
    config: &Config,
    approval: ApprovalPolicy,
    approver: Option<Arc<dyn Approver>>,
) -> Result<ToolEnv, ToolEnvError> {
    let workspace =
        Workspace::new(&config.workspace).map_err(|source| ToolEnvError::Workspace {
            path: config.workspace.clone(),
            source,
        })?;
    let sandbox =
        CommandSandbox::prepare(&super::policy::command_policy(config)).map_err(|source| {
            ToolEnvError::Sandbox {
                mode: config.sandbox.mode,
                source,
            }
        })?;
    let settings = SafetySettings {
        sandbox_mode: config.sandbox.mode,
        approval_policy: approval,
        network: config.sandbox.network,
    };
    // One cell for both, so a mode switch reaches the browser's gate too.
    let settings = SettingsCell::new(settings);
    let browser = Arc::new(Browser::new(
        config.network_rules.clone(),
        Approvals::sharing(settings.clone(), approver.clone()),
    ));
    let (sandbox, proxy) = route_through_proxy(config, sandbox, &browser)?;
    Ok(ToolEnv {
        undo: UndoLog::new(&workspace.root),
        plan: PlanStore::new(&config.workspace, config.plan_file.clone()),
        todos: crate::plan::todo::TodoStore::in_workspace(&config.workspace),
        workspace,
        limits: config.tools.clone(),
        user: None,
        delegator: None,
        sandbox: SandboxSlot::new(sandbox),
        env_policy: config.env_policy.clone(),
        approvals: Approvals::sharing(settings, approver),
        hooks: Arc::new(crate::hooks::Hooks::none()),
        web: Some(browser),
        proxy,
        editor: None,
    })
}

/// With `network = "allowlist"` in a sandboxed mode, the session's proxy
/// and the sandbox that routes commands through it. The proxy admits hosts
/// by the browser's gate, so a host the person allows for `browse_url` is
/// allowed for commands too, and the other way round. Without a sandboxed
/// mode there is nothing to route: commands reach the network directly.
fn route_through_proxy(
    config: &Config,
    sandbox: CommandSandbox,
    browser: &Arc<Browser>,
) -> Result<(CommandSandbox, Option<Arc<Proxy>>), ToolEnvError> {
    if !super::policy::routed_through_proxy(config.sandbox.network, config.sandbox.mode) {
        return Ok((sandbox, None));
    }
    let proxy =
        Proxy::start(browser.admission(), ProxyLimits::default()).map_err(ToolEnvError::Proxy)?;
    let sandbox = sandbox
        .with_proxy(proxy.route())
        .map_err(ToolEnvError::ProxySandbox)?;
    Ok((sandbox, Some(Arc::new(proxy))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{NetworkAccess, Overrides};

    fn env_with(pairs: &[(&str, &str)], workspace: &std::path::Path) -> ToolEnv {
        let mut env: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.push(("HOME".into(), workspace.join("home").display().to_string()));
        let overrides = Overrides {
            workspace: Some(workspace.to_path_buf()),
            values: vec![],
        };
        let config = Config::load_from(&overrides, &env).unwrap();
        tool_env(&config, ApprovalPolicy::Never, None).unwrap()
    }

    #[tokio::test]
    async fn only_an_allowlist_in_a_sandboxed_mode_starts_the_proxy() {
        let dir = tempfile::tempdir().unwrap();
        let allowlist = ("FIDO_NETWORK", "allowlist");
        for mode in ["workspace-write", "read-only"] {
            let env = env_with(&[allowlist, ("FIDO_SANDBOX_MODE", mode)], dir.path());
            let proxy = env.proxy.as_ref().expect("a proxy");
            assert_eq!(
                env.sandbox.current().proxy().map(|r| r.port),
                Some(proxy.port())
            );
            assert_eq!(
                env.sandbox.current().network(),
                NetworkAccess::Allowlist,
                "{mode}"
            );
        }
        // Without a sandbox there is nothing to route: the network is open.
        for (pairs, network) in [
            (
                vec![allowlist, ("FIDO_SANDBOX_MODE", "danger-full-access")],
                NetworkAccess::On,
            ),
            (vec![("FIDO_NETWORK", "true")], NetworkAccess::On),
            (vec![], NetworkAccess::Off),
        ] {
            let env = env_with(&pairs, dir.path());
            assert!(env.proxy.is_none(), "{pairs:?}");
            assert!(env.sandbox.current().proxy().is_none(), "{pairs:?}");
            assert_eq!(env.sandbox.current().network(), network, "{pairs:?}");
        }
    }
}
