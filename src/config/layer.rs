//! One layer of settings (a config file, the environment or the command
//! line) as a typed struct, and the stack of layers, the last of which wins
//! key by key.
//!
//! A layer is first a table of `key = text`: a file's values are written
//! as the text the environment would give (`7`, `true`, a list of strings
//! `:`-joined), so a key reads the same wherever it is set. Serde then puts
//! each text in its field, read as the field's type. A text that does not
//! read keeps what was expected instead; it is an error only if its layer
//! wins, and the error names that layer (a bad value that a later layer
//! overrides does no harm).

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::keys::COMMA_LISTS;
use super::mcp::{self, ServersByName};
use super::{ConfigError, KEYS, NetworkAccess, ProviderKind, Scope};
use crate::agent::CompactionStrategy;
use crate::hooks::config as hook_config;
use crate::hooks::{HookConfigError, HooksConfig};
use crate::protocol::changes::{DelegateMerge, DelegateWrite};
use crate::protocol::ipc::PlanFlavour;
use crate::protocol::{ApprovalPolicy, SandboxMode};
use crate::sandbox::SandboxRequirement;
use crate::subagent::MAX_DELEGATE_CONCURRENCY;

/// The settings of one layer: `None` where the layer is silent. The
/// meaning and scope of each key are in [`KEYS`]; the type says what the
/// key accepts.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigLayer {
    pub provider: Option<Setting<ProviderKind>>,
    pub base_url: Option<Setting<String>>,
    pub api_key: Option<Setting<String>>,
    pub model: Option<Setting<String>>,
    pub script: Option<Setting<String>>,
    pub plan_tool: Option<Setting<PlanFlavour>>,
    pub plan_file: Option<Setting<String>>,
    pub max_steps: Option<Setting<AtLeast<1>>>,
    pub request_timeout_ms: Option<Setting<Millis<1>>>,
    pub idle_timeout_ms: Option<Setting<Millis<1>>>,
    pub max_retries: Option<Setting<AtLeast<0>>>,
    pub retry_base_ms: Option<Setting<Millis<0>>>,
    pub retry_max_ms: Option<Setting<Millis<0>>>,
    pub bash_timeout_ms: Option<Setting<Millis<1>>>,
    pub bash_max_timeout_ms: Option<Setting<Millis<1>>>,
    pub compact_threshold_tokens: Option<Setting<AtLeast<1>>>,
    pub compact_keep_tokens: Option<Setting<AtLeast<1>>>,
    pub compact_strategy: Option<Setting<CompactionStrategy>>,
    pub anthropic_max_tokens: Option<Setting<AtLeast<1>>>,
    pub sandbox: Option<Setting<SandboxRequirement>>,
    pub sandbox_mode: Option<Setting<SandboxMode>>,
    pub approval_policy: Option<Setting<ApprovalPolicy>>,
    pub network: Option<Setting<NetworkAccess>>,
    pub network_allow: Option<Setting<HostList>>,
    pub network_deny: Option<Setting<HostList>>,
    pub env_passthrough: Option<Setting<NameList>>,
    pub writable_roots: Option<Setting<PathList>>,
    pub command_max_processes: Option<Setting<Between<299, 4_194_302>>>,
    pub command_tmpdir_mib: Option<Setting<AtLeast<1>>>,
    pub delegate_write: Option<Setting<DelegateWrite>>,
    pub delegate_merge: Option<Setting<DelegateMerge>>,
    pub delegate_diff_bytes: Option<Setting<AtLeast<256>>>,
    pub delegate_timeout_ms: Option<Setting<Millis<1_000>>>,
    pub delegate_max_timeout_ms: Option<Setting<Millis<1_000>>>,
    pub delegate_grace_ms: Option<Setting<Millis<0>>>,
    pub delegate_max_steps: Option<Setting<AtLeast<1>>>,
    pub delegate_concurrency: Option<Setting<Between<1, MAX_DELEGATE_CONCURRENCY>>>,
    pub delegate_max_per_turn: Option<Setting<AtLeast<1>>>,
    pub delegate_budget_tokens: Option<Setting<AtLeast<0>>>,
    pub delegate_session_budget_tokens: Option<Setting<AtLeast<0>>>,
    pub context_window: Option<Setting<AtLeast<512>>>,
    pub max_output_tokens: Option<Setting<AtLeast<16>>>,
    pub loop_repeat_limit: Option<Setting<AtLeast<2>>>,
    pub provider_concurrency: Option<Setting<AtLeast<1>>>,
    pub session_retention_days: Option<Setting<AtLeast<1>>>,
    pub tool_call_fallback: Option<Setting<OnOff>>,
}

