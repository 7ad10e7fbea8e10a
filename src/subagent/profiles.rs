//! Subagent profiles: `NAME.md` files in the user's config directory
//! (`agents/`) and, in a trusted workspace, in `.fido/agents/`. Front
//! matter between `---` lines sets `description`, `model`, `max_steps`,
//! `timeout_ms` and `budget_tokens`; the body holds extra instructions for
//! the subagent.
//!
//! Profiles are read once, at session start: the `delegate` description
//! lists them, so the catalog stays the same for the whole session. A
//! profile's body joins the subagent instructions, never the system
//! message, so every fork keeps the parent's prefix byte for byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest profile file read; past it the file is refused.
pub const MAX_PROFILE_BYTES: usize = 16 * 1024;
/// Most profiles a session offers (the description stays short).
pub const MAX_PROFILES: usize = 32;

/// One profile, as the parent uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The model the subagent asks for (through the parent's gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    /// The body: extra instructions for the subagent.
    pub instructions: String,
}

/// The profiles of a session, by name, and what was wrong with the files
/// that were not taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profiles {
    pub profiles: BTreeMap<String, Profile>,
    pub warnings: Vec<String>,
}

impl Profiles {
    /// Reads the user's profiles, then (trusted only) the workspace's, which
    /// win on a name clash. Blocking: call off the runtime.
    pub fn load(workspace: &Path, trusted: bool, config_dir: Option<&Path>) -> Profiles {
        let mut loaded = Profiles::default();
        if let Some(dir) = config_dir {
            loaded.read_dir(&dir.join("agents"));
        }
        let local = workspace.join(".fido").join("agents");
        if trusted {
            loaded.read_dir(&local);
        } else if local.is_dir() {
            loaded.warnings.push(format!(
                "{} holds subagent profiles, but this workspace is not trusted, so they were not read (`fido trust` to use them)",
                local.display()
            ));
        }
        loaded
    }

    pub fn get(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// What the `delegate` spec offers, by name.
    pub fn offers(&self) -> Vec<crate::protocol::delegate::ProfileOffer> {
        self.profiles
            .values()
            .map(|p| crate::protocol::delegate::ProfileOffer {
                name: p.name.clone(),
                description: p.description.clone(),
            })
            .collect()
    }

    fn read_dir(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        files.sort();
        for file in files {
            match read_profile(&file) {
                Ok(profile) if self.profiles.len() >= MAX_PROFILES => self.warnings.push(format!(
                    "{}: more than {MAX_PROFILES} subagent profiles; {} was not read",
                    dir.display(),
                    profile.name
                )),
                Ok(profile) => {
                    self.profiles.insert(profile.name.clone(), profile);
                }
                Err(why) => self
                    .warnings
                    .push(format!("subagent profile {}: {why}", file.display())),
            }
        }
    }
}

/// Why a profile file was not read (said in the session's warnings).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("the file name must be NAME.md with NAME of letters, digits, `-` or `_` (at most 40)")]
    BadName,
    #[error("cannot read it: {0}")]
    Read(String),
    #[error("it is {0} bytes, more than {MAX_PROFILE_BYTES}")]
    TooLarge(usize),
    #[error("it is not UTF-8 text")]
    NotUtf8,
    #[error("it must start with `---` front matter (description at least)")]
    NoFrontMatter,
    #[error("the front matter has no closing `---` line")]
    Unclosed,
    #[error("front matter line {0}: expected `key: value`")]
    NotKeyValue(usize),
    #[error("`{key}` must be a positive whole number, not {value:?}")]
    NotPositive { key: &'static str, value: String },
    #[error("unknown front matter key `{0}`")]
    UnknownKey(String),
    #[error("the front matter needs a `description`")]
    NoDescription,
}

fn read_profile(path: &Path) -> Result<Profile, ProfileError> {
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|n| is_profile_name(n))
        .ok_or(ProfileError::BadName)?
        .to_string();
    let bytes = std::fs::read(path).map_err(|e| ProfileError::Read(e.to_string()))?;
    if bytes.len() > MAX_PROFILE_BYTES {
        return Err(ProfileError::TooLarge(bytes.len()));
    }
    let text = String::from_utf8(bytes).map_err(|_| ProfileError::NotUtf8)?;
    parse(&name, &text)
}

