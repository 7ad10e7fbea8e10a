//! The scripted turns and the headless run most suites share: a model
//! reply that calls one tool, the tool result a later request carries, and
//! `fido exec --json` with a user config of the test's own.

use std::process::{Output, Stdio};

use serde_json::Value;

use super::process::{RUN_TIMEOUT, run_in};
use super::{FakeServer, Reply, fido_cmd_with_home, sse};

/// A model turn that calls the tool `name` with `args`, as call `id`.
pub fn call(id: &str, name: &str, args: Value) -> Reply {
    Reply::sse(sse::tool_call_turn(&[(id, name, &args.to_string())]))
}

/// The content of the tool message answering `call_id` in a recorded
/// request.
pub fn tool_result(request: &Value, call_id: &str) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no tool result for {call_id} in {request:#}"))
        .to_string()
}

/// `fido exec --json -- go` against `server`, in a fresh workspace, with
/// `config` as the user config and `env` on top.
pub fn exec_with_config(server: &FakeServer, config: &str, env: &[(&str, &str)]) -> Output {
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
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    run_in(ws.path(), cmd, None, RUN_TIMEOUT)
}
