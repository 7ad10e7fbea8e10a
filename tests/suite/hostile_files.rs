//! The file tools against a hostile workspace (issue 32): a concurrent
//! process swapping a folder for a symlink to a folder outside, thousands
//! of times while the tools run, and files that are no regular files
//! (FIFOs, sockets, devices). Real files, real tools through the catalog.
//!
//! The race tests run `FIDO_RACE_CALLS` calls per tool (2,000 by default,
//! a few seconds in a debug build); the soak, 10,000 calls per tool, is
//! `file_tools_race_soak`, ignored by default: `benches/run` runs it.

use std::collections::BTreeMap;
use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::common::process::{ProcessFilter, assert_no_processes};
use fido::plan::PlanFlavour;
use fido::protocol::{ApprovalPolicy, NetworkAccess, SafetySettings, SandboxMode, ToolCall};
use fido::tools::{InvocationContext, ToolCatalog, ToolEnv, ToolLimits, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SECRET: &str = "SECRET-KEY-0123456789";
const OUTSIDE_ONLY: &str = "outside-only-name";

fn tool_env(root: &Path) -> ToolEnv {
    let workspace = fido::workspace::Workspace::new(root).unwrap();
    ToolEnv {
        undo: fido::store::undo::UndoLog::new(&workspace.root),
        plan: fido::plan::PlanStore::new(&workspace.root, workspace.root.join(".fido-plan.json")),
        todos: fido::plan::todo::TodoStore::in_workspace(&workspace.root),
        workspace,
        limits: ToolLimits::default(),
        user: None,
        delegator: None,
        sandbox: fido::sandbox::SandboxSlot::new(fido::sandbox::CommandSandbox::unconfined()),
        env_policy: fido::process::EnvPolicy::default(),
        approvals: fido::tools::approval::Approvals::new(
            SafetySettings {
                sandbox_mode: SandboxMode::WorkspaceWrite,
                approval_policy: ApprovalPolicy::Never,
                network: NetworkAccess::Off,
            },
            None,
        ),
        hooks: Arc::new(fido::hooks::Hooks::none()),
        web: None,
        proxy: None,
        editor: None,
    }
}

async fn invoke(env: &ToolEnv, name: &str, args: Value, cancel: &CancellationToken) -> ToolOutput {
    invoke_in(
        &ToolCatalog::standard(PlanFlavour::UpdatePlan),
        env,
        name,
        args,
        cancel,
    )
    .await
}

async fn invoke_in(
    catalog: &ToolCatalog,
    env: &ToolEnv,
    name: &str,
    args: Value,
    cancel: &CancellationToken,
) -> ToolOutput {
    let call = ToolCall {
        id: "hostile".into(),
        name: name.into(),
        arguments: args.to_string(),
    };
    catalog
        .invoke(&call, env, &InvocationContext::main(), &[], cancel)
        .await
}

/// A temp dir on tmpfs where there is one: the undo journal's and the
/// writes' fsyncs then cost nothing, so thousands of calls fit in seconds.
fn fast_tempdir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().unwrap()
}

/// A workspace whose folder `d` a racer swaps, again and again, with a
/// symlink to `outside` (`renameat2(RENAME_EXCHANGE)` of `d` and `x`: `d`
/// is always there, as a real folder or as the link). The real folder and
/// `outside` hold the same names, so a tool that follows the link acts on
/// something outside, which the snapshot of `outside` shows.
struct Arena {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicU64>,
    racer: Option<std::thread::JoinHandle<()>>,
}

