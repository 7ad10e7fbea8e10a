//! `fido [-C DIR]`: the interactive full-screen session.
//!
//! Wires the same pieces as `fido exec` (config, provider, catalog, tool
//! environment, conversation, `AgentActor`) to the terminal UI instead of
//! the headless printer. Configuration and provider errors are one sentence
//! on stderr and exit 1, before the screen is touched. Logs never go to the
//! terminal the UI draws on: they go to `.fido-state/logs/tui.log` in the
//! workspace (or nowhere, when that cannot be opened).

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::Actor;
use tokio::sync::mpsc;

use super::{fail, runtime, tool_env};
use crate::agent::{AgentActor, AgentArguments, AgentDeps, EventSink, start_conversation};
use crate::config::{Config, Overrides};
use crate::plan::{PlanState, PlanStore};
use crate::protocol::EventKind;
use crate::tools::{InvocationContext, ToolCatalog, update_plan};
use crate::ui::{self, PlanCleared, PlanCommands, UiSetup};

/// How long the agent may take to stop after the UI quit.
const AGENT_STOP_GRACE: Duration = Duration::from_secs(5);

pub fn run(overrides: &Overrides) -> ExitCode {
    let config = match Config::load(overrides) {
        Ok(config) => config,
        Err(err) => return fail(&err.to_string()),
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(message) => return fail(&message),
    };
    let code = runtime.block_on(session(config));
    // A stuck tool after an interrupt must not delay exit.
    runtime.shutdown_timeout(Duration::from_millis(100));
    code
}

async fn session(config: Config) -> ExitCode {
    let provider = match config.build_provider() {
        Ok(provider) => provider,
        Err(err) => return fail(&err.to_string()),
    };
    let tool_env = match tool_env(&config, false) {
        Ok(env) => Arc::new(env),
        Err(message) => return fail(&message),
    };
    if let Err(err) = ui::terminal::check_interactive() {
        return fail(&err.to_string());
    }
    init_file_logging(&config.workspace);

    let catalog = ToolCatalog::standard(config.plan_tool);
    let (sender, receiver) = mpsc::unbounded_channel();
    let events = EventSink::new(sender);
    events.emit(EventKind::SessionStarted {
        workspace: config.workspace.display().to_string(),
        provider: provider.name().to_string(),
        model: provider.model().to_string(),
        tools: catalog.names(),
    });
    let conversation = start_conversation(&catalog, &tool_env, config.plan_tool, &events);
    let deps = Arc::new(AgentDeps {
        provider,
        catalog,
        tool_env,
        ctx: InvocationContext::main(),
        settings: config.agent,
        events,
    });
    let (agent, agent_handle) =
        match Actor::spawn(None, AgentActor, AgentArguments { deps, conversation }).await {
            Ok(spawned) => spawned,
            Err(err) => return fail(&format!("cannot start the agent: {err}")),
        };
    let plan_commands = Arc::new(CliPlanCommands {
        store: PlanStore::new(config.plan_file.clone()),
        flavour: config.plan_tool.tool_name(),
    });
    let result = ui::run(UiSetup {
        agent: agent.clone(),
        events: receiver,
        plan_commands,
    })
    .await;
    // Stopping the agent cancels a running turn (and what it started).
    agent.stop(None);
    let _ = tokio::time::timeout(AGENT_STOP_GRACE, agent_handle).await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err.to_string()),
    }
}

/// Tracing into `<workspace>/.fido-state/logs/tui.log`; `RUST_LOG` is
/// honoured, the default is `info`. Without a writable log file, nowhere.
fn init_file_logging(workspace: &Path) {
    let dir = workspace.join(".fido-state").join("logs");
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
        .with_writer(Mutex::new(file))
        .with_ansi(false)
        .try_init();
}

/// `/plan` and `/plan clear` on the workspace plan file: the same text and
/// the same change as `fido plan show` and `fido plan clear`.
struct CliPlanCommands {
    store: PlanStore,
    flavour: &'static str,
}

impl PlanCommands for CliPlanCommands {
    fn show(&self) -> Result<String, String> {
        let loaded = self.store.load().map_err(|err| err.to_string())?;
        let mut text = String::new();
        if let Some(warning) = &loaded.warning {
            text.push_str(&format!("warning: {warning}\n"));
        }
        text.push_str(&super::plan::render(&loaded.state));
        Ok(text)
    }

    fn clear(&self) -> Result<PlanCleared, String> {
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        let cleared = self.store.update(|current: &PlanState| {
            Ok::<_, std::convert::Infallible>(current.successor(
                "Plan cleared by the user.".into(),
                Vec::new(),
                now,
            ))
        });
        let (state, warning) = match cleared {
            Ok(Ok(saved)) => saved,
            Ok(Err(never)) => match never {},
            Err(err) => return Err(err.to_string()),
        };
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        let plan = update_plan::state_output(&state)
            .details
            .ok_or("the cleared plan cannot be shown")?;
        Ok(PlanCleared {
            message: format!("Plan cleared (version {}).", state.version),
            flavour: self.flavour.to_string(),
            plan,
        })
    }
}

#[cfg(test)]
mod tests {}
