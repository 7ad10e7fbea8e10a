//! `fido trust [DIR]` and `fido trust --revoke [DIR]`: record or remove a
//! folder whose `fido.toml` is read in full (see `config::trust`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::fail;
use crate::config::{TrustStore, user_config_dir};

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
                println!("no longer trusted: {}", path.display());
                ExitCode::SUCCESS
            }
            Ok((path, false)) => {
                println!("was not trusted: {}", path.display());
                ExitCode::SUCCESS
            }
            Err(err) => fail(&err.to_string()),
        };
    }
    match store.trust(&folder) {
        Ok(path) => {
            println!(
                "trusted: {} (its fido.toml is now read in full; undo with `fido trust --revoke`)",
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err.to_string()),
    }
}
