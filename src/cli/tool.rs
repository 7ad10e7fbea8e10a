//! `fido tool list` and `fido tool call NAME --args JSON`: the catalog as
//! the provider receives it, and one invocation as the main agent would run
//! it, printing exactly the text the model would get.

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::fail;
use super::preamble::run_configured;
use crate::config::{Config, Overrides};
use crate::protocol::ApprovalPolicy;
use crate::protocol::ToolCall;
use crate::provider::ProviderKind;
use crate::provider::{anthropic, openai};
use crate::runtime::tool_env;
use crate::tools::{InvocationContext, ToolCatalog};

#[derive(Debug, Subcommand)]
pub enum ToolCommand {
    /// Print the advertised catalog as a JSON array, exactly as sent to the provider.
    List,
    /// Run one tool as the main agent and print {"tool","ok","content","details"}.
    Call {
        name: String,
        /// The arguments object, as JSON.
        #[arg(long, default_value = "{}")]
        args: String,
    },
}

pub fn run(overrides: &Overrides, command: ToolCommand) -> ExitCode {
    run_configured(overrides, |config| async move {
        let mcp = crate::runtime::start_mcp(&config).await;
        for warning in mcp.warnings() {
            eprintln!("fido: warning: {}", crate::text::escape(warning));
        }
        let profiles = crate::runtime::load_profiles(&config).await;
        for warning in &profiles.warnings {
            eprintln!("fido: warning: {}", crate::text::escape(warning));
        }
        let catalog = ToolCatalog::with_mcp(config.plan_tool, profiles.offers(), mcp.clone());
        let code = match command {
            ToolCommand::List => list(&config, &catalog),
            ToolCommand::Call { name, args } => call(&config, &catalog, name, args).await,
        };
        mcp.shutdown().await;
        code
    })
}

fn list(config: &Config, catalog: &ToolCatalog) -> ExitCode {
    let tools = advertised_tools(config.provider, catalog.specs());
    match serde_json::to_string_pretty(&tools) {
        Ok(text) => {
            println!("{}", crate::text::json_for_terminal(&text));
            ExitCode::SUCCESS
        }
        Err(err) => fail(&format!("cannot print the catalog: {err}")),
    }
}

async fn call(config: &Config, catalog: &ToolCatalog, name: String, args: String) -> ExitCode {
    let env = match tool_env(config, ApprovalPolicy::Never, None) {
        Ok(env) => env,
        Err(err) => return fail(&err.to_string()),
    };
    let call = ToolCall {
        id: "cli-call".into(),
        name: name.clone(),
        arguments: args,
    };
    let cancel = CancellationToken::new();
    let interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            interrupt.cancel();
        }
    });
    let output = catalog
        .invoke(&call, &env, &InvocationContext::main(), &[], &cancel)
        .await;
    let printed = json!({
        "tool": name,
        "ok": output.ok,
        "content": output.content,
        "details": output.details_json(),
    });
    println!("{}", crate::text::json_for_terminal(&printed.to_string()));
    if output.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The `tools` array in the configured provider's wire format.
fn advertised_tools(
    provider: ProviderKind,
    specs: &[crate::protocol::ToolSpec],
) -> serde_json::Value {
    match provider {
        ProviderKind::OpenAi | ProviderKind::Script => openai::tools_json(specs),
        ProviderKind::Anthropic => anthropic::tools_json(specs),
    }
}
