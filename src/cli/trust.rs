//! `fido trust [DIR]` and `fido trust --revoke [DIR]`: record or remove a
//! folder whose `fido.toml` is read in full, with what its `fido.toml` and
//! `.fido/` say now (see `config::trust`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::fail;
use crate::config::{Fingerprint, TrustStore, user_config_dir};

#[derive(Debug, Args)]
pub struct TrustArgs {
    /// Stop trusting the folder instead.
    #[arg(long)]
    revoke: bool,
    /// The folder (default: the workspace, `-C`, else the current directory).
    dir: Option<PathBuf>,
}

pub(super) fn run(workspace: Option<PathBuf>, args: TrustArgs) -> ExitCode {
    let Some(config_dir) = user_config_dir() else {
        return fail("no config directory to record trust in: set HOME or XDG_CONFIG_HOME");
    };
    let store = TrustStore::in_dir(&config_dir);
    let folder = args.dir.or(workspace).unwrap_or_else(|| PathBuf::from("."));
    if args.revoke {
        return match store.revoke(&folder) {
            Ok((path, true)) => {
                println!("no longer trusted: {}", shown(&path));
                ExitCode::SUCCESS
            }
            Ok((path, false)) => {
                println!("was not trusted: {}", shown(&path));
                ExitCode::SUCCESS
            }
            Err(err) => fail(&err.to_string()),
        };
    }
    match store.trust_recording(&folder) {
        Ok((path, recorded)) => {
            println!(
                "trusted: {} (its fido.toml is now read in full; undo with `fido trust --revoke`)",
                shown(&path)
            );
            println!("{}", recorded_line(&recorded));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err.to_string()),
    }
}

/// What was recorded, and that a change of it untrusts the folder.
fn recorded_line(recorded: &Fingerprint) -> String {
    if recorded.is_empty() {
        return "recorded: no fido.toml and no .fido/; if one appears, the folder is untrusted until you run `fido trust` again".into();
    }
    format!(
        "recorded: {}; if any of them changes, the folder is untrusted until you run `fido trust` again",
        crate::text::escape_line(&recorded.names().join(", "))
    )
}

/// A folder's path on one line, escaped: a folder's name can hold anything.
fn shown(path: &std::path::Path) -> String {
    crate::text::escape_line(&path.display().to_string()).into_owned()
}
