//! The string-map loader as it was before the typed layers: a test-only
//! oracle for the differential test in `super::tests`.
#![allow(clippy::all)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::agent::{AgentSettings, CompactionSettings, CompactionStrategy, ModelLimits};
use crate::plan::PlanFlavour;
use crate::protocol::{ApprovalPolicy, SandboxMode};
use crate::provider::HttpPolicy;
use crate::sandbox::SandboxRequirement;
use crate::tools::ToolLimits;

/// Where a value came from, for error messages.
#[derive(Debug, Clone)]
struct Sourced {
    value: String,
    source_name: String,
}

/// The string-map loader this module replaced, kept for the differential test.
pub fn load_from(overrides: &Overrides, env: &[(String, String)]) -> Result<Config, ConfigError> {
    let env_get = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let workspace_arg = overrides
        .workspace
        .clone()
        .unwrap_or_else(|| PathBuf::from("."));
    let workspace =
        std::fs::canonicalize(&workspace_arg).map_err(|source| ConfigError::Workspace {
            path: workspace_arg.display().to_string(),
            source,
        })?;
    if !workspace.is_dir() {
        return Err(ConfigError::Workspace {
            path: workspace.display().to_string(),
            source: std::io::Error::other("not a directory"),
        });
    }

    let mut values: BTreeMap<String, Sourced> = BTreeMap::new();
    let mut mcp_servers = mcp::McpServers::new();
    let user_config_file = user_config_path(&env_get);
    if let Some(user_file) = &user_config_file
        && user_file.exists()
    {
        read_file_layer(user_file, true, &mut values, &mut mcp_servers)?;
    }
    let config_dir = config_dir(&env_get);
    let workspace_trusted = match &config_dir {
        Some(dir) => TrustStore::in_dir(dir).is_trusted(&workspace)?,
        None => false,
    };
    let mut warnings = Vec::new();
    let workspace_file = workspace.join("fido.toml");
    if workspace_file.exists() {
        let ignored = read_file_layer(
            &workspace_file,
            workspace_trusted,
            &mut values,
            &mut mcp_servers,
        )?;
        if !ignored.is_empty() {
            warnings.push(untrusted_warning(&workspace_file, &workspace, &ignored));
        }
    }
    for (key, _, _) in KEYS {
        let var = format!("FIDO_{}", key.to_ascii_uppercase());
        if let Some(value) = env_get(&var) {
            values.insert(
                key.to_string(),
                Sourced {
                    value,
                    source_name: format!("environment variable {var}"),
                },
            );
        }
    }
    for (key, value) in &overrides.values {
        let key = normalise_key(key);
        check_known(&key, "command line")?;
        values.insert(
            key.clone(),
            Sourced {
                value: value.clone(),
                source_name: "command line".into(),
            },
        );
    }

    let get = |key: &str| values.get(key);
    let provider = match get("provider") {
        None => ProviderKind::OpenAi,
        Some(s) => match s.value.as_str() {
            "openai" => ProviderKind::OpenAi,
            "anthropic" => ProviderKind::Anthropic,
            "script" => ProviderKind::Script,
            _ => return Err(invalid("provider", s, "openai, anthropic or script")),
        },
    };
    let plan_tool = match get("plan_tool") {
        None => PlanFlavour::UpdatePlan,
        Some(s) => match s.value.as_str() {
            "update_plan" => PlanFlavour::UpdatePlan,
            "todo" => PlanFlavour::Todo,
            _ => return Err(invalid("plan_tool", s, "update_plan or todo")),
        },
    };
    let base_url = get("base_url")
        .map(|s| s.value.trim_end_matches('/').to_string())
        .unwrap_or_else(|| match provider {
            ProviderKind::Anthropic => "https://api.anthropic.com".to_string(),
            ProviderKind::OpenAi | ProviderKind::Script => "https://api.openai.com/v1".to_string(),
        });
    let api_key = get("api_key")
        .map(|s| s.value.clone())
        .or_else(|| match provider {
            ProviderKind::OpenAi => env_get("OPENAI_API_KEY"),
            ProviderKind::Anthropic => env_get("ANTHROPIC_API_KEY"),
            ProviderKind::Script => None,
        });
    let model = get("model")
        .map(|s| s.value.clone())
        .unwrap_or_else(|| match provider {
            ProviderKind::OpenAi if base_url.starts_with("https://api.openai.com") => {
                "gpt-4.1-mini".into()
            }
            ProviderKind::OpenAi => "default".into(),
            ProviderKind::Anthropic => "claude-sonnet-4-5".into(),
            ProviderKind::Script => "script".into(),
        });
    let script = get("script").map(|s| resolve_relative(&workspace, &s.value));
    let plan_file = match get("plan_file") {
        None => workspace.join(".fido-plan.json"),
        Some(s) => inside_workspace(&workspace, s)?,
    };
    let safety = safety_config(&get, &workspace)?;

    let ms = |key: &str, default: u64, min: u64| -> Result<Duration, ConfigError> {
        number(get(key), key, default, min).map(Duration::from_millis)
    };
    let http = HttpPolicy {
        request_timeout: ms("request_timeout_ms", 600_000, 1)?,
        idle_timeout: ms("idle_timeout_ms", 90_000, 1)?,
        max_retries: number(get("max_retries"), "max_retries", 4, 0)? as u32,
        retry_base: ms("retry_base_ms", 500, 0)?,
        retry_max: ms("retry_max_ms", 30_000, 0)?,
    };
    let tools = ToolLimits {
        bash_default_timeout: ms("bash_timeout_ms", 120_000, 1)?,
        bash_max_timeout: ms("bash_max_timeout_ms", 600_000, 1)?,
        ..ToolLimits::default()
    };
    let strategy = match get("compact_strategy") {
        None => CompactionStrategy::Summarize,
        Some(s) => match s.value.as_str() {
            "summarize" | "summarise" => CompactionStrategy::Summarize,
            "elide" => CompactionStrategy::Elide,
            _ => return Err(invalid("compact_strategy", s, "summarize or elide")),
        },
    };
    let agent = AgentSettings {
        max_steps: number(get("max_steps"), "max_steps", 100, 1)? as u32,
        compaction: CompactionSettings {
            threshold_tokens: number(
                get("compact_threshold_tokens"),
                "compact_threshold_tokens",
                CompactionSettings::DEFAULT_THRESHOLD_TOKENS as u64,
                1,
            )? as usize,
            keep_recent_tokens: number(
                get("compact_keep_tokens"),
                "compact_keep_tokens",
                CompactionSettings::DEFAULT_KEEP_RECENT_TOKENS as u64,
                1,
            )? as usize,
            strategy,
        },
        limits: model_limits(&get, get("compact_threshold_tokens").is_some())?,
    };
    let anthropic_max_tokens =
        number(get("anthropic_max_tokens"), "anthropic_max_tokens", 8192, 1)? as u32;

    let sandbox = match get("sandbox") {
        None => SandboxRequirement::Required,
        Some(s) => SandboxRequirement::parse(&s.value)
            .map_err(|_| invalid("sandbox", s, "required or best_effort"))?,
    };
    let concurrency = number(get("delegate_concurrency"), "delegate_concurrency", 4, 1)?;
    if concurrency > MAX_DELEGATE_CONCURRENCY
        && let Some(s) = get("delegate_concurrency")
    {
        return Err(invalid(
            "delegate_concurrency",
            s,
            &format!("a whole number from 1 to {MAX_DELEGATE_CONCURRENCY}"),
        ));
    }
    // 0 means no budget.
    let budget = |key: &str| -> Result<Option<u64>, ConfigError> {
        Ok(Some(number(get(key), key, 0, 0)?).filter(|n| *n > 0))
    };
    let delegation = DelegationConfig {
        sandbox,
        default_timeout: ms("delegate_timeout_ms", 120_000, 1_000)?,
        max_timeout: ms("delegate_max_timeout_ms", 600_000, 1_000)?,
        grace: ms("delegate_grace_ms", 2_000, 0)?,
        max_steps: number(get("delegate_max_steps"), "delegate_max_steps", 40, 1)? as u32,
        concurrency: concurrency as u32,
        max_per_turn: number(get("delegate_max_per_turn"), "delegate_max_per_turn", 16, 1)? as u32,
        budget_tokens: budget("delegate_budget_tokens")?,
        session_budget_tokens: budget("delegate_session_budget_tokens")?,
    };

    Ok(Config {
        delegation,
        workspace,
        provider,
        base_url,
        api_key: api_key.map(ApiKey),
        model,
        script,
        plan_tool,
        plan_file,
        agent,
        http,
        tools,
        anthropic_max_tokens,
        safety,
        provider_concurrency: number(get("provider_concurrency"), "provider_concurrency", 4, 1)?
            as usize,
        session_retention_days: u32::try_from(number(
            get("session_retention_days"),
            "session_retention_days",
            30,
            1,
        )?)
        .unwrap_or(u32::MAX),
        config_dir,
        user_config_file,
        home: env_get("HOME").map(PathBuf::from),
        workspace_trusted,
        warnings,
        mcp_servers: mcp_servers.into_values().collect(),
    })
}

