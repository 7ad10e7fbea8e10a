//! `network = "allowlist"` through the real binary: the main agent's
//! commands are pointed at the session's proxy; a subagent's commands are
//! not (a subagent keeps no network at all).

use serde_json::json;

use crate::common::sse;
use crate::common::turns::{call, exec_with_config, tool_result};
use crate::common::{FakeServer, Reply};

const FINAL_JSON: &str = r#"{"summary": "looked", "findings": [], "recommended_next_steps": ["none"], "tests_to_run": [], "uncertainties": []}"#;

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
    let output = exec_with_config(&server, "network = \"allowlist\"\n", &[("NO_PROXY", "*")]);
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

/// A listener in Fido's own network namespace that nothing should reach:
/// a direct connection to it would succeed if the command were not
/// confined.
fn bystander() -> std::net::TcpListener {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// Bash alone (no curl on a fresh machine): one request through the proxy
/// named by `$HTTP_PROXY`, in absolute form, printing the answer.
fn through_the_proxy(target: &str) -> String {
    format!(
        "port=${{HTTP_PROXY##*:}}; exec 3<>/dev/tcp/127.0.0.1/$port && printf 'GET http://{target}/page HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n' >&3 && timeout 10 cat <&3; exec 3<&-"
    )
}

#[test]
fn a_confined_command_reaches_a_listed_host_through_the_proxy_and_nothing_else() {
    let server = FakeServer::start(Vec::new());
    server.route("GET", "/page", "\"listed page\"");
    let other = bystander();
    let other_addr = other.local_addr().unwrap();
    let script = [
        through_the_proxy(&server.addr().to_string()),
        "echo".into(),
        through_the_proxy(&other_addr.to_string()),
        "echo".into(),
        format!(
            "if (exec 4<>/dev/tcp/127.0.0.1/{}) 2>/dev/null; then echo direct: connected; else echo direct: refused; fi",
            other_addr.port()
        ),
    ]
    .join("\n");
    for reply in [
        call("b1", "bash_exec", json!({ "command": script })),
        Reply::sse(sse::text_turn("done")),
    ] {
        server.push_reply(reply);
    }
    let config = format!(
        "network = \"allowlist\"\nsandbox_mode = \"workspace-write\"\nnetwork_allow = [\"{}\"]\n",
        server.addr()
    );
    let output = exec_with_config(&server, &config, &[("NO_PROXY", "*")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    let result = tool_result(requests[1].body(), "b1");
    // The listed host answered through the proxy.
    assert!(result.contains("HTTP/1.1 200"), "{result}");
    assert!(result.contains("listed page"), "{result}");
    // The unlisted port got the proxy's refusal, and the tool said why.
    assert!(result.contains("HTTP/1.1 403"), "{result}");
    let line = format!("blocked by network allowlist: {other_addr} (add it to network_allow)");
    assert!(result.contains(&line), "{result}");
    // A direct connection found nothing to reach.
    assert!(result.contains("direct: refused"), "{result}");
    assert!(
        matches!(other.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the unlisted listener was reached"
    );
    let pages = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/page")
        .count();
    assert_eq!(pages, 1, "{result}");
}
