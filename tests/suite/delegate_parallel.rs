//! Parallel delegation, budgets and the subagents' read-only shell, end to
//! end: the real binary, real sandboxed children, the fake model server.
//! Children's requests race, so their replies are keyed by the task in the
//! child's instructions ([`FakeServer::push_keyed`]), not by arrival order.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::process::{self, ProcessFilter, exec_cmd_of, fido_bin, pids_with, processes};
use crate::common::sse::{self, TokenUsage};
use crate::common::{
    FakeServer, RecordedRequest, Reply, assert_no_processes, exec_cmd, parse_events,
    wait_with_timeout,
};

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.rs"),
        "fn main() {\n    println!(\"hi\");\n}\n",
    )
    .unwrap();
    dir
}

/// The final JSON of a child whose task is `task`.
fn findings(task: &str) -> String {
    json!({
        "summary": format!("{task} done"),
        "findings": [{"file": "main.rs", "line": 2, "claim": format!("{task} claim"), "confidence": "high"}],
        "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []
    })
    .to_string()
}

/// A text answer that takes about `total` to stream.
fn slow_text(text: &str, total: Duration) -> Reply {
    let events = sse::text_turn(text);
    let gaps = (events.len() as u32 - 1).max(1);
    Reply::sse_with_delay(events, total / gaps)
}

/// One assistant message calling `delegate` once per task, ids `d0`, `d1`…
fn delegate_calls(tasks: &[&str], extra: Value) -> Reply {
    let calls: Vec<(String, String)> = tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let mut args = json!({"task": task});
            if let (Some(args), Some(extra)) = (args.as_object_mut(), extra.as_object()) {
                args.extend(extra.clone());
            }
            (format!("d{i}"), args.to_string())
        })
        .collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "delegate", args.as_str()))
        .collect();
    Reply::sse(sse::tool_call_turn(&calls))
}

/// The live subagents of `parent`.
fn subagents_of(parent: u32) -> Vec<u32> {
    process::subagents_of(parent)
        .into_iter()
        .map(|p| p.pid)
        .collect()
}

fn is_subagent(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__subagent"))
}

/// The most subagents alive at once, every pid seen, the programs run.
type Seen = (usize, BTreeSet<u32>, BTreeSet<PathBuf>);

/// Watches the subagent children of one process.
struct Sampler {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(parent: u32) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new((0, BTreeSet::new(), BTreeSet::new())));
        let (s, v) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let alive = subagents_of(parent);
                let mut seen = v.lock().unwrap();
                seen.0 = seen.0.max(alive.len());
                let programs = alive
                    .iter()
                    .filter_map(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok());
                seen.2.extend(programs);
                seen.1.extend(alive);
                drop(seen);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Sampler {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Most subagents alive at once, every pid seen and their programs.
    fn finish(mut self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.seen.lock().unwrap().clone()
    }
}

/// Runs `fido exec` to its end while sampling its subagents.
fn run_sampled(
    ws: &std::path::Path,
    server: &FakeServer,
    env: &[(&str, &str)],
) -> (std::process::Output, usize, BTreeSet<u32>) {
    run_sampled_of(std::path::Path::new(fido_bin()), ws, server, env)
}

