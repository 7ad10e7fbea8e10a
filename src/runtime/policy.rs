//! The sandbox a configuration names, built here rather than in `config`,
//! which stays a description of settings (as for the provider, see
//! `runtime::provider`).

use std::path::PathBuf;

use crate::config::{Config, NetworkAccess};
use crate::protocol::SandboxMode;
use crate::sandbox::CommandPolicy;

/// The paths no sandboxed process may read: the credential folders in
/// `$HOME`, Fido's config directory and the user config file.
pub fn credential_paths(config: &Config) -> Vec<PathBuf> {
    let fido: Vec<PathBuf> = config
        .config_dir
        .iter()
        .chain(config.user_config_file.iter())
        .cloned()
        .collect();
    crate::sandbox::credential_paths(config.home.as_deref(), &fido)
}

/// Whether the main agent's commands in `mode` go through the session's
/// allowlist proxy: under `network = "allowlist"` in a sandboxed mode only
/// (outside the sandbox, commands reach the network directly).
pub fn routed_through_proxy(network: NetworkAccess, mode: SandboxMode) -> bool {
    match (network, mode) {
        (NetworkAccess::Allowlist, SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite) => true,
        (NetworkAccess::Off | NetworkAccess::On, _)
        | (NetworkAccess::Allowlist, SandboxMode::DangerFullAccess) => false,
    }
}

/// The sandbox of the main agent's commands, as configured.
pub fn command_policy(config: &Config) -> CommandPolicy {
    CommandPolicy {
        mode: config.sandbox.mode,
        // Under an allowlist the prepared sandbox gives the commands no
        // network of their own: the proxy is their only way out
        // (`runtime::tool_env`).
        network: config.sandbox.network,
        workspace: config.workspace.clone(),
        writable_roots: config.sandbox.writable_roots.clone(),
        deny: credential_paths(config),
        limits: config.sandbox.limits,
    }
}
