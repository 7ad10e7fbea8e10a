//! `browse_url` end to end against a local server: what the model reads,
//! and every refusal with its message.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::net::fetch::FetchLimits;
use crate::net::testing::{Answer, TestServer};
use crate::net::{NetRules, rules::parse_list};
use crate::protocol::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, SafetySettings, SandboxMode,
};
use crate::tools::approval::{ApprovalFuture, Approvals, Approver};
use crate::tools::testing;
use crate::tools::web::Browser;

/// Approves every request and records it.
#[derive(Default)]
struct Yes(Mutex<Vec<ApprovalRequest>>);

impl Approver for Yes {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        self.0.lock().unwrap().push(request.clone());
        Box::pin(async { Some(ApprovalDecision::Approved) })
    }
}

struct Setup {
    allow: String,
    deny: &'static str,
    policy: ApprovalPolicy,
    approver: Option<Arc<dyn Approver>>,
    limits: FetchLimits,
}

impl Setup {
    /// The server listed; headless under on-request.
    fn listing(server: &TestServer) -> Setup {
        Setup {
            allow: server.addr.to_string(),
            deny: "",
            policy: ApprovalPolicy::OnRequest,
            approver: None,
            limits: FetchLimits::default(),
        }
    }

    async fn call(self, args: serde_json::Value) -> ToolOutput {
        let dir = tempfile::tempdir().unwrap();
        let mut env = testing::env(dir.path());
        let rules = NetRules {
            allow: parse_list(&self.allow).unwrap(),
            deny: parse_list(self.deny).unwrap(),
        };
        let settings = SafetySettings {
            sandbox_mode: SandboxMode::WorkspaceWrite,
            approval_policy: self.policy,
            network: crate::protocol::NetworkAccess::Off,
        };
        let browser = Browser::new(rules, Approvals::new(settings, self.approver));
        env.web = Some(Arc::new(browser.with_limits(self.limits)));
        testing::call(&BrowseUrl, &env, args).await
    }
}

const PAGE: &str = r#"<!doctype html><html><head><title>T</title>
<style>body { color: red }</style><script>alert("x")</script></head>
<body><h1>Fido docs</h1><p>Read <a href="/guide">the guide</a>.</p>
<noscript>enable js</noscript></body></html>"#;

#[tokio::test]
async fn html_comes_back_as_markdown_without_scripts_or_styles() {
    let server =
        TestServer::start(vec![("/", Answer::page("text/html; charset=utf-8", PAGE))]).await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/")}))
        .await;
    assert!(out.ok, "{}", out.content);
    let head = format!(
        "URL: {}\nStatus: 200 OK\nContent-Type: text/html; charset=utf-8\n\n",
        server.url("/")
    );
    assert!(out.content.starts_with(&head), "{}", out.content);
    assert!(out.content.contains("# Fido docs"), "{}", out.content);
    assert!(
        out.content.contains("[the guide](/guide)"),
        "{}",
        out.content
    );
    for dropped in ["alert", "color: red", "enable js"] {
        assert!(!out.content.contains(dropped), "{dropped}: {}", out.content);
    }
}