/// One key's value in one layer: the text as given, and the text read as
/// `T` or else what was expected (for the error, should this layer win).
#[derive(Debug)]
pub(super) struct Setting<T> {
    text: String,
    read: Result<T, Expected>,
}

impl<'de, T: FromText> Deserialize<'de> for Setting<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let read = T::from_text(&text);
        Ok(Setting { text, read })
    }
}

/// What a key's text should have been, in words (`a whole number of at
/// least 1`): the end of the error a person reads, and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Expected(pub String);

impl From<&str> for Expected {
    fn from(words: &str) -> Expected {
        Expected(words.to_string())
    }
}

impl PartialEq<&str> for Expected {
    fn eq(&self, words: &&str) -> bool {
        self.0 == *words
    }
}

/// A setting's type: how a key's text reads, or what was expected.
pub(super) trait FromText: Sized {
    fn from_text(text: &str) -> Result<Self, Expected>;
}

/// Where a layer came from, to name it in errors.
#[derive(Debug, Clone)]
pub(super) enum Source {
    File(String),
    Environment,
    CommandLine,
}

impl Source {
    /// How an error about `key` names this layer.
    fn name(&self, key: &str) -> String {
        match self {
            Source::File(path) => path.clone(),
            Source::Environment => {
                format!("environment variable FIDO_{}", key.to_ascii_uppercase())
            }
            Source::CommandLine => "command line".into(),
        }
    }
}

/// The layers in order; a later one beats an earlier one key by key.
#[derive(Debug, Default)]
pub(super) struct Layers(Vec<(Source, ConfigLayer)>);

/// The winning value of one key, checked: `setting!(layers, max_steps)?`
/// is an `Option<&AtLeast<1>>`; `setting!(layers, plan_file, with source)?`
/// an `Option<(&String, String)>`, the second the name of the layer, for
/// the checks that need the file system.
macro_rules! setting {
    ($layers:expr, $key:ident) => {
        $layers.get(stringify!($key), |layer| &layer.$key)
    };
    ($layers:expr, $key:ident, with source) => {
        $layers.get_with_source(stringify!($key), |layer| &layer.$key)
    };
}
pub(super) use setting;

impl Layers {
    pub fn push(&mut self, source: Source, layer: ConfigLayer) {
        self.0.push((source, layer));
    }

    /// The winning value of `key`. Use [`setting!`], which names the key
    /// once.
    pub fn get<T>(
        &self,
        key: &str,
        field: impl Fn(&ConfigLayer) -> &Option<Setting<T>>,
    ) -> Result<Option<&T>, ConfigError> {
        Ok(self.get_with_source(key, field)?.map(|(value, _)| value))
    }

    /// The winning value of `key` and the name of its layer, or the error
    /// naming that layer if the value does not read.
    pub fn get_with_source<T>(
        &self,
        key: &str,
        field: impl Fn(&ConfigLayer) -> &Option<Setting<T>>,
    ) -> Result<Option<(&T, String)>, ConfigError> {
        let last = self
            .0
            .iter()
            .rev()
            .find_map(|(source, layer)| field(layer).as_ref().map(|setting| (source, setting)));
        let Some((source, setting)) = last else {
            return Ok(None);
        };
        match &setting.read {
            Ok(value) => Ok(Some((value, source.name(key)))),
            Err(expected) => Err(ConfigError::Invalid {
                source_name: source.name(key),
                key: key.to_string(),
                value: setting.text.clone(),
                expected: expected.0.clone(),
            }),
        }
    }
}

