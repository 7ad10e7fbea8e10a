//! The fetcher against a local server: redirects, loops, limits, binary
//! bodies, slow servers, cancellation and the resolver's filter.

use std::time::Duration;

use super::*;
use crate::net::testing::{Answer, TestServer};
use crate::net::{Listing, NetRules};

/// Admits what `rules` allow (as listed), approves `approved` hosts
/// (public addresses only) and refuses the rest.
struct TestGate {
    rules: NetRules,
    approved: Vec<String>,
}

impl HopGate for TestGate {
    fn admit<'a>(&'a self, target: &'a Target, _url: &'a str) -> GateFuture<'a> {
        let verdict = match self.rules.listing(target) {
            Listing::Allowed => Ok(Reach::Listed),
            Listing::Denied => Err(HopRefused(format!("{target} is denied"))),
            Listing::Unlisted if self.approved.contains(&target.host) => Ok(Reach::Approved),
            Listing::Unlisted => Err(HopRefused(format!("{target} is not listed"))),
        };
        Box::pin(std::future::ready(verdict))
    }
}

fn gate_for(server: &TestServer) -> TestGate {
    TestGate {
        rules: NetRules {
            allow: crate::net::rules::parse_list(&server.addr.to_string()).unwrap(),
            deny: Vec::new(),
        },
        approved: Vec::new(),
    }
}

async fn get(server: &TestServer, path: &str, limits: &FetchLimits) -> Result<Fetched, FetchError> {
    let gate = gate_for(server);
    fetch(&server.url(path), &gate, limits, &CancellationToken::new()).await
}

fn text(fetched: &Fetched) -> String {
    String::from_utf8_lossy(&fetched.body.as_ref().unwrap().bytes).into_owned()
}

#[tokio::test]
async fn a_page_comes_with_its_status_type_and_a_plain_user_agent() {
    let server = TestServer::start(vec![(
        "/",
        Answer::page("text/html; charset=utf-8", "<p>hi</p>"),
    )])
    .await;
    let fetched = get(&server, "/#frag", &FetchLimits::default())
        .await
        .unwrap();
    assert_eq!(fetched.status.as_u16(), 200);
    assert_eq!(
        fetched.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(text(&fetched), "<p>hi</p>");
    assert_eq!(fetched.redirects, 0);
    let head = server.requests().remove(0).to_ascii_lowercase();
    assert!(head.starts_with("get / http/1.1"), "{head}");
    assert!(
        head.contains(&format!("user-agent: fido/{}", env!("CARGO_PKG_VERSION"))),
        "{head}"
    );
    for secret in ["cookie", "authorization", "x-api-key"] {
        assert!(!head.contains(secret), "{head}");
    }
}

#[tokio::test]
async fn redirects_are_followed_by_hand_to_the_final_url() {
    let server = TestServer::start(vec![
        ("/a", Answer::redirect(301, "/b")),
        ("/b", Answer::redirect(302, "c")),
        ("/c", Answer::page("text/plain", "end")),
    ])
    .await;
    let fetched = get(&server, "/a", &FetchLimits::default()).await.unwrap();
    assert_eq!(fetched.url.as_str(), server.url("/c"));
    assert_eq!(fetched.redirects, 2);
    assert_eq!(text(&fetched), "end");
}

#[tokio::test]
async fn every_hop_is_admitted_and_a_refused_one_is_never_sent() {
    let away = "http://example.com/x";
    let server = TestServer::start(vec![
        ("/a", Answer::redirect(307, away)),
        ("/x", Answer::page("text/plain", "secret")),
    ])
    .await;
    let err = get(&server, "/a", &FetchLimits::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        FetchError::Refused("example.com:80 is not listed".into())
    );
    assert_eq!(server.requests().len(), 1, "only the first hop was sent");
}

#[tokio::test]
async fn a_redirect_loop_and_too_many_redirects_are_named() {
    let mut answers = vec![
        ("/loop1", Answer::redirect(302, "/loop2")),
        ("/loop2", Answer::redirect(302, "/loop1")),
    ];
    let hops: Vec<String> = (0..12).map(|n| format!("/r{n}")).collect();
    for n in 0..11 {
        answers.push((hops[n].as_str(), Answer::redirect(302, &hops[n + 1])));
    }
    let server = TestServer::start(answers).await;
    let err = get(&server, "/loop1", &FetchLimits::default())
        .await
        .unwrap_err();
    let FetchError::Loop(chain) = &err else {
        panic!("{err:?}")
    };
    let (one, two) = (server.url("/loop1"), server.url("/loop2"));
    assert_eq!(chain, &format!("{one} -> {two} -> {one}"));
    assert!(err.to_string().starts_with("redirect loop: "), "{err}");
    let err = get(&server, "/r0", &FetchLimits::default())
        .await
        .unwrap_err();
    assert_eq!(err, FetchError::TooManyRedirects(10, server.url("/r11")));
}

#[tokio::test]
async fn reading_stops_at_the_read_limit_and_says_so() {
    let server = TestServer::start(vec![(
        "/big",
        Answer::page("text/plain", vec![b'a'; 50_000]),
    )])
    .await;
    let limits = FetchLimits {
        max_read_bytes: 1_000,
        ..FetchLimits::default()
    };
    let fetched = get(&server, "/big", &limits).await.unwrap();
    let body = fetched.body.unwrap();
    assert_eq!(body.bytes.len(), 1_000);
    assert_eq!(body.cut, Some(Cut::Size(1_000)));
}

#[tokio::test]
async fn a_binary_body_is_never_read() {
    let server = TestServer::start(vec![(
        "/logo.png",
        Answer::page("image/png", vec![0u8; 4_096]),
    )])
    .await;
    let fetched = get(&server, "/logo.png", &FetchLimits::default())
        .await
        .unwrap();
    assert!(fetched.body.is_none());
    assert_eq!(fetched.content_length, Some(4_096));
}

#[tokio::test]
async fn a_trickling_server_is_cut_at_the_total_time() {
    let server = TestServer::start(vec![(
        "/slow",
        Answer::Trickle {
            every: Duration::from_millis(50),
        },
    )])
    .await;
    let limits = FetchLimits {
        total: Duration::from_millis(800),
        ..FetchLimits::default()
    };
    // The server trickles forever: the fetch ending, cut by the total
    // time, is the proof.
    let fetched = get(&server, "/slow", &limits).await.unwrap();
    let body = fetched.body.unwrap();
    assert_eq!(body.cut, Some(Cut::Total(limits.total)));
    assert!(!body.bytes.is_empty());
}

#[tokio::test]
async fn a_stalled_body_is_cut_at_the_idle_time_and_a_silent_server_times_out() {
    let server = TestServer::start(vec![
        (
            "/stall",
            Answer::Trickle {
                every: Duration::from_secs(60),
            },
        ),
        ("/silent", Answer::Silent),
    ])
    .await;
    let limits = FetchLimits {
        total: Duration::from_millis(900),
        idle: Duration::from_millis(200),
        ..FetchLimits::default()
    };
    let fetched = get(&server, "/stall", &limits).await.unwrap();
    assert_eq!(fetched.body.unwrap().cut, Some(Cut::Idle(limits.idle)));
    // The server never answers: a timeout error is the proof.
    let err = get(&server, "/silent", &limits).await.unwrap_err();
    assert!(matches!(err, FetchError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains(&server.addr.to_string()), "{err}");
}

#[tokio::test]
async fn the_cancel_token_stops_a_fetch_at_once() {
    let server = TestServer::start(vec![("/silent", Answer::Silent)]).await;
    let cancel = CancellationToken::new();
    let gate = gate_for(&server);
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.cancel();
    });
    // The server never answers and the default limits run for minutes:
    // a `Cancelled` error is the proof.
    let err = fetch(
        &server.url("/silent"),
        &gate,
        &FetchLimits::default(),
        &cancel,
    )
    .await
    .unwrap_err();
    assert_eq!(err, FetchError::Cancelled);
}

