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

/// How far a wall-clock figure may miss its target in the quick smoke
/// before its bench fails. CI runs the smoke on a shared two-core machine
/// whose load moves wall time by this much: stop 21's CI measured the
/// delegation overhead at 30.7 ms (8.7 ms here when quiet) and an exec of
/// a static binary at 1.8 ms (0.3 ms). The full runs hold every target.
pub const QUICK_SLACK: f64 = 4.0;

/// Whether this is the quick smoke (`BENCH_QUICK`, set by
/// `benches/run --quick`).
pub fn quick() -> bool {
    std::env::var_os("BENCH_QUICK").is_some()
}

/// Which side of its target a figure must stay.
#[derive(Clone, Copy)]
pub enum Bound {
    /// A time: at most the target.
    AtMost,
    /// A throughput: at least the target.
    AtLeast,
}

/// A target's verdict.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    Pass,
    /// Missed by a wall-clock figure within [`QUICK_SLACK`] of its target
    /// in the quick smoke: printed, and the bench does not fail.
    Miss,
    Fail,
}

impl Verdict {
    /// The verdict of a wall-clock figure (a time or a throughput, which a
    /// machine's load moves). NaN (no sample) fails.
    pub fn wall_clock(value: f64, bound: Bound, target: f64) -> Verdict {
        let (met, within_slack) = match bound {
            Bound::AtMost => (value <= target, value <= target * QUICK_SLACK),
            Bound::AtLeast => (value >= target, value * QUICK_SLACK >= target),
        };
        if met {
            Verdict::Pass
        } else if quick() && within_slack {
            Verdict::Miss
        } else {
            Verdict::Fail
        }
    }

    pub fn word(self) -> String {
        match self {
            Verdict::Pass => "PASS".into(),
            Verdict::Miss => format!(
                "MISS (the quick smoke fails a wall-clock figure only past {QUICK_SLACK}× its target)"
            ),
            Verdict::Fail => "FAIL".into(),
        }
    }
}

/// Checks a wall-clock figure against its target ([`Verdict::wall_clock`])
/// and prints the verdict. False when the bench fails.
pub fn wall_clock_target(name: &str, value: f64, bound: Bound, target: f64, unit: &str) -> bool {
    let sign = match bound {
        Bound::AtMost => "≤",
        Bound::AtLeast => "≥",
    };
    let verdict = Verdict::wall_clock(value, bound, target);
    println!(
        "target: {name} {sign} {target} {unit}: {value:.2} {unit} {}",
        verdict.word()
    );
    verdict != Verdict::Fail
}

/// Checks a figure that load does not move (a count, a memory size, a
/// ratio of two things measured side by side) and prints the verdict.
/// False when it misses.
pub fn steady_target(name: &str, met: bool, figure: &str) -> bool {
    println!(
        "target: {name}: {figure} {}",
        if met { "PASS" } else { "FAIL" }
    );
    met
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

/// One row of the suite's table (`benches/run` prints them all as one):
/// printed here, and appended to the file `$BENCH_TABLE` names, if any.
/// `figure` is a median with its spread, `limit` the physical floor the
/// figure approaches (or "—").
pub fn table_row(bench: &str, what: &str, figure: &str, target: &str, limit: &str) {
    let row = format!("| {bench} | {what} | {figure} | {target} | {limit} |");
    println!("table: {row}");
    let Some(path) = std::env::var_os("BENCH_TABLE") else {
        return;
    };
    use std::io::Write;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| writeln!(file, "{row}"));
    if let Err(err) = written {
        eprintln!(
            "cannot append to BENCH_TABLE {}: {err}",
            path.to_string_lossy()
        );
    }
}

/// "median (min–max)" with `digits` decimals and a unit, the figure of a
/// [`table_row`].
pub fn spread(sorted: &Sorted, digits: usize, unit: &str) -> String {
    format!(
        "{:.digits$} {unit} ({:.digits$}–{:.digits$}, n = {})",
        sorted.median(),
        sorted.min(),
        sorted.max(),
        sorted.len()
    )
}

/// The physical limits the figures approach, measured on this machine in
/// the same run: what no implementation of the same work could beat.
pub mod limits {
    use std::io::{Read, Write};
    use std::time::Instant;

    use super::Sorted;

