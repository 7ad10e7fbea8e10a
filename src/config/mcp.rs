//! `[mcp_servers.NAME]` tables: the MCP servers a session starts.
//!
//! A server is a command Fido runs with the user's rights, so it comes only
//! from trusted layers: the user config file, or a workspace `fido.toml`
//! once the folder is trusted. An untrusted workspace file that defines one
//! gets the same warning as its other trusted-only keys, and the server is
//! not started. A later layer replaces a server of the same name whole.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;
use crate::mcp::McpServerConfig;
use crate::process::EnvPolicy;

/// The key of the table in a config file.
pub const KEY: &str = "mcp_servers";

/// The servers of every layer read so far, by name.
pub type ServersByName = BTreeMap<String, McpServerConfig>;

/// Reads the `mcp_servers` value of the file `shown` into `servers`.
pub fn read_layer(
    shown: &str,
    value: toml::Value,
    servers: &mut ServersByName,
) -> Result<(), ConfigError> {
    let toml::Value::Table(table) = value else {
        return Err(invalid(
            shown,
            KEY,
            &value,
            "a table of servers: [mcp_servers.NAME]",
        ));
    };
    for (name, server) in table {
        let parsed = parse_server(shown, &name, server)?;
        servers.insert(name, parsed);
    }
    Ok(())
}

fn parse_server(
    shown: &str,
    name: &str,
    value: toml::Value,
) -> Result<McpServerConfig, ConfigError> {
    let key = |field: &str| format!("{KEY}.{name}.{field}");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(invalid(
            shown,
            &format!("{KEY}.{name}"),
            &toml::Value::String(name.into()),
            "a server name of letters, digits, `_` and `-`",
        ));
    }
    let toml::Value::Table(mut table) = value else {
        return Err(invalid(shown, &key(""), &value, "a table"));
    };
    let command = match table.remove("command") {
        Some(toml::Value::String(command)) if !command.trim().is_empty() => command,
        Some(other) => return Err(invalid(shown, &key("command"), &other, "a program name")),
        None => {
            return Err(ConfigError::Invalid {
                source_name: shown.into(),
                key: key("command"),
                value: "nothing".into(),
                expected: "the program that runs the server".into(),
            });
        }
    };
    let server = McpServerConfig {
        name: name.to_string(),
        command,
        args: strings(shown, &key("args"), table.remove("args"))?,
        env: env_table(shown, &key("env"), table.remove("env"))?,
        env_policy: EnvPolicy::default(),
        cwd: match table.remove("cwd") {
            None => None,
            Some(toml::Value::String(dir)) => Some(PathBuf::from(dir)),
            Some(other) => return Err(invalid(shown, &key("cwd"), &other, "a folder")),
        },
        read_only: match table.remove("read_only") {
            None => false,
            Some(toml::Value::Boolean(flag)) => flag,
            Some(other) => return Err(invalid(shown, &key("read_only"), &other, "true or false")),
        },
        startup_timeout: millis(
            shown,
            &key("startup_timeout_ms"),
            table.remove("startup_timeout_ms"),
            McpServerConfig::DEFAULT_STARTUP_TIMEOUT,
        )?,
        tool_timeout: millis(
            shown,
            &key("tool_timeout_ms"),
            table.remove("tool_timeout_ms"),
            McpServerConfig::DEFAULT_TOOL_TIMEOUT,
        )?,
        max_restarts: match table.remove("max_restarts") {
            None => McpServerConfig::DEFAULT_MAX_RESTARTS,
            Some(toml::Value::Integer(n)) if (0..=100).contains(&n) => n as u32,
            Some(other) => {
                return Err(invalid(shown, &key("max_restarts"), &other, "0 to 100"));
            }
        },
    };
    if let Some(unknown) = table.keys().next() {
        return Err(ConfigError::UnknownKey {
            source_name: shown.into(),
            key: key(unknown),
            known: "command, args, env, cwd, read_only, startup_timeout_ms, tool_timeout_ms, max_restarts"
                .into(),
        });
    }
    Ok(server)
}

fn strings(shown: &str, key: &str, value: Option<toml::Value>) -> Result<Vec<String>, ConfigError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let toml::Value::Array(items) = &value else {
        return Err(invalid(shown, key, &value, "a list of strings"));
    };
    items
        .iter()
        .map(|item| match item {
            toml::Value::String(s) => Ok(s.clone()),
            other => Err(invalid(shown, key, other, "a string")),
        })
        .collect()
}

fn env_table(
    shown: &str,
    key: &str,
    value: Option<toml::Value>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let Some(value) = value else {
        return Ok(BTreeMap::new());
    };
    let toml::Value::Table(table) = value else {
        return Err(invalid(shown, key, &value, "a table of NAME = \"value\""));
    };
    table
        .into_iter()
        .map(|(name, value)| match value {
            toml::Value::String(s) => Ok((name, s)),
            other => Err(invalid(shown, &format!("{key}.{name}"), &other, "a string")),
        })
        .collect()
}