impl ConfigLayer {
    /// The layer of a table of `key = text` pairs whose keys are known.
    /// (Serde can only refuse a key [`KEYS`] lists and the struct lacks,
    /// which a test rules out.)
    fn from_table(source: &Source, table: toml::Table) -> Result<ConfigLayer, ConfigError> {
        let path = match source {
            Source::File(path) => path.clone(),
            Source::Environment => "the environment".into(),
            Source::CommandLine => "the command line".into(),
        };
        toml::Value::Table(table)
            .try_into()
            .map_err(|err: toml::de::Error| ConfigError::Parse {
                path,
                message: err.message().to_string(),
            })
    }
}

/// A config file's layer. With `trusted` false (a workspace file of a
/// folder nobody trusted) only [`Scope::Anywhere`] keys are taken; the
/// others are returned, to be named in one warning. `[mcp_servers]` goes
/// to `mcp_servers` and `[[hooks.EVENT]]` to `hooks`, from trusted files
/// only (both run commands with the user's rights).
pub(super) fn file_layer(
    path: &Path,
    trusted: bool,
    mcp_servers: &mut ServersByName,
    hooks: &mut HooksConfig,
) -> Result<(Source, ConfigLayer, Vec<String>), ConfigError> {
    let shown = path.display().to_string();
    let table = read_table(path, &shown)?;
    table_layer(shown, table, trusted, mcp_servers, hooks)
}

/// [`file_layer`] of a file's table, already read (so that what was
/// trusted and what is used are the same reading).
pub(super) fn table_layer(
    shown: String,
    table: toml::Table,
    trusted: bool,
    mcp_servers: &mut ServersByName,
    hooks: &mut HooksConfig,
) -> Result<(Source, ConfigLayer, Vec<String>), ConfigError> {
    let mut texts = toml::Table::new();
    let mut ignored = Vec::new();
    for (raw_key, raw_value) in table {
        let key = normalise_key(&raw_key);
        let scope = if key == mcp::KEY || key == hook_config::KEY {
            Scope::Trusted
        } else {
            check_known(&key, &shown)?
        };
        if !trusted && scope == Scope::Trusted {
            ignored.push(key);
        } else if key == mcp::KEY {
            mcp::read_layer(&shown, raw_value, mcp_servers)?;
        } else if key == hook_config::KEY {
            hook_config::read_layer(raw_value, hooks).map_err(|err| hook_error(&shown, err))?;
        } else {
            let text = file_text(&shown, &key, raw_value)?;
            texts.insert(key, toml::Value::String(text));
        }
    }
    let source = Source::File(shown);
    let layer = ConfigLayer::from_table(&source, texts)?;
    Ok((source, layer, ignored))
}

/// Takes out of a workspace file's layer the keys only the user config
/// file may set ([`Scope::UserFile`]), trusted or not; the warning that
/// says so, if it set any.
pub(super) fn drop_user_file_keys(layer: &mut ConfigLayer, shown: &str) -> Option<String> {
    layer.env_passthrough.take().map(|_| {
        format!(
            "{shown} sets env_passthrough, which only your user config file may set (a repository must not choose which of your secrets its commands see); it was ignored."
        )
    })
}

/// The `FIDO_*` variables of every key (an empty one is unset).
pub(super) fn environment_layer(
    env_get: &dyn Fn(&str) -> Option<String>,
) -> Result<ConfigLayer, ConfigError> {
    let mut texts = toml::Table::new();
    for (key, _, scope) in KEYS {
        if let Some(text) = env_get(&format!("FIDO_{}", key.to_ascii_uppercase())) {
            if *scope == Scope::UserFile {
                return Err(ConfigError::UserFileOnly {
                    source_name: Source::Environment.name(key),
                    key: key.to_string(),
                });
            }
            texts.insert(key.to_string(), toml::Value::String(text));
        }
    }
    ConfigLayer::from_table(&Source::Environment, texts)
}

