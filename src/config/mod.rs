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

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::agent::{AgentSettings, CompactionSettings, CompactionStrategy, ModelLimits};
use crate::protocol::ipc::PlanFlavour;
use crate::protocol::{ApprovalPolicy, SandboxMode};
use crate::provider::HttpPolicy;
use crate::sandbox::SandboxRequirement;
use crate::tools::ToolLimits;
use crate::workspace::DEFAULT_PLAN_FILE;
use layer::{AtLeast, Layers, PathList, Source, setting};

mod layer;
pub mod mcp;
pub mod trust;
pub use mcp::McpServerConfig;
pub use trust::{TrustError, TrustStore};

/// Whether an untrusted workspace `fido.toml` may set a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Cannot redirect credentials, weaken safety or name a path: read from
    /// every layer.
    Anywhere,
    /// Read from a workspace file only once the folder is trusted
    /// (`fido trust`); the user file, the environment and flags always.
    Trusted,
}

/// Every key Fido understands, with a one-line meaning (shown on errors)
/// and whether an untrusted workspace file may set it.
const KEYS: &[(&str, &str, Scope)] = &[
    ("provider", "openai | anthropic | script", Scope::Trusted),
    (
        "base_url",
        "provider URL (openai: the URL /chat/completions is appended to)",
        Scope::Trusted,
    ),
    ("api_key", "provider API key", Scope::Trusted),
    ("model", "model name", Scope::Anywhere),
    (
        "script",
        "JSON file of assistant turns for the script provider",
        Scope::Trusted,
    ),
    ("plan_tool", "update_plan | todo", Scope::Anywhere),
    (
        "plan_file",
        "plan state file, inside the workspace",
        Scope::Trusted,
    ),
    (
        "max_steps",
        "model requests allowed in one turn",
        Scope::Anywhere,
    ),
    (
        "request_timeout_ms",
        "longest model request",
        Scope::Anywhere,
    ),
    (
        "idle_timeout_ms",
        "longest silence inside a model stream",
        Scope::Anywhere,
    ),
    (
        "max_retries",
        "retries of a failed model request",
        Scope::Anywhere,
    ),
    ("retry_base_ms", "first retry delay", Scope::Anywhere),
    ("retry_max_ms", "longest retry delay", Scope::Anywhere),
    (
        "bash_timeout_ms",
        "default bash_exec timeout",
        Scope::Anywhere,
    ),
    (
        "bash_max_timeout_ms",
        "longest bash_exec timeout",
        Scope::Anywhere,
    ),
    (
        "compact_threshold_tokens",
        "estimated context size that triggers compaction",
        Scope::Anywhere,
    ),
    (
        "compact_keep_tokens",
        "estimated size of the newest turns kept by compaction",
        Scope::Anywhere,
    ),
    ("compact_strategy", "summarize | elide", Scope::Anywhere),
    (
        "anthropic_max_tokens",
        "max_tokens sent to Anthropic",
        Scope::Anywhere,
    ),
    (
        "sandbox",
        "required | best_effort: what a subagent's sandbox must enforce",
        Scope::Trusted,
    ),
    (
        "sandbox_mode",
        "read-only | workspace-write | danger-full-access: the main agent's commands",
        Scope::Trusted,
    ),
    (
        "approval_policy",
        "untrusted | on-request | never: when to ask before commands and edits",
        Scope::Trusted,
    ),
    (
        "network",
        "true | false: whether sandboxed commands may use the network",
        Scope::Trusted,
    ),
    (
        "writable_roots",
        "extra folders sandboxed commands may write (a list, or `:`-separated)",
        Scope::Trusted,
    ),
    (
        "delegate_timeout_ms",
        "default time limit of a subagent",
        Scope::Anywhere,
    ),
    (
        "delegate_max_timeout_ms",
        "longest time limit the model may ask for",
        Scope::Anywhere,
    ),
    (
        "delegate_grace_ms",
        "time a cancelled subagent has to send a partial result",
        Scope::Anywhere,
    ),
    (
        "delegate_max_steps",
        "model requests a subagent may make",
        Scope::Anywhere,
    ),
    (
        "delegate_concurrency",
        "subagents running at once (1 to 16); further calls queue in call order",
        Scope::Anywhere,
    ),
    (
        "delegate_max_per_turn",
        "subagents started in one turn; a call past it fails with delegation_limit",
        Scope::Anywhere,
    ),
    (
        "delegate_budget_tokens",
        "default token budget (prompt + completion) of one subagent; 0 for none",
        Scope::Anywhere,
    ),
    (
        "delegate_session_budget_tokens",
        "token budget of all subagents of a session together; 0 for none",
        Scope::Anywhere,
    ),
    (
        "context_window",
        "the model's context window in tokens, when the server does not report it",
        Scope::Anywhere,
    ),
    (
        "max_output_tokens",
        "longest answer the model may write in one request",
        Scope::Anywhere,
    ),
    (
        "loop_repeat_limit",
        "identical tool calls in a row before the model is warned (one more stops the turn)",
        Scope::Anywhere,
    ),
    (
        "provider_concurrency",
        "model requests in flight at once, the main agent's and its subagents' together",
        Scope::Anywhere,
    ),
    (
        "session_retention_days",
        "days a session journal is kept after its last write (pruned at start)",
        Scope::Anywhere,
    ),
    // Calls written as text still pass the guard, the sandbox and the
    // approval policy like any other.
    (
        "tool_call_fallback",
        "true | false: accept tool calls written as text (fenced json or <tool_call>)",
        Scope::Anywhere,
    ),
];

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
    #[error(transparent)]
    Trust(#[from] TrustError),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Which provider talks to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    OpenAi,
    Anthropic,
    Script,
}

