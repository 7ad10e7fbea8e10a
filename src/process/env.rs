//! The environment a child of Fido starts with: never a secret of the
//! user's unless the user config names it in `env_passthrough` (README,
//! "Secrets").
//!
//! Every kind of child goes through [`EnvPolicy::apply`]: the main
//! agent's commands and the user's hooks start from Fido's whole
//! environment ([`Inherit::All`]), MCP servers and subagents from a short
//! list ([`Inherit::Only`]); in both, a variable [`is_secret`] says is a
//! secret is left out, unless passed through by name.
//!
//! A secret is known by its name (`*KEY*`, `*SECRET*`, `*TOKEN*`,
//! `*PASSWORD*`, `*CREDENTIAL*` and their kin, any case, and the
//! credential variables those miss, such as `SSH_AUTH_SOCK` or
//! `KUBECONFIG`) or by its value (a URL carrying a password, a token in a
//! well-known format), so a token under an innocent name is caught too.

use std::ffi::{OsStr, OsString};

/// Which of Fido's variables a kind of child starts from.
#[derive(Debug, Clone, Copy)]
pub enum Inherit {
    /// Every variable but the secrets (commands, hooks).
    All,
    /// Only these names, and even of them no secret (MCP servers,
    /// subagents).
    Only(&'static [&'static str]),
}

/// What a subagent's `fido __subagent` starts with: enough to find
/// programs, speak the user's language and log (README, "Write-capable
/// delegation").
pub const SUBAGENT_ENV: Inherit = Inherit::Only(&["PATH", "LANG", "LC_ALL", "RUST_LOG"]);

/// The environment policy of a session: the names the user config lets
/// through (`env_passthrough`), exact and case-sensitive, as the
/// environment itself is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPolicy {
    passthrough: Vec<String>,
}

impl EnvPolicy {
    /// A policy that lets `names` through, secrets or not.
    pub fn with_passthrough(names: impl IntoIterator<Item = String>) -> EnvPolicy {
        let mut passthrough: Vec<String> = names.into_iter().collect();
        passthrough.sort();
        passthrough.dedup();
        EnvPolicy { passthrough }
    }

    /// The names let through, sorted.
    pub fn passthrough(&self) -> &[String] {
        &self.passthrough
    }

    /// Gives `command` Fido's environment as `inherit` and this policy
    /// say. It replaces the whole environment, so call it before setting
    /// the child's own variables (`TMPDIR`, `PAGER`, an MCP server's
    /// `env`), which are Fido's choice and kept.
    pub fn apply(&self, command: &mut tokio::process::Command, inherit: Inherit) {
        self.apply_from(command, inherit, std::env::vars_os());
    }

    /// [`Self::apply`] with `parent` standing for Fido's environment
    /// (`fido sandbox check` adds a canary secret to it).
    pub fn apply_from(
        &self,
        command: &mut tokio::process::Command,
        inherit: Inherit,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
    ) {
        command.env_clear();
        command.envs(self.child_env(inherit, parent));
    }

    /// The variables of `parent` a child gets.
    pub fn child_env(
        &self,
        inherit: Inherit,
        parent: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        parent
            .into_iter()
            .filter(|(name, value)| self.passes(inherit, name, value))
            .collect()
    }

    fn passes(&self, inherit: Inherit, name: &OsStr, value: &OsStr) -> bool {
        if self.passthrough.iter().any(|p| OsStr::new(p) == name) {
            return true;
        }
        let listed = match inherit {
            Inherit::All => true,
            Inherit::Only(names) => names.iter().any(|n| OsStr::new(n) == name),
        };
        listed && !is_secret(name, value)
    }
}

/// Words that make a name a secret wherever they appear in it, in any
/// case (`GITHUB_TOKEN`, `npm_config__authToken`, `AWS_SECRET_ACCESS_KEY`,
/// `PGPASSWORD`, `GOOGLE_APPLICATION_CREDENTIALS`).
const SECRET_PARTS: &[&str] = &[
    "KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDS",
    "ASKPASS",
    "AUTHORIZATION",
    "COOKIE",
    "WEBHOOK",
    "CONNECTION_STRING",
];