/// The keys about the model's limits and habits (issue 9), in one place.
fn model_limits<'a>(
    get: &dyn Fn(&str) -> Option<&'a Sourced>,
    threshold_configured: bool,
) -> Result<ModelLimits, ConfigError> {
    let context_window = match get("context_window") {
        None => None,
        Some(s) => Some(number(Some(s), "context_window", 0, 512)? as u32),
    };
    let tool_call_fallback = match get("tool_call_fallback") {
        None => false,
        Some(s) => match s.value.trim() {
            "true" | "1" | "yes" | "on" => true,
            "false" | "0" | "no" | "off" => false,
            _ => return Err(invalid("tool_call_fallback", s, "true or false")),
        },
    };
    Ok(ModelLimits {
        context_window,
        max_output_tokens: number(
            get("max_output_tokens"),
            "max_output_tokens",
            u64::from(ModelLimits::DEFAULT_MAX_OUTPUT_TOKENS),
            16,
        )? as u32,
        loop_repeat_limit: number(
            get("loop_repeat_limit"),
            "loop_repeat_limit",
            u64::from(ModelLimits::DEFAULT_LOOP_REPEAT_LIMIT),
            2,
        )? as u32,
        tool_call_fallback,
        threshold_configured,
    })
}

fn invalid(key: &str, s: &Sourced, expected: &str) -> ConfigError {
    ConfigError::Invalid {
        source_name: s.source_name.clone(),
        key: key.to_string(),
        value: s.value.clone(),
        expected: expected.to_string(),
    }
}

