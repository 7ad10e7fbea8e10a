//! ACP session modes: Fido's safety presets as an editor offers them (the
//! sandbox mode and the approval policy of `fido exec`'s flags and the
//! config, README "Use Fido in your editor"). A session starts in its
//! configuration's settings: the preset they match, or one more mode,
//! "As configured", when they match none.

use agent_client_protocol::v1::schema::{
    CurrentModeUpdate, SessionMode, SessionModeState, SessionUpdate,
};

use crate::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};

/// One mode a session offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    pub id: &'static str,
    name: String,
    description: String,
    pub sandbox_mode: SandboxMode,
    pub approval_policy: ApprovalPolicy,
}

/// The presets: id, name, description, sandbox mode, approval policy.
const PRESETS: &[(&str, &str, &str, SandboxMode, ApprovalPolicy)] = &[
    (
        "read-only",
        "Read only",
        "Reads and runs commands that change nothing; every file change asks you first (sandbox read-only).",
        SandboxMode::ReadOnly,
        ApprovalPolicy::OnRequest,
    ),
    (
        "auto",
        "Auto",
        "Edits files and runs commands inside the workspace; a command that needs more asks you first (sandbox workspace-write).",
        SandboxMode::WorkspaceWrite,
        ApprovalPolicy::OnRequest,
    ),
    (
        "full-access",
        "Full access",
        "Edits files and runs commands with all your rights, never asking (no sandbox). Only in a trusted folder.",
        SandboxMode::DangerFullAccess,
        ApprovalPolicy::Never,
    ),
];

/// The id of the mode for settings no preset matches.
const CONFIGURED: &str = "configured";

/// The modes of a session, and the one it is in.
#[derive(Debug, Clone)]
pub struct Modes {
    available: Vec<Mode>,
    current: &'static str,
}

impl Modes {
    /// The modes of a session that started with `started`.
    pub fn new(started: &SafetySettings) -> Modes {
        let mut available: Vec<Mode> = PRESETS
            .iter()
            .map(
                |(id, name, description, sandbox_mode, approval_policy)| Mode {
                    id,
                    name: (*name).to_string(),
                    description: (*description).to_string(),
                    sandbox_mode: *sandbox_mode,
                    approval_policy: *approval_policy,
                },
            )
            .collect();
        let matching = available.iter().find(|mode| mode.is(started)).map(|m| m.id);
        let current = matching.unwrap_or_else(|| {
            available.push(Mode {
                id: CONFIGURED,
                name: "As configured".into(),
                description: format!(
                    "Your configuration's settings: sandbox {}, approvals {}.",
                    started.sandbox_mode, started.approval_policy
                ),
                sandbox_mode: started.sandbox_mode,
                approval_policy: started.approval_policy,
            });
            CONFIGURED
        });
        Modes { available, current }
    }

    /// The mode `id` names, if the session offers it.
    pub fn find(&self, id: &str) -> Option<&Mode> {
        self.available.iter().find(|mode| mode.id == id)
    }

    /// The session is in `id` now.
    pub fn set_current(&mut self, id: &'static str) {
        self.current = id;
    }

    /// What `session/new` and `session/load` answer with.
    pub fn state(&self) -> SessionModeState {
        let available = self
            .available
            .iter()
            .map(|mode| {
                SessionMode::new(mode.id, mode.name.clone()).description(mode.description.clone())
            })
            .collect();
        SessionModeState::new(self.current, available)
    }
}

impl Mode {
    fn is(&self, settings: &SafetySettings) -> bool {
        self.sandbox_mode == settings.sandbox_mode
            && self.approval_policy == settings.approval_policy
    }

    /// The update that tells the client the session is in this mode.
    pub fn update(&self) -> SessionUpdate {
        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(self.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::NetworkAccess;

    fn settings(sandbox_mode: SandboxMode, approval_policy: ApprovalPolicy) -> SafetySettings {
        SafetySettings {
            sandbox_mode,
            approval_policy,
            network: NetworkAccess::Off,
        }
    }

    #[test]
    fn a_session_starts_in_the_preset_its_settings_match() {
        let modes = Modes::new(&settings(
            SandboxMode::WorkspaceWrite,
            ApprovalPolicy::OnRequest,
        ));
        let state = modes.state();
        assert_eq!(&*state.current_mode_id.0, "auto");
        let ids: Vec<_> = state.available_modes.iter().map(|m| &*m.id.0).collect();
        assert_eq!(ids, ["read-only", "auto", "full-access"]);
        let full = modes.find("full-access").unwrap();
        assert_eq!(full.sandbox_mode, SandboxMode::DangerFullAccess);
        assert_eq!(full.approval_policy, ApprovalPolicy::Never);
    }

    #[test]
    fn settings_no_preset_matches_are_one_more_mode_to_come_back_to() {
        let started = settings(SandboxMode::WorkspaceWrite, ApprovalPolicy::Untrusted);
        let mut modes = Modes::new(&started);
        assert_eq!(&*modes.state().current_mode_id.0, "configured");
        let configured = modes.find("configured").unwrap().clone();
        assert!(configured.is(&started));
        assert!(configured.description.contains("untrusted"));
        modes.set_current("read-only");
        assert_eq!(&*modes.state().current_mode_id.0, "read-only");
        assert!(modes.find("configured").is_some());
        assert!(modes.find("plan").is_none());
    }
}
