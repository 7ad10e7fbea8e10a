//! The start every command shares: the configuration (its warnings told
//! before anything runs) and the async runtime the command runs on.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use super::{fail, init_logging};
use crate::config::{Config, Overrides};

/// Whether a command prints the configuration's warnings at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ConfigWarnings {
    /// On stderr, before anything runs.
    Print,
    /// Left to the command (the terminal UI shows them itself; a probe
    /// reads one setting only).
    Keep,
}

/// The preamble of a command that runs async work with the configuration:
/// logging on stderr, the configuration (warnings printed), a runtime, and
/// `command` run on it to its exit code.
pub(super) fn run_configured<F, Fut>(overrides: &Overrides, command: F) -> ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    init_logging();
    match load_config(overrides, ConfigWarnings::Print) {
        Ok(config) => block_on(command(config)).unwrap_or_else(|err| fail(&err.to_string())),
        Err(code) => code,
    }
}

/// The configuration for `overrides`, or the exit code of its one-sentence
/// error (already printed).
pub(super) fn load_config(
    overrides: &Overrides,
    warnings: ConfigWarnings,
) -> Result<Config, ExitCode> {
    let config = Config::load(overrides).map_err(|err| fail(&err.to_string()))?;
    match warnings {
        ConfigWarnings::Print => print_config_warnings(&config),
        ConfigWarnings::Keep => {}
    }
    Ok(config)
}

/// Runs `future` to completion on a new runtime. Tasks still running after
/// it (a stuck tool after an interrupt) do not delay the exit.
pub(super) fn block_on<F: Future>(future: F) -> Result<F::Output, NoRuntime> {
    let runtime = runtime()?;
    let output = runtime.block_on(future);
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(output)
}

/// Tells the person what the configuration ignored, before anything runs.
fn print_config_warnings(config: &Config) {
    for warning in &config.warnings {
        eprintln!("fido: warning: {}", crate::text::escape(warning));
    }
}

/// The async runtime could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the async runtime: {0}")]
pub(super) struct NoRuntime(#[source] std::io::Error);

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, NoRuntime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(NoRuntime)
}