fn millis(
    shown: &str,
    key: &str,
    value: Option<toml::Value>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(toml::Value::Integer(ms)) if ms >= 1 => Ok(Duration::from_millis(ms as u64)),
        Some(other) => Err(invalid(
            shown,
            key,
            &other,
            "a whole number of milliseconds, at least 1",
        )),
    }
}

fn invalid(shown: &str, key: &str, value: &toml::Value, expected: &str) -> ConfigError {
    ConfigError::Invalid {
        source_name: shown.to_string(),
        key: key.to_string(),
        value: format!("{value:?}"),
        expected: expected.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides, TrustStore};
    use std::path::Path;

    const SERVER: &str = "[mcp_servers.time]\ncommand = \"mcp-server-time\"\nargs = [\"--local-timezone\", \"UTC\"]\nenv = { TZ = \"UTC\" }\nread_only = true\ntool_timeout_ms = 500\n";

    fn load(dir: &Path, home: &Path) -> Config {
        let env = vec![("HOME".to_string(), home.display().to_string())];
        let overrides = Overrides {
            workspace: Some(dir.to_path_buf()),
            values: vec![],
        };
        Config::load_from(&overrides, &env).unwrap()
    }

    #[test]
    fn a_server_table_is_parsed_with_defaults() {
        let mut servers = ServersByName::new();
        let value: toml::Table = SERVER.parse().unwrap();
        read_layer("f", value["mcp_servers"].clone(), &mut servers).unwrap();
        let time = &servers["time"];
        assert_eq!(time.command, "mcp-server-time");
        assert_eq!(time.args, ["--local-timezone", "UTC"]);
        assert_eq!(time.env["TZ"], "UTC");
        assert!(time.read_only);
        assert_eq!(time.tool_timeout, Duration::from_millis(500));
        assert_eq!(
            time.startup_timeout,
            McpServerConfig::DEFAULT_STARTUP_TIMEOUT
        );
        assert_eq!(time.max_restarts, McpServerConfig::DEFAULT_MAX_RESTARTS);
        assert_eq!(time.working_dir(Path::new("/w")), Path::new("/w"));
    }

    #[test]
    fn bad_server_tables_name_the_key() {
        for (text, needle) in [
            ("[mcp_servers.x]\nargs = []\n", "mcp_servers.x.command"),
            (
                "[mcp_servers.x]\ncommand = \"c\"\nread_only = 1\n",
                "read_only",
            ),
            (
                "[mcp_servers.x]\ncommand = \"c\"\ntool_timeout_ms = 0\n",
                "tool_timeout_ms",
            ),
            (
                "[mcp_servers.x]\ncommand = \"c\"\nenv = { A = 1 }\n",
                "env.A",
            ),
            (
                "[mcp_servers.x]\ncommand = \"c\"\ncomand = 1\n",
                "mcp_servers.x.comand",
            ),
            (
                "[mcp_servers.\"a b\"]\ncommand = \"c\"\n",
                "letters, digits",
            ),
            ("mcp_servers = 3\n", "a table of servers"),
        ] {
            let table: toml::Table = text.parse().unwrap();
            let err = read_layer("f", table["mcp_servers"].clone(), &mut ServersByName::new())
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn an_untrusted_workspace_cannot_define_a_server() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fido.toml"), SERVER).unwrap();
        let cfg = load(dir.path(), home.path());
        assert!(cfg.mcp_servers.is_empty());
        assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
        assert!(
            cfg.warnings[0].contains("ignored: mcp_servers."),
            "{:?}",
            cfg.warnings
        );

        TrustStore::in_dir(&home.path().join(".config/fido"))
            .trust(dir.path())
            .unwrap();
        let cfg = load(dir.path(), home.path());
        assert_eq!(cfg.mcp_servers.len(), 1);
        assert_eq!(cfg.mcp_servers[0].name, "time");
        assert!(cfg.warnings.is_empty());
    }

    #[test]
    fn the_user_file_defines_servers_and_the_workspace_replaces_them_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config/fido")).unwrap();
        std::fs::write(
            home.path().join(".config/fido/config.toml"),
            "[mcp_servers.b]\ncommand = \"user-b\"\n[mcp_servers.a]\ncommand = \"user-a\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("fido.toml"),
            "[mcp_servers.b]\ncommand = \"ws-b\"\n",
        )
        .unwrap();
        TrustStore::in_dir(&home.path().join(".config/fido"))
            .trust(dir.path())
            .unwrap();
        let cfg = load(dir.path(), home.path());
        let names: Vec<(&str, &str)> = cfg
            .mcp_servers
            .iter()
            .map(|s| (s.name.as_str(), s.command.as_str()))
            .collect();
        assert_eq!(names, [("a", "user-a"), ("b", "ws-b")], "sorted by name");
    }
}
