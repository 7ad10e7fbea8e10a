//! The builders of the configuration's sections (HTTP policy, tool
//! limits, agent, delegation, and the safety keys: the commands' sandbox,
//! approvals, network rules): each reads its keys from the layers and
//! fills in the defaults of the settings type its consumer owns.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ConfigError;
use super::files::resolve_relative;
use super::layer::{AtLeast, Layers, PathList, setting};
use crate::agent::{AgentSettings, CompactionSettings, CompactionStrategy, ModelLimits};
use crate::net::NetRules;
use crate::process::EnvPolicy;
use crate::provider::HttpPolicy;
use crate::sandbox::SandboxSettings;
use crate::sandbox::limits::CommandLimits;
use crate::subagent::DelegationLimits;
use crate::tools::ToolLimits;
use crate::tools::approval::ApprovalSettings;

pub(super) fn http_policy(layers: &Layers) -> Result<HttpPolicy, ConfigError> {
    let ms = Duration::from_millis;
    Ok(HttpPolicy {
        request_timeout: setting!(layers, request_timeout_ms)?.map_or(ms(600_000), |m| m.0),
        idle_timeout: setting!(layers, idle_timeout_ms)?.map_or(ms(90_000), |m| m.0),
        max_retries: setting!(layers, max_retries)?.map_or(4, |n| n.0 as u32),
        retry_base: setting!(layers, retry_base_ms)?.map_or(ms(500), |m| m.0),
        retry_max: setting!(layers, retry_max_ms)?.map_or(ms(30_000), |m| m.0),
    })
}

pub(super) fn tool_limits(layers: &Layers) -> Result<ToolLimits, ConfigError> {
    let defaults = ToolLimits::default();
    Ok(ToolLimits {
        bash_default_timeout: setting!(layers, bash_timeout_ms)?
            .map_or(defaults.bash_default_timeout, |m| m.0),
        bash_max_timeout: setting!(layers, bash_max_timeout_ms)?
            .map_or(defaults.bash_max_timeout, |m| m.0),
        ..defaults
    })
}

pub(super) fn agent_settings(layers: &Layers) -> Result<AgentSettings, ConfigError> {
    let strategy = setting!(layers, compact_strategy)?.copied();
    let max_steps = setting!(layers, max_steps)?.map_or(100, |n| n.0 as u32);
    let threshold = setting!(layers, compact_threshold_tokens)?;
    let keep = setting!(layers, compact_keep_tokens)?;
    let compaction = CompactionSettings {
        threshold_tokens: threshold.map_or(CompactionSettings::DEFAULT_THRESHOLD_TOKENS, |n| {
            n.0 as usize
        }),
        keep_recent_tokens: keep.map_or(CompactionSettings::DEFAULT_KEEP_RECENT_TOKENS, |n| {
            n.0 as usize
        }),
        strategy: strategy.unwrap_or(CompactionStrategy::Summarize),
    };
    Ok(AgentSettings {
        max_steps,
        compaction,
        limits: model_limits(layers, threshold.is_some())?,
    })
}

/// The keys about the model's limits and habits (issue 9), in one place.
fn model_limits(layers: &Layers, threshold_configured: bool) -> Result<ModelLimits, ConfigError> {
    Ok(ModelLimits {
        context_window: setting!(layers, context_window)?.map(|n| n.0 as u32),
        tool_call_fallback: setting!(layers, tool_call_fallback)?.is_some_and(|on| on.0),
        max_output_tokens: setting!(layers, max_output_tokens)?
            .map_or(ModelLimits::DEFAULT_MAX_OUTPUT_TOKENS, |n| n.0 as u32),
        loop_repeat_limit: setting!(layers, loop_repeat_limit)?
            .map_or(ModelLimits::DEFAULT_LOOP_REPEAT_LIMIT, |n| n.0 as u32),
        threshold_configured,
    })
}