/// The `KEY=VALUE` pairs of the command line; a later pair beats an
/// earlier one of the same key.
pub(super) fn command_line_layer(values: &[(String, String)]) -> Result<ConfigLayer, ConfigError> {
    let source = Source::CommandLine;
    let mut texts = toml::Table::new();
    for (key, value) in values {
        let key = normalise_key(key);
        if check_known(&key, "command line")? == Scope::UserFile {
            return Err(ConfigError::UserFileOnly {
                source_name: source.name(&key),
                key,
            });
        }
        texts.insert(key, toml::Value::String(value.clone()));
    }
    ConfigLayer::from_table(&source, texts)
}

/// A hook table's error as the config's, naming the file.
fn hook_error(shown: &str, err: HookConfigError) -> ConfigError {
    match err {
        HookConfigError::UnknownKey { key, known } => ConfigError::UnknownKey {
            source_name: shown.to_string(),
            key,
            known,
        },
        HookConfigError::Invalid {
            key,
            value,
            expected,
        } => ConfigError::Invalid {
            source_name: shown.to_string(),
            key,
            value,
            expected,
        },
    }
}

pub(super) fn read_table(path: &Path, shown: &str) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: shown.to_string(),
        source,
    })?;
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            path: shown.to_string(),
            message: e.message().to_string(),
        })
}

/// `FIDO_MAX_STEPS` and `MAX_STEPS` are `max_steps`.
pub(super) fn normalise_key(key: &str) -> String {
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

/// A TOML value as the text the other layers give; a list of strings is
/// `:`-joined (for `writable_roots`), or `,`-joined for the keys whose
/// entries hold `:` ([`COMMA_LISTS`]).
fn file_text(shown: &str, key: &str, raw: toml::Value) -> Result<String, ConfigError> {
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
            let separator = if COMMA_LISTS.contains(&key) { "," } else { ":" };
            Ok(parts.join(separator))
        }
        other @ (toml::Value::Datetime(_) | toml::Value::Table(_)) => Err(bad(&other)),
    }
}

/// A whole number of at least `MIN` and at most `u32::MAX`: every such
/// setting is held in 32 bits or more, so none wraps around on the way.
#[derive(Debug, Clone, Copy)]
pub(super) struct AtLeast<const MIN: u64>(pub u64);

impl<const MIN: u64> FromText for AtLeast<MIN> {
    fn from_text(text: &str) -> Result<Self, Expected> {
        let most = u64::from(u32::MAX);
        match text.trim().parse::<u64>() {
            Ok(n) if (MIN..=most).contains(&n) => Ok(AtLeast(n)),
            Ok(n) if n > most => Err(Expected(format!("a whole number from {MIN} to {most}"))),
            _ => Err(Expected(format!("a whole number of at least {MIN}"))),
        }
    }
}

/// A whole number from `MIN` to `MAX`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Between<const MIN: u64, const MAX: u64>(pub u64);

impl<const MIN: u64, const MAX: u64> FromText for Between<MIN, MAX> {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match AtLeast::<MIN>::from_text(text)? {
            AtLeast(n) if n <= MAX => Ok(Between(n)),
            _ => Err(Expected(format!("a whole number from {MIN} to {MAX}"))),
        }
    }
}

/// A number of milliseconds, at least `MIN`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Millis<const MIN: u64>(pub Duration);

impl<const MIN: u64> FromText for Millis<MIN> {
    fn from_text(text: &str) -> Result<Self, Expected> {
        AtLeast::<MIN>::from_text(text).map(|AtLeast(ms)| Millis(Duration::from_millis(ms)))
    }
}

/// `true`, `1`, `yes` or `false`, `0`, `no`.
impl FromText for bool {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text.trim() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err("true or false".into()),
        }
    }
}