/// Words that make a name a secret only as a whole `_`-separated word,
/// since they are common inside other words (`AUTH` in `GIT_AUTHOR_NAME`,
/// `PAT` in `PATH`): `SSH_AUTH_SOCK`, `NPM_CONFIG__AUTH`, `GH_PAT`,
/// `SMTP_PASS`, `MYSQL_PWD` (but not `PWD` alone, the working directory).
const SECRET_WORDS: &[&str] = &["AUTH", "PAT", "PASS", "PWD"];

/// Credential variables that the parts and words above miss: agents'
/// sockets, files that hold or point at credentials, password managers'
/// sessions, and git's configuration by environment, which can carry an
/// `http.extraHeader` with a token (its keys and values go together, or
/// git refuses to start).
const SECRET_NAMES: &[&str] = &[
    "GPG_AGENT_INFO",
    "SSH_AGENT_PID",
    "KUBECONFIG",
    "NETRC",
    "KRB5CCNAME",
    "KRB5_KTNAME",
    "BW_SESSION",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "VSCODE_GIT_IPC_HANDLE",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// Prefixes of credential variables: PostgreSQL's password file, Vault's
/// settings, 1Password's sessions, git's numbered configuration.
const SECRET_PREFIXES: &[&str] = &[
    "PGPASS",
    "VAULT_",
    "OP_SESSION_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
];

/// Whether a variable holds a secret, by its name or by its value.
pub fn is_secret(name: &OsStr, value: &OsStr) -> bool {
    secret_name(&name.to_string_lossy()) || secret_value(&value.to_string_lossy())
}

fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_PARTS.iter().any(|part| upper.contains(part))
        || SECRET_NAMES.contains(&upper.as_str())
        || SECRET_PREFIXES.iter().any(|p| upper.starts_with(p))
    {
        return true;
    }
    let words: Vec<&str> = upper.split('_').collect();
    // A single word is never one of these: `PWD` is the working directory.
    words.len() > 1 && words.iter().any(|word| SECRET_WORDS.contains(word))
}

/// Prefixes of tokens in well-known formats (GitHub, GitLab, Slack,
/// Anthropic, OpenAI, AWS access keys, npm, Hugging Face, PyPI).
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "sk-ant-",
    "sk-proj-",
    "AKIA",
    "ASIA",
    "npm_",
    "hf_",
    "pypi-",
];

fn secret_value(value: &str) -> bool {
    url_with_password(value) || looks_like_token(value)
}

/// A URL with a password in it anywhere in the value
/// (`postgres://user:pw@host/db`, `http://user:pw@proxy:3128`).
fn url_with_password(value: &str) -> bool {
    value.match_indices("://").any(|(at, sep)| {
        let rest = &value[at + sep.len()..];
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        authority
            .rfind('@')
            .is_some_and(|at| authority[..at].contains(':'))
    })
}