/// [`run_sampled`] of the `fido` binary `program`; every subagent must run
/// the program `program` picks (`fido-subagent` beside it, else itself).
fn run_sampled_of(
    program: &std::path::Path,
    ws: &std::path::Path,
    server: &FakeServer,
    env: &[(&str, &str)],
) -> (std::process::Output, usize, BTreeSet<u32>) {
    let child: Child = exec_cmd_of(program, ws, server, &[], "investigate", env)
        .spawn()
        .unwrap();
    let sampler = Sampler::start(child.id());
    let output = crate::common::process::wait_in(ws, child, Duration::from_secs(60));
    let (most, pids, programs) = sampler.finish();
    let expected = fido::subagent::child_program(program);
    let expected = std::fs::canonicalize(&expected).unwrap_or(expected);
    assert!(
        (most == 0 || !programs.is_empty()) && programs.iter().all(|p| *p == expected),
        "subagents ran {programs:?}, not {}",
        expected.display()
    );
    for pid in &pids {
        assert_no_processes(ProcessFilter::Pid(*pid), Duration::from_secs(5));
    }
    (output, most, pids)
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tool_json(request: &RecordedRequest, call_id: &str) -> Value {
    let message = request
        .messages()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .unwrap_or_else(|| panic!("no result for {call_id}"));
    serde_json::from_str(message["content"].as_str().unwrap())
        .unwrap_or_else(|_| json!({"text": message["content"]}))
}

/// The ids of the tool results of the parent's last request, in order.
fn result_ids(request: &RecordedRequest) -> Vec<String> {
    request
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn without_fido_subagent_beside_it_fido_runs_its_own_subagents() {
    let ws = workspace();
    // A fido alone in its folder (a hard link: the debug binary is large).
    let solo = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fido = solo.path().join("fido");
    std::fs::hard_link(fido_bin(), &fido)
        .or_else(|_| std::fs::copy(fido_bin(), &fido).map(|_| ()))
        .unwrap();
    let server = FakeServer::start(vec![
        delegate_calls(&["alpha"], json!({})),
        Reply::sse(sse::text_turn("verified")),
    ]);
    server.push_keyed(
        "Task: alpha",
        slow_text(&findings("alpha"), Duration::from_millis(500)),
    );
    let (output, most, _) = run_sampled_of(&fido, ws.path(), &server, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(most, 1, "the subagent was seen running `fido __subagent`");
    let result = tool_json(server.model_requests().last().unwrap(), "d0");
    assert_eq!(result["status"], "completed", "{result:#}");
}

#[test]
fn three_delegations_in_one_message_run_at_once_and_return_in_call_order() {
    let ws = workspace();
    let tasks = ["alpha", "beta", "gamma"];
    let child_time = Duration::from_secs(2);
    let server = FakeServer::start(vec![
        delegate_calls(&tasks, json!({})),
        Reply::sse(sse::text_turn("all three verified")),
    ]);
    for task in tasks {
        server.push_keyed(
            &format!("Task: {task}"),
            slow_text(&findings(task), child_time),
        );
    }
    let (output, most, pids) = run_sampled(ws.path(), &server, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    // Overlap, seen in /proc rather than timed: all three children were
    // alive at one instant, so none waited for another to end.
    assert_eq!(most, 3, "3 children alive at once (pids seen {pids:?})");
    assert_eq!(pids.len(), 3);

    let requests = server.model_requests();
    assert_eq!(requests.len(), 5, "stderr: {}", stderr(&output));
    let last = requests.last().unwrap();
    assert_eq!(result_ids(last), ["d0", "d1", "d2"]);
    let mut agents = BTreeSet::new();
    for (i, task) in tasks.iter().enumerate() {
        let result = tool_json(last, &format!("d{i}"));
        assert_eq!(result["status"], "completed", "{result:#}");
        assert_eq!(result["findings"][0]["claim"], format!("{task} claim"));
        assert!(result["usage"]["wall_ms"].as_u64().unwrap() >= 1000);
        agents.insert(result["identity"]["agent_id"].as_str().unwrap().to_string());
    }
    assert_eq!(agents.len(), 3, "one identity per child");

    // Each fork: the parent's prefix and its call message byte for byte,
    // its own bootstrap, the siblings "not run in this fork".
    let parent_first = requests[0].messages();
    let forks: Vec<&RecordedRequest> = requests[1..4].iter().collect();
    for fork in &forks {
        let messages = fork.messages();
        assert_eq!(&messages[..parent_first.len()], parent_first);
        assert_eq!(
            messages[parent_first.len()],
            forks[0].messages()[parent_first.len()]
        );
        let instructions = messages.last().unwrap()["content"].as_str().unwrap();
        let own = tasks
            .iter()
            .position(|t| instructions.contains(&format!("Task: {t}")))
            .unwrap();
        for i in 0..tasks.len() {
            let answer = tool_json(fork, &format!("d{i}"));
            if i == own {
                assert_eq!(answer["type"], "subagent_bootstrap", "{answer:#}");
            } else {
                assert!(
                    answer["text"]
                        .as_str()
                        .unwrap()
                        .contains("Not run in this fork"),
                    "{answer:#}"
                );
            }
        }
    }
    let events = parse_events(&output.stdout);
    let live_tokens = events
        .iter()
        .filter(|e| e["type"] == "subagent")
        .filter_map(|e| e["tokens"].as_u64())
        .max();
    assert!(live_tokens.unwrap_or(0) > 0, "no live usage in the events");
}

#[test]
fn six_delegations_with_concurrency_two_never_run_more_than_two_at_once() {
    let ws = workspace();
    let tasks = ["t1", "t2", "t3", "t4", "t5", "t6"];
    let server = FakeServer::start(vec![
        delegate_calls(&tasks, json!({})),
        Reply::sse(sse::text_turn("done")),
    ]);
    for task in tasks {
        server.push_keyed(
            &format!("Task: {task}"),
            slow_text(&findings(task), Duration::from_millis(600)),
        );
    }
    let (output, most, pids) =
        run_sampled(ws.path(), &server, &[("FIDO_DELEGATE_CONCURRENCY", "2")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(most, 2, "pids seen {pids:?}");
    assert_eq!(pids.len(), 6);
    let last = server.model_requests().last().unwrap().clone();
    assert_eq!(result_ids(&last), ["d0", "d1", "d2", "d3", "d4", "d5"]);
    for (i, task) in tasks.iter().enumerate() {
        let result = tool_json(&last, &format!("d{i}"));
        assert_eq!(result["findings"][0]["claim"], format!("{task} claim"));
    }
}

#[test]
fn calls_past_delegate_max_per_turn_fail_with_delegation_limit() {
    let ws = workspace();
    let tasks = ["one", "two", "three"];
    let server = FakeServer::start(vec![
        delegate_calls(&tasks, json!({})),
        Reply::sse(sse::text_turn("done")),
    ]);
    for task in &tasks[..2] {
        server.push_keyed(
            &format!("Task: {task}"),
            Reply::sse(sse::text_turn(&findings(task))),
        );
    }
    let (output, _, pids) = run_sampled(ws.path(), &server, &[("FIDO_DELEGATE_MAX_PER_TURN", "2")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    // The parent's two and the two children's: none for the third call.
    assert_eq!(requests.len(), 4, "pids {pids:?}");
    let last = requests.last().unwrap();
    assert_eq!(tool_json(last, "d0")["status"], "completed");
    assert_eq!(tool_json(last, "d1")["status"], "completed");
    let refused = tool_json(last, "d2");
    assert_eq!(refused["status"], "failed");
    assert_eq!(refused["error"]["code"], "delegation_limit", "{refused:#}");
}

/// An answer with text (what the child found so far) and one tool call,
/// with `usage`.
fn text_and_call(text: &str, call: (&str, &str, &str), usage: TokenUsage) -> Reply {
    let mut events = vec![sse::data(&sse::chunk(
        json!({"role": "assistant", "content": text}),
        None,
    ))];
    events.extend(
        sse::tool_call_turn_with_usage(&[call], usage)
            .into_iter()
            .map(|e| e.replace(r#""role":"assistant","#, "")),
    );
    Reply::sse(events)
}

#[test]
fn a_crossed_budget_stops_the_child_with_budget_exceeded_and_its_partial_findings() {
    let ws = workspace();
    let server = FakeServer::start(vec![
        // Above what the fork alone costs (a smaller budget is refused
        // before any child starts), below what its first answer reports.
        delegate_calls(&["budgeted"], json!({"budget_tokens": 20_000})),
        text_and_call(
            &findings("budgeted"),
            ("s1", "read_file", r#"{"path": "main.rs"}"#),
            TokenUsage {
                prompt: 19_990,
                completion: 30,
                cached: 0,
            },
        ),
        Reply::sse(sse::text_turn("noted")),
    ]);
    // The grace only bounds the wait for the child's partial answer: on a
    // loaded machine 5 s was once too short for it.
    let (output, _, _) = run_sampled(ws.path(), &server, &[("FIDO_DELEGATE_GRACE_MS", "20000")]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    let last = requests.last().unwrap();
    let result = tool_json(last, "d0");
    assert_eq!(result["status"], "partial", "{result:#}");
    assert_eq!(result["error"]["code"], "budget_exceeded", "{result:#}");
    assert_eq!(
        result["findings"][0]["claim"], "budgeted claim",
        "{result:#}"
    );
    assert_eq!(result["usage"]["prompt_tokens"], 19_990);
    assert_eq!(result["usage"]["completion_tokens"], 30);
    // The child asked once: the parent stopped it after the first answer.
    assert_eq!(requests.len(), 3, "stderr: {}", stderr(&output));
}

#[test]
fn a_subagents_shell_reads_the_workspace_writes_only_its_tmpdir_and_leaves_nothing_behind() {
    let ws = workspace();
    // A file outside the workspace, as a home folder's files are.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.txt"), "not for subagents\n").unwrap();
    let read_outside = format!(
        "cat {}/private.txt; echo \"home=$HOME\"",
        outside.path().display()
    );
    let commands = [
        ("b1", "cat main.rs"),
        ("b2", "touch new.txt"),
        ("b5", read_outside.as_str()),
        (
            "b3",
            "echo scratch > \"$TMPDIR/f\" && cat \"$TMPDIR/f\" && echo \"dir=$TMPDIR\"",
        ),
        (
            "b4",
            "setsid sleep 300.375 >/dev/null 2>&1 & echo \"ns=$(readlink /proc/self/ns/pid)\"",
        ),
    ];
    let calls: Vec<(String, String)> = commands
        .iter()
        .map(|(id, cmd)| (id.to_string(), json!({"command": cmd}).to_string()))
        .collect();
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "bash_exec", args.as_str()))
        .collect();
    let server = FakeServer::start(vec![
        delegate_calls(&["shell"], json!({})),
        Reply::sse(sse::tool_call_turn(&calls)),
        Reply::sse(sse::text_turn(&findings("shell"))),
        Reply::sse(sse::text_turn("done")),
    ]);
    let (output, _, pids) = run_sampled(ws.path(), &server, &[]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_eq!(pids.len(), 1);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "stderr: {}", stderr(&output));
    let child = &requests[2];
    let content = |id: &str| -> String {
        child
            .messages()
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .map(|m| m["content"].as_str().unwrap().to_string())
            .unwrap()
    };
    assert!(
        content("b1").contains("println!(\"hi\")"),
        "{}",
        content("b1")
    );
    assert!(
        content("b2").contains("exit code 1") || content("b2").contains("Permission denied"),
        "{}",
        content("b2")
    );
    assert!(
        !ws.path().join("new.txt").exists(),
        "touch wrote the workspace"
    );
    let outside_read = content("b5");
    assert!(
        outside_read.contains("Permission denied") && !outside_read.contains("not for subagents"),
        "{outside_read}"
    );
    let scratch = content("b3");
    assert!(scratch.contains("scratch"), "{scratch}");
    let dir = scratch
        .lines()
        .find_map(|l| l.strip_prefix("dir="))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        outside_read.contains(&format!("home={dir}")),
        "the commands' HOME is the scratch folder: {outside_read}"
    );
    assert!(
        !std::path::Path::new(&dir).exists(),
        "{dir} was not removed"
    );
    // The command ran in a PID namespace of its own (where the kernel
    // allows one), and its setsid'd sleep is gone either way.
    let namespace = content("b4");
    if fido::sandbox::pidns::containment().uses_namespace() {
        let own = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert!(
            namespace.contains("ns=pid:[") && !namespace.contains(&own.display().to_string()),
            "{namespace}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids_with("300.375").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the setsid'd sleep outlived the subagent"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let parent_result = tool_json(&requests[3], "d0");
    assert_eq!(parent_result["status"], "completed", "{parent_result:#}");
}

#[test]
fn sigint_with_three_subagents_running_stops_all_of_them_and_exits_130() {
    let ws = workspace();
    let tasks = ["x1", "x2", "x3"];
    let server = FakeServer::start(vec![delegate_calls(&tasks, json!({}))]);
    for task in tasks {
        server.push_keyed(&format!("Task: {task}"), Reply::stall_forever(vec![]));
    }
    let child: Child = exec_cmd(ws.path(), &server, "investigate", &[])
        .spawn()
        .unwrap();
    let parent = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    let running = loop {
        let alive = subagents_of(parent);
        if alive.len() == 3 && server.model_requests().len() == 4 {
            break alive;
        }
        assert!(Instant::now() < deadline, "3 subagents never ran at once");
        std::thread::sleep(Duration::from_millis(10));
    };
    crate::common::process::send_signal(parent, libc::SIGINT);
    let output = wait_with_timeout(child, Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(130),
        "stderr: {}",
        stderr(&output)
    );
    for pid in running {
        assert_no_processes(ProcessFilter::Pid(pid), Duration::from_secs(5));
    }
}

/// `fido agents|cancel ARGS -C ws` from another process, to completion.
fn control_cmd(ws: &std::path::Path, args: &[&str]) -> std::process::Output {
    let mut cmd = crate::common::process::fido_cmd();
    cmd.args(args)
        .arg("-C")
        .arg(ws)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    wait_with_timeout(cmd.spawn().unwrap(), Duration::from_secs(20))
}

#[test]
fn fido_cancel_from_another_process_cancels_only_that_subagent_and_fido_agents_lists_them() {
    let ws = workspace();
    let tasks = ["c1", "c2", "c3"];
    let server = FakeServer::start(vec![
        delegate_calls(&tasks, json!({"plan_item": "i1"})),
        Reply::sse(sse::text_turn("two done, one cancelled")),
    ]);
    for task in tasks {
        server.push_keyed(
            &format!("Task: {task}"),
            slow_text(&findings(task), Duration::from_secs(8)),
        );
    }
    let child: Child = exec_cmd(
        ws.path(),
        &server,
        "investigate",
        &[("FIDO_DELEGATE_GRACE_MS", "300")],
    )
    .spawn()
    .unwrap();
    let parent = child.id();

    // `fido agents --json` sees all three once their processes exist.
    let deadline = Instant::now() + Duration::from_secs(20);
    let listed: Vec<Value> = loop {
        let output = control_cmd(ws.path(), &["agents", "--json"]);
        assert!(output.status.success(), "stderr: {}", stderr(&output));
        let agents: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        if agents.len() == 3 && agents.iter().all(|a| a["child_pid"].is_u64()) {
            break agents;
        }
        assert!(
            Instant::now() < deadline,
            "3 subagents never listed: {agents:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for agent in &listed {
        assert_eq!(agent["parent_pid"], parent);
        assert!(
            is_subagent(agent["child_pid"].as_u64().unwrap() as u32),
            "{agent}"
        );
        assert_eq!(agent["plan_item"], "i1");
        assert!(
            agent["phase"].is_string() && agent["elapsed_ms"].is_u64() && agent["tokens"].is_u64()
        );
    }
    let table = control_cmd(ws.path(), &["subagents"]);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(table.starts_with("AGENT ID"), "{table}");
    let target = listed[1]["agent_id"].as_str().unwrap().to_string();
    let target_pid = listed[1]["child_pid"].as_u64().unwrap() as u32;
    assert!(table.contains(&target), "{table}");

    let output = control_cmd(ws.path(), &["cancel", &target]);
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains(&format!("cancelling {target}")));
    assert_no_processes(ProcessFilter::Pid(target_pid), Duration::from_secs(10));
    // The other two still run. The subagent's process is gone before Fido
    // has reaped the keeper of its namespace and ended the run: the
    // listing drops it a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    let agents: Vec<Value> = loop {
        let output = control_cmd(ws.path(), &["agents", "--json"]);
        let agents: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
        if agents.len() <= 2 || Instant::now() >= deadline {
            break agents;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ids: BTreeSet<&str> = agents
        .iter()
        .filter_map(|a| a["agent_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{agents:?}");
    assert!(!ids.contains(target.as_str()));
    // An unknown id is one clear sentence and exit 1.
    let output = control_cmd(ws.path(), &["cancel", "subagent-nothere"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no running subagent subagent-nothere"),
        "{}",
        stderr(&output)
    );

    let output = wait_with_timeout(child, Duration::from_secs(30));
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let requests = server.model_requests();
    let last = requests.last().unwrap();
    assert_eq!(result_ids(last), ["d0", "d1", "d2"]);
    for i in 0..3 {
        let result = tool_json(last, &format!("d{i}"));
        if result["identity"]["agent_id"] == target.as_str() {
            assert_eq!(result["error"]["code"], "cancelled", "{result:#}");
        } else {
            assert_eq!(result["status"], "completed", "{result:#}");
        }
    }
    // The session is gone, and so is its socket; nothing is left running.
    assert_no_processes(ProcessFilter::ChildrenOf(parent), Duration::from_secs(5));
    let run = ws.path().join(".fido-state/run");
    let left: Vec<_> = std::fs::read_dir(&run)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let output = control_cmd(ws.path(), &["agents"]);
    assert!(String::from_utf8_lossy(&output.stdout).contains("no subagent is running"));
}

/// Start time of `pid` from `/proc/PID/stat` (field 22).
fn start_time(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &text[text.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn a_fido_that_starts_after_a_crash_kills_the_dead_parents_leftovers_and_removes_its_records() {
    use std::os::unix::process::CommandExt;
    let ws = workspace();
    let run = ws.path().join(".fido-state/run");
    let server = FakeServer::start(vec![delegate_calls(&["stuck"], json!({}))]);
    server.push_keyed("Task: stuck", Reply::stall_forever(vec![]));
    let child: Child = exec_cmd(ws.path(), &server, "investigate", &[])
        .spawn()
        .unwrap();
    let parent = child.id();
    let records = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().ends_with(".child.json"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while records(&run).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the running child was never recorded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let record: Value = serde_json::from_slice(&std::fs::read(&records(&run)[0]).unwrap()).unwrap();
    assert_eq!(record["parent_pid"], parent);
    let real_child = record["child_pid"].as_u64().unwrap() as u32;
    // The process Fido spawned: the subagent, or the keeper of the PID
    // namespace the subagent runs in.
    let spawned = is_subagent(real_child) || !process::subagents_of(real_child).is_empty();
    assert!(spawned, "the record names no subagent: {record}");

    // The crash: no cleanup runs. The parent-death signal takes the child.
    crate::common::process::send_signal(parent, libc::SIGKILL);
    let _ = wait_with_timeout(child, Duration::from_secs(10));
    assert_no_processes(ProcessFilter::Pid(real_child), Duration::from_secs(10));
    assert_eq!(records(&run).len(), 1, "a crash leaves its record behind");
    let dead_socket = run.join(format!("{parent}.sock"));
    assert!(dead_socket.exists(), "and its control socket");

    // A leftover the parent-death signal missed: a process posing as that
    // parent's subagent, in its own group, with a grandchild.
    let agent_id = "subagent-0rphan01";
    let mut stranded = std::process::Command::new("sh")
        .args(["-c", "sleep 300 & sleep 300; :", "__subagent", "__subagent"])
        .args(["--agent-id", agent_id])
        .process_group(0)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let stranded_pid = stranded.id();
    let fake = json!({
        "agent_id": agent_id,
        "parent_pid": parent,
        "parent_start": record["parent_start"],
        "child_pid": stranded_pid,
        "child_start": start_time(stranded_pid),
    });
    std::fs::write(
        run.join(format!("{parent}-{agent_id}.child.json")),
        fake.to_string(),
    )
    .unwrap();
    let grandchildren = processes(ProcessFilter::ChildrenOf(stranded_pid));
    assert!(!grandchildren.is_empty());

    // The next Fido in the workspace sweeps at start.
    let next = FakeServer::start(vec![Reply::sse(sse::text_turn("fresh start"))]);
    let output = exec_cmd(ws.path(), &next, "hello", &[]).output().unwrap();
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    let deadline = Instant::now() + Duration::from_secs(5);
    while stranded.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "the stranded subagent survived the sweep"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for process in grandchildren {
        assert_no_processes(ProcessFilter::Pid(process.pid), Duration::from_secs(5));
    }
    assert!(records(&run).is_empty(), "{:?}", records(&run));
    assert!(
        !dead_socket.exists(),
        "the dead parent's socket is stale and was removed"
    );
}

#[test]
fn one_of_three_subagents_killed_fails_alone_and_the_others_complete_in_call_order() {
    let ws = workspace();
    let tasks = ["alpha", "beta", "gamma"];
    let server = FakeServer::start(vec![
        delegate_calls(&tasks, json!({})),
        Reply::sse(sse::text_turn("two of three")),
    ]);
    server.push_keyed(
        "Task: alpha",
        Reply::sse(sse::text_turn(&findings("alpha"))),
    );
    server.push_keyed("Task: beta", Reply::stall_forever(vec![]));
    server.push_keyed(
        "Task: gamma",
        Reply::sse(sse::text_turn(&findings("gamma"))),
    );
    let child: Child = exec_cmd(ws.path(), &server, "investigate", &[])
        .spawn()
        .unwrap();
    let parent = child.id();
    // The two quick ones are done when one child is left, stalled.
    let deadline = Instant::now() + Duration::from_secs(20);
    let stalled = loop {
        let alive = subagents_of(parent);
        if alive.len() == 1 && server.model_requests().len() == 4 {
            break alive[0];
        }
        assert!(
            Instant::now() < deadline,
            "the stalled child never stood alone"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    crate::common::process::send_signal(stalled, libc::SIGKILL);
    let output = wait_with_timeout(child, Duration::from_secs(30));
    assert!(output.status.success(), "stderr: {}", stderr(&output));
    assert_no_processes(ProcessFilter::Pid(stalled), Duration::from_secs(5));
    let requests = server.model_requests();
    let last = requests.last().unwrap();
    assert_eq!(result_ids(last), ["d0", "d1", "d2"]);
    assert_eq!(tool_json(last, "d0")["status"], "completed");
    assert_eq!(tool_json(last, "d2")["status"], "completed");
    let killed = tool_json(last, "d1");
    assert_eq!(killed["status"], "failed", "{killed:#}");
    assert_eq!(killed["error"]["code"], "subagent_crashed", "{killed:#}");
}
