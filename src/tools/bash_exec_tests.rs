//! `bash_exec`'s unit tests: output order, limits, timeouts, cancellation,
//! and the processes a command leaves.

use super::*;
use crate::tools::ToolEnv;
use crate::tools::testing::{call, call_with, env};
use serde_json::json;
use std::time::Instant;

fn setup() -> (tempfile::TempDir, ToolEnv) {
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path());
    (dir, env)
}

/// Live (non-zombie) processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised name: state, ppid, pgrp, …
        let rest: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .collect();
        if rest[2] == pgid.to_string() && rest[0] != "Z" && rest[0] != "X" {
            members.push(pid);
        }
    }
    members
}

async fn assert_group_gone(pgid: u32) {
    let start = Instant::now();
    loop {
        let members = group_members(pgid);
        if members.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "processes left in group {pgid}: {members:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn first_line_pid(content: &str) -> u32 {
    content.lines().next().unwrap().trim().parse().unwrap()
}

#[tokio::test]
async fn interleaved_output_keeps_its_order_and_exit_code() {
    let (_dir, env) = setup();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "for i in 1 2 3; do echo out$i; echo err$i >&2; done"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert_eq!(
        out.content,
        "out1\nerr1\nout2\nerr2\nout3\nerr3\nexit code: 0"
    );
    let out = call(&BashExec, &env, json!({"command": "echo nope >&2; exit 3"})).await;
    assert!(!out.ok);
    assert_eq!(out.content, "nope\nexit code: 3");
    let out = call(&BashExec, &env, json!({"command": "true"})).await;
    assert_eq!(out.content, "(no output)\nexit code: 0");
    let out = call(&BashExec, &env, json!({"command": "kill -9 $$"})).await;
    assert!(!out.ok);
    assert!(out.content.contains("killed by SIGKILL"), "{}", out.content);
}

/// How the command ran, as the tool reports it beside its text.
fn run_of(out: &ToolOutput) -> CommandRun {
    let facts = out
        .facts
        .as_deref()
        .expect("a command that ran reports facts");
    assert_eq!(facts.file, None);
    facts.command.clone().expect("command facts")
}

/// The facts say how each command ended, whatever its output says: its
/// code, a signal, a timeout, a cancel; and where its output ends in the
/// text (the exit line and notes follow).
#[tokio::test]
async fn the_facts_say_how_the_command_ended() {
    let (_dir, env) = setup();
    let out = call(&BashExec, &env, json!({"command": "echo hi"})).await;
    let run = run_of(&out);
    assert_eq!((out.ok, &run.exit), (true, &CommandExit::Code { code: 0 }));
    assert_eq!(&out.content[..run.output_bytes], "hi");
    assert_eq!(out.facts.as_deref().unwrap().truncation, None);
    let lying = json!({"command": "echo 'exit code: 0'; exit 1"});
    let out = call(&BashExec, &env, lying).await;
    let run = run_of(&out);
    assert_eq!((out.ok, &run.exit), (false, &CommandExit::Code { code: 1 }));
    assert_eq!(&out.content[..run.output_bytes], "exit code: 0");
    let out = call(&BashExec, &env, json!({"command": "kill -9 $$"})).await;
    let killed = CommandExit::Signal {
        number: 9,
        name: "SIGKILL".into(),
    };
    assert_eq!((out.ok, run_of(&out).exit), (false, killed));
    // `sleep 100` cannot end by itself first: the timeout ended it.
    let slow = json!({"command": "sleep 100", "timeout_ms": 100});
    let out = call(&BashExec, &env, slow).await;
    let run = run_of(&out);
    assert_eq!(run.exit, CommandExit::TimedOut { after_ms: 100 });
    assert!(run.elapsed_ms >= 100, "{run:?}");
    assert!(!out.ok);
    // Cancelled before the command could end: the cancel ended it.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let out = call_with(&BashExec, &env, json!({"command": "sleep 100"}), &cancel).await;
    assert_eq!((out.ok, run_of(&out).exit), (false, CommandExit::Cancelled));
    assert_eq!(&out.content[..run_of(&out).output_bytes], "(no output)");
}

#[tokio::test]
async fn runs_in_cwd_without_credentials_and_sanitizes() {
    let (dir, env) = setup();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "basename \"$PWD\"; echo \"key=${FIDO_API_KEY:-unset}\"; printf '\\033[31mred\\033[0m\\n'", "cwd": "sub"}),
    )
    .await;
    assert_eq!(out.content, "sub\nkey=unset\nred\nexit code: 0");
    for (args, expected) in [
        (
            json!({"command": "ls", "cwd": "../"}),
            "outside the workspace",
        ),
        (json!({"command": "ls", "cwd": "missing"}), "does not exist"),
        (json!({"command": "  "}), "empty"),
        (json!({"command": "ls", "timeout_ms": 0}), "at least 1"),
        (json!({"cmd": "ls"}), "invalid arguments"),
    ] {
        let out = call(&BashExec, &env, args.clone()).await;
        assert!(!out.ok, "{args}");
        assert!(out.content.contains(expected), "{args}: {}", out.content);
    }
}