/// A token in a well-known format: one of [`TOKEN_PREFIXES`], then enough
/// token characters that it is no ordinary word.
fn looks_like_token(value: &str) -> bool {
    let value = value.trim();
    value.len() >= 20
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && TOKEN_PREFIXES.iter().any(|p| value.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str) -> bool {
        is_secret(OsStr::new(name), OsStr::new("x"))
    }

    #[test]
    fn names_of_secrets_are_secret_in_any_case() {
        for name in [
            "GITHUB_TOKEN",
            "github_token",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AZURE_CLIENT_SECRET",
            "AZURE_CLIENT_CERTIFICATE_PATH",
            "AZURE_STORAGE_CONNECTION_STRING",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "NPM_TOKEN",
            "NPM_CONFIG__AUTH",
            "npm_config__authToken",
            "SSH_AUTH_SOCK",
            "GPG_AGENT_INFO",
            "GH_PAT",
            "MYSQL_PWD",
            "PGPASSWORD",
            "PGPASSFILE",
            "SMTP_PASS",
            "KUBECONFIG",
            "DOCKER_AUTH_CONFIG",
            "VAULT_ADDR",
            "VAULT_TOKEN",
            "OPENAI_API_KEY",
            "FIDO_API_KEY",
            "GIT_ASKPASS",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
            "GIT_CONFIG_VALUE_0",
            "OP_SESSION_my",
            "BW_SESSION",
            "SLACK_WEBHOOK_URL",
            "BORG_PASSPHRASE",
            "KRB5CCNAME",
            "NETRC",
        ] {
            assert!(secret(name), "{name} passed");
        }
    }

    #[test]
    fn what_programs_need_is_no_secret() {
        for name in [
            "PATH",
            "HOME",
            "USER",
            "SHELL",
            "TERM",
            "LANG",
            "LC_ALL",
            "PWD",
            "OLDPWD",
            "TMPDIR",
            "XDG_CONFIG_HOME",
            "XDG_RUNTIME_DIR",
            "XDG_SESSION_TYPE",
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "MANPATH",
            "PYTHONPATH",
            "LD_LIBRARY_PATH",
            "CARGO_HOME",
            "RUST_LOG",
            "EDITOR",
            "AWS_REGION",
            "AWS_PROFILE",
            "SSL_CERT_FILE",
            "DISPLAY",
        ] {
            assert!(!secret(name), "{name} was removed");
        }
    }

    #[test]
    fn secret_values_are_caught_under_any_name() {
        let value_secret = |value: &str| is_secret(OsStr::new("SOME_URL"), OsStr::new(value));
        assert!(value_secret("postgres://app:hunter2@db.internal:5432/app"));
        assert!(value_secret("http://me:pw@proxy:3128"));
        assert!(value_secret("x https://u:p@example.com y"));
        assert!(value_secret("ghp_0123456789abcdefghijklmnopqrstuvwxyz"));
        assert!(value_secret("AKIAIOSFODNN7EXAMPLE"));
        assert!(value_secret("sk-proj-abcdefghijklmnopqrstuv"));
        assert!(!value_secret("https://example.com/a@b:c"));
        assert!(!value_secret("https://user@example.com/"));
        assert!(!value_secret("/usr/bin:/bin"));
        assert!(!value_secret("ghp_short"));
        assert!(!value_secret("hf_is the start of a sentence"));
    }

    #[test]
    fn a_child_gets_what_its_kind_inherits_and_what_is_passed_through() {
        let parent = || {
            [
                ("PATH", "/bin"),
                ("HOME", "/home/u"),
                ("GITHUB_TOKEN", "t"),
                ("NPM_TOKEN", "n"),
                ("DATABASE_URL", "postgres://a:b@h/d"),
            ]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        };
        let names = |env: Vec<(OsString, OsString)>| {
            env.into_iter()
                .map(|(k, _)| k.into_string().unwrap())
                .collect::<Vec<_>>()
        };
        let none = EnvPolicy::default();
        assert_eq!(
            names(none.child_env(Inherit::All, parent())),
            ["PATH", "HOME"]
        );
        let through = EnvPolicy::with_passthrough(["GITHUB_TOKEN".to_string()]);
        assert_eq!(
            names(through.child_env(Inherit::All, parent())),
            ["PATH", "HOME", "GITHUB_TOKEN"]
        );
        assert_eq!(
            names(through.child_env(Inherit::Only(&["PATH", "NPM_TOKEN"]), parent())),
            ["PATH", "GITHUB_TOKEN"]
        );
        // Passing through is exact: the case of a name matters, as it does
        // to the programs that read it.
        let lower = EnvPolicy::with_passthrough(["github_token".to_string()]);
        assert_eq!(
            names(lower.child_env(Inherit::All, parent())),
            ["PATH", "HOME"]
        );
        assert_eq!(names(none.child_env(SUBAGENT_ENV, parent())), ["PATH"]);
    }
}
