//! `fido exec`: one prompt, headless, to completion.
//!
//! A headless front end of the [`Engine`]: one `SubmitPrompt` op, its
//! events, its `TurnEnded` reply. stdout is the product: the final answer,
//! or with `--json` one event per line. Without `--json`, progress goes to
//! stderr as the work happens (`progress`; `-q` silences it), as do logs.
//! Exit codes: 0 done, 1 error, 130 interrupted (SIGINT or SIGTERM cancel
//! the turn, including the process groups of running commands, before the
//! process exits).

mod progress;

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::oneshot;
use tracing::{info, warn};

use super::fail;
use super::preamble::run_configured;
use crate::config::{Config, Overrides};
use crate::protocol::op::{Op, OpReply};
use crate::protocol::outcome::{EXIT_INTERRUPTED, exit_code};
use crate::protocol::{EventKind, SandboxMode, TurnStatus, UsageTotals};
use crate::runtime::{CallError, Engine, EngineCaller, FrontEnd, ResumeFrom};

/// How long an interrupted turn may take to wind down before Fido exits anyway.
const INTERRUPT_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Print the event stream (one JSON object per line) instead of the answer.
    #[arg(long)]
    json: bool,
    /// Sandbox of the agent's commands: read-only, workspace-write (the
    /// default) or danger-full-access.
    #[arg(long, value_name = "MODE")]
    sandbox: Option<String>,
    /// When to ask before commands and edits: untrusted, on-request or never
    /// (the default). Headless, nobody can answer, so asking means denying.
    #[arg(long, value_name = "POLICY")]
    approval: Option<String>,
    /// workspace-write sandbox, never ask.
    #[arg(long, conflicts_with_all = ["sandbox", "approval", "dangerously_bypass_sandbox"])]
    full_auto: bool,
    /// Let the model delegate write subagents (delegate_write = allow);
    /// their change sets stay pending unless delegate_merge says otherwise.
    #[arg(long)]
    allow_write_delegation: bool,
    /// Run commands without any sandbox (danger-full-access).
    #[arg(long, conflicts_with = "sandbox")]
    dangerously_bypass_sandbox: bool,
    /// Continue a journaled session: its id (or a unique prefix); without
    /// one, the latest session (`--resume --last`).
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    resume: Option<String>,
    /// With `--resume`: the latest session no other Fido is running.
    #[arg(long)]
    last: bool,
    /// Also write the final answer to FILE (created or replaced).
    #[arg(long, value_name = "FILE")]
    output_last_message: Option<std::path::PathBuf>,
    /// No progress lines on stderr (errors and warnings still show).
    #[arg(short, long)]
    quiet: bool,
    /// The prompt; `-` reads it from standard input.
    prompt: String,
}

impl ExecArgs {
    /// The safety flags as configuration values (they beat every layer).
    fn safety_overrides(&self) -> Vec<(String, String)> {
        let mut values = Vec::new();
        let mut set = |key: &str, value: &str| values.push((key.to_string(), value.to_string()));
        if self.full_auto {
            set("sandbox_mode", "workspace-write");
            set("approval_policy", "never");
        }
        if self.dangerously_bypass_sandbox {
            set("sandbox_mode", "danger-full-access");
        }
        if let Some(mode) = &self.sandbox {
            set("sandbox_mode", mode);
        }
        if let Some(policy) = &self.approval {
            set("approval_policy", policy);
        }
        if self.allow_write_delegation {
            set("delegate_write", "allow");
        }
        values
    }
}

pub fn run(overrides: &Overrides, args: ExecArgs) -> ExitCode {
    let mut overrides = overrides.clone();
    overrides.values.extend(args.safety_overrides());
    let prompt = if args.prompt == "-" {
        let mut text = String::new();
        if let Err(err) = std::io::stdin().read_to_string(&mut text) {
            return fail(&format!(
                "cannot read the prompt from standard input: {err}"
            ));
        }
        text
    } else {
        args.prompt
    };
    if prompt.trim().is_empty() {
        return fail("the prompt is empty");
    }
    let resume = super::sessions::exec_pick(args.resume.as_deref(), args.last);
    let run = Run {
        json: args.json,
        quiet: args.quiet,
        last_message: args.output_last_message,
        resume,
    };
    run_configured(&overrides, |config| async move {
        if config.sandbox.mode == SandboxMode::DangerFullAccess {
            eprintln!(
                "fido: warning: commands run without a sandbox (danger-full-access): the model's commands have your full rights"
            );
        }
        exec(config, prompt, run).await
    })
}