    /// The smallest static x86_64 ELF that runs: `exit(0)` and nothing
    /// else (132 bytes, one PT_LOAD segment, no libc, no dynamic loader).
    fn tiny_static_elf() -> Vec<u8> {
        const BASE: u64 = 0x40_0000;
        const CODE: [u8; 12] = [
            0xbf, 0, 0, 0, 0, // mov edi, 0
            0xb8, 60, 0, 0, 0, // mov eax, 60 (exit)
            0x0f, 0x05, // syscall
        ];
        let size = (64 + 56 + CODE.len()) as u64;
        let mut elf = vec![0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        elf.extend(2u16.to_le_bytes()); // ET_EXEC
        elf.extend(0x3eu16.to_le_bytes()); // x86-64
        elf.extend(1u32.to_le_bytes());
        elf.extend((BASE + 120).to_le_bytes()); // entry: the code
        elf.extend(64u64.to_le_bytes()); // program headers right after
        elf.extend(0u64.to_le_bytes());
        elf.extend(0u32.to_le_bytes());
        for half in [64u16, 56, 1, 0, 0, 0] {
            elf.extend(half.to_le_bytes());
        }
        elf.extend(1u32.to_le_bytes()); // PT_LOAD
        elf.extend(5u32.to_le_bytes()); // read + execute
        elf.extend(0u64.to_le_bytes());
        elf.extend(BASE.to_le_bytes());
        elf.extend(BASE.to_le_bytes());
        elf.extend(size.to_le_bytes());
        elf.extend(size.to_le_bytes());
        elf.extend(0x1000u64.to_le_bytes());
        elf.extend(CODE);
        elf
    }

    /// Spawning and reaping a static binary that exits at once, in ms
    /// (`/bin/true` where the tiny ELF is not for this architecture).
    pub fn static_exec(runs: usize) -> Result<Sorted, String> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let program = if cfg!(target_arch = "x86_64") {
            let path = dir.path().join("exit0");
            std::fs::write(&path, tiny_static_elf()).map_err(|e| format!("write: {e}"))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("chmod: {e}"))?;
            path
        } else {
            "/bin/true".into()
        };
        let mut times = Vec::with_capacity(runs);
        for _ in 0..=runs {
            let start = Instant::now();
            let status = std::process::Command::new(&program)
                .status()
                .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
            if !status.success() {
                return Err(format!("{} exited with {status}", program.display()));
            }
            times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        times.remove(0);
        Ok(Sorted::new(times))
    }

    /// One HTTP/1.1 request and its whole answer over a new loopback
    /// connection to `addr` (the fake model server), in ms.
    pub fn loopback_round_trip(addr: std::net::SocketAddr, runs: usize) -> Result<Sorted, String> {
        let request = b"GET /limit HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        let mut times = Vec::with_capacity(runs);
        let mut answer = Vec::new();
        for _ in 0..=runs {
            let start = Instant::now();
            let mut stream =
                std::net::TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
            stream
                .set_nodelay(true)
                .map_err(|e| format!("nodelay: {e}"))?;
            stream
                .write_all(request)
                .map_err(|e| format!("write: {e}"))?;
            answer.clear();
            stream
                .read_to_end(&mut answer)
                .map_err(|e| format!("read: {e}"))?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
            if !answer.starts_with(b"HTTP/1.1 ") {
                return Err("the server sent no HTTP answer".into());
            }
        }
        times.remove(0);
        Ok(Sorted::new(times))
    }

