//! What the benches share: finding the release binary, and order statistics.

use std::path::PathBuf;
use std::process::Command;

/// `FIDO_BIN`, else the binary cargo built with this bench, built on demand.
/// `bench` names the caller in the message.
pub fn fido_binary(bench: &str) -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("FIDO_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("FIDO_BIN={} is not a file", path.display()))
        };
    }
    let path = PathBuf::from(env!("CARGO_BIN_EXE_fido"));
    if !path.is_file() {
        eprintln!(
            "{bench} bench: {} is missing; running `cargo build --release --bins`",
            path.display()
        );
        let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--release", "--bins"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() || !path.is_file() {
            return Err(format!(
                "no fido binary at {}; run `cargo build --release` first",
                path.display()
            ));
        }
    }
    Ok(path)
}

/// The program the delegation benches' subagents run: the one `fido`
/// runs beside [`fido_binary`] (`fido-subagent`, else `fido` itself).
pub fn subagent_program(bench: &str) -> Result<PathBuf, String> {
    fido_binary(bench).map(|fido| fido::subagent::child_program(&fido))
}

/// `BENCH_RUNS` (or another count variable) as a positive number, else
/// `default`.
pub fn env_count(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(text) => text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name} must be a positive number, not {text:?}")),
        Err(_) => Ok(default),
    }
}

/// A sample sorted once, read by rank. Empty samples read as NaN.
pub struct Sorted(Vec<f64>);

impl Sorted {
    pub fn new(mut values: Vec<f64>) -> Sorted {
        values.sort_by(f64::total_cmp);
        Sorted(values)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn min(&self) -> f64 {
        self.0.first().copied().unwrap_or(f64::NAN)
    }

    pub fn max(&self) -> f64 {
        self.0.last().copied().unwrap_or(f64::NAN)
    }

    /// The middle value, or the mean of the two middle values.
    pub fn median(&self) -> f64 {
        let n = self.0.len();
        if n == 0 {
            return f64::NAN;
        }
        (self.0[(n - 1) / 2] + self.0[n / 2]) / 2.0
    }

    /// The nearest-rank quantile `q` (0.9 for p90).
    pub fn quantile(&self, q: f64) -> f64 {
        let n = self.0.len();
        if n == 0 {
            return f64::NAN;
        }
        self.0[((q * n as f64).ceil() as usize).clamp(1, n) - 1]
    }
}

/// A small parent conversation whose last message calls `delegate`
/// `parallel` times (the delegation benches' parent).
pub fn parent_messages(parallel: usize) -> Vec<fido::protocol::Message> {
    use fido::protocol::{Message, ToolCall};
    vec![
        Message::System {
            content: "You are Fido.".into(),
        },
        Message::user("investigate"),
        Message::Assistant {
            content: None,
            tool_calls: (0..parallel)
                .map(|i| ToolCall {
                    id: format!("d{i}"),
                    name: "delegate".into(),
                    arguments: r#"{"task": "look"}"#.into(),
                })
                .collect(),
        },
    ]
}

/// The runtime the async benches run on: two workers, like the machines
/// the targets were set on.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a runtime: {e}"))
}

/// Runs an async bench to its end: its error (or a runtime that cannot be
/// built) is printed after `name` and fails the bench.
pub fn run_async(
    name: &str,
    bench: impl std::future::Future<Output = Result<(), String>>,
) -> std::process::ExitCode {
    match runtime().and_then(|runtime| runtime.block_on(bench)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{name} bench: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