/// A flag (`true` / `false`, as for any flag) or `allowlist`.
impl FromText for NetworkAccess {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text.trim() {
            "allowlist" => Ok(NetworkAccess::Allowlist),
            other => match bool::from_text(other) {
                Ok(true) => Ok(NetworkAccess::On),
                Ok(false) => Ok(NetworkAccess::Off),
                Err(_) => Err("true, false or \"allowlist\"".into()),
            },
        }
    }
}

/// A flag that also takes `on` and `off`.
#[derive(Debug, Clone, Copy)]
pub(super) struct OnOff(pub bool);

impl FromText for OnOff {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text.trim() {
            "on" => Ok(OnOff(true)),
            "off" => Ok(OnOff(false)),
            other => bool::from_text(other).map(OnOff),
        }
    }
}

/// Folders, `:`-separated (a file's list of strings is joined so); the
/// parts as given, blank ones left out.
#[derive(Debug, Clone)]
pub(super) struct PathList(pub Vec<String>);

impl FromText for PathList {
    fn from_text(text: &str) -> Result<Self, Expected> {
        let parts = text.split(':').filter(|part| !part.trim().is_empty());
        Ok(PathList(parts.map(str::to_string).collect()))
    }
}

/// Names of environment variables (`env_passthrough`), `,`- or
/// space-separated (a file's list of strings is joined so), each letters,
/// digits and `_`, not starting with a digit.
#[derive(Debug, Clone)]
pub(super) struct NameList(pub Vec<String>);

impl FromText for NameList {
    fn from_text(text: &str) -> Result<Self, Expected> {
        let names = text.split(|c: char| c == ',' || c.is_whitespace());
        let names: Vec<String> = names
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        let bad = names.iter().find(|name| {
            name.starts_with(|c: char| c.is_ascii_digit())
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        match bad {
            Some(name) => Err(Expected(format!(
                "a list of environment variable names (letters, digits and `_`, not starting with a digit); `{name}` is not one"
            ))),
            None => Ok(NameList(names)),
        }
    }
}

/// Host rules (`network_allow`, `network_deny`), `,`- or space-separated.
#[derive(Debug, Clone)]
pub(super) struct HostList(pub Vec<crate::net::HostRule>);

impl FromText for HostList {
    fn from_text(text: &str) -> Result<Self, Expected> {
        crate::net::rules::parse_list(text)
            .map(HostList)
            .map_err(|why| {
                Expected(format!(
                    "a list of HOST or HOST:PORT (`*.` for subdomains): {why}"
                ))
            })
    }
}

impl FromText for String {
    fn from_text(text: &str) -> Result<Self, Expected> {
        Ok(text.to_string())
    }
}

impl FromText for ProviderKind {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text {
            "openai" => Ok(ProviderKind::OpenAi),
            "anthropic" => Ok(ProviderKind::Anthropic),
            "script" => Ok(ProviderKind::Script),
            _ => Err("openai, anthropic or script".into()),
        }
    }
}

impl FromText for PlanFlavour {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text {
            "update_plan" => Ok(PlanFlavour::UpdatePlan),
            "todo" => Ok(PlanFlavour::Todo),
            _ => Err("update_plan or todo".into()),
        }
    }
}

impl FromText for CompactionStrategy {
    fn from_text(text: &str) -> Result<Self, Expected> {
        match text {
            "summarize" | "summarise" => Ok(CompactionStrategy::Summarize),
            "elide" => Ok(CompactionStrategy::Elide),
            _ => Err("summarize or elide".into()),
        }
    }
}

impl FromText for SandboxRequirement {
    fn from_text(text: &str) -> Result<Self, Expected> {
        SandboxRequirement::parse(text).map_err(|_| "required or best_effort".into())
    }
}

impl FromText for SandboxMode {
    fn from_text(text: &str) -> Result<Self, Expected> {
        SandboxMode::parse(text)
            .ok_or_else(|| "read-only, workspace-write or danger-full-access".into())
    }
}

