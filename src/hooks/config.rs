//! `[[hooks.EVENT]]` tables: the commands a session runs at its events.
//!
//! A hook is a command run with the user's rights, outside every sandbox,
//! so hooks come only from trusted layers (the user config file, or a
//! workspace `fido.toml` once the folder is trusted), as MCP servers do.
//! The hooks of every trusted layer run: the user's first, then the
//! workspace's, each in the order written.

use std::time::Duration;

use regex::Regex;

use super::HookEvent;

/// The key of the table in a config file.
pub const KEY: &str = "hooks";

/// The fields a hook table may have.
const FIELDS: &str = "matcher, command, timeout_ms";

/// How long a hook may run when its table names no `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One configured hook.
#[derive(Debug, Clone)]
pub struct HookConfig {
    pub event: HookEvent,
    /// Over tool names, for the tool events; `None`: every tool.
    pub matcher: Option<Regex>,
    /// Run by `sh -c` in the workspace.
    pub command: String,
    pub timeout: Duration,
}

impl HookConfig {
    /// Whether the hook runs for a call of `tool` (`None`: an event that is
    /// not about a tool).
    pub fn matches(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (None, _) | (Some(_), None) => true,
            (Some(matcher), Some(tool)) => matcher.is_match(tool),
        }
    }
}

/// The hooks of every trusted layer, in the order they run.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    pub hooks: Vec<HookConfig>,
}

impl HooksConfig {
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks of `event` that apply to `tool`, in order.
    pub fn for_event(
        &self,
        event: HookEvent,
        tool: Option<&str>,
    ) -> impl Iterator<Item = &HookConfig> {
        self.hooks
            .iter()
            .filter(move |hook| hook.event == event && hook.matches(tool))
    }
}

/// Why a hook table cannot be read: the key (`hooks.Stop[0].command`),
/// the value as written, and what was expected. The config module turns
/// it into its error naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookConfigError {
    UnknownKey {
        key: String,
        known: String,
    },
    Invalid {
        key: String,
        value: String,
        expected: String,
    },
}

