//! `cargo bench --bench peer`: Fido beside a real peer, Codex CLI, on the
//! same work against the same scripted model server, in one run:
//! `fido exec` and `codex exec` each read a small file with one tool call
//! and answer, runs interleaved so both see the same machine load.
//!
//! The whole bench runs in a network namespace of its own with only
//! loopback (what `unshare -rn` makes: a user namespace mapping this user
//! to root, and a network namespace whose `lo` the bench brings up), so
//! neither program can reach anything but the fake server. Both get an
//! empty `HOME`, `PATH=/usr/bin:/bin` and nothing else of the environment.
//! Codex gets its own config: the fake server as a Responses API provider,
//! no retries, and its update check and analytics off (offline, each
//! waits out DNS timeouts at exit: about 5 s per run). Fido reads the file
//! with `read_file`; Codex with its `exec_command` tool (`cat notes.txt`,
//! no login shell), in its default read-only sandbox.
//!
//! Codex is the native binary that `npm install @openai/codex` puts under
//! `node_modules/@openai/codex-linux-*/vendor/*/bin/codex`: `BENCH_CODEX`,
//! else the one under `~/.cache/fido/peers/codex` (where `.ci/run`
//! installs it). Peak RSS is each child's `ru_maxrss` from `wait4` (it
//! counts the descendants it reaped: Codex's shell and sandbox helper).
//! `BENCH_RUNS` (default 10) runs of each. Exit status 1 when a run fails,
//! or when Fido is not faster and leaner than the peer at the median.

#[allow(dead_code)]
#[path = "../tests/common/server.rs"]
mod server;
#[allow(dead_code)]
#[path = "../tests/common/sse.rs"]
mod sse;
#[allow(dead_code)]
mod support;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use server::{FakeServer, Reply};
use support::Sorted;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const FILE_NAME: &str = "notes.txt";
const FILE_TEXT: &str = "The bench file: seven small words here.";
const PROMPT: &str = "What does notes.txt say?";
const ANSWER: &str = "notes.txt says: The bench file: seven small words here.";

