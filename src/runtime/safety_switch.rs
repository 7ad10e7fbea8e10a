//! Switching a running session's sandbox mode and approval policy (an
//! editor's session mode, `Op::SwitchSafety`): the commands' sandbox is
//! rebuilt for the new mode and put in for the next command, and the
//! approvals (the tools' and the browser's) judge the next call by the new
//! settings. Nothing is written to a file: a resumed session starts with
//! its configuration's settings again.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use super::tool_env::ToolEnvError;
use crate::config::Config;
use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};
use crate::sandbox::child::error_chain;
use crate::sandbox::{CommandSandbox, SandboxError};
use crate::tools::ToolEnv;

/// Why a switch was refused; the session's settings stay as they were.
#[derive(Debug, thiserror::Error)]
pub enum SwitchRefused {
    /// Full access in a folder that is not trusted.
    #[error(
        "full access is refused: {} is not trusted, and its files could steer commands that run with all your rights. Review it, then run `fido trust` there",
        .workspace.display()
    )]
    Untrusted { workspace: PathBuf },
    /// The kernel cannot give the commands the sandbox of `mode`.
    #[error("sandbox_mode {mode} cannot be had here: {}", error_chain(.source))]
    Sandbox {
        mode: SandboxMode,
        #[source]
        source: SandboxError,
    },
    /// `network = "allowlist"` in a sandboxed `mode`, but the session
    /// started in full access, without its proxy.
    #[error(
        "network = \"allowlist\": this session started without its proxy (in danger-full-access), so {mode} cannot keep commands to it; start a new session in this mode"
    )]
    NoProxy { mode: SandboxMode },
    /// The commands cannot be kept to the proxy.
    #[error(transparent)]
    Proxy(ToolEnvError),
}

/// What a session needs to switch its settings.
pub struct SafetySwitch {
    config: Config,
    /// The settings the session started with: always allowed back.
    started: SafetySettings,
    tool_env: Arc<ToolEnv>,
    /// One switch at a time, so the sandbox and the approvals never come
    /// from two different switches.
    switching: Mutex<()>,
}

impl SafetySwitch {
    pub fn new(config: &Config, tool_env: Arc<ToolEnv>) -> SafetySwitch {
        SafetySwitch {
            config: config.clone(),
            started: tool_env.approvals.settings(),
            tool_env,
            switching: Mutex::new(()),
        }
    }

    /// Puts `mode` and `policy` in force, or says why not. Blocking: the
    /// sandbox is built here (and the one it replaces may be removed).
    pub fn switch(
        &self,
        mode: SandboxMode,
        policy: ApprovalPolicy,
    ) -> Result<SafetySettings, SwitchRefused> {
        let _one_at_a_time = self
            .switching
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let wanted = SafetySettings {
            sandbox_mode: mode,
            approval_policy: policy,
            network: self.config.sandbox.network,
        };
        if let Some(why) = self.forbidden(&wanted) {
            return Err(why);
        }
        let sandbox = self.sandbox_for(mode)?;
        // The sandbox first: a switch to a stricter mode must not leave a
        // moment where the new approvals let a command run in the old one.
        drop(self.tool_env.sandbox.replace(sandbox));
        self.tool_env.approvals.settings_cell().set(wanted.clone());
        tracing::info!(%mode, %policy, "the session's sandbox mode and approval policy switched");
        Ok(wanted)
    }

    /// Why the workspace's trust forbids `wanted`: full access, where the
    /// folder is not trusted, unless the session started with it (the
    /// person's own configuration chose it then).
    fn forbidden(&self, wanted: &SafetySettings) -> Option<SwitchRefused> {
        let full = wanted.sandbox_mode == SandboxMode::DangerFullAccess;
        if !full
            || self.config.workspace_trusted
            || self.started.sandbox_mode == wanted.sandbox_mode
        {
            return None;
        }
        Some(SwitchRefused::Untrusted {
            workspace: self.config.workspace.clone(),
        })
    }

    /// The commands' sandbox for `mode`, as the session's would have been
    /// had it started in it (routed through its allowlist proxy, if any).
    fn sandbox_for(&self, mode: SandboxMode) -> Result<CommandSandbox, SwitchRefused> {
        let mut policy = super::policy::command_policy(&self.config);
        policy.mode = mode;
        let sandbox = CommandSandbox::prepare(&policy)
            .map_err(|source| SwitchRefused::Sandbox { mode, source })?;
        if !super::policy::routed_through_proxy(self.config.sandbox.network, mode) {
            return Ok(sandbox);
        }
        let Some(proxy) = &self.tool_env.proxy else {
            return Err(SwitchRefused::NoProxy { mode });
        };
        sandbox
            .with_proxy(proxy.route())
            .map_err(|err| SwitchRefused::Proxy(ToolEnvError::ProxySandbox(err)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Overrides;

    /// A session in an untrusted `dir`, started in `mode`, whose commands
    /// run unsandboxed where the test must not depend on Landlock.
    fn switch_in(dir: &std::path::Path, mode: &str) -> SafetySwitch {
        let env = vec![
            ("HOME".to_string(), dir.join("home").display().to_string()),
            ("FIDO_SANDBOX_MODE".to_string(), mode.to_string()),
        ];
        let overrides = Overrides {
            workspace: Some(dir.to_path_buf()),
            values: vec![],
        };
        let config = Config::load_from(&overrides, &env).unwrap();
        let tool_env = super::super::tool_env(&config, ApprovalPolicy::OnRequest, None).unwrap();
        SafetySwitch::new(&config, Arc::new(tool_env))
    }

    #[test]
    fn full_access_in_an_untrusted_folder_is_refused_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let switch = switch_in(dir.path(), "read-only");
        let before = switch.tool_env.sandbox.current();
        let refused = switch
            .switch(SandboxMode::DangerFullAccess, ApprovalPolicy::Never)
            .unwrap_err();
        assert!(refused.to_string().contains("not trusted"), "{refused}");
        assert!(Arc::ptr_eq(&before, &switch.tool_env.sandbox.current()));
        assert_eq!(
            switch.tool_env.approvals.settings().sandbox_mode,
            SandboxMode::ReadOnly
        );
    }

    #[test]
    fn the_mode_a_session_started_in_is_always_allowed_back() {
        let dir = tempfile::tempdir().unwrap();
        let switch = switch_in(dir.path(), "danger-full-access");
        let settings = switch
            .switch(SandboxMode::DangerFullAccess, ApprovalPolicy::Untrusted)
            .unwrap();
        assert_eq!(settings.approval_policy, ApprovalPolicy::Untrusted);
        assert_eq!(
            switch.tool_env.approvals.settings().approval_policy,
            ApprovalPolicy::Untrusted
        );
        assert_eq!(
            switch.tool_env.sandbox.current().mode(),
            SandboxMode::DangerFullAccess
        );
    }
}