#[tokio::test]
async fn output_cap_keeps_head_and_tail() {
    let (_dir, mut env) = setup();
    env.limits.bash_output_cap = 100;
    let out = call(&BashExec, &env, json!({"command": "seq 1 10000"})).await;
    assert!(out.ok);
    assert!(out.content.starts_with("1\n2\n3\n"), "{}", out.content);
    assert!(
        out.content.ends_with("9999\n10000\nexit code: 0"),
        "{}",
        out.content
    );
    assert!(out.content.contains("bytes of output elided"));
    assert!(out.content.len() < 200);
    // `seq 1 10000` writes 48,894 bytes; the text keeps 100 of them.
    let truncation = out.facts.as_deref().and_then(|facts| facts.truncation);
    assert_eq!(
        truncation,
        Some(Truncation {
            shown_bytes: 100,
            total_bytes: 48_894
        })
    );
}

#[test]
fn capture_cuts_on_char_boundaries() {
    let mut capture = Capture::new(10);
    capture.push("ééééééééééééé".as_bytes());
    let text = capture.render();
    assert!(!text.contains('\u{fffd}'), "{text}");
    assert_eq!(text, "éé\n[… 18 bytes of output elided …]\néé");
    let mut small = Capture::new(10);
    small.push(b"abc");
    small.push(b"def");
    assert_eq!(small.render(), "abcdef");
}

#[tokio::test]
async fn timeout_kills_the_whole_group_quickly() {
    let (_dir, env) = setup();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo $$; sleep 100", "timeout_ms": 300}),
    )
    .await;
    // The command sleeps 100 s: the timeout ended it, as it says.
    assert!(!out.ok);
    assert!(
        out.content.contains("timed out after 300ms"),
        "{}",
        out.content
    );
    assert_group_gone(first_line_pid(&out.content)).await;
}

#[tokio::test]
async fn timeout_kills_a_group_that_ignores_sigterm() {
    let (_dir, env) = setup();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "trap '' TERM; echo $$; sleep 100 & sleep 100; wait", "timeout_ms": 200}),
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("timed out"), "{}", out.content);
    assert_group_gone(first_line_pid(&out.content)).await;
}

#[tokio::test]
async fn cancel_stops_the_command() {
    let (_dir, env) = setup();
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        trigger.cancel();
    });
    let out = call_with(
        &BashExec,
        &env,
        json!({"command": "echo $$; sleep 100"}),
        &cancel,
    )
    .await;
    assert!(!out.ok);
    assert!(out.content.contains("cancelled"), "{}", out.content);
    assert_group_gone(first_line_pid(&out.content)).await;
}