impl ProviderKind {
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Script => "script",
        }
    }
}

/// An API key; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(…)")
    }
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
    pub delegation: DelegationConfig,
    pub safety: SafetyConfig,
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
}

/// The main agent's safety settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetyConfig {
    pub sandbox_mode: SandboxMode,
    /// `None`: the command's default (on-request in the TUI, never for
    /// `fido exec`).
    pub approval_policy: Option<ApprovalPolicy>,
    pub network: bool,
    /// Canonical extra folders commands may write.
    pub writable_roots: Vec<PathBuf>,
}

/// Limits of `delegate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationConfig {
    pub sandbox: SandboxRequirement,
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub grace: Duration,
    pub max_steps: u32,
    /// Subagents running at once (1 to [`MAX_DELEGATE_CONCURRENCY`]).
    pub concurrency: u32,
    /// Subagents started in one turn.
    pub max_per_turn: u32,
    /// Default budget of one subagent, in tokens; `None`: unlimited.
    pub budget_tokens: Option<u64>,
    /// Budget of all subagents of the session together; `None`: unlimited.
    pub session_budget_tokens: Option<u64>,
}

/// Most subagents that may run at once, whatever the configuration says.
pub const MAX_DELEGATE_CONCURRENCY: u64 = 16;

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
        let safety = safety_config(layers, &workspace)?;
        let http = http_policy(layers)?;
        let tools = tool_limits(layers)?;
        let agent = agent_settings(layers)?;
        let anthropic_max_tokens = setting!(layers, anthropic_max_tokens)?;
        let delegation = delegation_config(layers)?;
        let provider_concurrency = setting!(layers, provider_concurrency)?;
        let retention_days = setting!(layers, session_retention_days)?;
        Ok(Config {
            provider,
            model: model.unwrap_or_else(|| provider.default_model(&base_url).to_string()),
            base_url,
            api_key: api_key.map(ApiKey),
            script,
            plan_tool: plan_tool.unwrap_or(PlanFlavour::UpdatePlan),
            plan_file,
            agent,
            http,
            tools,
            anthropic_max_tokens: anthropic_max_tokens.map_or(8192, |n| n.0 as u32),
            delegation,
            safety,
            provider_concurrency: provider_concurrency.map_or(4, |n| n.0 as usize),
            session_retention_days: retention_days
                .map_or(30, |n| u32::try_from(n.0).unwrap_or(u32::MAX)),
            config_dir: files.config_dir,
            user_config_file: files.user_config_file,
            home: env_get("HOME").map(PathBuf::from),
            workspace_trusted: files.workspace_trusted,
            warnings: files.warnings,
            mcp_servers: files.mcp_servers.into_values().collect(),
            workspace,
        })
    }
}

impl ProviderKind {
    fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::OpenAi | ProviderKind::Script => "https://api.openai.com/v1",
        }
    }

    /// The variable the provider's key is read from when `api_key` is unset.
    fn key_variable(self) -> Option<&'static str> {
        match self {
            ProviderKind::OpenAi => Some("OPENAI_API_KEY"),
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Script => None,
        }
    }

    fn default_model(self, base_url: &str) -> &'static str {
        match self {
            ProviderKind::OpenAi if base_url.starts_with("https://api.openai.com") => {
                "gpt-4.1-mini"
            }
            ProviderKind::OpenAi => "default",
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::Script => "script",
        }
    }
}