/// Parses one profile file's text.
pub fn parse(name: &str, text: &str) -> Result<Profile, ProfileError> {
    let (front, body) = split_front_matter(text)?;
    let mut profile = Profile {
        name: name.to_string(),
        description: String::new(),
        model: None,
        max_steps: None,
        timeout_ms: None,
        budget_tokens: None,
        instructions: crate::text::sanitize(body.trim(), false),
    };
    for (number, line) in front.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or(ProfileError::NotKeyValue(number + 2))?;
        let value = value.trim().trim_matches('"').trim();
        let number_of =
            |key: &'static str| {
                value.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ProfileError::NotPositive {
                        key,
                        value: value.to_string(),
                    }
                })
            };
        match key.trim() {
            "description" => profile.description = crate::text::summary(value, 200),
            "model" if !value.is_empty() => profile.model = Some(crate::text::summary(value, 100)),
            "model" => {}
            "max_steps" => {
                profile.max_steps = Some(u32::try_from(number_of("max_steps")?).unwrap_or(u32::MAX))
            }
            "timeout_ms" => profile.timeout_ms = Some(number_of("timeout_ms")?),
            "budget_tokens" => profile.budget_tokens = Some(number_of("budget_tokens")?),
            other => return Err(ProfileError::UnknownKey(other.to_string())),
        }
    }
    if profile.description.is_empty() {
        return Err(ProfileError::NoDescription);
    }
    Ok(profile)
}

fn split_front_matter(text: &str) -> Result<(&str, &str), ProfileError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Err(ProfileError::NoFrontMatter);
    };
    let end = rest.find("\n---").ok_or(ProfileError::Unclosed)?;
    let body = rest[end + 4..].trim_start_matches(['\r', '\n']);
    Ok((&rest[..end], body))
}

fn is_profile_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const REVIEWER: &str = "---\ndescription: Reviews a diff for bugs\nmodel: small-model\nmax_steps: 12\ntimeout_ms: 60000\nbudget_tokens: 20000\n---\nLook for off-by-one errors first.\n";

    #[test]
    fn front_matter_and_body_are_read() {
        let profile = parse("reviewer", REVIEWER).unwrap();
        assert_eq!(profile.description, "Reviews a diff for bugs");
        assert_eq!(profile.model.as_deref(), Some("small-model"));
        assert_eq!(profile.max_steps, Some(12));
        assert_eq!(profile.timeout_ms, Some(60_000));
        assert_eq!(profile.budget_tokens, Some(20_000));
        assert_eq!(profile.instructions, "Look for off-by-one errors first.");
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        let err = |text: &str| parse("x", text).unwrap_err().to_string();
        assert!(err("no front matter").contains("must start with `---`"));
        assert!(err("---\ndescription: d\n").contains("no closing"));
        assert!(err("---\nmodel: m\n---\n").contains("needs a `description`"));
        assert!(
            err("---\ndescription: d\ncolour: red\n---\n")
                .contains("unknown front matter key `colour`")
        );
        assert!(err("---\ndescription: d\nmax_steps: -3\n---\n").contains("positive whole number"));
    }

    #[test]
    fn workspace_profiles_need_trust_and_win_over_the_users() {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let user = home.path().join("agents");
        let local = ws.path().join(".fido/agents");
        std::fs::create_dir_all(&user).unwrap();
        std::fs::create_dir_all(&local).unwrap();
        std::fs::write(user.join("reviewer.md"), REVIEWER).unwrap();
        std::fs::write(
            local.join("reviewer.md"),
            "---\ndescription: The project's reviewer\n---\nCheck the changelog.\n",
        )
        .unwrap();
        std::fs::write(local.join("bad name.md"), REVIEWER).unwrap();

        let untrusted = Profiles::load(ws.path(), false, Some(home.path()));
        assert_eq!(
            untrusted.get("reviewer").unwrap().description,
            "Reviews a diff for bugs"
        );
        assert!(
            untrusted.warnings[0].contains("not trusted"),
            "{:?}",
            untrusted.warnings
        );

        let trusted = Profiles::load(ws.path(), true, Some(home.path()));
        assert_eq!(
            trusted.get("reviewer").unwrap().description,
            "The project's reviewer"
        );
        assert_eq!(trusted.profiles.len(), 1);
        assert!(
            trusted.warnings.iter().any(|w| w.contains("bad name.md")),
            "{:?}",
            trusted.warnings
        );
    }
}
