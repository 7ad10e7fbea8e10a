//! Configuration: defaults, then the user config file, then the workspace's
//! `fido.toml`, then `FIDO_*` environment variables, then command-line flags;
//! each layer beats the one before.
//!
//! Keys are the same everywhere: `FIDO_MAX_STEPS` in the environment is
//! `max_steps` in a file (the upper-case form is accepted in files too).
//! Each layer is a typed `layer::ConfigLayer`; the value of a key is the
//! one of the last layer that sets it, and a bad one is one clear sentence
//! that names that layer. An untrusted workspace file may not set the
//! `Scope::Trusted` keys (`api_key`, `base_url`, …): a cloned repository
//! must not be able to send your key to a server of its choosing.
//!
//! Each section of [`Config`] is a type its consumer owns (the agent's
//! `AgentSettings`, the sandbox's `SandboxSettings`, the approvals'
//! `ApprovalSettings`, delegation's `DelegationLimits`, …); this module only
//! reads the keys into them.
//!
//! Files: `keys` (the key table and each key's scope), `layer` (one layer,
//! typed), `files` (where the files are, and reading them), `sections` (the
//! builders of those sections from the layers), `mcp`, `trust` and
//! `fingerprint` (what trust records of a workspace).

use std::path::PathBuf;

use crate::agent::AgentSettings;
use crate::hooks::HooksConfig;
use crate::net::NetRules;
use crate::process::EnvPolicy;
pub use crate::protocol::NetworkAccess;
use crate::protocol::ipc::PlanFlavour;
use crate::provider::{ApiKey, HttpPolicy, ProviderKind};
use crate::sandbox::SandboxSettings;
use crate::subagent::DelegationLimits;
use crate::tools::ToolLimits;
use crate::tools::approval::ApprovalSettings;
use crate::workspace::DEFAULT_PLAN_FILE;
use files::{Files, inside_workspace, resolve_relative, workspace_root};
use keys::{KEYS, Scope};
use layer::{Source, setting};
use sections::{
    agent_settings, delegation_limits, env_policy, http_policy, safety_sections, tool_limits,
};

mod files;
pub mod fingerprint;
mod keys;
mod layer;
pub mod mcp;
mod sections;
pub mod trust;
use crate::mcp::McpServerConfig;
pub use files::user_config_dir;
pub use fingerprint::Fingerprint;
pub use trust::{Trust, TrustError, TrustStore};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{source_name}: unknown key `{key}` (known keys: {known})")]
    UnknownKey {
        source_name: String,
        key: String,
        known: String,
    },
    #[error("{source_name}: `{key}` = {value:?} is not valid: expected {expected}")]
    Invalid {
        source_name: String,
        key: String,
        value: String,
        expected: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid TOML: {message}")]
    Parse { path: String, message: String },
    #[error(
        "{source_name}: plan_file {value:?} is outside the workspace {workspace}; the plan file must be inside it"
    )]
    PlanFileOutside {
        source_name: String,
        value: String,
        workspace: String,
    },
    #[error("{source_name}: writable root {value:?}: {source}")]
    WritableRoot {
        source_name: String,
        value: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{source_name}: `{key}` can be set only in your user config file ($FIDO_CONFIG, else ~/.config/fido/config.toml)"
    )]
    UserFileOnly { source_name: String, key: String },
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Values given on the command line; they beat every other layer.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub workspace: Option<PathBuf>,
    pub values: Vec<(String, String)>,
}

/// The resolved configuration of one session.
#[derive(Debug, Clone)]
pub struct Config {
    /// Canonical workspace root.
    pub workspace: PathBuf,
    pub provider: ProviderKind,
    pub base_url: String,
    pub api_key: Option<ApiKey>,
    pub model: String,
    pub script: Option<PathBuf>,
    pub plan_tool: PlanFlavour,
    /// Absolute path of the plan file (`PLAN_FILE`, default `.fido-plan.json`).
    pub plan_file: PathBuf,
    pub agent: AgentSettings,
    pub http: HttpPolicy,
    pub tools: ToolLimits,
    pub anthropic_max_tokens: u32,
    /// The `sandbox` and `delegate_*` keys.
    pub delegation: DelegationLimits,
    /// The sandbox of the main agent's commands.
    pub sandbox: SandboxSettings,
    /// When the person is asked, where the command leaves it to them.
    pub approvals: ApprovalSettings,
    /// `network_allow` and `network_deny`: the hosts `browse_url` (and,
    /// with `network = "allowlist"`, commands) may reach without asking,
    /// and those never reached.
    pub network_rules: NetRules,
    /// Model requests in flight at once, through the gateway.
    pub provider_concurrency: usize,
    /// Session journals older than this many days are pruned at start.
    pub session_retention_days: u32,
    /// The user's config directory (`$XDG_CONFIG_HOME/fido`, else
    /// `~/.config/fido`): the trust record, kept out of commands' reach.
    pub config_dir: Option<PathBuf>,
    /// The user config file, which may hold `api_key`.
    pub user_config_file: Option<PathBuf>,
    /// `$HOME`, where the credential folders (`~/.ssh`, …) are.
    pub home: Option<PathBuf>,
    /// The workspace folder is trusted (`fido trust`).
    pub workspace_trusted: bool,
    /// What the person must be told before the session starts (ignored
    /// keys of an untrusted workspace file), one sentence each.
    pub warnings: Vec<String>,
    /// The MCP servers to start, sorted by name (trusted layers only).
    pub mcp_servers: Vec<McpServerConfig>,
    /// The user's hooks (trusted layers only), in the order they run.
    pub hooks: HooksConfig,
    /// Which of Fido's variables commands, hooks and MCP servers get
    /// (`env_passthrough`, user config file only).
    pub env_policy: EnvPolicy,
}

