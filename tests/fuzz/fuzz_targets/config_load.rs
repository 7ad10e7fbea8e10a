//! The config loader on an untrusted workspace `fido.toml` (and, when the
//! first byte is odd, on the same text as the user's own config file): any
//! text is a config or a `ConfigError`, never a panic, and an untrusted
//! workspace file can set none of the trusted keys (provider, URL, key,
//! script, plan file, sandbox, approvals, network, writable roots, MCP
//! servers): those stay exactly what they are without the file.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use fido::config::{Config, Overrides};
use libfuzzer_sys::fuzz_target;

struct Dirs {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    user_file: PathBuf,
    env: Vec<(String, String)>,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("temp dir: {e}"));
        let workspace = root.path().join("workspace");
        let config = root.path().join("config");
        for dir in [&workspace, &config.join("fido"), &root.path().join("home")] {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
        }
        let user_file = root.path().join("user.toml");
        let env = vec![
            (
                "HOME".into(),
                root.path().join("home").display().to_string(),
            ),
            ("XDG_CONFIG_HOME".into(), config.display().to_string()),
            ("FIDO_CONFIG".into(), user_file.display().to_string()),
        ];
        Dirs {
            _root: root,
            workspace,
            user_file,
            env,
        }
    })
}

fn load(dirs: &Dirs) -> Result<Config, fido::config::ConfigError> {
    let overrides = Overrides {
        workspace: Some(dirs.workspace.clone()),
        values: Vec::new(),
    };
    Config::load_from(&overrides, &dirs.env)
}

fn write(path: &Path, text: &[u8]) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
}

/// What only a trusted layer may decide, as comparable text.
fn trusted_part(config: &Config) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {:?}",
        config.provider,
        config.base_url,
        config.api_key.as_ref().map(|k| k.expose().to_owned()),
        config.script,
        config.plan_file,
        config.sandbox,
        config.approvals,
        config.network_rules,
        config.delegation.sandbox,
        config.mcp_servers,
    )
}

fuzz_target!(|input: &[u8]| {
    let Some((selector, text)) = input.split_first() else {
        return;
    };
    let dirs = dirs();
    let workspace_file = dirs.workspace.join("fido.toml");
    let _ = std::fs::remove_file(&workspace_file);
    let _ = std::fs::remove_file(&dirs.user_file);
    if selector & 1 == 1 {
        // The user's file is trusted: anything goes, but errors are errors.
        write(&dirs.user_file, text);
        let _ = load(dirs);
        std::fs::remove_file(&dirs.user_file).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let baseline = match load(dirs) {
        Ok(config) => trusted_part(&config),
        Err(err) => panic!("no config files, yet an error: {err}"),
    };
    write(&workspace_file, text);
    if let Ok(config) = load(dirs) {
        assert!(!config.workspace_trusted);
        assert_eq!(
            trusted_part(&config),
            baseline,
            "an untrusted file set a trusted key"
        );
    }
});
