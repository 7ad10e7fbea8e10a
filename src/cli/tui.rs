//! `fido [-C DIR]`: the interactive full-screen session.
//!
//! Starts the same [`Engine`] as `fido exec` (an interactive one: the
//! person answers approvals and questions through ops) and hands its op
//! queue and event receiver to the terminal UI, nothing else. Configuration and provider errors are
//! one sentence on stderr and exit 1, before the screen is touched. Logs
//! never go to the terminal the UI draws on: they go to
//! `.fido-state/logs/tui.log` in the workspace (or nowhere, when that
//! cannot be opened).

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Mutex;

use super::fail;
use super::preamble::{ConfigWarnings, block_on, load_config};
use crate::config::{Config, Overrides};
use crate::runtime::{Engine, FrontEnd, ResumeFrom, SessionStart};
use crate::ui::{self, UiSetup};
use crate::workspace::LOGS_DIR;

pub fn run(overrides: &Overrides, resume: Option<ResumeFrom>) -> ExitCode {
    // The UI shows the warnings; logging starts in `session`, into a file.
    let config = match load_config(overrides, ConfigWarnings::Keep) {
        Ok(config) => config,
        Err(code) => return code,
    };
    block_on(session(config, resume)).unwrap_or_else(|err| fail(&err.to_string()))
}

async fn session(config: Config, resume: Option<ResumeFrom>) -> ExitCode {
    // Before anything else can log (never into the terminal UI).
    if config.workspace.is_dir() {
        init_file_logging(&config.workspace);
    }
    let (engine, receiver) = match Engine::start(&config, FrontEnd::Interactive, resume).await {
        Ok(started) => started,
        Err(err) => return fail(&err.to_string()),
    };
    if let Err(err) = ui::terminal::check_interactive() {
        engine.shutdown().await;
        return fail(&err.to_string());
    }
    let mut warnings = config.warnings.clone();
    warnings.extend(engine.session.warnings.iter().cloned());
    let result = ui::run(UiSetup {
        engine: engine.sender(),
        events: receiver,
        panic_is_caught: crate::agent::recover::panic_is_recoverable,
        warnings,
        resumed: resumed_note(&engine.session),
    })
    .await;
    // Every subagent is gone and a running turn is cancelled before exit.
    engine.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err.to_string()),
    }
}

/// A resumed session's messages and the line that says so.
fn resumed_note(session: &SessionStart) -> Option<(Vec<crate::protocol::Message>, String)> {
    if session.resumed.is_empty() {
        return None;
    }
    let id = session.id.as_deref().unwrap_or("?");
    let note = format!(
        "resumed session {id}: {} messages restored; the workspace plan was re-delivered to the model",
        session.resumed.len()
    );
    Some((session.resumed.clone(), note))
}

/// Tracing into `<workspace>/.fido-state/logs/tui.log`; `RUST_LOG` is
/// honoured, the default is `info`. Without a writable log file, nowhere.
fn init_file_logging(workspace: &Path) {
    let dir = workspace.join(LOGS_DIR);
    let file = fs::create_dir_all(&dir).and_then(|()| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("tui.log"))
    });
    let Ok(file) = file else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(super::log_fields::escaped())
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init();
}

#[cfg(test)]
#[path = "tui_tests.rs"]
mod tests;