impl FromText for DelegateWrite {
    fn from_text(text: &str) -> Result<Self, Expected> {
        DelegateWrite::parse(text).ok_or_else(|| "never, ask or allow".into())
    }
}

impl FromText for DelegateMerge {
    fn from_text(text: &str) -> Result<Self, Expected> {
        DelegateMerge::parse(text).ok_or_else(|| "ask, auto or manual".into())
    }
}

impl FromText for ApprovalPolicy {
    fn from_text(text: &str) -> Result<Self, Expected> {
        ApprovalPolicy::parse(text).ok_or_else(|| "untrusted, on-request or never".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(pairs: &[(&str, &str)]) -> toml::Table {
        pairs
            .iter()
            .map(|(key, text)| (key.to_string(), toml::Value::String(text.to_string())))
            .collect()
    }

    #[test]
    fn every_key_has_its_field_and_every_field_is_a_key() {
        let fields = format!("{:?}", ConfigLayer::default());
        assert_eq!(fields.matches(": None").count(), KEYS.len(), "{fields}");
        for (key, _, _) in KEYS {
            let layer = ConfigLayer::from_table(&Source::CommandLine, table(&[(key, "x")]))
                .unwrap_or_else(|err| panic!("{key}: {err}"));
            let shown = format!("{layer:?}");
            assert!(shown.contains(&format!("{key}: Some(")), "{key}: {shown}");
        }
    }

    #[test]
    fn the_last_layer_wins_and_a_bad_value_it_overrides_does_no_harm() {
        let mut layers = Layers::default();
        for (source, text) in [
            (Source::File("user.toml".into()), "many"),
            (Source::Environment, "7"),
            (Source::CommandLine, "9"),
        ] {
            let layer = ConfigLayer::from_table(&source, table(&[("max_steps", text)])).unwrap();
            layers.push(source, layer);
        }
        layers.push(Source::CommandLine, ConfigLayer::default());
        let steps = setting!(layers, max_steps).unwrap().map(|n| n.0);
        assert_eq!(steps, Some(9));

        let layer = ConfigLayer::from_table(&Source::Environment, table(&[("max_steps", "0")]));
        layers.push(Source::Environment, layer.unwrap());
        let err = setting!(layers, max_steps).unwrap_err().to_string();
        assert_eq!(
            err,
            "environment variable FIDO_MAX_STEPS: `max_steps` = \"0\" is not valid: expected a whole number of at least 1"
        );
    }

    #[test]
    fn each_type_reads_its_texts() {
        assert!(matches!(AtLeast::<2>::from_text(" 2 "), Ok(AtLeast(2))));
        assert_eq!(
            AtLeast::<2>::from_text("1").unwrap_err(),
            "a whole number of at least 2"
        );
        assert_eq!(
            Between::<1, 16>::from_text("0").unwrap_err(),
            "a whole number of at least 1"
        );
        assert_eq!(
            Between::<1, 16>::from_text("17").unwrap_err(),
            "a whole number from 1 to 16"
        );
        assert!(
            matches!(Millis::<0>::from_text("5"), Ok(Millis(d)) if d == Duration::from_millis(5))
        );
        assert_eq!(bool::from_text("on").unwrap_err(), "true or false");
        assert!(matches!(OnOff::from_text("on"), Ok(OnOff(true))));
        assert!(matches!(OnOff::from_text(" no "), Ok(OnOff(false))));
        let roots = PathList::from_text("/a: :b:").unwrap();
        assert_eq!(roots.0, ["/a", "b"]);
        let hosts = HostList::from_text("example.com, *.example.org:8443 [::1]:9").unwrap();
        let shown: Vec<String> = hosts.0.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["example.com", "*.example.org:8443", "[::1]:9"]);
        let err = HostList::from_text("example.com:x").unwrap_err();
        assert!(err.0.contains("`example.com:x`"), "{}", err.0);
    }
}