/// Reads the `hooks` value of one file into `hooks` (appended).
pub fn read_layer(value: toml::Value, hooks: &mut HooksConfig) -> Result<(), HookConfigError> {
    let toml::Value::Table(table) = value else {
        return Err(invalid(KEY, &value, "tables of hooks: [[hooks.EVENT]]"));
    };
    for (name, list) in table {
        let Some(event) = HookEvent::parse(&name) else {
            return Err(HookConfigError::UnknownKey {
                key: format!("{KEY}.{name}"),
                known: HookEvent::ALL
                    .iter()
                    .map(|event| event.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let toml::Value::Array(items) = list else {
            return Err(invalid(
                &format!("{KEY}.{name}"),
                &list,
                "a list of hook tables: [[hooks.EVENT]]",
            ));
        };
        for (index, item) in items.into_iter().enumerate() {
            let key = format!("{KEY}.{name}[{index}]");
            hooks.hooks.push(parse_hook(event, &key, item)?);
        }
    }
    Ok(())
}

fn parse_hook(
    event: HookEvent,
    key: &str,
    value: toml::Value,
) -> Result<HookConfig, HookConfigError> {
    let field = |name: &str| format!("{key}.{name}");
    let toml::Value::Table(mut table) = value else {
        return Err(invalid(key, &value, "a table with command"));
    };
    let command = match table.remove("command") {
        Some(toml::Value::String(command)) if !command.trim().is_empty() => command,
        Some(other) => return Err(invalid(&field("command"), &other, "a shell command")),
        None => {
            return Err(HookConfigError::Invalid {
                key: field("command"),
                value: "nothing".into(),
                expected: "the shell command the hook runs".into(),
            });
        }
    };
    let matcher = match table.remove("matcher") {
        None => None,
        Some(toml::Value::String(text)) => matcher(event, &field("matcher"), &text)?,
        Some(other) => return Err(invalid(&field("matcher"), &other, "a regular expression")),
    };
    let timeout = match table.remove("timeout_ms") {
        None => DEFAULT_TIMEOUT,
        Some(toml::Value::Integer(ms)) if ms >= 1 => Duration::from_millis(ms.unsigned_abs()),
        Some(other) => {
            return Err(invalid(
                &field("timeout_ms"),
                &other,
                "a whole number of milliseconds, at least 1",
            ));
        }
    };
    if let Some(unknown) = table.keys().next() {
        return Err(HookConfigError::UnknownKey {
            key: field(unknown),
            known: FIELDS.into(),
        });
    }
    Ok(HookConfig {
        event,
        matcher,
        command,
        timeout,
    })
}

/// A matcher: `""` and `"*"` match every tool (as in Claude Code); else a
/// regular expression that must match the whole tool name, so `read_file`
/// does not also select `mcp__x__read_file_tail`.
fn matcher(event: HookEvent, key: &str, text: &str) -> Result<Option<Regex>, HookConfigError> {
    let text = text.trim();
    if text.is_empty() || text == "*" {
        return Ok(None);
    }
    if !event.is_tool_event() {
        return Err(HookConfigError::Invalid {
            key: key.into(),
            value: format!("{text:?}"),
            expected:
                "no matcher: only PreToolUse, PostToolUse and PermissionRequest hooks select tools"
                    .into(),
        });
    }
    Regex::new(&format!("^(?:{text})$"))
        .map(Some)
        .map_err(|err| HookConfigError::Invalid {
            key: key.into(),
            value: format!("{text:?}"),
            expected: format!("a regular expression ({})", last_line(&err.to_string())),
        })
}

/// The regex crate's error ends with the one line that says what is wrong.
fn last_line(text: &str) -> String {
    text.lines().last().unwrap_or(text).trim().to_string()
}

fn invalid(key: &str, value: &toml::Value, expected: &str) -> HookConfigError {
    HookConfigError::Invalid {
        key: key.to_string(),
        value: format!("{value:?}"),
        expected: expected.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<HooksConfig, HookConfigError> {
        let table: toml::Table = text.parse().unwrap();
        let mut hooks = HooksConfig::default();
        read_layer(table["hooks"].clone(), &mut hooks).map(|()| hooks)
    }

    #[test]
    fn hook_tables_are_read_in_order_with_defaults() {
        let hooks = read(
            "[[hooks.PreToolUse]]\nmatcher = \"read_file|patch\"\ncommand = \"a\"\ntimeout_ms = 500\n[[hooks.PreToolUse]]\ncommand = \"b\"\nmatcher = \"*\"\n[[hooks.Stop]]\ncommand = \"c\"\nmatcher = \"\"\n",
        )
        .unwrap();
        let commands: Vec<&str> = hooks
            .for_event(HookEvent::PreToolUse, Some("read_file"))
            .map(|h| h.command.as_str())
            .collect();
        assert_eq!(commands, ["a", "b"]);
        let commands: Vec<&str> = hooks
            .for_event(HookEvent::PreToolUse, Some("read_file_x"))
            .map(|h| h.command.as_str())
            .collect();
        assert_eq!(commands, ["b"], "the matcher matches whole names");
        assert_eq!(hooks.hooks[0].timeout, Duration::from_millis(500));
        assert_eq!(hooks.hooks[1].timeout, DEFAULT_TIMEOUT);
        assert_eq!(hooks.for_event(HookEvent::Stop, None).count(), 1);
    }

    #[test]
    fn bad_hook_tables_name_the_key() {
        for (text, needle) in [
            (
                "[[hooks.PreToolUse]]\nmatcher = \"x\"\n",
                "hooks.PreToolUse[0].command",
            ),
            (
                "[[hooks.PreToolUse]]\ncommand = \"c\"\ncomand = 1\n",
                "hooks.PreToolUse[0].comand",
            ),
            ("[[hooks.PreTool]]\ncommand = \"c\"\n", "hooks.PreTool"),
            (
                "[[hooks.Stop]]\ncommand = \"c\"\ntimeout_ms = 0\n",
                "timeout_ms",
            ),
            (
                "[[hooks.PostToolUse]]\ncommand = \"c\"\nmatcher = \"(\"\n",
                "regular expression",
            ),
            (
                "[[hooks.Stop]]\ncommand = \"c\"\nmatcher = \"patch\"\n",
                "only PreToolUse",
            ),
            ("[hooks.Stop]\ncommand = \"c\"\n", "a list of hook tables"),
            ("hooks = 3\n", "tables of hooks"),
        ] {
            let err = read(text).unwrap_err();
            let shown = format!("{err:?}");
            assert!(shown.contains(needle), "{text}: {shown}");
        }
    }
}