/// The config files' layers (the user file, then the workspace's
/// `fido.toml`) and what reading them found out.
struct Files {
    layers: Layers,
    config_dir: Option<PathBuf>,
    user_config_file: Option<PathBuf>,
    workspace_trusted: bool,
    /// About an untrusted workspace file's ignored keys.
    warnings: Vec<String>,
    mcp_servers: mcp::McpServers,
}

impl Files {
    fn read(
        workspace: &Path,
        env_get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Files, ConfigError> {
        let mut files = Files {
            layers: Layers::default(),
            config_dir: config_dir(env_get),
            user_config_file: user_config_path(env_get),
            workspace_trusted: false,
            warnings: Vec::new(),
            mcp_servers: mcp::McpServers::new(),
        };
        if let Some(user_file) = &files.user_config_file
            && user_file.exists()
        {
            let (source, layer, _) = layer::file_layer(user_file, true, &mut files.mcp_servers)?;
            files.layers.push(source, layer);
        }
        if let Some(dir) = &files.config_dir {
            files.workspace_trusted = TrustStore::in_dir(dir).is_trusted(workspace)?;
        }
        let workspace_file = workspace.join("fido.toml");
        if workspace_file.exists() {
            let trusted = files.workspace_trusted;
            let (source, layer, ignored) =
                layer::file_layer(&workspace_file, trusted, &mut files.mcp_servers)?;
            files.layers.push(source, layer);
            if !ignored.is_empty() {
                let warning = untrusted_warning(&workspace_file, workspace, &ignored);
                files.warnings.push(warning);
            }
        }
        Ok(files)
    }
}

/// The canonical workspace folder (`-C`, else the current one).
fn workspace_root(given: Option<&Path>) -> Result<PathBuf, ConfigError> {
    let given = given.unwrap_or(Path::new("."));
    let workspace = std::fs::canonicalize(given).map_err(|source| ConfigError::Workspace {
        path: given.display().to_string(),
        source,
    })?;
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace {
            path: workspace.display().to_string(),
            source: std::io::Error::other("not a directory"),
        });
    }
    Ok(workspace)
}

fn http_policy(layers: &Layers) -> Result<HttpPolicy, ConfigError> {
    let ms = Duration::from_millis;
    Ok(HttpPolicy {
        request_timeout: setting!(layers, request_timeout_ms)?.map_or(ms(600_000), |m| m.0),
        idle_timeout: setting!(layers, idle_timeout_ms)?.map_or(ms(90_000), |m| m.0),
        max_retries: setting!(layers, max_retries)?.map_or(4, |n| n.0 as u32),
        retry_base: setting!(layers, retry_base_ms)?.map_or(ms(500), |m| m.0),
        retry_max: setting!(layers, retry_max_ms)?.map_or(ms(30_000), |m| m.0),
    })
}

fn tool_limits(layers: &Layers) -> Result<ToolLimits, ConfigError> {
    let defaults = ToolLimits::default();
    Ok(ToolLimits {
        bash_default_timeout: setting!(layers, bash_timeout_ms)?
            .map_or(defaults.bash_default_timeout, |m| m.0),
        bash_max_timeout: setting!(layers, bash_max_timeout_ms)?
            .map_or(defaults.bash_max_timeout, |m| m.0),
        ..defaults
    })
}