#[tokio::test]
async fn the_final_url_after_redirects_is_reported_and_json_is_text() {
    let server = TestServer::start(vec![
        ("/old", Answer::redirect(301, "/new")),
        ("/new", Answer::redirect(303, "/data.json")),
        (
            "/data.json",
            Answer::page("application/json", r#"{"a": 1}"#),
        ),
    ])
    .await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/old")}))
        .await;
    let head = format!(
        "URL: {}\nStatus: 200 OK\nContent-Type: application/json\nRedirects: 2\n\n{{\"a\": 1}}",
        server.url("/data.json")
    );
    assert_eq!(out.content, head);
}

#[tokio::test]
async fn a_redirect_to_an_unlisted_host_is_refused_at_that_hop() {
    let server = TestServer::start(vec![(
        "/go",
        Answer::redirect(302, "https://example.com/x"),
    )])
    .await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/go")}))
        .await;
    assert!(!out.ok);
    assert!(
        out.content
            .contains("example.com:443 is not in network_allow"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("network_allow = [\"example.com\"]"),
        "{}",
        out.content
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_redirect_loop_is_reported() {
    let server = TestServer::start(vec![
        ("/a", Answer::redirect(302, "/b")),
        ("/b", Answer::redirect(302, "/a")),
    ])
    .await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/a")}))
        .await;
    assert!(!out.ok);
    assert!(
        out.content.starts_with("Error: redirect loop: "),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_huge_page_is_cut_and_says_so() {
    let big = format!("<p>{}</p>", "word ".repeat(50_000));
    let server = TestServer::start(vec![("/big", Answer::page("text/html", big))]).await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/big"), "max_bytes": 1000}))
        .await;
    assert!(out.ok);
    assert!(
        out.content.contains("[cut: showing 1000 of "),
        "{}",
        out.content
    );
    assert!(out.content.len() < 1_600, "{}", out.content.len());
    let setup = Setup {
        limits: FetchLimits {
            max_read_bytes: 4_096,
            ..FetchLimits::default()
        },
        ..Setup::listing(&server)
    };
    let out = setup.call(json!({"url": server.url("/big")})).await;
    assert!(
        out.content
            .ends_with("[cut: the page is larger than 4 KB; only that much was read]"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn binary_content_is_refused_naming_its_type_and_size() {
    let server = TestServer::start(vec![
        ("/logo.png", Answer::page("image/png", vec![0x89; 4_096])),
        (
            "/blob",
            Answer::Page {
                status: 200,
                headers: Vec::new(),
                body: vec![0, 1, 2, 3],
            },
        ),
    ])
    .await;
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/logo.png")}))
        .await;
    assert!(!out.ok);
    assert!(
        out.content
            .contains("is binary (content type image/png, 4096 bytes)"),
        "{}",
        out.content
    );
    let out = Setup::listing(&server)
        .call(json!({"url": server.url("/blob")}))
        .await;
    assert!(
        out.content
            .contains("no content type, and its first bytes are binary"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_trickling_server_is_cut_in_time_with_a_note() {
    let server = TestServer::start(vec![(
        "/slow",
        Answer::Trickle {
            every: Duration::from_millis(50),
        },
    )])
    .await;
    let setup = Setup {
        limits: FetchLimits {
            total: Duration::from_secs(1),
            ..FetchLimits::default()
        },
        ..Setup::listing(&server)
    };
    // The server trickles forever: the note of the cut is the proof.
    let out = setup.call(json!({"url": server.url("/slow")})).await;
    assert!(
        out.content
            .ends_with("[cut: the fetch ran out of its 1 s, so this is only what arrived in time]"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn an_unlisted_host_is_refused_headless_saying_how_to_allow_it() {
    for policy in [ApprovalPolicy::OnRequest, ApprovalPolicy::Never] {
        let setup = Setup {
            allow: String::new(),
            deny: "",
            policy,
            approver: None,
            limits: FetchLimits::default(),
        };
        let out = setup
            .call(json!({"url": "https://docs.example.com/page"}))
            .await;
        assert!(!out.ok);
        assert!(
            out.content
                .contains("network_allow = [\"docs.example.com\"]"),
            "{policy}: {}",
            out.content
        );
    }
}

#[tokio::test]
async fn deny_beats_allow_and_addresses_must_be_listed() {
    let server = TestServer::start(vec![("/", Answer::page("text/plain", "hi"))]).await;
    let denied = Setup {
        deny: "127.0.0.1:1",
        ..Setup::listing(&server)
    };
    let out = denied.call(json!({"url": "http://127.0.0.1:1/"})).await;
    assert!(
        out.content.contains("127.0.0.1:1 is in network_deny"),
        "{}",
        out.content
    );
    let person = Arc::new(Yes::default());
    let unlisted = Setup {
        allow: String::new(),
        approver: Some(person.clone()),
        ..Setup::listing(&server)
    };
    let out = unlisted.call(json!({"url": server.url("/")})).await;
    assert!(
        out.content.contains("names an IP address"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains(&format!("network_allow = [\"{}\"]", server.addr)),
        "{}",
        out.content
    );
    assert!(
        person.0.lock().unwrap().is_empty(),
        "an address is never asked for"
    );
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn an_approved_name_that_resolves_to_loopback_is_refused() {
    let server = TestServer::start(vec![("/", Answer::page("text/plain", "hi"))]).await;
    let person = Arc::new(Yes::default());
    let setup = Setup {
        allow: String::new(),
        approver: Some(person.clone()),
        ..Setup::listing(&server)
    };
    let url = format!("http://localhost:{}/", server.addr.port());
    let out = setup.call(json!({"url": url})).await;
    assert!(
        out.content.contains("resolves to a private address"),
        "{}",
        out.content
    );
    let asked = person.0.lock().unwrap().clone();
    assert_eq!(
        asked,
        [ApprovalRequest::Browse {
            host: format!("localhost:{}", server.addr.port()),
            url,
        }]
    );
    assert!(server.requests().is_empty());
    let listed = Setup {
        allow: format!("localhost:{}", server.addr.port()),
        ..Setup::listing(&server)
    };
    let out = listed
        .call(json!({"url": format!("http://localhost:{}/", server.addr.port())}))
        .await;
    assert!(out.ok && out.content.ends_with("\n\nhi"), "{}", out.content);
}

#[tokio::test]
async fn credentials_and_other_schemes_are_refused() {
    let setup = || Setup {
        allow: "example.com".into(),
        deny: "",
        policy: ApprovalPolicy::Never,
        approver: None,
        limits: FetchLimits::default(),
    };
    let out = setup()
        .call(json!({"url": "https://me:secret@example.com/"}))
        .await;
    assert!(out.content.contains("credentials"), "{}", out.content);
    let out = setup().call(json!({"url": "file:///etc/passwd"})).await;
    assert!(
        out.content.contains("only http and https"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_session_without_web_access_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let env = testing::env(dir.path());
    let out = testing::call(&BrowseUrl, &env, json!({"url": "https://example.com/"})).await;
    assert_eq!(
        out.content,
        "Error: browse_url is not available in this session"
    );
}