fn number(value: Option<&Sourced>, key: &str, default: u64, min: u64) -> Result<u64, ConfigError> {
    let Some(s) = value else {
        return Ok(default);
    };
    match s.value.trim().parse::<u64>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(invalid(
            key,
            s,
            &format!("a whole number of at least {min}"),
        )),
    }
}

fn normalise_key(key: &str) -> String {
    let lower = key.trim().to_ascii_lowercase();
    lower.strip_prefix("fido_").unwrap_or(&lower).to_string()
}

fn check_known(key: &str, source_name: &str) -> Result<Scope, ConfigError> {
    if let Some((_, _, scope)) = KEYS.iter().find(|(k, _, _)| *k == key) {
        return Ok(*scope);
    }
    Err(ConfigError::UnknownKey {
        source_name: source_name.to_string(),
        key: key.to_string(),
        known: KEYS
            .iter()
            .map(|(k, _, _)| *k)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Reads one config file into `values`. With `trusted` false (a workspace
/// file of a folder nobody trusted) only [`Scope::Anywhere`] keys are
/// taken; the others are returned, to be named in one warning.
fn read_file_layer(
    path: &Path,
    trusted: bool,
    values: &mut BTreeMap<String, Sourced>,
    mcp_servers: &mut mcp::McpServers,
) -> Result<Vec<String>, ConfigError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            path: shown.clone(),
            message: e.message().to_string(),
        })?;
    let mut ignored = Vec::new();
    for (raw_key, raw_value) in table {
        let key = normalise_key(&raw_key);
        // A table of commands to run: trusted layers only.
        if key == mcp::KEY {
            if trusted {
                mcp::read_layer(&shown, raw_value, mcp_servers)?;
            } else {
                ignored.push(key);
            }
            continue;
        }
        let scope = check_known(&key, &shown)?;
        if !trusted && scope == Scope::Trusted {
            ignored.push(key);
            continue;
        }
        let value = file_value(&shown, &key, raw_value)?;
        values.insert(
            key,
            Sourced {
                value,
                source_name: shown.clone(),
            },
        );
    }
    Ok(ignored)
}

/// A TOML value as the string the other layers give; a list of strings is
/// `:`-joined (for `writable_roots`).
fn file_value(shown: &str, key: &str, raw: toml::Value) -> Result<String, ConfigError> {
    let bad = |other: &toml::Value| ConfigError::Invalid {
        source_name: shown.to_string(),
        key: key.to_string(),
        value: format!("{other:?}"),
        expected: "a string, a number, a boolean or a list of strings".into(),
    };
    match raw {
        toml::Value::String(s) => Ok(s),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Array(items) => {
            let mut parts = Vec::new();
            for item in &items {
                match item {
                    toml::Value::String(s) => parts.push(s.clone()),
                    other => return Err(bad(other)),
                }
            }
            Ok(parts.join(":"))
        }
        other @ (toml::Value::Datetime(_) | toml::Value::Table(_)) => Err(bad(&other)),
    }
}

/// `plan_file` resolved against the workspace, refused unless it stays
/// inside it: lexically (no `..` out) and through every existing symlink.
fn inside_workspace(workspace: &Path, s: &Sourced) -> Result<PathBuf, ConfigError> {
    let outside = || ConfigError::PlanFileOutside {
        source_name: s.source_name.clone(),
        value: s.value.clone(),
        workspace: workspace.display().to_string(),
    };
    let mut path = PathBuf::from(workspace);
    for part in Path::new(s.value.trim()).components() {
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

fn safety_config<'a>(
    get: &dyn Fn(&str) -> Option<&'a Sourced>,
    workspace: &Path,
) -> Result<SafetyConfig, ConfigError> {
    let sandbox_mode = match get("sandbox_mode") {
        None => SandboxMode::DEFAULT,
        Some(s) => SandboxMode::parse(&s.value).ok_or_else(|| {
            invalid(
                "sandbox_mode",
                s,
                "read-only, workspace-write or danger-full-access",
            )
        })?,
    };
    let approval_policy = match get("approval_policy") {
        None => None,
        Some(s) => Some(
            ApprovalPolicy::parse(&s.value)
                .ok_or_else(|| invalid("approval_policy", s, "untrusted, on-request or never"))?,
        ),
    };
    let network = match get("network") {
        None => false,
        Some(s) => match s.value.trim() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            _ => return Err(invalid("network", s, "true or false")),
        },
    };
    let mut writable_roots = Vec::new();
    if let Some(s) = get("writable_roots") {
        for part in s.value.split(':').filter(|p| !p.trim().is_empty()) {
            let root = resolve_relative(workspace, part.trim());
            let canonical =
                std::fs::canonicalize(&root).map_err(|source| ConfigError::WritableRoot {
                    source_name: s.source_name.clone(),
                    value: part.to_string(),
                    source,
                })?;
            writable_roots.push(canonical);
        }
    }
    Ok(SafetyConfig {
        sandbox_mode,
        approval_policy,
        network,
        writable_roots,
    })
}

/// The typed loader against the string-map one on random layers: the same
/// `Config` (by its `Debug` text) or the same error sentence.
mod tests {
    use proptest::prelude::*;

    use super::super::{Config, KEYS, Overrides, TrustStore};

    /// Texts worth trying for a key: mostly valid ones, then invalid and
    /// edge values.
    fn pool(key: &str) -> (&'static [&'static str], &'static [&'static str]) {
        match key {
            "provider" => (&["openai", "anthropic", "script"], &["OpenAI", ""]),
            "plan_tool" => (&["update_plan", "todo"], &["plan", " todo"]),
            "compact_strategy" => (&["summarize", "summarise", "elide"], &["x"]),
            "sandbox" => (&["required", "best_effort"], &["best-effort", "no"]),
            "sandbox_mode" => (
                &[
                    "read-only",
                    "read_only",
                    " danger-full-access ",
                    "workspace-write",
                ],
                &["off"],
            ),
            "approval_policy" => (&["untrusted", "on_request", "never"], &["sometimes"]),
            "network" | "tool_call_fallback" => (
                &["true", "false", "yes", "no", "1", "0", " true "],
                &["on", "off", "maybe"],
            ),
            "plan_file" => (
                &["state/plan.json", " p.json ", "sub/../p.json"],
                &["../x.json", "/etc/passwd", "."],
            ),
            "writable_roots" => (&["/tmp", "/tmp:/var", "", " : ", "sub"], &["/no/such/dir"]),
            "script" => (&["s.json", "/abs/s.json", ""], &[]),
            "base_url" => (
                &["http://127.0.0.1:9/v1/", "https://api.openai.com/v1", "x//"],
                &[],
            ),
            "model" | "api_key" => (&["m", "", " k "], &[]),
            "delegate_concurrency" => (&["1", "2", "16"], &["0", "17", "x"]),
            _ => (
                &["1000", "2000", "4096", " 1500 ", "65536", "4294967297"],
                &[
                    "-1",
                    "abc",
                    "",
                    "99999999999999999999",
                    "7.0",
                    "0.5",
                    "511",
                    "0",
                    "2",
                    "16",
                ],
            ),
        }
    }

    /// One key set in one layer: which key, which text, how it is spelt
    /// and, in a file, how it is written.
    type Pick = (usize, usize, u8, u8);

    fn picks() -> impl Strategy<Value = Vec<Pick>> {
        proptest::collection::vec((0..1000usize, 0..40usize, 0..4u8, 0..6u8), 0..6)
    }

    fn key_and_text(pick: &Pick) -> (String, &'static str) {
        let (key, text, spelling, _) = *pick;
        let key = match key {
            0..990 => KEYS[key % KEYS.len()].0.to_string(),
            990..995 => "modle".into(),
            _ => "mcp_servers".into(),
        };
        let (valid, invalid) = pool(&key);
        let text = match text {
            36.. if !invalid.is_empty() => invalid[text % invalid.len()],
            _ => valid[text % valid.len()],
        };
        let key = match spelling {
            1 => key.to_ascii_uppercase(),
            2 => format!("FIDO_{}", key.to_ascii_uppercase()),
            3 => format!("fido_{key}"),
            _ => key,
        };
        (key, text)
    }

    /// A TOML file of the picks, each value as a string, a bare scalar, a
    /// list or something no key accepts.
    fn file(picks: &[Pick]) -> String {
        let mut lines = std::collections::BTreeMap::new();
        let mut tables = String::new();
        for pick in picks {
            let (key, text) = key_and_text(pick);
            if key.eq_ignore_ascii_case("mcp_servers") || key.ends_with("MCP_SERVERS") {
                match pick.3 {
                    0 => lines.insert(key, "3".to_string()),
                    _ => {
                        tables.push_str(&format!("[{key}.s{}]\ncommand = \"c\"\n", pick.1));
                        None
                    }
                };
                continue;
            }
            let quoted = format!("{text:?}");
            let value = match pick.3 {
                1 | 2 if text.parse::<i64>().is_ok() || text.parse::<f64>().is_ok() => {
                    text.to_string()
                }
                1 | 2 if text == "true" || text == "false" => text.to_string(),
                3 => format!(
                    "[{}]",
                    text.split(':')
                        .map(|part| format!("{part:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                4 if pick.1 % 7 == 0 => "1979-05-27".to_string(),
                4 if pick.1 % 7 == 1 => "{ a = 1 }".to_string(),
                4 if pick.1 % 7 == 2 => "[1]".to_string(),
                _ => quoted,
            };
            lines.insert(key, value);
        }
        let mut text: String = lines
            .into_iter()
            .map(|(key, value)| format!("{key:?} = {value}\n"))
            .collect();
        text.push_str(&tables);
        text
    }

    fn outcome(result: Result<Config, super::super::ConfigError>) -> String {
        match result {
            Ok(config) => format!("{config:?}"),
            Err(err) => format!("error: {err}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

        #[test]
        fn the_typed_layers_load_what_the_string_map_loaded(
            user in picks(),
            workspace in picks(),
            environment in picks(),
            flags in picks(),
            trusted in any::<bool>(),
            with_user_file in any::<bool>(),
            openai_key in any::<bool>(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("sub")).unwrap();
            if with_user_file {
                std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
                std::fs::write(home.path().join(".config/fido/config.toml"), file(&user)).unwrap();
            }
            if !workspace.is_empty() {
                std::fs::write(dir.path().join("fido.toml"), file(&workspace)).unwrap();
            }
            if trusted {
                TrustStore::in_dir(&home.path().join(".config/fido")).trust(dir.path()).unwrap();
            }
            let mut env = vec![("HOME".to_string(), home.path().display().to_string())];
            if openai_key {
                env.push(("OPENAI_API_KEY".into(), "env-key".into()));
                env.push(("ANTHROPIC_API_KEY".into(), "".into()));
            }
            for pick in &environment {
                let (key, text) = key_and_text(pick);
                let name = key.to_ascii_uppercase();
                let name = if name.starts_with("FIDO_") { name } else { format!("FIDO_{name}") };
                env.push((name, text.to_string()));
            }
            let overrides = Overrides {
                workspace: Some(dir.path().to_path_buf()),
                values: flags
                    .iter()
                    .map(|pick| {
                        let (key, text) = key_and_text(pick);
                        (key, text.to_string())
                    })
                    .collect(),
            };
            let typed = outcome(Config::load_from(&overrides, &env));
            let string_map = outcome(super::load_from(&overrides, &env));
            prop_assert_eq!(typed, string_map);
        }
    }
}