/// How `fido exec` runs, besides the configuration and the prompt.
struct Run {
    json: bool,
    quiet: bool,
    last_message: Option<std::path::PathBuf>,
    resume: Option<ResumeFrom>,
}

async fn exec(config: Config, prompt: String, run: Run) -> ExitCode {
    // Signals are watched from the start, so an early Ctrl+C is not lost.
    let mut signals = match Signals::watch() {
        Ok(signals) => signals,
        Err(err) => return fail(&format!("cannot watch for signals: {err}")),
    };
    let (engine, receiver) = match start_engine(&config, run.resume, &mut signals).await {
        Ok(started) => started,
        Err(code) => return code,
    };
    let output = Output {
        json: run.json,
        progress: (!run.json && !run.quiet).then(progress::Progress::for_stderr),
    };
    let printer = match spawn_printer(receiver, output) {
        Ok(printer) => printer,
        Err(err) => return fail(&format!("cannot start the event printer: {err}")),
    };
    for warning in &engine.session.warnings {
        eprintln!("fido: warning: {}", crate::text::escape(warning));
    }
    let caller = engine.caller();
    let turn = tokio::spawn(async move { caller.call(Op::SubmitPrompt { prompt }).await });
    let (ended, interrupted) = wait_for_the_turn(&engine.caller(), turn, &mut signals).await;
    // Every subagent is gone before Fido exits, whatever ended the turn.
    engine.shutdown().await;
    // The printer ends when the last event sender (held by the agent) is gone.
    let _ = tokio::time::timeout(Duration::from_secs(2), printer).await;

    conclude(ended, interrupted, run.json, run.last_message.as_deref()).await
}

/// How the turn ended, from its `TurnEnded` reply.
struct Ended {
    status: TurnStatus,
    final_text: Option<String>,
    usage: UsageTotals,
}

/// The turn's reply (`Err`: why there is none).
type TurnReply = Result<Result<OpReply, CallError>, tokio::task::JoinError>;

impl Ended {
    fn of(reply: TurnReply) -> Result<Ended, NoTurnEnd> {
        match reply {
            Ok(Ok(OpReply::TurnEnded { outcome })) => Ok(Ended {
                status: outcome.status(),
                final_text: outcome.final_text().map(str::to_string),
                usage: outcome.usage(),
            }),
            Ok(Ok(other)) => Err(NoTurnEnd::Unexpected(Box::new(other))),
            // The agent went (its `error` event said why).
            Ok(Err(CallError::Stopped)) => Err(NoTurnEnd::Stopped),
            Ok(Err(err)) => Err(NoTurnEnd::NotStarted(err)),
            Err(err) => Err(NoTurnEnd::Task(err)),
        }
    }
}

