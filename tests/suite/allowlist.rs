//! `network = "allowlist"` through the real binary: the main agent's
//! commands are pointed at the session's proxy; a subagent's commands are
//! not (a subagent keeps no network at all).

use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::common::process::{RUN_TIMEOUT, run_in};
use crate::common::sse;
use crate::common::{FakeServer, Reply, fido_cmd_with_home};

const FINAL_JSON: &str = r#"{"summary": "looked", "findings": [], "recommended_next_steps": ["none"], "tests_to_run": [], "uncertainties": []}"#;

/// `fido exec --json` against `server` with `config` as the user config.
fn exec(server: &FakeServer, config: &str) -> Output {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("fido")).unwrap();
    std::fs::write(home.path().join("fido/config.toml"), config).unwrap();
    let mut cmd = fido_cmd_with_home(home.path());
    cmd.arg("-C")
        .arg(ws.path())
        .args(["exec", "--json", "--", "go"])
        .env("FIDO_PROVIDER", "openai")
        .env("FIDO_BASE_URL", server.base_url())
        .env("FIDO_MODEL", "test-model")
        .env("FIDO_API_KEY", "secret-test-key")
        .env("NO_PROXY", "*")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_in(ws.path(), cmd, None, RUN_TIMEOUT)
}

fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(sse::tool_call_turn(&[(id, name, &args.to_string())]))
}

fn tool_result(request: &Value, call_id: &str) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {request:#}"))
        .to_string()
}

#[test]
fn the_main_agents_commands_go_to_the_proxy_and_a_subagents_get_no_network() {
    let show = "env | grep -i -e '_proxy=' | sort";
    let server = FakeServer::start(Vec::new());
    for reply in [
        call("b1", "bash_exec", json!({ "command": show })),
        call("d1", "delegate", json!({"task": "look at the environment"})),
        call(
            "s1",
            "bash_exec",
            json!({ "command": format!("{show}; true") }),
        ),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ] {
        server.push_reply(reply);
    }
    let output = exec(&server, "network = \"allowlist\"\n");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 5, "{stderr}");

    let main = tool_result(requests[1].body(), "b1");
    let lines: Vec<&str> = main.lines().collect();
    let names = [
        "ALL_PROXY",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "all_proxy",
        "http_proxy",
        "https_proxy",
    ];
    assert_eq!(lines.len(), names.len() + 1, "{main}");
    let url = lines[0]
        .strip_prefix("ALL_PROXY=")
        .unwrap_or_else(|| panic!("{main}"));
    let port: u16 = url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("{main}"));
    assert!(port > 0);
    for (line, name) in lines.iter().zip(names) {
        assert_eq!(*line, format!("{name}={url}"));
    }
    assert_eq!(lines[names.len()], "exit code: 0", "{main}");

    let child = tool_result(requests[3].body(), "s1");
    assert_eq!(child, "(no output)\nexit code: 0");
}