impl Config {
    /// Loads the layers for the process environment.
    pub fn load(overrides: &Overrides) -> Result<Config, ConfigError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        Config::load_from(overrides, &env)
    }

    /// Loads the layers with an explicit environment (for tests).
    pub fn load_from(
        overrides: &Overrides,
        env: &[(String, String)],
    ) -> Result<Config, ConfigError> {
        let env_get = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let workspace = workspace_root(overrides.workspace.as_deref())?;
        let mut files = Files::read(&workspace, &env_get)?;
        let layers = &mut files.layers;
        layers.push(Source::Environment, layer::environment_layer(&env_get)?);
        layers.push(
            Source::CommandLine,
            layer::command_line_layer(&overrides.values)?,
        );
        Config::resolve(workspace, files, &env_get)
    }

    /// The settings the layers name, with the defaults for the rest.
    fn resolve(
        workspace: PathBuf,
        files: Files,
        env_get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let layers = &files.layers;
        let provider = setting!(layers, provider)?.copied();
        let provider = provider.unwrap_or(ProviderKind::OpenAi);
        let plan_tool = setting!(layers, plan_tool)?.copied();
        let base_url = match setting!(layers, base_url)? {
            Some(url) => url.trim_end_matches('/').to_string(),
            None => provider.default_base_url().to_string(),
        };
        let api_key = setting!(layers, api_key)?.cloned();
        let api_key = api_key.or_else(|| provider.key_variable().and_then(env_get));
        let model = setting!(layers, model)?.cloned();
        let script = setting!(layers, script)?.map(|path| resolve_relative(&workspace, path));
        let plan_file = match setting!(layers, plan_file, with source)? {
            None => workspace.join(DEFAULT_PLAN_FILE),
            Some((path, source_name)) => inside_workspace(&workspace, path, &source_name)?,
        };
        let (sandbox, approvals, network_rules) = safety_sections(layers, &workspace)?;
        let http = http_policy(layers)?;
        let tools = tool_limits(layers)?;
        let agent = agent_settings(layers)?;
        let anthropic_max_tokens = setting!(layers, anthropic_max_tokens)?;
        let delegation = delegation_limits(layers)?;
        let provider_concurrency = setting!(layers, provider_concurrency)?;
        let retention_days = setting!(layers, session_retention_days)?;
        let env_policy = env_policy(layers)?;
        let mut mcp_servers: Vec<McpServerConfig> = files.mcp_servers.into_values().collect();
        for server in &mut mcp_servers {
            server.env_policy = env_policy.clone();
        }
        Ok(Config {
            provider,
            model: model.unwrap_or_else(|| provider.default_model(&base_url).to_string()),
            base_url,
            api_key: api_key.map(ApiKey::new),
            script,
            plan_tool: plan_tool.unwrap_or(PlanFlavour::UpdatePlan),
            plan_file,
            agent,
            http,
            tools,
            anthropic_max_tokens: anthropic_max_tokens.map_or(8192, |n| n.0 as u32),
            delegation,
            sandbox,
            approvals,
            network_rules,
            provider_concurrency: provider_concurrency.map_or(4, |n| n.0 as usize),
            session_retention_days: retention_days
                .map_or(30, |n| u32::try_from(n.0).unwrap_or(u32::MAX)),
            config_dir: files.config_dir,
            user_config_file: files.user_config_file,
            home: env_get("HOME").map(PathBuf::from),
            workspace_trusted: files.workspace_trusted,
            warnings: files.warnings,
            mcp_servers,
            hooks: files.hooks,
            env_policy,
            workspace,
        })
    }
}

/// Whether a URL points at this machine (no key needed for a local server).
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .unwrap_or(url);
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = if let Some(stripped) = host.strip_prefix('[') {
        stripped.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests;
