//! Safety settings of a session and the approval exchange between the
//! invocation guard and the person at the keyboard.
//!
//! [`SandboxMode`] and [`ApprovalPolicy`] are the config values
//! `sandbox_mode` and `approval_policy` (Codex's names). The system prompt
//! states them as the session started, so the prefix stays stable; an
//! editor's mode switch (`Op::SwitchSafety`) changes them mid-session, and
//! the model is told so in a note before its next prompt.
//!
//! An [`ApprovalRequest`] is sent by the guard when the policy says to ask;
//! the UI renders it and answers with exactly one [`ApprovalDecision`].
//! Every started tool call still gets exactly one tool result, whatever the
//! answer.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What the main agent's commands may do (`sandbox_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Commands may read, and write nowhere (but `/dev/null`); the file
    /// tools ask before they change anything.
    ReadOnly,
    /// Commands may write in the workspace, the session's `TMPDIR` and the
    /// trusted `writable_roots`; no network unless `network = true`.
    WorkspaceWrite,
    /// No sandbox: commands run with the user's full rights.
    DangerFullAccess,
}

impl SandboxMode {
    pub const DEFAULT: SandboxMode = SandboxMode::WorkspaceWrite;
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Parses the config spelling (`_` is accepted for `-`).
    pub fn parse(value: &str) -> Option<SandboxMode> {
        let value = value.trim().replace('_', "-");
        SandboxMode::ALL.into_iter().find(|m| m.as_str() == value)
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When the person is asked before a command or a file change
/// (`approval_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalPolicy {
    /// Ask before every command and every file change.
    Untrusted,
    /// Run sandboxed without asking; ask when the model requests an
    /// escalated run (the terminal UI's default).
    OnRequest,
    /// Never ask; escalation requests are denied (`fido exec`'s default).
    Never,
}

impl ApprovalPolicy {
    pub const ALL: [ApprovalPolicy; 3] = [
        ApprovalPolicy::Untrusted,
        ApprovalPolicy::OnRequest,
        ApprovalPolicy::Never,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Untrusted => "untrusted",
            ApprovalPolicy::OnRequest => "on-request",
            ApprovalPolicy::Never => "never",
        }
    }

    /// Parses the config spelling (`_` is accepted for `-`).
    pub fn parse(value: &str) -> Option<ApprovalPolicy> {
        let value = value.trim().replace('_', "-");
        ApprovalPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == value)
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The safety settings of one session, as the guard and the prompt see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SafetySettings {
    pub sandbox_mode: SandboxMode,
    pub approval_policy: ApprovalPolicy,
    /// What commands may reach (`network`).
    pub network: NetworkAccess,
}

/// `network`: what the main agent's sandboxed commands may reach.
/// On the wire as in the config: `false`, `true` or `"allowlist"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkAccess {
    /// `false` (the default): no network at all.
    #[default]
    Off,
    /// `true`: the network, unfiltered.
    On,
    /// `"allowlist"`: only what `network_allow` lists (or the person
    /// approves), through Fido's proxy (`net::proxy`).
    Allowlist,
}

impl NetworkAccess {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkAccess::Off => "false",
            NetworkAccess::On => "true",
            NetworkAccess::Allowlist => "allowlist",
        }
    }

    /// Whether commands reach the network directly (`true`).
    pub fn is_direct(self) -> bool {
        match self {
            NetworkAccess::On => true,
            NetworkAccess::Off | NetworkAccess::Allowlist => false,
        }
    }
}

impl fmt::Display for NetworkAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for NetworkAccess {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            NetworkAccess::Off => serializer.serialize_bool(false),
            NetworkAccess::On => serializer.serialize_bool(true),
            NetworkAccess::Allowlist => serializer.serialize_str("allowlist"),
        }
    }
}

impl<'de> Deserialize<'de> for NetworkAccess {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Flag(bool),
            Word(String),
        }
        match Wire::deserialize(deserializer)? {
            Wire::Flag(false) => Ok(NetworkAccess::Off),
            Wire::Flag(true) => Ok(NetworkAccess::On),
            Wire::Word(word) if word == "allowlist" => Ok(NetworkAccess::Allowlist),
            Wire::Word(word) => Err(serde::de::Error::custom(format!(
                "network: expected true, false or \"allowlist\", not {word:?}"
            ))),
        }
    }
}

/// What the guard asks the person to approve. Sent by the invocation guard
/// to the UI; answered by one [`ApprovalDecision`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ApprovalRequest {
    /// A `bash_exec` command, sandboxed or (when `escalated`) not.
    Command {
        command: String,
        /// The working directory, as the workspace shows it.
        cwd: String,
        /// The model's reason for an escalated run.
        justification: Option<String>,
        escalated: bool,
    },
    /// A file change by patch, mkdir, rm or rmdir.
    FileChange {
        tool: String,
        /// The path, as the workspace shows it.
        path: String,
        /// A unified diff for a patch, a one-line description otherwise.
        diff: String,
    },
    /// A tool of an MCP server that is not `read_only`.
    McpCall {
        tool: String,
        server: String,
        /// The arguments as JSON, cut short.
        arguments: String,
    },
    /// A `browse_url` fetch from a host in neither `network_allow` nor
    /// `network_deny`; "for the session" covers the host and port.
    Browse {
        /// `HOST:PORT`.
        host: String,
        /// The URL of the hop that reaches it.
        url: String,
    },
    /// A `delegate` call with `mode: "write"` (`delegate_write = "ask"`).
    WriteDelegation {
        agent_id: String,
        task: String,
        /// The paths it may change.
        claim: Vec<String>,
        /// The commit its worktree starts from.
        base: String,
    },
    /// A write subagent's change set to apply or discard
    /// (`delegate_merge = "ask"`): approving applies it.
    ChangeSet {
        id: String,
        task: String,
        /// "3 files (+12 -4)".
        summary: String,
        /// One line per file: status, path, counts.
        files: Vec<String>,
        /// Files changed outside the claim (never applied).
        outside_claim: Vec<String>,
        /// The capped unified diff.
        diff: String,
        /// The control files it touches (listed first in `files`): never
        /// applied unasked, not even after "apply later ones".
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        control_files: Vec<String>,
    },
    /// A tool call a user hook (PreToolUse) wants the person to approve.
    HookAsk {
        tool: String,
        /// The arguments as JSON, cut short.
        arguments: String,
        /// The hook's reason, if it gave one.
        reason: Option<String>,
    },
}

/// The person's answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// `y`: run this once.
    Approved,
    /// `a`: run this, and this exact command again without asking for the
    /// rest of the session.
    ApprovedForSession,
    /// `n` or Esc, with the reason the person typed, if any.
    Denied { reason: Option<String> },
}

#[cfg(test)]
mod tests {
    use super::NetworkAccess;

    #[test]
    fn network_access_keeps_the_boolean_wire_form_and_adds_allowlist() {
        for (access, wire) in [
            (NetworkAccess::Off, "false"),
            (NetworkAccess::On, "true"),
            (NetworkAccess::Allowlist, "\"allowlist\""),
        ] {
            assert_eq!(serde_json::to_string(&access).unwrap(), wire);
            assert_eq!(serde_json::from_str::<NetworkAccess>(wire).unwrap(), access);
        }
        let err = serde_json::from_str::<NetworkAccess>("\"some\"").unwrap_err();
        assert!(err.to_string().contains("expected true, false"), "{err}");
    }
}
