//! MCP servers end to end: the real binary starts real server processes
//! (the stdlib fixture `tests/fixtures/mcp_fixture.py` for the fault cases,
//! the published `mcp-server-time` that `.ci/run` installs for the real
//! one) from the user config, against the fake model server.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::catalog::{advertised_fingerprint, child_catalogs};
use crate::common::process::RUN_TIMEOUT;
use crate::common::process::run_in;
use crate::common::sse;
use crate::common::turns::{call, tool_result};
use crate::common::{FakeServer, Reply, fido_cmd_with_home};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_fixture.py")
}

/// A workspace and a home whose user config defines `servers` (TOML
/// tables after `[mcp_servers.NAME]`); `{fixture}` and `{marker}` are
/// replaced by the fixture's path and a marker unique to this test, which
/// finds the servers' processes by their command line.
struct Setup {
    ws: tempfile::TempDir,
    home: tempfile::TempDir,
    marker: String,
}

impl Setup {
    fn new(servers: &str) -> Setup {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let marker = format!(
            "marker-{}",
            ws.path().file_name().unwrap().to_string_lossy()
        );
        let config = servers
            .replace("{fixture}", &fixture().display().to_string())
            .replace("{marker}", &marker);
        std::fs::create_dir_all(home.path().join("fido")).unwrap();
        std::fs::write(home.path().join("fido/config.toml"), config).unwrap();
        Setup { ws, home, marker }
    }

    fn fido(&self, args: &[&str]) -> Command {
        let mut cmd = fido_cmd_with_home(self.home.path());
        cmd.arg("-C").arg(self.ws.path()).args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        run_in(self.ws.path(), self.fido(args), None, RUN_TIMEOUT)
    }

    /// `fido exec --json` against `server`, with the key in the environment
    /// (the servers must not see it).
    fn exec(&self, server: &FakeServer, extra: &[&str]) -> Output {
        self.exec_with_env(server, extra, &[])
    }

    /// [`Setup::exec`] with `env` on top.
    fn exec_with_env(&self, server: &FakeServer, extra: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.fido(&["exec", "--json"]);
        cmd.args(extra)
            .envs(env.iter().copied())
            .arg("--")
            .arg("go")
            .env("FIDO_PROVIDER", "openai")
            .env("FIDO_BASE_URL", server.base_url())
            .env("FIDO_MODEL", "test-model")
            .env("FIDO_API_KEY", "secret-test-key")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        run_in(self.ws.path(), cmd, None, RUN_TIMEOUT)
    }

