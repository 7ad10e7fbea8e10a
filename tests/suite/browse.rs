//! `browse_url` end to end: the real binary fetches from the fake server
//! (on 127.0.0.1, listed in the user config), for the main agent and for a
//! subagent, whose call the parent runs; an unlisted host is refused in a
//! headless run with the line that would allow it.

use serde_json::{Value, json};

use crate::common::sse;
use crate::common::turns::{call, exec_with_config, tool_result};
use crate::common::{FakeServer, Reply};

const FINAL_JSON: &str = r#"{"summary": "read the page", "findings": [], "recommended_next_steps": ["none"], "tests_to_run": [], "uncertainties": []}"#;

const PAGE: &str = r#"{"page": "the docs say 42"}"#;

/// The page requests the fake server saw.
fn page_requests(server: &FakeServer) -> Vec<crate::common::server::RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/page")
        .collect()
}

fn allow_the_server(server: &FakeServer) -> String {
    format!("network_allow = [\"{}\"]\n", server.addr())
}

#[test]
fn a_subagents_browse_url_is_fetched_by_the_parent() {
    let server = FakeServer::start(Vec::new());
    server.route("GET", "/page", PAGE);
    let url = format!("http://{}/page", server.addr());
    for reply in [
        call("d1", "delegate", json!({"task": "read the docs page"})),
        call("s1", "browse_url", json!({ "url": url })),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ] {
        server.push_reply(reply);
    }
    let output = exec_with_config(&server, &allow_the_server(&server), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "{stderr}");
    // The child's next request carries the page as the tool result.
    let result = tool_result(requests[2].body(), "s1");
    assert!(
        result.starts_with(&format!("URL: {url}\nStatus: 200 OK")),
        "{result}"
    );
    assert!(result.ends_with(PAGE), "{result}");
    // The page was fetched once, with Fido's plain user agent and none of
    // the model key's headers.
    let pages = page_requests(&server);
    assert_eq!(pages.len(), 1);
    let agent = pages[0].header("user-agent").unwrap_or_default();
    assert!(agent.starts_with("fido/"), "{agent}");
    assert!(pages[0].header("authorization").is_none());
    let delegated: Value = serde_json::from_str(&tool_result(requests[3].body(), "d1")).unwrap();
    assert_eq!(delegated["status"], "completed", "{delegated}");
}

#[test]
fn an_unlisted_host_is_refused_headless_with_the_line_that_allows_it() {
    let server = FakeServer::start(Vec::new());
    server.route("GET", "/page", PAGE);
    // b2 names the fake server itself, which serves the page: had Fido
    // fetched it despite the refusal, the server would have seen it.
    for reply in [
        call(
            "b1",
            "browse_url",
            json!({"url": "https://docs.example.com/guide"}),
        ),
        call(
            "b2",
            "browse_url",
            json!({"url": format!("http://{}/page", server.addr())}),
        ),
        Reply::sse(sse::text_turn("done")),
    ] {
        server.push_reply(reply);
    }
    let output = exec_with_config(&server, "", &[]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.model_requests();
    let refused = tool_result(requests[1].body(), "b1");
    assert!(
        refused.contains("network_allow = [\"docs.example.com\"]"),
        "{refused}"
    );
    let address = tool_result(requests[2].body(), "b2");
    assert!(address.contains("names an IP address"), "{address}");
    assert!(page_requests(&server).is_empty());
}

#[test]
fn a_subagents_browse_url_of_an_unlisted_host_is_refused_by_the_parents_policy() {
    let server = FakeServer::start(vec![
        call("d1", "delegate", json!({"task": "read the docs page"})),
        call(
            "s1",
            "browse_url",
            json!({"url": "https://docs.example.com/guide"}),
        ),
        Reply::sse(sse::text_turn(FINAL_JSON)),
        Reply::sse(sse::text_turn("done")),
    ]);
    let output = exec_with_config(&server, "", &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 4, "{stderr}");
    let refused = tool_result(requests[2].body(), "s1");
    assert!(refused.starts_with("Error: "), "{refused}");
    assert!(
        refused.contains("network_allow = [\"docs.example.com\"]"),
        "{refused}"
    );
}