#[tokio::test]
async fn an_approved_name_that_resolves_to_loopback_is_refused_before_connecting() {
    let server = TestServer::start(vec![("/", Answer::page("text/plain", "local"))]).await;
    let gate = TestGate {
        rules: NetRules::default(),
        approved: vec!["localhost".into()],
    };
    let url = format!("http://localhost:{}/", server.addr.port());
    let err = fetch(
        &url,
        &gate,
        &FetchLimits::default(),
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    let FetchError::Refused(message) = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("private address") && message.contains("network_allow"),
        "{message}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn only_plain_http_urls_without_credentials_are_fetched() {
    for (url, says) in [
        ("ftp://example.com/x", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("https://user:pass@example.com/", "credentials"),
        ("https://user@example.com/", "credentials"),
        ("example.com", "not a URL"),
    ] {
        let err = checked_url(url).unwrap_err().to_string();
        assert!(err.contains(says), "{url}: {err}");
    }
    assert_eq!(
        checked_url("https://example.com/a#b").unwrap().as_str(),
        "https://example.com/a"
    );
}

#[test]
fn content_types_are_html_text_or_binary() {
    for (content_type, kind) in [
        ("text/html; charset=utf-8", ContentKind::Html),
        ("application/xhtml+xml", ContentKind::Html),
        ("text/plain", ContentKind::Text),
        ("application/json", ContentKind::Text),
        ("application/vnd.api+json", ContentKind::Text),
        ("image/svg+xml", ContentKind::Binary),
        ("application/atom+xml", ContentKind::Text),
        ("image/png", ContentKind::Binary),
        ("application/octet-stream", ContentKind::Binary),
        ("application/pdf", ContentKind::Binary),
    ] {
        assert_eq!(ContentKind::of(content_type), kind, "{content_type}");
    }
}
