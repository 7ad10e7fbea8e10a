//! Self-tests of the process helpers, with `sleep`, `sh` and `cat`.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use crate::common::process::processes;
use crate::common::{
    ProcessFilter, assert_no_processes, events_of, parse_events, run_with_timeout,
};

#[test]
fn process_scan_sees_a_group_until_it_is_killed() {
    let mut child = Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run sleep: {e}"));
    let pid = child.id();
    let group = processes(ProcessFilter::Group(pid));
    assert_eq!(group.len(), 1, "{group:?}");
    assert_eq!(group[0].comm, "sleep");
    assert_eq!(group[0].ppid, std::process::id());
    assert_eq!(processes(ProcessFilter::Pid(pid)).len(), 1);
    assert!(
        processes(ProcessFilter::ChildrenOf(std::process::id()))
            .iter()
            .any(|p| p.pid == pid)
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_no_processes(ProcessFilter::Group(pid), Duration::from_secs(5));
}

#[test]
#[should_panic(expected = "ran longer than")]
fn run_with_timeout_kills_a_runaway_process() {
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    run_with_timeout(cmd, None, Duration::from_millis(200));
}

#[test]
fn run_with_timeout_feeds_stdin_and_collects_output() {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "cat; echo err >&2"]);
    let output = run_with_timeout(cmd, Some(b"in\n"), Duration::from_secs(10));
    assert!(output.status.success());
    assert_eq!(output.stdout, b"in\n");
    assert_eq!(output.stderr, b"err\n");
}

#[test]
fn parse_events_reads_one_object_per_line() {
    let events =
        parse_events(b"{\"type\":\"turn_started\",\"turn\":1}\n\n{\"type\":\"turn_completed\"}\n");
    assert_eq!(events.len(), 2);
    assert_eq!(events_of(&events, "turn_completed").len(), 1);
}
