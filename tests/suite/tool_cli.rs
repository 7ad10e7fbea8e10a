//! `fido tool list` and `fido tool call`: the catalog as the provider gets
//! it, and single invocations as the main agent runs them.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::common::fido_cmd;

fn fido(args: &[&str], workspace: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = fido_cmd();
    cmd.arg("-C")
        .arg(workspace)
        .args(args)
        .envs(env.iter().copied());
    crate::common::process::run_in(workspace, cmd, None, Duration::from_secs(60))
}

fn json_out(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

const CATALOG_ORDER: [&str; 12] = [
    "list_files",
    "read_file",
    "ripgrep",
    "browse_url",
    "patch",
    "mkdir",
    "rm",
    "rmdir",
    "bash_exec",
    "ask_user",
    "update_plan",
    "delegate",
];

#[test]
fn tool_list_prints_the_catalog_in_its_fixed_order() {
    let ws = tempfile::tempdir().unwrap();
    let output = fido(&["tool", "list"], ws.path(), &[]);
    assert!(output.status.success());
    let tools = json_out(&output);
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, CATALOG_ORDER);
    for tool in tools.as_array().unwrap() {
        assert_eq!(tool["type"], "function");
        let function = &tool["function"];
        assert!(
            function["description"].as_str().unwrap().len() > 40,
            "{tool}"
        );
        assert_eq!(function["parameters"]["type"], "object", "{tool}");
    }
    // Byte-identical on every call: the prompt cache depends on it.
    assert_eq!(
        fido(&["tool", "list"], ws.path(), &[]).stdout,
        output.stdout
    );

    let anthropic = json_out(&fido(
        &["tool", "list"],
        ws.path(),
        &[("FIDO_PROVIDER", "anthropic")],
    ));
    let names: Vec<&str> = anthropic
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, CATALOG_ORDER);
    assert!(anthropic[0]["input_schema"].is_object());
}

#[test]
fn tool_call_prints_exactly_what_the_model_gets() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("hello.txt"), "hi there\n").unwrap();
    let output = fido(
        &[
            "tool",
            "call",
            "read_file",
            "--args",
            r#"{"path":"hello.txt"}"#,
        ],
        ws.path(),
        &[],
    );
    assert!(output.status.success());
    let printed = json_out(&output);
    assert_eq!(printed["tool"], "read_file");
    assert_eq!(printed["ok"], true);
    assert!(printed["content"].as_str().unwrap().contains("hi there"));
    assert!(printed["details"].is_null());
    let keys: Vec<&String> = printed.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tool", "ok", "content", "details"]);
}

#[test]
fn tool_call_errors_exit_1_with_the_error_result() {
    let ws = tempfile::tempdir().unwrap();
    for (args, expect) in [
        (
            vec![
                "tool",
                "call",
                "read_file",
                "--args",
                r#"{"path":"missing.txt"}"#,
            ],
            "missing.txt",
        ),
        (
            vec!["tool", "call", "read_file", "--args", "{not json"],
            "not valid JSON",
        ),
        (vec!["tool", "call", "nope", "--args", "{}"], "unknown tool"),
        (
            vec![
                "tool",
                "call",
                "ask_user",
                "--args",
                r#"{"question":"which?"}"#,
            ],
            "No user is present",
        ),
        (
            vec![
                "tool",
                "call",
                "read_file",
                "--args",
                r#"{"path":"/etc/passwd"}"#,
            ],
            "outside",
        ),
    ] {
        let output = fido(&args, ws.path(), &[]);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let printed = json_out(&output);
        assert_eq!(printed["ok"], false, "{args:?}");
        let content = printed["content"].as_str().unwrap();
        assert!(content.contains(expect), "{args:?}: {content}");
    }
}

#[test]
fn patch_through_the_cli_changes_the_file_and_fido_files_are_out_of_reach() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("main.rs"), "fn main() {\n    old();\n}\n").unwrap();
    let output = fido(
        &[
            "tool",
            "call",
            "patch",
            "--args",
            r#"{"path":"main.rs","edits":[{"old_text":"old();","new_text":"new();"}]}"#,
        ],
        ws.path(),
        &[],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("main.rs")).unwrap(),
        "fn main() {\n    new();\n}\n"
    );
    let output = fido(
        &[
            "tool",
            "call",
            "patch",
            "--args",
            r#"{"path":".fido-plan.json","content":"{}"}"#,
        ],
        ws.path(),
        &[],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(!ws.path().join(".fido-plan.json").exists());
}