    /// Copying `bytes` bytes once (into memory already touched), in ms.
    pub fn memcpy(bytes: usize, runs: usize) -> Sorted {
        let source = vec![0x5au8; bytes];
        let mut target = vec![0u8; bytes];
        let mut times = Vec::with_capacity(runs);
        for round in 0..=runs {
            let start = Instant::now();
            target.copy_from_slice(std::hint::black_box(&source));
            std::hint::black_box(&mut target);
            if round > 0 {
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        Sorted::new(times)
    }

    /// Writing `bytes` to a temp file, fsync, rename over the target and
    /// fsync of the folder: an atomic replace with nothing else, in ms.
    pub fn atomic_write(
        dir: &std::path::Path,
        bytes: &[u8],
        runs: usize,
    ) -> Result<Sorted, String> {
        let target = dir.join("limit-target");
        let temp = dir.join("limit-target.tmp");
        let folder = std::fs::File::open(dir).map_err(|e| format!("open folder: {e}"))?;
        let mut times = Vec::with_capacity(runs);
        for round in 0..=runs {
            let start = Instant::now();
            let mut file = std::fs::File::create(&temp).map_err(|e| format!("create: {e}"))?;
            file.write_all(bytes).map_err(|e| format!("write: {e}"))?;
            file.sync_all().map_err(|e| format!("fsync: {e}"))?;
            std::fs::rename(&temp, &target).map_err(|e| format!("rename: {e}"))?;
            folder
                .sync_all()
                .map_err(|e| format!("fsync folder: {e}"))?;
            if round > 0 {
                times.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        Ok(Sorted::new(times))
    }
}

/// The tool environment of a session in `root` with commands in `mode`,
/// no approvals asked and no delegation (what `fido tool call` builds).
pub fn tool_env(
    root: &std::path::Path,
    mode: fido::protocol::SandboxMode,
) -> Result<fido::tools::ToolEnv, String> {
    use fido::protocol::{ApprovalPolicy, SafetySettings};
    use fido::sandbox::{CommandPolicy, CommandSandbox};
    let workspace = fido::workspace::Workspace::new(root).map_err(|e| e.to_string())?;
    let sandbox = CommandSandbox::prepare(&CommandPolicy {
        mode,
        network: fido::protocol::NetworkAccess::Off,
        workspace: workspace.root.clone(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits: Default::default(),
    })
    .map_err(|e| format!("{mode}: {e}"))?;
    Ok(fido::tools::ToolEnv {
        undo: fido::store::undo::UndoLog::new(&workspace.root),
        plan: fido::plan::PlanStore::new(&workspace.root, workspace.root.join(".fido-plan.json")),
        todos: fido::plan::todo::TodoStore::in_workspace(&workspace.root),
        workspace,
        limits: fido::tools::ToolLimits::default(),
        user: None,
        delegator: None,
        sandbox: fido::sandbox::SandboxSlot::new(sandbox),
        env_policy: fido::process::EnvPolicy::default(),
        approvals: fido::tools::approval::Approvals::new(
            SafetySettings {
                sandbox_mode: mode,
                approval_policy: ApprovalPolicy::Never,
                network: fido::protocol::NetworkAccess::Off,
            },
            None,
        ),
        hooks: std::sync::Arc::new(fido::hooks::Hooks::none()),
        web: None,
        proxy: None,
        editor: None,
    })
}

/// What one measured child cost: wall time from spawn to reaping, and its
/// peak RSS as the kernel counts it for `wait4` (the child and the
/// descendants it reaped).
pub struct Measured {
    pub wall: std::time::Duration,
    pub max_rss_kib: u64,
    /// The wait status (see `libc::WIFEXITED`).
    pub status: i32,
}

impl Measured {
    pub fn exited_zero(&self) -> bool {
        libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }
}

/// Keeps this process's Fido and provider settings (and `RUST_LOG`) from
/// `cmd`, so the measured Fido sees only what the bench sets.
pub fn remove_fido_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let text = key.to_string_lossy();
        if ["FIDO_", "OPENAI_", "ANTHROPIC_"]
            .iter()
            .any(|p| text.starts_with(p))
            || text == "RUST_LOG"
        {
            cmd.env_remove(&key);
        }
    }
}

/// Runs `command` to its end, killed with SIGKILL after `timeout`.
pub fn run_measured(
    command: &mut Command,
    timeout: std::time::Duration,
) -> Result<Measured, String> {
    Watched::spawn(command, timeout)?.reap()
}

/// A spawned child that a watchdog kills with SIGKILL after its timeout
/// unless it was reaped first; for a bench that talks to the child (its
/// pipes, [`Watched::child_mut`]) before [`Watched::reap`].
pub struct Watched {
    child: std::process::Child,
    pid: libc::pid_t,
    start: std::time::Instant,
    done: std::sync::mpsc::Sender<()>,
}

impl Watched {
    pub fn spawn(command: &mut Command, timeout: std::time::Duration) -> Result<Watched, String> {
        let start = std::time::Instant::now();
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
        let pid = libc::pid_t::try_from(child.id()).map_err(|_| "pid out of range".to_owned())?;
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(timeout) {
                eprintln!("bench: a run exceeded {timeout:?}; killing {pid}");
                // SAFETY: kill(2) has no memory-safety preconditions; the
                // pid is still our unreaped child, since wait4 has not
                // returned (the channel is sent on only after it).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        Ok(Watched {
            child,
            pid,
            start,
            done,
        })
    }

    pub fn child_mut(&mut self) -> &mut std::process::Child {
        &mut self.child
    }

    /// Waits for the child and disarms the watchdog: wall time from spawn
    /// to reaping, and what `wait4` says of it.
    pub fn reap(self) -> Result<Measured, String> {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our unreaped child; both pointers are valid for writes.
        let rc = unsafe { libc::wait4(self.pid, &mut status, 0, &mut usage) };
        let wall = self.start.elapsed();
        let _ = self.done.send(());
        // Reaped by wait4: dropping `child` does not wait again.
        drop(self.child);
        if rc != self.pid {
            return Err(format!("wait4 failed: {}", std::io::Error::last_os_error()));
        }
        Ok(Measured {
            wall,
            max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
            status,
        })
    }
}
