//! Where the configuration comes from on disk: the workspace folder, the
//! user's config directory and file, the workspace's `fido.toml` (read in
//! full only once trusted), and paths a setting names.

use std::path::{Path, PathBuf};

use super::fingerprint::{Fingerprint, WORKSPACE_FILE, workspace_table};
use super::layer::{self, Layers};
use super::trust::Trust;
use super::{ConfigError, TrustStore, mcp};
use crate::hooks::HooksConfig;

/// The config files' layers (the user file, then the workspace's
/// `fido.toml`) and what reading them found out.
pub(super) struct Files {
    pub(super) layers: Layers,
    pub(super) config_dir: Option<PathBuf>,
    pub(super) user_config_file: Option<PathBuf>,
    pub(super) workspace_trusted: bool,
    /// About an untrusted workspace file's ignored keys.
    pub(super) warnings: Vec<String>,
    pub(super) mcp_servers: mcp::ServersByName,
    pub(super) hooks: HooksConfig,
}

impl Files {
    pub(super) fn read(
        workspace: &Path,
        env_get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Files, ConfigError> {
        let mut files = Files {
            layers: Layers::default(),
            config_dir: config_dir(env_get),
            user_config_file: user_config_path(env_get),
            workspace_trusted: false,
            warnings: Vec::new(),
            mcp_servers: mcp::ServersByName::new(),
            hooks: HooksConfig::default(),
        };
        if let Some(user_file) = &files.user_config_file
            && user_file.exists()
        {
            let (source, layer, _) =
                layer::file_layer(user_file, true, &mut files.mcp_servers, &mut files.hooks)?;
            files.layers.push(source, layer);
        }
        // One reading of fido.toml is both what trust is checked against
        // and what is used.
        let table = workspace_table(workspace)?;
        let now = Fingerprint::of(workspace, table.as_ref());
        let trust = match &files.config_dir {
            Some(dir) => TrustStore::in_dir(dir).trust_of(workspace, &now)?,
            None => Trust::Untrusted,
        };
        files.workspace_trusted = trust == Trust::Trusted;
        let workspace_file = workspace.join(WORKSPACE_FILE);
        let mut ignored = Vec::new();
        if let Some(table) = table {
            let shown = workspace_file.display().to_string();
            let (source, mut layer, skipped) = layer::table_layer(
                shown,
                table,
                files.workspace_trusted,
                &mut files.mcp_servers,
                &mut files.hooks,
            )?;
            let shown = workspace_file.display().to_string();
            files
                .warnings
                .extend(layer::drop_user_file_keys(&mut layer, &shown));
            files.layers.push(source, layer);
            ignored = skipped;
        }
        let warning = trust_warning(&trust, &workspace_file, workspace, &ignored, &now);
        files.warnings.extend(warning);
        Ok(files)
    }
}

/// The canonical workspace folder (`-C`, else the current one).
pub(super) fn workspace_root(given: Option<&Path>) -> Result<PathBuf, ConfigError> {
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

/// The one warning, if any, about the workspace's trust: what an untrusted
/// file had ignored, or why a folder trusted before is not trusted now
/// (what changed, or an older Fido's record) and how to trust it again.
fn trust_warning(
    trust: &Trust,
    file: &Path,
    workspace: &Path,
    ignored: &[String],
    now: &Fingerprint,
) -> Option<String> {
    let ignoring = if ignored.is_empty() {
        String::new()
    } else {
        format!(" (ignored: {})", ignored.join(", "))
    };
    let profiles = if now.names().contains(&".fido/") {
        " and its .fido/ is not read"
    } else {
        ""
    };
    let why = match trust {
        Trust::Trusted => return None,
        Trust::Untrusted if ignored.is_empty() => return None,
        Trust::Untrusted => return Some(untrusted_warning(file, workspace, ignored)),
        Trust::Legacy if now.is_empty() => return None,
        Trust::Changed(changes) => format!(
            "what you trusted in {} changed since `fido trust`: {}",
            workspace.display(),
            changes.join(", ")
        ),
        Trust::Legacy => format!(
            "{} was trusted by an older Fido, which recorded the folder but not what it trusted",
            workspace.display()
        ),
    };
    // Part names come from the file: no control character reaches a
    // terminal.
    let warning = format!(
        "{why}. Until you trust it again, its fido.toml is read as untrusted{ignoring}{profiles}. Review fido.toml and .fido/, then run `fido trust {}`.",
        workspace.display()
    );
    Some(crate::text::sanitize(&warning, true))
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
pub(super) fn config_dir(env_get: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = env_get("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(xdg).join("fido"));
    }
    env_get("HOME").map(|home| PathBuf::from(home).join(".config/fido"))
}

/// `plan_file` resolved against the workspace, refused unless it stays
/// inside it: lexically (no `..` out) and through every existing symlink.
pub(super) fn inside_workspace(
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
pub(super) fn user_config_path(env_get: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env_get("FIDO_CONFIG") {
        return Some(PathBuf::from(path));
    }
    if let Some(xdg) = env_get("XDG_CONFIG_HOME") {
        return Some(PathBuf::from(xdg).join("fido").join("config.toml"));
    }
    env_get("HOME").map(|home| PathBuf::from(home).join(".config/fido/config.toml"))
}

pub(super) fn resolve_relative(workspace: &Path, value: &str) -> PathBuf {
    let path = Path::new(value);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        workspace.join(path)
    }
}