pub(super) fn delegation_limits(layers: &Layers) -> Result<DelegationLimits, ConfigError> {
    let defaults = DelegationLimits::default();
    // 0 means no budget.
    let budget = |tokens: Option<&AtLeast<0>>| tokens.map(|n| n.0).filter(|n| *n > 0);
    Ok(DelegationLimits {
        sandbox: setting!(layers, sandbox)?
            .copied()
            .unwrap_or(defaults.sandbox),
        concurrency: setting!(layers, delegate_concurrency)?
            .map_or(defaults.concurrency, |n| n.0 as u32),
        default_timeout: setting!(layers, delegate_timeout_ms)?
            .map_or(defaults.default_timeout, |m| m.0),
        max_timeout: setting!(layers, delegate_max_timeout_ms)?
            .map_or(defaults.max_timeout, |m| m.0),
        grace: setting!(layers, delegate_grace_ms)?.map_or(defaults.grace, |m| m.0),
        max_steps: setting!(layers, delegate_max_steps)?.map_or(defaults.max_steps, |n| n.0 as u32),
        max_per_turn: setting!(layers, delegate_max_per_turn)?
            .map_or(defaults.max_per_turn, |n| n.0 as u32),
        budget_tokens: budget(setting!(layers, delegate_budget_tokens)?),
        session_budget_tokens: budget(setting!(layers, delegate_session_budget_tokens)?),
        diff_bytes: setting!(layers, delegate_diff_bytes)?
            .map_or(defaults.diff_bytes, |n| n.0 as usize),
    })
}

/// The main agent's safety keys: its commands' sandbox, the approvals and
/// the network rules. One builder reads them all, in this order, so that
/// of several bad values the first one here is the one reported.
pub(super) fn safety_sections(
    layers: &Layers,
    workspace: &Path,
) -> Result<(SandboxSettings, ApprovalSettings, NetRules), ConfigError> {
    let sandbox_mode = setting!(layers, sandbox_mode)?.copied();
    let approval_policy = setting!(layers, approval_policy)?.copied();
    let network = setting!(layers, network)?.copied();
    let writable_roots = writable_roots(layers, workspace)?;
    let approvals = ApprovalSettings {
        approval_policy,
        delegate_write: setting!(layers, delegate_write)?.copied(),
        delegate_merge: setting!(layers, delegate_merge)?.copied(),
    };
    let network_rules = NetRules {
        allow: setting!(layers, network_allow)?.map_or_else(Vec::new, |l| l.0.clone()),
        deny: setting!(layers, network_deny)?.map_or_else(Vec::new, |l| l.0.clone()),
    };
    let defaults = SandboxSettings::default();
    let sandbox = SandboxSettings {
        mode: sandbox_mode.unwrap_or(defaults.mode),
        network: network.unwrap_or(defaults.network),
        writable_roots,
        limits: command_limits(layers)?,
    };
    Ok((sandbox, approvals, network_rules))
}

/// `writable_roots`, each resolved against the workspace and canonical.
fn writable_roots(layers: &Layers, workspace: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let mut roots = Vec::new();
    if let Some((PathList(parts), source_name)) = setting!(layers, writable_roots, with source)? {
        for part in parts {
            let root = resolve_relative(workspace, part.trim());
            let canonical =
                std::fs::canonicalize(&root).map_err(|source| ConfigError::WritableRoot {
                    source_name: source_name.clone(),
                    value: part.clone(),
                    source,
                })?;
            roots.push(canonical);
        }
    }
    Ok(roots)
}

/// `command_max_processes` and `command_tmpdir_mib`.
fn command_limits(layers: &Layers) -> Result<CommandLimits, ConfigError> {
    let defaults = CommandLimits::default();
    Ok(CommandLimits {
        max_processes: setting!(layers, command_max_processes)?
            .map_or(defaults.max_processes, |n| n.0 as u32),
        tmpdir_mib: setting!(layers, command_tmpdir_mib)?.map_or(defaults.tmpdir_mib, |n| n.0),
    })
}

/// The environment policy: the names of `env_passthrough`, if any.
pub(super) fn env_policy(layers: &Layers) -> Result<EnvPolicy, ConfigError> {
    let names = setting!(layers, env_passthrough)?;
    Ok(EnvPolicy::with_passthrough(
        names.map(|list| list.0.clone()).unwrap_or_default(),
    ))
}