fn main() -> ExitCode {
    // First, while this process has one thread (a user namespace needs it).
    if let Err(message) = namespace::enter_loopback_only() {
        eprintln!("peer bench: cannot make a loopback-only network namespace: {message}");
        return ExitCode::FAILURE;
    }
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("peer bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Which program a run starts.
#[derive(Clone, Copy)]
enum Agent {
    Fido,
    Codex,
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", 10)?;
    let fido = support::fido_binary("peer")?;
    let codex = codex_binary()?;
    let version = Command::new(&codex)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", codex.display()))?;
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    println!(
        "peer bench: {} against {version} ({})",
        fido.display(),
        codex.display()
    );
    let mut fido_runs = Vec::new();
    let mut codex_runs = Vec::new();
    for run in 0..=runs {
        let f = run_once(Agent::Fido, &fido).map_err(|e| format!("fido run {run}: {e}"))?;
        let c = run_once(Agent::Codex, &codex).map_err(|e| format!("codex run {run}: {e}"))?;
        if run > 0 {
            fido_runs.push(f);
            codex_runs.push(c);
        }
    }
    Ok(report(&version, &fido_runs, &codex_runs))
}

/// `BENCH_CODEX`, else the native binary of an npm install under
/// `~/.cache/fido/peers/codex`.
fn codex_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("BENCH_CODEX") {
        return Ok(PathBuf::from(path));
    }
    let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
    let scope = Path::new(&home).join(".cache/fido/peers/codex/node_modules/@openai");
    let found = std::fs::read_dir(&scope)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("codex-linux-")
        })
        .flat_map(|entry| {
            std::fs::read_dir(entry.path().join("vendor"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|target| target.path().join("bin/codex"))
        .find(|path| path.is_file());
    found.ok_or_else(|| {
        format!(
            "no Codex binary under {}: run `npm install @openai/codex` in {} (as .ci/run does), or set BENCH_CODEX",
            scope.display(),
            scope.parent().and_then(Path::parent).unwrap_or(&scope).display()
        )
    })
}

/// The scripted model of `agent`: one tool call reading the file, then the
/// answer, in the wire format the agent speaks.
fn script(agent: Agent) -> Vec<Reply> {
    match agent {
        Agent::Fido => vec![
            Reply::sse(sse::tool_call_turn(&[(
                "call_1",
                "read_file",
                &format!(r#"{{"path":"{FILE_NAME}"}}"#),
            )])),
            Reply::sse(sse::text_turn(ANSWER)),
        ],
        Agent::Codex => vec![
            Reply::sse(sse::responses_function_call_turn(
                "call_1",
                "exec_command",
                &format!(r#"{{"cmd":"cat {FILE_NAME}","login":false}}"#),
            )),
            Reply::sse(sse::responses_text_turn(ANSWER)),
        ],
    }
}

/// One measured run in a fresh workspace, home and server; checks that
/// it exited 0, printed the answer and sent the file's text back.
fn run_once(agent: Agent, program: &Path) -> Result<support::Measured, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let (workspace, home, outputs) = (
        scratch.path().join("ws"),
        scratch.path().join("home"),
        scratch.path().join("out"),
    );
    for dir in [&workspace, &home, &outputs] {
        std::fs::create_dir(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    }
    std::fs::write(workspace.join(FILE_NAME), format!("{FILE_TEXT}\n"))
        .map_err(|e| format!("workspace file: {e}"))?;
    let server = FakeServer::start(script(agent));
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .current_dir(&workspace)
        .stdin(Stdio::null());
    match agent {
        Agent::Fido => {
            cmd.env("XDG_CONFIG_HOME", &home)
                .env("FIDO_PROVIDER", "openai")
                .env("FIDO_BASE_URL", server.base_url())
                .env("FIDO_MODEL", "test-model")
                .env("FIDO_API_KEY", "test-key")
                .args(["exec", "--", PROMPT]);
        }
        Agent::Codex => {
            let codex_home = scratch.path().join("codex-home");
            std::fs::create_dir(&codex_home).map_err(|e| format!("codex home: {e}"))?;
            std::fs::write(
                codex_home.join("config.toml"),
                codex_config(&server.base_url()),
            )
            .map_err(|e| format!("codex config: {e}"))?;
            cmd.env("CODEX_HOME", &codex_home)
                .env("FAKE_API_KEY", "test-key")
                .args(["exec", "--skip-git-repo-check", PROMPT]);
        }
    }
    let (stdout_path, stderr_path) = (outputs.join("stdout"), outputs.join("stderr"));
    let create = |path: &Path| File::create(path).map_err(|e| format!("{}: {e}", path.display()));
    cmd.stdout(create(&stdout_path)?)
        .stderr(create(&stderr_path)?);
    let measured = support::run_measured(&mut cmd, RUN_TIMEOUT)?;
    let stdout = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let context = || format!("\n--- stdout\n{stdout}\n--- stderr\n{stderr}");
    if !measured.exited_zero() {
        return Err(format!("exit status {:#x}{}", measured.status, context()));
    }
    if !stdout.contains(ANSWER) {
        return Err(format!("stdout lacks the answer{}", context()));
    }
    let requests = server.model_requests();
    let fed_back = requests.len() == 2 && requests[1].body().to_string().contains(FILE_TEXT);
    if !fed_back {
        return Err(format!(
            "{} model requests, and the second does not carry the file's text{}",
            requests.len(),
            context()
        ));
    }
    Ok(measured)
}

fn codex_config(base_url: &str) -> String {
    format!(
        r#"model = "test-model"
model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"#
    )
}

fn report(version: &str, fido: &[support::Measured], codex: &[support::Measured]) -> bool {
    let wall = |runs: &[support::Measured]| {
        Sorted::new(runs.iter().map(|m| m.wall.as_secs_f64() * 1e3).collect())
    };
    let rss = |runs: &[support::Measured]| {
        Sorted::new(runs.iter().map(|m| m.max_rss_kib as f64 / 1024.0).collect())
    };
    let (fido_wall, codex_wall, fido_rss, codex_rss) =
        (wall(fido), wall(codex), rss(fido), rss(codex));
    println!("{:<28}{:>10}{:>10}{:>10}", "", "min", "median", "max");
    for (name, s) in [
        ("fido wall (ms)", &fido_wall),
        ("codex wall (ms)", &codex_wall),
        ("fido peak RSS (MiB)", &fido_rss),
        ("codex peak RSS (MiB)", &codex_rss),
    ] {
        println!(
            "{name:<28}{:>10.1}{:>10.1}{:>10.1}",
            s.min(),
            s.median(),
            s.max()
        );
    }
    let time_ratio = codex_wall.median() / fido_wall.median();
    let rss_ratio = codex_rss.median() / fido_rss.median();
    println!("codex / fido at the median: wall {time_ratio:.1}x, peak RSS {rss_ratio:.1}x");
    support::table_row(
        "peer",
        &format!(
            "the exec work (read a file, answer) side by side with {version}, same fake server, loopback-only namespace: wall, Fido / Codex"
        ),
        &format!(
            "{} / {}: Codex takes {time_ratio:.1}×",
            support::spread(&fido_wall, 1, "ms"),
            support::spread(&codex_wall, 1, "ms")
        ),
        "Fido faster",
        "—",
    );
    support::table_row(
        "peer",
        "the same: peak RSS, Fido / Codex",
        &format!(
            "{:.1} / {:.1} MiB: Codex maps {rss_ratio:.1}×",
            fido_rss.median(),
            codex_rss.median()
        ),
        "Fido leaner",
        "—",
    );
    let ok = time_ratio > 1.0 && rss_ratio > 1.0;
    println!(
        "target: Fido faster and leaner than the peer at the median: {}",
        if ok { "PASS" } else { "FAIL" }
    );
    ok
}

/// The loopback-only network namespace the bench runs in.
mod namespace {
    /// `unshare -rn`, then `ip link set lo up`, for this process: call it
    /// while the process has one thread.
    pub fn enter_loopback_only() -> Result<(), String> {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        // SAFETY: unshare(2) takes flags only; the caller is single-threaded.
        if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) } != 0 {
            let err = std::io::Error::last_os_error();
            return Err(format!("unshare(CLONE_NEWUSER | CLONE_NEWNET): {err}"));
        }
        let write = |file: &str, text: String| {
            std::fs::write(format!("/proc/self/{file}"), text)
                .map_err(|e| format!("/proc/self/{file}: {e}"))
        };
        write("setgroups", "deny".into())?;
        write("uid_map", format!("0 {uid} 1"))?;
        write("gid_map", format!("0 {gid} 1"))?;
        loopback_up()
    }

    fn loopback_up() -> Result<(), String> {
        // SAFETY: socket(2) with constant arguments; the fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: an all-zero ifreq is valid; the name is NUL-terminated.
        let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write `request` only.
        let result = unsafe {
            if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(())
                }
            }
        };
        // SAFETY: fd is ours and open.
        unsafe { libc::close(fd) };
        result.map_err(|e| format!("bringing lo up: {e}"))
    }
}