#[tokio::test]
async fn background_jobs_do_not_hang_and_are_killed() {
    let (_dir, env) = setup();
    let start = Instant::now();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo $$; sleep 100 & echo started"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    // The background sleep runs 100 s: a call that returned before it
    // ended did not wait for it (how fast is the benches' business).
    assert!(
        start.elapsed() < Duration::from_secs(90),
        "{:?}",
        start.elapsed()
    );
    assert!(
        out.content.ends_with("started\nexit code: 0"),
        "{}",
        out.content
    );
    assert_group_gone(first_line_pid(&out.content)).await;
}

/// A session whose commands go through an allowlist proxy listing only
/// `allow`, headless, in a workspace-write sandbox routed through it (the
/// confinement itself is tested in `sandbox::netns`; this is about what
/// the command is told and what the model hears).
fn proxied(allow: &str) -> (tempfile::TempDir, ToolEnv) {
    use crate::net::proxy::{Proxy, ProxyLimits};
    let (dir, mut env) = setup();
    let rules = crate::net::NetRules {
        allow: crate::net::rules::parse_list(allow).unwrap(),
        deny: Vec::new(),
    };
    let headless = crate::tools::approval::Approvals::new(env.approvals.settings(), None);
    let browser = crate::tools::web::Browser::new(rules, headless);
    let proxy = Proxy::start(browser.admission(), ProxyLimits::default()).unwrap();
    let policy = crate::sandbox::CommandPolicy {
        mode: crate::protocol::SandboxMode::WorkspaceWrite,
        network: crate::protocol::NetworkAccess::Off,
        workspace: dir.path().to_path_buf(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits: Default::default(),
    };
    let sandbox = CommandSandbox::prepare(&policy).unwrap();
    env.sandbox = crate::sandbox::SandboxSlot::new(sandbox.with_proxy(proxy.route()).unwrap());
    env.proxy = Some(Arc::new(proxy));
    (dir, env)
}

#[tokio::test]
async fn a_proxied_command_is_pointed_at_the_proxy() {
    let (_dir, env) = proxied("");
    let port = env.proxy.as_ref().unwrap().port();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "env | grep -i '_proxy=' | sort"}),
    )
    .await;
    let url = format!("http://127.0.0.1:{port}");
    let expected: Vec<String> = [
        "ALL_PROXY",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "all_proxy",
        "http_proxy",
        "https_proxy",
    ]
    .iter()
    .map(|name| format!("{name}={url}"))
    .collect();
    assert_eq!(
        out.content,
        format!("{}\nexit code: 0", expected.join("\n"))
    );
}

#[tokio::test]
async fn the_proxys_refusals_during_a_command_end_its_output() {
    use crate::net::testing::{Answer, TestServer};
    let listed = TestServer::start(vec![("/page", Answer::page("text/plain", "the page"))]).await;
    let other = TestServer::start(Vec::new()).await;
    let (_dir, env) = proxied(&format!("127.0.0.1:{}", listed.addr.port()));
    let blocked = format!("127.0.0.1:{}", other.addr.port());
    let command = format!(
        "curl -s http://{blocked}/; echo; curl -sS https://{blocked}/ 2>&1; curl -s {}",
        listed.url("/page")
    );
    let out = call(&BashExec, &env, json!({ "command": command })).await;
    let line = format!("blocked by network allowlist: {blocked} (add it to network_allow)");
    assert!(
        out.content.starts_with(&format!("{line}\n")),
        "{}",
        out.content
    );
    assert!(out.content.contains("response 403"), "{}", out.content);
    assert!(out.content.contains("the page"), "{}", out.content);
    assert!(
        out.content.ends_with(&format!("exit code: 0\n{line}")),
        "{}",
        out.content
    );
    assert!(other.requests().is_empty());
    let later = call(&BashExec, &env, json!({"command": "true"})).await;
    assert_eq!(later.content, "(no output)\nexit code: 0");
}

