//! Subagent profiles through the binary: offered in the catalog (the same
//! in parent and child), their instructions, limits and model applied to
//! the child, and a workspace's own profiles read only once it is trusted.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::catalog::{advertised_fingerprint, child_catalogs};
use crate::common::sse;
use crate::common::{FakeServer, Reply, assert_conversation_invariants, fido_cmd_with_home};

const REVIEWER: &str = "---\ndescription: Reviews a change for bugs\nmodel: review-model\nmax_steps: 3\n---\nAlways check the error paths first.\n";

fn fido(home: &Path, ws: &Path, args: &[&str], server: Option<&FakeServer>) -> Output {
    let mut cmd = fido_cmd_with_home(home);
    cmd.arg("-C").arg(ws).args(args);
    if let Some(server) = server {
        cmd.env("FIDO_BASE_URL", server.base_url())
            .env("FIDO_MODEL", "test-model")
            .env("FIDO_API_KEY", "test-key")
            // The subagent logs the fingerprint of the catalog it built.
            .env("RUST_LOG", "info");
    }
    crate::common::process::run_in(ws, cmd, None, Duration::from_secs(60))
}

fn catalog(home: &Path, ws: &Path) -> (Value, String) {
    let output = fido(home, ws, &["tool", "list"], None);
    assert!(output.status.success(), "{output:?}");
    let tools: Value = serde_json::from_slice(&output.stdout).unwrap();
    let delegate = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "delegate")
        .cloned()
        .unwrap();
    (
        delegate,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let agents = home.path().join("fido/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("reviewer.md"), REVIEWER).unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {}\n").unwrap();
    (home, ws)
}

#[test]
fn a_profile_runs_the_child_with_its_instructions_limits_and_model_and_the_same_prefix() {
    let (home, ws) = setup();
    let (delegate, _) = catalog(home.path(), ws.path());
    assert_eq!(
        delegate["function"]["parameters"]["properties"]["profile"]["enum"],
        json!(["reviewer"])
    );
    assert!(
        delegate["function"]["description"]
            .as_str()
            .unwrap()
            .contains("- reviewer: Reviews a change for bugs")
    );

    let findings = r#"{"summary": "looked", "findings": [], "recommended_next_steps": [], "tests_to_run": [], "uncertainties": []}"#;
    let args = json!({"task": "Review main.rs", "profile": "reviewer"}).to_string();
    let server = FakeServer::start(vec![
        Reply::sse(sse::tool_call_turn(&[("d1", "delegate", &args)])),
        Reply::sse(sse::text_turn(findings)),
        Reply::sse(sse::text_turn("reviewed")),
    ]);
    let output = fido(
        home.path(),
        ws.path(),
        &["exec", "--json", "--", "review it"],
        Some(&server),
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    let (parent, child) = (requests[0].body(), requests[1].body());
    assert_eq!(parent["model"], "test-model");
    assert_eq!(child["model"], "review-model", "the profile's model");
    assert_eq!(
        child_catalogs(&String::from_utf8_lossy(&output.stderr)),
        [advertised_fingerprint(parent)],
        "the child process built the parent's catalog, byte for byte"
    );
    let parent_messages = parent["messages"].as_array().unwrap();
    let child_messages = child["messages"].as_array().unwrap();
    assert_eq!(
        &child_messages[..parent_messages.len()],
        &parent_messages[..],
        "the fork keeps the parent's prefix"
    );
    assert_eq!(
        child_messages[0], parent_messages[0],
        "the same system message"
    );
    let instructions = child_messages.last().unwrap()["content"].as_str().unwrap();
    assert!(
        instructions.contains("Always check the error paths first."),
        "{instructions}"
    );
    assert!(
        instructions.contains("at most 3 model requests"),
        "{instructions}"
    );
    assert!(
        !parent_messages[0]["content"]
            .as_str()
            .unwrap()
            .contains("error paths"),
        "a profile never reaches the system message"
    );
    assert_conversation_invariants(&[requests[0].clone(), requests[2].clone()]);
}

#[test]
fn a_workspace_profile_is_read_only_once_the_workspace_is_trusted() {
    let (home, ws) = setup();
    let local = ws.path().join(".fido/agents");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::write(
        local.join("tester.md"),
        "---\ndescription: Runs the tests in its head\n---\nBe careful.\n",
    )
    .unwrap();
    let (delegate, stderr) = catalog(home.path(), ws.path());
    assert_eq!(
        delegate["function"]["parameters"]["properties"]["profile"]["enum"],
        json!(["reviewer"])
    );
    assert!(stderr.contains("is not trusted"), "{stderr}");

    let trusted = fido(home.path(), ws.path(), &["trust"], None);
    assert!(trusted.status.success(), "{trusted:?}");
    let (delegate, _) = catalog(home.path(), ws.path());
    assert_eq!(
        delegate["function"]["parameters"]["properties"]["profile"]["enum"],
        json!(["reviewer", "tester"])
    );
}