/// Why the turn has no `TurnEnded` reply.
#[derive(Debug, thiserror::Error)]
enum NoTurnEnd {
    #[error("the engine answered the prompt with {0:?}")]
    Unexpected(Box<OpReply>),
    #[error("the agent stopped before the turn ended")]
    Stopped,
    #[error("cannot start the turn: {0}")]
    NotStarted(#[source] CallError),
    #[error("the turn failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// SIGINT and SIGTERM, which both interrupt `fido exec`.
struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    fn watch() -> std::io::Result<Signals> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// The name of the next signal to arrive.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}

/// Starts the session's engine, with nobody to answer approvals.
/// Start-up can wait (for the plan's lock, for MCP servers): a signal then
/// ends it at once with 130, dropping what was started (each child process
/// dies with its handle or with this process).
async fn start_engine(
    config: &Config,
    resume: Option<ResumeFrom>,
    signals: &mut Signals,
) -> Result<(Engine, crate::agent::EventReceiver), ExitCode> {
    tokio::select! {
        started = Engine::start(config, FrontEnd::Headless, resume) => {
            started.map_err(|err| fail(&err.to_string()))
        }
        signal = signals.next() => {
            info!("{signal} during start-up: exiting");
            Err(ExitCode::from(EXIT_INTERRUPTED))
        }
    }
}

/// Waits for the turn's reply; a signal interrupts the turn (an op),
/// which then has [`INTERRUPT_GRACE`] to wind down (`None` past it). Also
/// says whether a signal arrived.
async fn wait_for_the_turn(
    engine: &EngineCaller,
    mut reply: tokio::task::JoinHandle<Result<OpReply, CallError>>,
    signals: &mut Signals,
) -> (Option<TurnReply>, bool) {
    let mut interrupted = false;
    loop {
        let deadline = async {
            if interrupted {
                tokio::time::sleep(INTERRUPT_GRACE).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            outcome = &mut reply => return (Some(outcome), interrupted),
            signal = signals.next() => {
                info!("{signal}: interrupting the turn");
                interrupted = true;
                let _ = engine.send(Op::Interrupt);
            }
            _ = deadline => {
                warn!("the interrupted turn did not wind down in time; exiting");
                return (None, interrupted);
            }
        }
    }
}

/// The exit code of how the turn ended (`None`: it never replied), after
/// the final answer is written where it was asked for.
async fn conclude(
    reply: Option<TurnReply>,
    interrupted: bool,
    json: bool,
    last_message: Option<&std::path::Path>,
) -> ExitCode {
    let ended = match reply.map(Ended::of) {
        Some(Ok(ended)) => ended,
        None if interrupted => return ExitCode::from(EXIT_INTERRUPTED),
        Some(Err(_)) if interrupted => return ExitCode::from(EXIT_INTERRUPTED),
        Some(Err(why)) => return fail(&why.to_string()),
        None => return fail("the agent stopped before the turn ended"),
    };
    let usage = ended.usage;
    info!(
        requests = usage.requests,
        prompt_tokens = usage.prompt_tokens,
        cached_tokens = usage.cached_tokens,
        completion_tokens = usage.completion_tokens,
        "session usage"
    );
    // A failure was already reported as an event (printed below).
    let code = exit_code(ended.status, interrupted);
    if ended.status == TurnStatus::Completed {
        let text = ended.final_text.unwrap_or_default();
        if let Some(path) = last_message
            && let Err(err) = tokio::fs::write(path, format!("{text}\n")).await
        {
            return fail(&format!(
                "cannot write the final answer to {}: {err}",
                path.display()
            ));
        }
        if !json {
            // The model's text: a terminal must not act on it (OSC 52 sets
            // the clipboard, CSI moves the cursor); the file above keeps it
            // exact.
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "{}", crate::text::escape(&text));
            let _ = stdout.flush();
        }
    }
    ExitCode::from(code)
}

/// Prints the events on a thread of its own: a slow or blocked stdout
/// holds that thread, never a runtime worker. The receiver resolves when
/// the last event is printed.
fn spawn_printer(
    receiver: crate::agent::EventReceiver,
    output: Output,
) -> std::io::Result<oneshot::Receiver<()>> {
    let (printed, done) = oneshot::channel();
    std::thread::Builder::new()
        .name("fido-events".into())
        .spawn(move || {
            print_events(receiver, output);
            let _ = printed.send(());
        })?;
    Ok(done)
}

/// Where the events go.
struct Output {
    /// Every event as one JSON line on stdout.
    json: bool,
    /// Progress lines on stderr (`None`: `--json` or `-q`).
    progress: Option<progress::Progress>,
}

/// Prints events: with `--json` every event as one line on stdout (with
/// JSON's escapes also for the C1 and bidi characters it leaves raw); errors
/// and hooks that blocked or failed also as one sentence on stderr, for the
/// person watching, and without `--json` the progress lines. Blocking.
fn print_events(mut receiver: crate::agent::EventReceiver, output: Output) {
    let Output { json, mut progress } = output;
    while let Some(event) = receiver.blocking_recv() {
        // Streaming text and tool output are for the live UI; the --json
        // stream (a contract) stays as it is.
        if event.kind.is_live_only() {
            continue;
        }
        if let Some(progress) = &mut progress {
            progress.show(&event.kind);
        }
        if json {
            match serde_json::to_string(&event) {
                Ok(line) => {
                    let mut stdout = std::io::stdout().lock();
                    // A closed stdout (e.g. `| head`) must not stop the agent.
                    let line = crate::text::json_for_terminal(&line);
                    let _ = writeln!(stdout, "{line}");
                    let _ = stdout.flush();
                }
                Err(err) => warn!(error = %err, "cannot serialise an event"),
            }
        }
        if let EventKind::Error { message } = &event.kind {
            eprintln!("fido: {}", crate::text::escape(message));
        }
        if let Some(notice) = crate::protocol::hook::HookNotice::of(&event.kind) {
            eprintln!("fido: {}", crate::text::escape(notice.text()));
        }
    }
}