fn agent_settings(layers: &Layers) -> Result<AgentSettings, ConfigError> {
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

fn delegation_config(layers: &Layers) -> Result<DelegationConfig, ConfigError> {
    let ms = Duration::from_millis;
    // 0 means no budget.
    let budget = |tokens: Option<&AtLeast<0>>| tokens.map(|n| n.0).filter(|n| *n > 0);
    Ok(DelegationConfig {
        sandbox: setting!(layers, sandbox)?
            .copied()
            .unwrap_or(SandboxRequirement::Required),
        concurrency: setting!(layers, delegate_concurrency)?.map_or(4, |n| n.0 as u32),
        default_timeout: setting!(layers, delegate_timeout_ms)?.map_or(ms(120_000), |m| m.0),
        max_timeout: setting!(layers, delegate_max_timeout_ms)?.map_or(ms(600_000), |m| m.0),
        grace: setting!(layers, delegate_grace_ms)?.map_or(ms(2_000), |m| m.0),
        max_steps: setting!(layers, delegate_max_steps)?.map_or(40, |n| n.0 as u32),
        max_per_turn: setting!(layers, delegate_max_per_turn)?.map_or(16, |n| n.0 as u32),
        budget_tokens: budget(setting!(layers, delegate_budget_tokens)?),
        session_budget_tokens: budget(setting!(layers, delegate_session_budget_tokens)?),
    })
}

fn safety_config(layers: &Layers, workspace: &Path) -> Result<SafetyConfig, ConfigError> {
    let sandbox_mode = setting!(layers, sandbox_mode)?.copied();
    let approval_policy = setting!(layers, approval_policy)?.copied();
    let network = setting!(layers, network)?.copied();
    let mut writable_roots = Vec::new();
    if let Some((PathList(parts), source_name)) = setting!(layers, writable_roots, with source)? {
        for part in parts {
            let root = resolve_relative(workspace, part.trim());
            let canonical =
                std::fs::canonicalize(&root).map_err(|source| ConfigError::WritableRoot {
                    source_name: source_name.clone(),
                    value: part.clone(),
                    source,
                })?;
            writable_roots.push(canonical);
        }
    }
    Ok(SafetyConfig {
        sandbox_mode: sandbox_mode.unwrap_or(SandboxMode::DEFAULT),
        approval_policy,
        network: network.unwrap_or(false),
        writable_roots,
    })
}

/// The one warning about an untrusted workspace file's ignored keys.
fn untrusted_warning(file: &Path, workspace: &Path, ignored: &[String]) -> String {
    format!(
        "{} is not trusted, so these keys were ignored: {}. An untrusted repository could use them to send your API key elsewhere or weaken the sandbox. If you trust this folder, run `fido trust {}`.",
        file.display(),
        ignored.join(", "),
        workspace.display()
    )
}

/// The user's config directory for the process environment.
pub fn user_config_dir() -> Option<PathBuf> {
    config_dir(&|name: &str| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The user's config directory: `$XDG_CONFIG_HOME/fido`, else
/// `$HOME/.config/fido`.
fn config_dir(env_get: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env_get("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(xdg).join("fido"));
    }
    env_get("HOME").map(|home| PathBuf::from(home).join(".config/fido"))
}

/// `plan_file` resolved against the workspace, refused unless it stays
/// inside it: lexically (no `..` out) and through every existing symlink.
fn inside_workspace(
    workspace: &Path,
    value: &str,
    source_name: &str,
) -> Result<PathBuf, ConfigError> {
    let outside = || ConfigError::PlanFileOutside {
        source_name: source_name.to_string(),
        value: value.to_string(),
        workspace: workspace.display().to_string(),
    };
    let mut path = PathBuf::from(workspace);
    for part in Path::new(value.trim()).components() {
        match part {
            std::path::Component::Normal(name) => path.push(name),
            std::path::Component::ParentDir => {
                path.pop();
            }
            std::path::Component::RootDir => path = PathBuf::from("/"),
            std::path::Component::CurDir | std::path::Component::Prefix(_) => {}
        }
    }
    if path == workspace || !path.starts_with(workspace) {
        return Err(outside());
    }
    // The deepest existing ancestor (or the file itself) must resolve
    // inside the workspace too: a symlink may not lead the writes out.
    let mut probe = path.clone();
    loop {
        if let Ok(real) = std::fs::canonicalize(&probe) {
            if !real.starts_with(workspace) {
                return Err(outside());
            }
            break;
        }
        if !probe.pop() {
            return Err(outside());
        }
    }
    Ok(path)
}

/// `$FIDO_CONFIG`, else `$XDG_CONFIG_HOME/fido/config.toml`, else
/// `$HOME/.config/fido/config.toml`.
fn user_config_path(env_get: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env_get("FIDO_CONFIG") {
        return Some(PathBuf::from(path));
    }
    if let Some(xdg) = env_get("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(xdg).join("fido").join("config.toml"));
    }
    env_get("HOME").map(|home| PathBuf::from(home).join(".config/fido/config.toml"))
}

fn resolve_relative(workspace: &Path, value: &str) -> PathBuf {
    let path = Path::new(value);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
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
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)], home: &Path) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.push(("HOME".into(), home.display().to_string()));
        v
    }

    fn overrides(dir: &Path) -> Overrides {
        Overrides {
            workspace: Some(dir.to_path_buf()),
            values: vec![],
        }
    }

    #[test]
    fn a_number_too_large_for_its_setting_is_refused_not_wrapped() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        // 2^32 + 1 would wrap to 1 step in the 32 bits that hold it.
        let err = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_MAX_STEPS", "4294967297")], home.path()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("FIDO_MAX_STEPS") && err.contains("a whole number from 1 to 4294967295"),
            "{err}"
        );
        let cfg = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_MAX_STEPS", "4294967295")], home.path()),
        )
        .unwrap();
        assert_eq!(cfg.agent.max_steps, u32::MAX);
    }

    #[test]
    fn defaults_and_layers_flags_beat_env_beat_files() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("fido.toml"),
            "model = \"from-file\"\nmax_steps = 7\n",
        )
        .unwrap();
        let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
        assert_eq!(cfg.model, "from-file");
        assert_eq!(cfg.agent.max_steps, 7);
        assert_eq!(cfg.provider, ProviderKind::OpenAi);
        assert_eq!(cfg.plan_file, cfg.workspace.join(".fido-plan.json"));

        let cfg = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_MODEL", "from-env")], home.path()),
        )
        .unwrap();
        assert_eq!(cfg.model, "from-env");

        let mut flags = overrides(dir.path());
        flags.values.push(("model".into(), "from-flag".into()));
        let cfg =
            Config::load_from(&flags, &env(&[("FIDO_MODEL", "from-env")], home.path())).unwrap();
        assert_eq!(cfg.model, "from-flag");
    }

    #[test]
    fn user_file_is_beaten_by_workspace_file() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
        std::fs::write(
            home.path().join(".config/fido/config.toml"),
            "api_key = \"k\"\nmodel = \"user\"\nFIDO_MAX_STEPS = 9\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("fido.toml"), "model = \"ws\"\n").unwrap();
        let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
        assert_eq!(cfg.model, "ws");
        assert_eq!(cfg.agent.max_steps, 9);
        assert_eq!(cfg.api_key.unwrap().expose(), "k");
    }

    #[test]
    fn bad_values_are_one_clear_sentence_naming_the_source() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let err = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_MAX_STEPS", "many")], home.path()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("FIDO_MAX_STEPS") && err.contains("many"),
            "{err}"
        );

        std::fs::write(dir.path().join("fido.toml"), "modle = \"x\"\n").unwrap();
        let err = Config::load_from(&overrides(dir.path()), &env(&[], home.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `modle`"), "{err}");

        std::fs::write(dir.path().join("fido.toml"), "model = [1\n").unwrap();
        let err = Config::load_from(&overrides(dir.path()), &env(&[], home.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("not valid TOML"), "{err}");
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback_url("http://127.0.0.1:8080/v1"));
        assert!(is_loopback_url("http://localhost/v1"));
        assert!(is_loopback_url("http://[::1]:11434/v1"));
        assert!(!is_loopback_url("https://api.openai.com/v1"));
        assert!(!is_loopback_url("http://127.0.0.1.evil.com/v1"));
    }

    /// A value for each trusted-only key that differs from its default.
    const TRUSTED_ONLY: &[(&str, &str)] = &[
        ("provider", "\"anthropic\""),
        ("base_url", "\"http://attacker.invalid/v1\""),
        ("api_key", "\"stolen\""),
        ("script", "\"/etc/passwd\""),
        ("plan_file", "\"elsewhere.json\""),
        ("sandbox", "\"best_effort\""),
        ("sandbox_mode", "\"danger-full-access\""),
        ("approval_policy", "\"never\""),
        ("network", "true"),
        ("writable_roots", "[\"/\"]"),
    ];

    fn trusted_only_changed(cfg: &Config, key: &str) -> bool {
        match key {
            "provider" => cfg.provider != ProviderKind::OpenAi,
            "base_url" => cfg.base_url.contains("attacker"),
            "api_key" => cfg.api_key.is_some(),
            "script" => cfg.script.is_some(),
            "plan_file" => cfg.plan_file.ends_with("elsewhere.json"),
            "sandbox" => cfg.delegation.sandbox != SandboxRequirement::Required,
            "sandbox_mode" => cfg.safety.sandbox_mode != SandboxMode::DEFAULT,
            "approval_policy" => cfg.safety.approval_policy.is_some(),
            "network" => cfg.safety.network,
            "writable_roots" => !cfg.safety.writable_roots.is_empty(),
            other => panic!("no check for {other}"),
        }
    }

    #[test]
    fn every_trusted_only_key_is_listed_and_checked() {
        let listed: Vec<&str> = KEYS
            .iter()
            .filter(|(_, _, scope)| *scope == Scope::Trusted)
            .map(|(key, _, _)| *key)
            .collect();
        let checked: Vec<&str> = TRUSTED_ONLY.iter().map(|(key, _)| *key).collect();
        assert_eq!(listed, checked);
    }

    #[test]
    fn an_untrusted_workspace_file_cannot_set_a_trusted_only_key() {
        for (key, value) in TRUSTED_ONLY {
            let dir = tempfile::tempdir().unwrap();
            let home = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join("fido.toml"),
                format!("{key} = {value}\nmodel = \"ws\"\n"),
            )
            .unwrap();
            let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
            assert!(!trusted_only_changed(&cfg, key), "{key} took effect");
            assert_eq!(cfg.model, "ws", "safe keys still apply");
            assert!(!cfg.workspace_trusted);
            assert_eq!(cfg.warnings.len(), 1, "{key}: {:?}", cfg.warnings);
            let warning = &cfg.warnings[0];
            assert!(warning.contains(&format!("ignored: {key}.")), "{warning}");
            assert!(warning.contains("fido trust "), "{warning}");
        }
    }

    #[test]
    fn a_trusted_workspace_file_is_read_in_full() {
        for (key, value) in TRUSTED_ONLY {
            let dir = tempfile::tempdir().unwrap();
            let home = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("fido.toml"), format!("{key} = {value}\n")).unwrap();
            TrustStore::in_dir(&home.path().join(".config/fido"))
                .trust(dir.path())
                .unwrap();
            let cfg = Config::load_from(&overrides(dir.path()), &env(&[], home.path())).unwrap();
            assert!(cfg.workspace_trusted);
            assert!(trusted_only_changed(&cfg, key), "{key} was not applied");
            assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        }
    }

    #[test]
    fn the_user_file_and_environment_stay_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
        std::fs::write(
            home.path().join(".config/fido/config.toml"),
            "sandbox_mode = \"read-only\"\nwritable_roots = [\"/tmp\"]\n",
        )
        .unwrap();
        let cfg = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_APPROVAL_POLICY", "untrusted")], home.path()),
        )
        .unwrap();
        assert_eq!(cfg.safety.sandbox_mode, SandboxMode::ReadOnly);
        assert_eq!(cfg.safety.approval_policy, Some(ApprovalPolicy::Untrusted));
        assert_eq!(
            cfg.safety.writable_roots,
            vec![std::fs::canonicalize("/tmp").unwrap()]
        );
    }

    #[test]
    fn plan_file_must_stay_inside_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        for value in [
            "../plan.json",
            "/etc/passwd",
            "sub/../../plan.json",
            "link/plan.json",
            ".",
        ] {
            let err = Config::load_from(
                &overrides(dir.path()),
                &env(&[("FIDO_PLAN_FILE", value)], home.path()),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains("outside the workspace"), "{value}: {err}");
        }
        let cfg = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_PLAN_FILE", "state/plan.json")], home.path()),
        )
        .unwrap();
        assert_eq!(cfg.plan_file, cfg.workspace.join("state/plan.json"));
    }

    #[test]
    fn safety_values_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        for (var, value, needle) in [
            ("FIDO_SANDBOX_MODE", "off", "workspace-write"),
            ("FIDO_APPROVAL_POLICY", "sometimes", "on-request"),
            ("FIDO_NETWORK", "maybe", "true or false"),
            ("FIDO_WRITABLE_ROOTS", "/no/such/dir", "/no/such/dir"),
        ] {
            let err = Config::load_from(&overrides(dir.path()), &env(&[(var, value)], home.path()))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{var}: {err}");
        }
        let cfg = Config::load_from(
            &overrides(dir.path()),
            &env(&[("FIDO_SANDBOX_MODE", "read_only")], home.path()),
        )
        .unwrap();
        assert_eq!(cfg.safety.sandbox_mode, SandboxMode::ReadOnly);
    }

    #[test]
    fn api_key_debug_hides_the_key() {
        assert_eq!(format!("{:?}", ApiKey("secret".into())), "ApiKey(…)");
    }
}
