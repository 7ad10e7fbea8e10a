//! The README's first command: `FIDO_PROVIDER=script fido exec` plays the
//! demo built into the binary, with no model. It plans, lists the
//! workspace, delegates one question to a real sandboxed subagent process
//! (whose requests come back through the parent's gateway, which plays the
//! script's subagent turns for it), completes the plan and answers with
//! what the subagent found.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::process::{run_in, skip_unless_ci};
use crate::common::{events_of, fido_cmd, parse_events};

/// The opening of the workspace's README, which the subagent reads.
const README: &str = "# Demo workspace\n\nThis workspace is the octopus-garden project.\n";

fn run_demo(workspace: &std::path::Path, json: bool) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("exec");
    if json {
        cmd.arg("--json");
    }
    cmd.arg("-C")
        .arg(workspace)
        .arg("Show me around this repository")
        .env("FIDO_PROVIDER", "script");
    // `run_in` checks that nothing is left in the process group.
    let output = run_in(workspace, cmd, None, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    output
}

fn plan_statuses(event: &Value) -> Vec<String> {
    event["plan"]["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no plan items in {event}"))
        .iter()
        .map(|item| item["status"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_built_in_demo_plans_delegates_to_a_real_subagent_and_uses_its_result() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), README).unwrap();
    let output = run_demo(ws.path(), true);
    let events = parse_events(&output.stdout);
    assert_eq!(events[0]["provider"], "script");

    let plans = events_of(&events, "plan_updated");
    assert_eq!(plans.len(), 3, "{plans:#?}");
    assert_eq!(
        plan_statuses(plans[0]),
        ["in_progress", "pending", "pending"]
    );
    assert_eq!(plan_statuses(plans[2]), ["done", "done", "done"]);

    let answer = events_of(&events, "assistant_text").last().unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    let delegated = events_of(&events, "tool_result")
        .into_iter()
        .find(|r| r["name"] == "delegate")
        .expect("no delegate result");
    if delegated["ok"] != true {
        // No sandbox here: the demo says so in one line and goes on.
        let why = delegated.to_string();
        assert!(why.contains("sandbox_unavailable"), "{why}");
        assert!(
            answer.contains("no subagent result (sandbox_unavailable"),
            "{answer}"
        );
        skip_unless_ci(
            "the demo's subagent",
            "this kernel cannot sandbox a subagent",
        );
        return;
    }
    let phases: Vec<&str> = events_of(&events, "subagent")
        .iter()
        .map(|e| e["phase"].as_str().unwrap())
        .collect();
    assert_eq!(phases.first(), Some(&"starting"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"completed"), "{phases:?}");
    assert!(
        events_of(&events, "subagent")
            .iter()
            .any(|e| e["pid"].as_u64().is_some()),
        "no subagent process"
    );
    // The subagent read the README and the parent's answer quotes it.
    assert!(
        answer.contains("README.md opens with: This workspace is the octopus-garden project."),
        "{answer}"
    );

    // Without --json, the progress on stderr shows the plan and the child.
    // A fresh workspace: the plan of the first run lives on in its own.
    let fresh = tempfile::tempdir().unwrap();
    std::fs::write(fresh.path().join("README.md"), README).unwrap();
    let plain = run_demo(fresh.path(), false);
    let stderr = String::from_utf8_lossy(&plain.stderr);
    assert!(stderr.contains("plan v1: 0/3 done"), "{stderr}");
    assert!(stderr.contains("3/3 done"), "{stderr}");
    assert!(stderr.contains("(plan: ask)"), "{stderr}");
    let stdout = String::from_utf8_lossy(&plain.stdout);
    assert!(stdout.contains("octopus-garden"), "{stdout}");
}
