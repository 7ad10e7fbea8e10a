//! Nothing a child of Fido starts outlives it: for each kind of child
//! (hook, MCP server, command, subagent; git in `git::process`'s tests)
//! a descendant that calls `setsid` or daemonises, and so leaves the
//! process group `killpg` reaches, is gone once the spawn or Fido ends;
//! and a `kill -9` of Fido takes its running hook along (the death
//! signal). Each leaver writes its pid to a file before the check, so the
//! check looks at a process known to have started.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::common::process::{
    ProcessFilter, assert_no_processes, exec_cmd, fido_cmd_with_home, pids_with, run_in,
    send_signal, skip_unless_ci, wait_in, wait_until, wrapped_in,
};
use crate::common::turns::tool_result;
use crate::common::{FakeServer, Reply, run_exec, sse};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a SIGKILLed process may take to be gone from `/proc` (a
/// bound for a failing test, not a measure).
const DEATH: Duration = Duration::from_secs(10);

/// A shell snippet that starts `sleep MARKER` in a session of its own
/// (`setsid`) and a double-forked `sleep MARKER` (daemonised: its parent,
/// a subshell, exits at once), writes both pids, one a line, to `pids`,
/// and ends without waiting for them.
fn leave_the_group(marker: &str, pids: &Path) -> String {
    let pids = pids.display();
    format!(
        "setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo $! > {pids}; \
         (sleep {marker} </dev/null >/dev/null 2>&1 & echo $! >> {pids})"
    )
}

/// The pids [`leave_the_group`] wrote, once both are there.
fn leaver_pids(file: &Path) -> Vec<u32> {
    wait_until("the leavers to start", RUN_TIMEOUT, || {
        std::fs::read_to_string(file).is_ok_and(|t| t.lines().count() == 2)
    });
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().map(|l| l.trim().parse().unwrap()).collect()
}

/// Each leaver and every process with `marker` are gone.
fn assert_left_nothing(pids: &[u32], marker: &str) {
    for pid in pids {
        assert_no_processes(ProcessFilter::Pid(*pid), DEATH);
    }
    assert_no_marker(marker);
}

/// No process with `marker` on its command line is left.
fn assert_no_marker(marker: &str) {
    wait_until(
        &format!("{:?} to be gone", pids_with(marker)),
        DEATH,
        || pids_with(marker).is_empty(),
    );
}

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A folder for the config and the pid files, outside the workspace.
fn out_dir() -> (tempfile::TempDir, PathBuf) {
    let out = tempfile::tempdir().unwrap();
    let pids = out.path().join("pids");
    (out, pids)
}

/// `cmd` run in a mount namespace of its own in which every cgroup v2
/// mount is read-only: Fido there can make no cgroup and falls back to
/// adopting orphans. `None` where this process may not do that (not
/// root); CI is root.
fn without_cgroups(cmd: &Command) -> Option<Command> {
    let probe = Command::new("unshare").args(["-m", "true"]).status();
    if !probe.is_ok_and(|s| s.success()) {
        skip_unless_ci("without_cgroups", "unshare -m is refused here");
        return None;
    }
    let script = "mount --make-rprivate / && \
        for m in $(awk '/ - cgroup2 / {print $5}' /proc/self/mountinfo); do \
        mount -o remount,bind,ro \"$m\" || exit 1; done && exec \"$@\"";
    let mut masked = wrapped_in(&["unshare", "-m", "--", "/bin/sh", "-c", script, "sh"], cmd);
    masked.stdin(Stdio::null()).process_group(0);
    Some(masked)
}

/// Whether `pid` is in a cgroup a Fido spawn made.
fn in_spawn_cgroup(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| c.contains("fido-spawn-"))
}

/// A hook's leavers, with cgroups usable or (`masked`) not.
fn hook_leavers_end(masked: bool) {
    let ws = tempfile::tempdir().unwrap();
    let (out, pids) = out_dir();
    let marker = if masked { "1003.1875" } else { "1003.125" };
    // Each leaver records its cgroup before the check.
    let command = format!(
        "{}; for p in $(cat {pids}); do grep -c fido-spawn- /proc/$p/cgroup >> {pids}.cg; done",
        leave_the_group(marker, &pids),
        pids = pids.display()
    );
    let config = prompt_hook_config(out.path(), &command);
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("done"))]);
    let cmd = exec_cmd(ws.path(), &server, "go", &[("FIDO_CONFIG", &config)]);
    let cmd = if masked {
        let Some(cmd) = without_cgroups(&cmd) else {
            return;
        };
        cmd
    } else {
        cmd
    };
    let output = run_in(ws.path(), cmd, None, RUN_TIMEOUT);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let leavers = leaver_pids(&pids);
    if masked {
        let counts = std::fs::read_to_string(pids.with_extension("cg")).unwrap();
        assert_eq!(counts, "0\n0\n", "a leaver was in a spawn's cgroup");
    }
    assert_left_nothing(&leavers, marker);
}

#[test]
fn what_a_hook_started_outside_its_group_ends_with_the_hook() {
    hook_leavers_end(false);
}

/// The subreaper fallback: Fido adopts the orphans and sweeps them.
#[test]
fn without_cgroups_what_a_hook_started_outside_its_group_still_ends_with_the_hook() {
    hook_leavers_end(true);
}