impl Arena {
    fn new(calls: usize) -> Arena {
        let dir = fast_tempdir();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        let real = ws.join("d");
        for folder in [&real, &outside] {
            fs::create_dir_all(folder).unwrap();
            for i in 0..calls {
                fs::write(folder.join(format!("victim-{i}")), "victim").unwrap();
                fs::create_dir(folder.join(format!("empty-{i}"))).unwrap();
            }
        }
        fs::write(real.join("file.txt"), "an inside KEY line\n").unwrap();
        fs::write(outside.join("file.txt"), format!("{SECRET}\n")).unwrap();
        fs::write(outside.join(OUTSIDE_ONLY), SECRET).unwrap();
        symlink(&outside, ws.join("x")).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicU64::new(0));
        let racer = {
            let root: OwnedFd = fs::File::open(&ws).unwrap().into();
            let (stop, swaps) = (stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let swapped = nix::fcntl::renameat2(
                        root.as_fd(),
                        "d",
                        root.as_fd(),
                        "x",
                        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
                    );
                    if swapped.is_ok() {
                        swaps.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        Arena {
            _dir: dir,
            ws,
            outside,
            stop,
            swaps,
            racer: Some(racer),
        }
    }

    fn finish(&mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(racer) = self.racer.take() {
            racer.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Every path under `dir` with its content ("<dir>" for a folder).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(folder) = todo.pop() {
        for entry in fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let content = if meta.is_dir() {
                todo.push(path.clone());
                "<dir>".to_string()
            } else {
                fs::read_to_string(&path).unwrap_or_default()
            };
            seen.insert(path.strip_prefix(dir).unwrap().to_path_buf(), content);
        }
    }
    seen
}

fn race_calls() -> usize {
    std::env::var("FIDO_RACE_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000)
}

/// Whether the tools journal undo entries in a race: only where the
/// journal is the point (rm moves what it removes into it by a rename);
/// elsewhere it would only add its own cost to each call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Undo {
    Journal,
    Off,
}

/// `calls` calls of `tool` with the arguments `args(i)`, the racer
/// swapping all along: nothing outside changes, no answer holds the
/// secret or a name only the outside folder has. `victims` files and
/// empty folders are made on both sides first. Returns how many calls
/// succeeded.
async fn race(
    tool: &str,
    (calls, victims, undo): (usize, usize, Undo),
    args: impl Fn(usize) -> Value,
) -> usize {
    let mut arena = Arena::new(victims);
    let mut env = tool_env(&arena.ws);
    if undo == Undo::Off {
        env.undo = fido::store::undo::UndoLog::disabled();
    }
    let catalog = ToolCatalog::standard(PlanFlavour::UpdatePlan);
    let before = snapshot(&arena.outside);
    let cancel = CancellationToken::new();
    let mut succeeded = 0;
    let mut leaks = Vec::new();
    for i in 0..calls {
        let out = invoke_in(&catalog, &env, tool, args(i), &cancel).await;
        if out.content.contains(SECRET) || out.content.contains(OUTSIDE_ONLY) {
            leaks.push(out.content.clone());
        }
        succeeded += usize::from(out.ok);
    }
    let swaps = arena.finish();
    let after = snapshot(&arena.outside);
    let changed: Vec<_> = before
        .iter()
        .filter(|(path, content)| after.get(*path) != Some(*content))
        .map(|(path, _)| path.display().to_string())
        .chain(
            after
                .keys()
                .filter(|path| !before.contains_key(*path))
                .map(|path| format!("new {}", path.display())),
        )
        .collect();
    assert!(swaps > 100, "{tool}: the racer swapped only {swaps} times");
    assert!(
        leaks.is_empty(),
        "{tool}: {} of {calls} answers read outside, e.g. {:?}",
        leaks.len(),
        leaks.first()
    );
    assert!(
        changed.is_empty(),
        "{tool}: {} entries outside changed in {calls} calls, e.g. {:?}",
        changed.len(),
        &changed[..changed.len().min(5)]
    );
    succeeded
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_file_never_reads_outside_while_a_folder_is_swapped() {
    let ok = race(
        "read_file",
        (race_calls(), 0, Undo::Off),
        |_| json!({"path": "d/file.txt"}),
    )
    .await;
    assert!(ok > 0, "no read_file call succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_never_edits_outside_while_a_folder_is_swapped() {
    let ok = race("patch", (race_calls(), 0, Undo::Off), |i| {
        let (old, new) = if i % 2 == 0 {
            ("KEY", "KEY2")
        } else {
            ("KEY2", "KEY")
        };
        json!({"path": "d/file.txt", "edits": [{"old_text": old, "new_text": new, "replace_all": true}]})
    })
    .await;
    assert!(ok > 0, "no patch edit succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_never_creates_or_overwrites_outside_while_a_folder_is_swapped() {
    let ok = race("patch", (race_calls(), 0, Undo::Off), |i| {
        if i % 2 == 0 {
            json!({"path": format!("d/new-{i}.txt"), "content": "created\n"})
        } else {
            json!({"path": "d/file.txt", "content": "overwritten KEY\n"})
        }
    })
    .await;
    assert!(ok > 0, "no patch write succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rm_never_removes_outside_while_a_folder_is_swapped() {
    let ok = race(
        "rm",
        (race_calls(), race_calls(), Undo::Journal),
        |i| json!({"path": format!("d/victim-{i}")}),
    )
    .await;
    assert!(ok > 0, "no rm succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmdir_never_removes_outside_while_a_folder_is_swapped() {
    let ok = race(
        "rmdir",
        (race_calls(), race_calls(), Undo::Off),
        |i| json!({"path": format!("d/empty-{i}")}),
    )
    .await;
    assert!(ok > 0, "no rmdir succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mkdir_never_creates_outside_while_a_folder_is_swapped() {
    let ok = race(
        "mkdir",
        (race_calls(), 0, Undo::Off),
        |i| json!({"path": format!("d/made-{i}/sub")}),
    )
    .await;
    assert!(ok > 0, "no mkdir succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_never_lists_outside_while_a_folder_is_swapped() {
    let ok = race(
        "list_files",
        (race_calls(), 0, Undo::Off),
        |_| json!({"path": "d", "depth": 1, "limit": 5}),
    )
    .await;
    assert!(ok > 0, "no list_files call succeeded");
}

/// A level below the listed folder, which the walker reads by path: the
/// swapped folder's names are shown only as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_never_lists_outside_a_level_down_while_a_folder_is_swapped() {
    let ok = race(
        "list_files",
        (race_calls(), 0, Undo::Off),
        |_| json!({"path": ".", "depth": 2, "limit": 50}),
    )
    .await;
    assert!(ok > 0, "no list_files call succeeded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ripgrep_never_reads_outside_while_a_folder_is_swapped() {
    let ok = race(
        "ripgrep",
        (race_calls(), 0, Undo::Off),
        |_| json!({"pattern": "KEY", "path": "d"}),
    )
    .await;
    assert!(ok > 0, "no ripgrep call succeeded");
}

/// The soak: 10,000 calls of each tool (`benches/run` runs it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of minutes; benches/run runs it"]
async fn file_tools_race_soak() {
    let n = 10_000;
    let plain = (n, 0, Undo::Off);
    race("read_file", plain, |_| json!({"path": "d/file.txt"})).await;
    race("patch", plain, |i| {
        let (old, new) = if i % 2 == 0 { ("KEY", "KEY2") } else { ("KEY2", "KEY") };
        json!({"path": "d/file.txt", "edits": [{"old_text": old, "new_text": new, "replace_all": true}]})
    })
    .await;
    race(
        "patch",
        plain,
        |i| json!({"path": format!("d/new-{i}.txt"), "content": "x\n"}),
    )
    .await;
    race(
        "rm",
        (n, n, Undo::Journal),
        |i| json!({"path": format!("d/victim-{i}")}),
    )
    .await;
    race(
        "rmdir",
        (n, n, Undo::Off),
        |i| json!({"path": format!("d/empty-{i}")}),
    )
    .await;
    race("mkdir", plain, |i| json!({"path": format!("d/made-{i}")})).await;
    race(
        "list_files",
        plain,
        |_| json!({"path": "d", "depth": 1, "limit": 5}),
    )
    .await;
    race(
        "list_files",
        plain,
        |_| json!({"path": ".", "depth": 2, "limit": 50}),
    )
    .await;
    race("ripgrep", plain, |_| json!({"pattern": "KEY", "path": "d"})).await;
}

// ---------------------------------------------------------------------
// Odd files: refused by name, at once.

/// Only a guard against a hang: the refusal's own message proves the
/// file was never opened for a blocking read.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn odd_workspace() -> (tempfile::TempDir, ToolEnv) {
    let dir = tempfile::tempdir().unwrap();
    let env = tool_env(dir.path());
    (dir, env)
}

/// Each file tool that reads or writes content, on `name`: a prompt
/// error that says what the file is.
async fn refused_promptly(env: &ToolEnv, name: &str, what: &str) {
    let cases = [
        ("read_file", json!({"path": name})),
        (
            "patch",
            json!({"path": name, "edits": [{"old_text": "a", "new_text": "b"}]}),
        ),
        ("patch", json!({"path": name, "content": "x"})),
    ];
    for (tool, args) in cases {
        let out = tokio::time::timeout(
            HANG_GUARD,
            invoke(env, tool, args, &CancellationToken::new()),
        )
        .await
        .unwrap_or_else(|_| panic!("{tool} on {what} hung for {HANG_GUARD:?}"));
        assert!(!out.ok, "{tool} on {what}: {}", out.content);
        assert!(
            out.content.contains(&format!(
                "`{name}` is {what}; file tools read and write regular files only"
            )),
            "{tool} on {what}: {}",
            out.content
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_without_a_writer_is_refused_at_once() {
    let (dir, env) = odd_workspace();
    nix::unistd::mkfifo(
        &dir.path().join("pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    refused_promptly(&env, "pipe", "a FIFO (named pipe)").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_fed_forever_is_refused_at_once() {
    let (dir, env) = odd_workspace();
    let fifo = dir.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    use std::os::unix::process::CommandExt;
    // A writer that never stops and never writes a newline, in a group
    // of its own: killing only `sh` would leave `yes` and `tr` blocked on
    // the FIFO for good.
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec yes abcdefgh | tr -d '\\n' > pipe")
        .current_dir(dir.path())
        .process_group(0)
        .spawn()
        .unwrap();
    refused_promptly(&env, "pipe", "a FIFO (named pipe)").await;
    let group = nix::unistd::Pid::from_raw(writer.id() as i32);
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = writer.wait();
    // The group's other members are not our children: wait until none
    // runs (a zombie waits for an init that may not reap it, in a
    // container).
    assert_no_processes(ProcessFilter::Group(writer.id()), Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unix_socket_is_refused_at_once() {
    let (dir, env) = odd_workspace();
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    refused_promptly(&env, "sock", "a socket").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_character_device_is_refused_at_once() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: creating a character device needs root");
        return;
    }
    let (dir, env) = odd_workspace();
    // The numbers of /dev/zero: endless bytes to a reader that trusts it.
    let made = nix::sys::stat::mknod(
        &dir.path().join("zero"),
        nix::sys::stat::SFlag::S_IFCHR,
        nix::sys::stat::Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 5),
    );
    if let Err(err) = made {
        eprintln!("skipped: mknod refused here ({err})");
        return;
    }
    refused_promptly(&env, "zero", "a character device").await;
}

// ---------------------------------------------------------------------
// Cancel.

/// A file whose first 11 KB are lines and whose rest is one line of a
/// terabyte (sparse: a hole of zeros, no disk used). Reading past the
/// first lines has no end in sight; a cancel must end it.
fn endless_line(dir: &Path) -> PathBuf {
    let path = dir.join("giant.txt");
    let file = fs::File::create(&path).unwrap();
    let head = "short line\n".repeat(1000);
    std::io::Write::write_all(&mut &file, head.as_bytes()).unwrap();
    file.set_len(1 << 40).unwrap();
    path
}

/// CPU time in clock ticks of this process's threads named `name`.
fn cpu_ticks_of_threads(name: &str) -> u64 {
    let mut ticks = 0;
    for task in fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(name) {
            continue;
        }
        let stat = fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let after_comm = stat.rsplit(')').next().unwrap_or("");
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        // utime and stime: fields 14 and 15 of stat(5), 11 and 12 here.
        for index in [11, 12] {
            ticks += fields
                .get(index)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ticks
}

/// Cancel mid-read: the tool returns, saying it was cancelled, and the
/// blocking thread stops reading (its CPU time stops growing). How soon
/// it returns is measured by `benches/hostile` (a bound here would be a
/// real-clock race). Its own runtime, so its threads can be told from
/// other tests'.
#[test]
fn read_file_ends_on_a_cancel_and_stops_reading() {
    const THREADS: &str = "cancel-probe";
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(THREADS)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = tool_env(dir.path());
    endless_line(dir.path());
    let cancel = CancellationToken::new();
    let out = runtime.block_on(async {
        let canceller = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cancel.cancel();
            })
        };
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            invoke(
                &env,
                "read_file",
                json!({"path": "giant.txt", "offset": 1100}),
                &cancel,
            ),
        )
        .await
        .expect("read_file hung for 60 s (cancelled at 0.3 s)");
        canceller.await.unwrap();
        out
    });
    assert!(!out.ok);
    assert!(out.content.contains("cancelled"), "{}", out.content);
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu_ticks_of_threads(THREADS);
    std::thread::sleep(Duration::from_millis(500));
    let spent = cpu_ticks_of_threads(THREADS) - before;
    // 100 ticks a second: a thread still reading would take about 50.
    assert!(
        spent < 10,
        "{spent} ticks of CPU in the 500 ms after the cancel: a reader is still going"
    );
}