    /// No process of this test's servers is left.
    fn assert_no_server_left(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !processes_with(&self.marker).is_empty() {
            assert!(
                Instant::now() < deadline,
                "MCP server processes are still alive: {:?}",
                processes_with(&self.marker)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A fixture server `name` with extra settings.
fn fixture_server(name: &str, extra: &str) -> String {
    format!(
        "[mcp_servers.{name}]\ncommand = \"python3\"\nargs = [\"{{fixture}}\", \"--marker\", \"{{marker}}\"]\n{extra}\n"
    )
}

/// Pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
        })
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

const FIXTURE_TOOLS: [&str; 7] = ["echo", "env", "pid", "crash", "hang", "garbage", "grow"];

#[test]
fn mcp_tools_join_the_catalog_after_the_builtin_ones_in_a_fixed_order() {
    let setup = Setup::new(&format!(
        "{}{}",
        fixture_server("zeta", ""),
        fixture_server("alpha", "read_only = true")
    ));
    let output = setup.run(&["tool", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    let mcp: Vec<String> = ["alpha", "zeta"]
        .iter()
        .flat_map(|server| FIXTURE_TOOLS.map(|tool| format!("mcp__{server}__{tool}")))
        .collect();
    assert_eq!(names[..12].last(), Some(&"delegate"), "built-ins first");
    assert_eq!(names[12..], mcp, "servers by name, tools as listed");
    let echo = &tools[12]["function"];
    assert_eq!(
        echo["description"],
        "Echoes the text back. (MCP server alpha)"
    );
    assert_eq!(echo["parameters"]["required"], json!(["text"]));
    // Byte for byte the same on the next start: the prompt cache holds.
    assert_eq!(setup.run(&["tool", "list"]).stdout, output.stdout);
    setup.assert_no_server_left();
}

#[test]
fn the_model_calls_an_mcp_tool_and_its_result_reaches_the_next_request() {
    let setup = Setup::new(&fixture_server("fix", ""));
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("c1", "mcp__fix__echo", r#"{"text": "hello"}"#),
            ("c2", "mcp__fix__env", r#"{"name": "FIDO_API_KEY"}"#),
        ])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec(&server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(tool_names(requests[0].body()).contains(&"mcp__fix__echo".to_string()));
    assert_eq!(
        tool_result(requests[1].body(), "c1"),
        "echo: hello\n[image/png, 8 bytes]"
    );
    // The server's environment was scrubbed: no key reached it.
    assert_eq!(tool_result(requests[1].body(), "c2"), "<unset>");
    setup.assert_no_server_left();
}

#[test]
fn untrusted_approval_asks_before_a_side_effecting_mcp_tool_but_not_a_read_only_one() {
    let setup = Setup::new(&format!(
        "{}{}",
        fixture_server("ro", "read_only = true"),
        fixture_server("rw", "")
    ));
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[
            ("r1", "mcp__ro__echo", r#"{"text": "a"}"#),
            ("w1", "mcp__rw__echo", r#"{"text": "b"}"#),
        ])),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec(&server, &["--approval", "untrusted"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let model_requests = server.model_requests();
    let last = model_requests[1].body();
    assert!(tool_result(last, "r1").starts_with("echo: a"));
    let denied = tool_result(last, "w1");
    assert!(
        denied.contains("not approved") && denied.contains("headless"),
        "{denied}"
    );
    setup.assert_no_server_left();
}

const FINAL_JSON: &str = r#"{"summary": "s", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;

#[test]
fn a_subagent_calls_read_only_mcp_tools_through_the_parent_and_is_denied_the_others() {
    let setup = Setup::new(&format!(
        "{}{}",
        fixture_server("ro", "read_only = true"),
        fixture_server("rw", "")
    ));
    let server = FakeServer::start(vec![
        call("d1", "delegate", json!({"task": "use the MCP tools"})),
        Reply::sse(sse::tool_call_turn(&[
            ("s1", "mcp__ro__echo", r#"{"text": "from the child"}"#),
            ("s2", "mcp__rw__echo", r#"{"text": "must not run"}"#),
        ])),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec_with_env(&server, &[], &[("RUST_LOG", "info")]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        4,
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    // The child process built the parent's catalog, MCP tools included: the
    // fingerprint it computed is that of the tools the parent advertised.
    assert!(tool_names(requests[0].body()).contains(&"mcp__rw__echo".to_owned()));
    assert_eq!(
        child_catalogs(&stderr(&output)),
        [advertised_fingerprint(requests[0].body())],
        "{}",
        stderr(&output)
    );
    let child = requests[2].body();
    assert_eq!(
        tool_result(child, "s1"),
        "echo: from the child\n[image/png, 8 bytes]"
    );
    let denied: Value = serde_json::from_str(&tool_result(child, "s2")).unwrap();
    assert_eq!(denied["error"]["code"], "permission_denied", "{denied}");
    let delegated: Value = serde_json::from_str(&tool_result(requests[3].body(), "d1")).unwrap();
    assert_eq!(delegated["status"], "completed", "{delegated}");
    setup.assert_no_server_left();
}

#[test]
fn a_crashing_server_is_restarted_then_unavailable_and_leaves_no_process() {
    let setup = Setup::new(&fixture_server("fix", "max_restarts = 1"));
    let server = FakeServer::start(vec![
        call("c1", "mcp__fix__pid", json!({})),
        call("c2", "mcp__fix__crash", json!({})),
        call("c3", "mcp__fix__pid", json!({})),
        call("c4", "mcp__fix__crash", json!({})),
        call("c5", "mcp__fix__pid", json!({})),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec(&server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let model_requests = server.model_requests();
    let last = model_requests[5].body();
    let first_pid = tool_result(last, "c1");
    let crash = tool_result(last, "c2");
    assert!(
        crash.starts_with("Error: MCP server fix: the server exited with code 3")
            && crash.contains("crashing on purpose")
            && crash.contains("restarted for the next call"),
        "{crash}"
    );
    let restarted_pid = tool_result(last, "c3");
    assert!(restarted_pid.parse::<u32>().is_ok(), "{restarted_pid}");
    assert_ne!(restarted_pid, first_pid, "a new process answered");
    assert!(tool_result(last, "c4").contains("no restarts left"));
    let unavailable = tool_result(last, "c5");
    assert!(
        unavailable
            .starts_with("Error: MCP server fix unavailable: it crashed (exited with code 3"),
        "{unavailable}"
    );
    // Each crash is reported once on stderr, not once per call.
    let log = stderr(&output);
    assert_eq!(
        log.matches("MCP server fix failed: the server exited with code 3")
            .count(),
        2,
        "{log}"
    );
    assert_eq!(
        log.matches("restarted for the next call (restart 1 of 1)")
            .count(),
        1,
        "{log}"
    );
    assert_eq!(
        log.matches("unavailable for the rest of the session")
            .count(),
        1,
        "{log}"
    );
    setup.assert_no_server_left();
}

#[test]
fn a_hanging_call_times_out_and_malformed_output_is_an_error_and_the_loop_goes_on() {
    // Two servers: the fixture answers one request at a time, so the hung
    // one stays hung.
    let setup = Setup::new(&format!(
        "{}{}",
        fixture_server("slow", "tool_timeout_ms = 400"),
        fixture_server("fix", "")
    ));
    let server = FakeServer::start(vec![
        call("c1", "mcp__slow__hang", json!({})),
        call("c2", "mcp__fix__garbage", json!({})),
        call("c3", "mcp__fix__echo", json!({"text": "still here"})),
        Reply::sse(sse::text_turn("done")),
    ]);
    // `hang` never answers: the run ending at all, with the timeout's
    // result below, proves the 400 ms tool timeout ended the call.
    let output = setup.exec(&server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let model_requests = server.model_requests();
    let last = model_requests[3].body();
    assert_eq!(
        tool_result(last, "c1"),
        "Error: MCP server slow: the call timed out after 400 ms (tool_timeout_ms); it was cancelled"
    );
    let garbage = tool_result(last, "c2");
    assert!(
        garbage.starts_with(
            "Error: MCP server fix: the server sent malformed JSON-RPC: this is {not json"
        ),
        "{garbage}"
    );
    assert!(tool_result(last, "c3").starts_with("echo: still here"));
    setup.assert_no_server_left();
}

#[test]
fn a_server_that_fails_to_start_is_reported_once_and_fido_mcp_list_shows_it() {
    let setup = Setup::new(&format!(
        "{}{}[mcp_servers.gone]\ncommand = \"/no/such/mcp-server\"\n",
        fixture_server("bad", "").replace("\"{marker}\"]", "\"{marker}\", \"--exit-at-start\"]"),
        fixture_server("good", "read_only = true"),
    ));
    let output = setup.run(&["mcp", "list", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let servers: Value = serde_json::from_slice(&output.stdout).unwrap();
    let by_name = |name: &str| {
        servers
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {servers:#}"))
            .clone()
    };
    let bad = by_name("bad");
    assert_eq!(bad["state"], "failed");
    assert!(
        bad["reason"]
            .as_str()
            .unwrap()
            .contains("exited with code 7"),
        "{bad}"
    );
    assert_eq!(bad["tools"], json!([]));
    assert!(
        by_name("gone")["reason"]
            .as_str()
            .unwrap()
            .contains("No such file")
    );
    let good = by_name("good");
    assert_eq!(good["state"], "running");
    assert_eq!(good["read_only"], true);
    assert_eq!(good["tools"][0]["name"], "mcp__good__echo");
    assert_eq!(good["tools"].as_array().unwrap().len(), FIXTURE_TOOLS.len());
    // A session reports it once, as a warning.
    let listed = setup.run(&["tool", "list"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let log = stderr(&listed);
    assert_eq!(
        log.matches("MCP server bad failed to start").count(),
        1,
        "{log}"
    );
    assert!(
        log.contains("its tools are not available in this session"),
        "{log}"
    );

    let text = setup.run(&["mcp", "list"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("good  running (pid "), "{text}");
    assert!(text.contains("  mcp__good__hang  Never answers."), "{text}");
    assert!(text.contains("bad  failed: "), "{text}");
    setup.assert_no_server_left();
}

/// The published reference server `mcp-server-time` (PyPI), which
/// `.ci/run` installs and names in `FIDO_TEST_MCP_TIME`.
fn time_server() -> Option<String> {
    match std::env::var("FIDO_TEST_MCP_TIME") {
        Ok(path) if Path::new(&path).exists() => Some(path),
        _ if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("FIDO_TEST_MCP_TIME does not name mcp-server-time; .ci/run installs it")
        }
        _ => {
            // Straight to the terminal: the harness captures `eprintln!`.
            let _ = writeln!(
                std::io::stderr(),
                "mcp::the_published_time_server: skipped (set FIDO_TEST_MCP_TIME to an mcp-server-time binary; .ci/run installs one)"
            );
            None
        }
    }
}

#[test]
fn the_published_time_server_answers_the_model_through_the_parent() {
    let Some(binary) = time_server() else {
        return;
    };
    let mut setup = Setup::new(&format!(
        "[mcp_servers.time]\ncommand = \"{binary}\"\nargs = [\"--local-timezone\", \"UTC\"]\nread_only = true\n"
    ));
    // Only this test runs this binary: its path finds the processes.
    setup.marker = binary.clone();
    let server = FakeServer::start(vec![
        call(
            "t1",
            "mcp__time__get_current_time",
            json!({"timezone": "Europe/Paris"}),
        ),
        call(
            "t2",
            "mcp__time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        ),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec(&server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.model_requests();
    let names = tool_names(requests[0].body());
    assert!(
        names.contains(&"mcp__time__get_current_time".to_string()),
        "{names:?}"
    );
    let now: Value = serde_json::from_str(&tool_result(requests[2].body(), "t1")).unwrap();
    assert_eq!(now["timezone"], "Europe/Paris", "{now}");
    let converted = tool_result(requests[2].body(), "t2");
    assert!(converted.contains("21:00"), "{converted}");
    setup.assert_no_server_left();
}

#[test]
fn servers_start_concurrently_and_a_late_one_fails_within_its_startup_timeout() {
    let times = tempfile::tempdir().unwrap();
    let started_file = times.path().join("started");
    let slow = |name: &str| {
        fixture_server(name, "").replace(
            "\"{marker}\"]",
            &format!(
                "\"{{marker}}\", \"--sleep-start\", \"1000\", \"--started-file\", \"{}\"]",
                started_file.display()
            ),
        )
    };
    let late = fixture_server("late", "startup_timeout_ms = 300").replace(
        "\"{marker}\"]",
        "\"{marker}\", \"--sleep-start\", \"30000\"]",
    );
    let setup = Setup::new(&format!("{}{}{}{late}", slow("a"), slow("b"), slow("c")));
    let output = setup.run(&["tool", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Overlap, not a time window: every server had started before any
    // had finished its start-up (one after another, each would start only
    // once the one before was ready).
    let times = |path: &Path| -> Vec<f64> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|line| line.parse().unwrap())
            .collect()
    };
    let starts = times(&started_file);
    let readies = times(&started_file.with_extension("ready"));
    assert_eq!(
        (starts.len(), readies.len()),
        (3, 3),
        "{starts:?} {readies:?}"
    );
    let last_start = starts.iter().copied().fold(f64::MIN, f64::max);
    let first_ready = readies.iter().copied().fold(f64::MAX, f64::min);
    assert!(
        last_start < first_ready,
        "a server started only after another was ready: started {starts:?}, ready {readies:?}"
    );
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        tools.as_array().unwrap().len(),
        12 + 3 * FIXTURE_TOOLS.len()
    );
    let log = stderr(&output);
    assert!(
        log.contains("MCP server late failed to start: it did not answer the handshake and the tool list within 300 ms (startup_timeout_ms)"),
        "{log}"
    );
    setup.assert_no_server_left();
}

#[test]
fn servers_die_with_fido_when_it_is_killed() {
    let calls = tempfile::tempdir().unwrap();
    let calls_file = calls.path().join("calls");
    let setup = Setup::new(&fixture_server("fix", "").replace(
        "\"{marker}\"]",
        &format!(
            "\"{{marker}}\", \"--calls-file\", \"{}\"]",
            calls_file.display()
        ),
    ));
    let server = FakeServer::start(vec![
        call("c1", "mcp__fix__hang", json!({})),
        Reply::sse(sse::text_turn("never reached")),
    ]);
    let mut cmd = setup.fido(&["exec", "--json", "--", "go"]);
    cmd.env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "k")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut fido = cmd.spawn().unwrap();
    // The server is up and running the hanging call.
    server.wait_for_requests(1, Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&calls_file).is_ok_and(|c| c == "hang\n") {
        assert!(
            Instant::now() < deadline,
            "the MCP server never got the call"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!processes_with(&setup.marker).is_empty());
    fido.kill().unwrap();
    let _ = fido.wait();
    setup.assert_no_server_left();
}

#[test]
fn a_changed_tool_list_is_noted_and_waits_for_the_next_session() {
    let setup = Setup::new(&fixture_server("fix", ""));
    let server = FakeServer::start(vec![
        call("g1", "mcp__fix__grow", json!({})),
        call("g2", "mcp__fix__grow", json!({})),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = setup.exec(&server, &[]);
    assert!(output.status.success(), "{}", stderr(&output));
    let requests = server.model_requests();
    assert_eq!(tool_result(requests[2].body(), "g2"), "grown");
    // The catalog did not change mid-session.
    assert_eq!(requests[2].body()["tools"], requests[0].body()["tools"]);
    assert!(!tool_names(requests[2].body()).contains(&"mcp__fix__extra".to_string()));
    let log = stderr(&output);
    let note = "MCP server fix changed its tool list; the catalog is fixed for this session, so the change takes effect in the next session";
    assert_eq!(log.matches(note).count(), 1, "noted once: {log}");
    setup.assert_no_server_left();
}