/// A config whose one hook, on each prompt, is `command`.
fn prompt_hook_config(out: &Path, command: &str) -> String {
    let config = out.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[hooks.UserPromptSubmit]]\ncommand = {}\n",
            toml_string(command)
        ),
    )
    .unwrap();
    config.display().to_string()
}

#[test]
fn kill_9_of_fido_while_a_hook_runs_leaves_no_hook_process() {
    let ws = tempfile::tempdir().unwrap();
    let (out, pid_file) = out_dir();
    let (marker, member_marker) = ("1003.375", "1003.4375");
    // The hook's shell becomes the sleep (the process Fido started, which
    // has the death signal); a member of its group does not have it.
    let command = format!(
        "sleep {member_marker} </dev/null >/dev/null 2>&1 & echo $$ $! > {}; exec sleep {marker}",
        pid_file.display()
    );
    let config = prompt_hook_config(out.path(), &command);
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("never asked"))]);
    let child = exec_cmd(ws.path(), &server, "go", &[("FIDO_CONFIG", &config)])
        .spawn()
        .unwrap();
    let fido = child.id();
    wait_until("the hook to run", RUN_TIMEOUT, || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
            && !pids_with(marker).is_empty()
    });
    let pids: Vec<u32> = std::fs::read_to_string(&pid_file)
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    let (hook, member) = (pids[0], pids[1]);
    let in_spawn_cgroup = in_spawn_cgroup(member);
    send_signal(fido, libc::SIGKILL);
    if !in_spawn_cgroup {
        // No cgroup here: the member goes to init, out of any Fido's
        // reach (the limit README's process section names).
        send_signal(member, libc::SIGKILL);
    }
    let output = wait_in(ws.path(), child, RUN_TIMEOUT);
    assert_eq!(output.status.code(), None, "killed, not exited");
    assert_no_processes(ProcessFilter::Pid(hook), DEATH);
    assert!(pids_with(marker).is_empty(), "{:?}", pids_with(marker));
    if !in_spawn_cgroup {
        return;
    }
    // The next Fido's first spawn ends the cgroup the killed one left.
    let config = prompt_hook_config(out.path(), "true");
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("done"))]);
    let output = run_exec(ws.path(), &server, "go", &[("FIDO_CONFIG", &config)]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_no_processes(ProcessFilter::Pid(member), DEATH);
}

#[test]
fn what_an_mcp_server_started_outside_its_group_ends_with_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (_out, pids) = out_dir();
    let marker = "1003.625";
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fixture.py");
    let script = format!(
        "{}; exec python3 {} --marker cleanup-{marker}",
        leave_the_group(marker, &pids),
        fixture.display()
    );
    let config = format!(
        "[mcp_servers.leaver]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        toml_string(&script)
    );
    std::fs::create_dir_all(home.path().join("fido")).unwrap();
    std::fs::write(home.path().join("fido/config.toml"), config).unwrap();
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("done"))]);
    let mut cmd = fido_cmd_with_home(home.path());
    cmd.arg("-C")
        .arg(ws.path())
        .args(["exec", "--json", "--", "go"])
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "test-key")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = run_in(ws.path(), cmd, None, RUN_TIMEOUT);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_left_nothing(&leaver_pids(&pids), marker);
}

fn call(id: &str, tool: &str, args: serde_json::Value) -> Reply {
    Reply::sse(sse::tool_call_turn(&[(id, tool, &args.to_string())]))
}

/// The leavers' pids as a command printed them (`leaver PID` lines): a
/// sandboxed command cannot write outside its workspace and scratch
/// folder, and its pids are its PID namespace's where it has one.
fn printed_leavers(result: &str) -> Vec<&str> {
    result
        .lines()
        .filter_map(|l| l.strip_prefix("leaver "))
        .collect()
}

/// [`leave_the_group`], printing the pids instead.
fn leave_the_group_printing(marker: &str) -> String {
    format!(
        "setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo leaver $!; \
         (sleep {marker} </dev/null >/dev/null 2>&1 & echo leaver $!)"
    )
}

#[test]
fn what_a_command_started_outside_its_group_ends_with_the_command() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "1003.875";
    let server = FakeServer::start(vec![
        call(
            "b1",
            "bash_exec",
            json!({ "command": leave_the_group_printing(marker) }),
        ),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let result = tool_result(server.model_requests()[1].body(), "b1");
    assert_eq!(printed_leavers(&result).len(), 2, "{result}");
    assert_no_marker(marker);
}

const FINAL_JSON: &str = r#"{"summary": "s", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

#[test]
fn what_a_subagents_command_started_outside_its_group_ends_with_the_subagent() {
    let ws = tempfile::tempdir().unwrap();
    let marker = "1004.125";
    // The subagent's command prints the pids, which reach its model.
    let command = leave_the_group_printing(marker);
    let server = FakeServer::start(vec![
        call("d1", "delegate", json!({"task": "start something"})),
        call("s1", "bash_exec", json!({ "command": command })),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = run_exec(ws.path(), &server, "go", &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "stderr: {}", stderr(&output));
    let result = tool_result(requests[2].body(), "s1");
    assert_eq!(printed_leavers(&result).len(), 2, "{result}");
    assert_no_marker(marker);
}