/// Waits until no `sleep MARKER` runs, failing after 5 s.
async fn assert_no_sleep(marker: &str) {
    let start = Instant::now();
    loop {
        let left = crate::sandbox::pidns::tests::running(&["sleep", marker]);
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "left behind: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// In a sandboxed mode, what a command starts ends with it, also a
/// process that left its group and session (`setsid`, `set -m`, a double
/// fork): the command is PID 1 of a namespace of its own.
#[tokio::test]
async fn a_sandboxed_commands_escaped_processes_end_with_it() {
    use crate::sandbox::pidns::tests::skip_unless_ci;
    if !crate::sandbox::pidns::containment().uses_namespace() {
        skip_unless_ci("no PID namespace here");
        return;
    }
    let (dir, mut env) = setup();
    let policy = crate::sandbox::CommandPolicy {
        mode: crate::protocol::SandboxMode::WorkspaceWrite,
        network: crate::protocol::NetworkAccess::Off,
        workspace: std::fs::canonicalize(dir.path()).unwrap(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits: Default::default(),
    };
    env.sandbox = crate::sandbox::SandboxSlot::new(CommandSandbox::prepare(&policy).unwrap());
    let marker = format!("307.{}", fastrand::u32(1000..9999));
    let command = format!(
        "setsid sleep {marker} </dev/null >/dev/null 2>&1 & (set -m; sleep {marker} </dev/null >/dev/null 2>&1 &); ( ( sleep {marker} </dev/null >/dev/null 2>&1 & ) & ); sleep 0.2; echo started"
    );
    let out = call(&BashExec, &env, json!({ "command": command })).await;
    assert!(out.ok, "{}", out.content);
    assert_no_sleep(&marker).await;
}

/// Outside the sandbox (`danger-full-access`, or a command approved to
/// escalate) a command has no PID namespace, yet what left its group is in
/// its cgroup and ends with it.
#[tokio::test]
async fn an_unsandboxed_commands_escaped_processes_end_with_it() {
    if !crate::process::leavers::has_cgroups() {
        // A test binary adopts no orphans (`leavers::adopt_orphans`); the
        // fido binary's fallback is tested in process_cleanup.
        eprintln!("no writable cgroup v2 here: nothing contains the leavers");
        return;
    }
    let (_dir, env) = setup();
    let marker = format!("308.{}", fastrand::u32(1000..9999));
    let command = format!(
        "setsid sleep {marker} </dev/null >/dev/null 2>&1 & ( ( sleep {marker} </dev/null >/dev/null 2>&1 & ) & ); sleep 0.2; echo started"
    );
    let out = call(&BashExec, &env, json!({ "command": command })).await;
    assert!(out.ok, "{}", out.content);
    assert_no_sleep(&marker).await;
}

/// The sandbox note tells the model which network its commands have:
/// none, or the allowlisted hosts through the proxy.
#[tokio::test]
async fn the_sandbox_note_says_which_network_the_commands_have() {
    let refused = json!({"command": "echo 'Permission denied' >&2; exit 1"});
    let (_dir, env) = proxied("");
    let out = call(&BashExec, &env, refused.clone()).await;
    assert!(
        out.content
            .contains("workspace-write: writes only in the workspace")
            && out
                .content
                .contains(", network only to the hosts of network_allow"),
        "{}",
        out.content
    );
    let (dir, mut env) = setup();
    env.sandbox = crate::sandbox::SandboxSlot::new(limited(&dir, Default::default()));
    let out = call(&BashExec, &env, refused).await;
    assert!(out.content.contains(", no network"), "{}", out.content);
    assert!(!out.content.contains("network_allow"), "{}", out.content);
}

/// A workspace-write sandbox with small limits, as `command_max_processes`
/// and `command_tmpdir_mib` would set them.
fn limited(
    dir: &tempfile::TempDir,
    limits: crate::sandbox::limits::CommandLimits,
) -> CommandSandbox {
    CommandSandbox::prepare(&crate::sandbox::CommandPolicy {
        mode: crate::protocol::SandboxMode::WorkspaceWrite,
        network: crate::protocol::NetworkAccess::Off,
        workspace: std::fs::canonicalize(dir.path()).unwrap(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits,
    })
    .unwrap()
}

/// A workspace-write session whose commands may have 299 processes (the
/// smallest limit); `None` where this kernel cannot keep it (a failure
/// under `CI=true`).
fn with_299_processes() -> Option<(tempfile::TempDir, ToolEnv)> {
    use crate::sandbox::limits::{CommandLimits, process_limit_support};
    if let Err(reason) = process_limit_support() {
        crate::sandbox::pidns::tests::skip_unless_ci(&reason.to_string());
        return None;
    }
    let (dir, mut env) = setup();
    let limits = CommandLimits {
        max_processes: 299,
        ..CommandLimits::default()
    };
    env.sandbox = crate::sandbox::SandboxSlot::new(limited(&dir, limits));
    Some((dir, env))
}

/// A fork bomb stops at the command's process limit (its PID namespace's
/// `pid_max`), also for root, whom `RLIMIT_NPROC` never binds; the next
/// command runs as usual.
#[tokio::test]
async fn a_commands_processes_stop_at_its_limit() {
    let Some((_dir, env)) = with_299_processes() else {
        return;
    };
    // dash, not bash: bash retries a refused fork for seconds. Past the
    // limit and the 300 PIDs of the namespace's first round.
    let bomb =
        "sh -c 'n=0; while [ $n -lt 800 ]; do sleep 30 & n=$((n+1)); done; echo started $n' 2>&1";
    let out = call(&BashExec, &env, json!({ "command": bomb })).await;
    assert!(
        out.content.contains("fork") || out.content.contains("Resource temporarily unavailable"),
        "800 processes started under a limit of 299: {}",
        out.content
    );
    let later = call(
        &BashExec,
        &env,
        json!({"command": "cat /proc/sys/kernel/pid_max"}),
    )
    .await;
    assert!(later.content.starts_with("601\n"), "{}", later.content);
}

/// A command that ran its first 300 processes one after the other (a
/// build's short compiler runs) still has its whole limit at once: the
/// kernel gives out PIDs below 300 in the namespace's first round only,
/// and a `pid_max` of the limit plus two left it room for one process.
#[tokio::test]
async fn a_command_keeps_its_limit_after_its_pids_wrapped() {
    let Some((_dir, env)) = with_299_processes() else {
        return;
    };
    let build = "sh -c 'i=0; while [ $i -lt 700 ]; do /bin/true; i=$((i+1)); done; n=0; while [ $n -lt 200 ]; do sleep 5 & n=$((n+1)); done; echo started $n' 2>&1";
    let out = call(&BashExec, &env, json!({ "command": build })).await;
    assert!(out.content.contains("started 200"), "{}", out.content);
}

/// The session's `TMPDIR` holds at most its size (ENOSPC past it), and
/// what one command leaves there the next one still finds.
#[tokio::test]
async fn the_tmpdir_holds_its_size_and_lasts_the_session() {
    use crate::sandbox::limits::{CommandLimits, TmpdirLimit};
    use crate::sandbox::pidns::tests::skip_unless_ci;
    let (dir, mut env) = setup();
    let sandbox = limited(
        &dir,
        CommandLimits {
            tmpdir_mib: 1,
            ..CommandLimits::default()
        },
    );
    if let Some((_, TmpdirLimit::None { reason })) = sandbox.limits() {
        skip_unless_ci(reason);
        return;
    }
    env.sandbox = crate::sandbox::SandboxSlot::new(sandbox);
    let fill = "head -c 2097152 /dev/zero > \"$TMPDIR/big\"; echo rc=$?";
    let out = call(&BashExec, &env, json!({ "command": fill })).await;
    assert!(
        out.content.contains("No space left on device"),
        "{}",
        out.content
    );
    let keep = "rm -f \"$TMPDIR/big\"; echo kept > \"$TMPDIR/note\"";
    call(&BashExec, &env, json!({ "command": keep })).await;
    let read = call(&BashExec, &env, json!({"command": "cat \"$TMPDIR/note\""})).await;
    assert!(read.content.starts_with("kept"), "{}", read.content);
}
