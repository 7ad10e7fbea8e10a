//! The proxy against real loopback servers: what it lets through, what it
//! refuses and says so, and the clients it drops.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::*;
use crate::net::fetch::GateFuture;
use crate::net::rules::parse_list;
use crate::net::testing::{Answer, TestServer};
use crate::net::{NetRules, Target};
use crate::protocol::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, SafetySettings, SandboxMode,
};
use crate::tools::approval::{ApprovalFuture, Approvals, Approver};
use crate::tools::web::Browser;

const PAGE: &str = "the page";

async fn server() -> TestServer {
    TestServer::start(vec![("/page", Answer::page("text/plain", PAGE))]).await
}

fn approvals(policy: ApprovalPolicy, approver: Option<Arc<dyn Approver>>) -> Approvals {
    let settings = SafetySettings {
        sandbox_mode: SandboxMode::WorkspaceWrite,
        approval_policy: policy,
        network: crate::protocol::NetworkAccess::Off,
    };
    Approvals::new(settings, approver)
}

/// The session's admission as the gate: `allow` listed, nobody to ask.
fn headless(allow: &str) -> Arc<dyn HopGate> {
    let rules = NetRules {
        allow: parse_list(allow).unwrap(),
        deny: Vec::new(),
    };
    Browser::new(rules, approvals(ApprovalPolicy::OnRequest, None)).admission()
}

fn start(gate: Arc<dyn HopGate>) -> Proxy {
    Proxy::start(gate, ProxyLimits::default()).unwrap()
}

/// Everything the other side sends until it closes.
async fn read_all<C: AsyncRead + Unpin>(mut stream: C) -> String {
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes))
        .await
        .expect("the connection was not closed")
        .unwrap();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A plain GET of `url` through `client`, and the whole answer.
async fn get_via<C: AsyncRead + AsyncWrite + Unpin>(mut client: C, url: &str) -> String {
    let request = format!(
        "GET {url} HTTP/1.1\r\nHost: ignored\r\nProxy-Connection: keep-alive\r\nUser-Agent: t\r\n\r\n"
    );
    client.write_all(request.as_bytes()).await.unwrap();
    read_all(client).await
}

async fn get(proxy: &Proxy, url: &str) -> String {
    let client = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    get_via(client, url).await
}

/// A CONNECT to `authority`, then (if established) a GET of /page.
async fn connect(proxy: &Proxy, authority: &str) -> String {
    let mut client = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    client.write_all(request.as_bytes()).await.unwrap();
    let mut head = vec![0u8; super::http::ESTABLISHED.len()];
    let read = client.read_exact(&mut head).await;
    if read.is_err() || head != super::http::ESTABLISHED {
        return String::from_utf8_lossy(&head).into_owned() + &read_all(client).await;
    }
    client
        .write_all(b"GET /page HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    read_all(client).await
}

fn blocked(host: &str) -> String {
    format!("blocked by network allowlist: {host} (add it to network_allow)")
}

fn assert_blocked(answer: &str, host: &str) {
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    assert!(
        answer.ends_with(&format!("\r\n\r\n{}\n", blocked(host))),
        "{answer}"
    );
}

#[tokio::test]
async fn a_listed_port_is_reached_by_connect_and_by_plain_get() {
    let origin = server().await;
    let proxy = start(headless(&format!("localhost:{}", origin.addr.port())));
    let port = origin.addr.port();

    let tunnelled = connect(&proxy, &format!("localhost:{port}")).await;
    assert!(tunnelled.starts_with("HTTP/1.1 200 "), "{tunnelled}");
    assert!(tunnelled.ends_with(PAGE), "{tunnelled}");

    let plain = get(&proxy, &format!("http://LOCALHOST:{port}/page")).await;
    assert!(plain.starts_with("HTTP/1.1 200 "), "{plain}");
    assert!(plain.ends_with(PAGE), "{plain}");
    let seen = origin.requests();
    let forwarded = seen.last().unwrap();
    assert!(
        forwarded.starts_with(&format!("GET /page HTTP/1.1\r\nHost: localhost:{port}\r\n")),
        "{forwarded}"
    );
    assert!(
        forwarded.contains("\r\nConnection: close\r\n"),
        "{forwarded}"
    );
    assert!(
        !forwarded.to_ascii_lowercase().contains("proxy-connection"),
        "{forwarded}"
    );
    assert!(
        proxy
            .blocked_since(Instant::now() - Duration::from_secs(60))
            .is_empty()
    );
}

#[tokio::test]
async fn other_ports_addresses_and_unlisted_names_are_refused_with_the_line() {
    let listed = server().await;
    let other = server().await;
    let started = Instant::now();
    let proxy = start(headless(&format!("127.0.0.1:{}", listed.addr.port())));
    let (a, b) = (listed.addr.port(), other.addr.port());

    assert_blocked(
        &connect(&proxy, &format!("127.0.0.1:{b}")).await,
        &format!("127.0.0.1:{b}"),
    );
    assert_blocked(
        &get(&proxy, &format!("http://127.0.0.1:{b}/page")).await,
        &format!("127.0.0.1:{b}"),
    );
    assert_blocked(
        &connect(&proxy, &format!("127.0.0.2:{a}")).await,
        &format!("127.0.0.2:{a}"),
    );
    assert_blocked(
        &connect(&proxy, &format!("localhost:{a}")).await,
        &format!("localhost:{a}"),
    );
    assert_blocked(&get(&proxy, "http://example.com/").await, "example.com");
    assert!(other.requests().is_empty(), "{:?}", other.requests());
    assert!(listed.requests().is_empty(), "{:?}", listed.requests());

    let lines = proxy.blocked_since(started);
    let expected: Vec<String> = [
        format!("127.0.0.1:{b}"),
        format!("127.0.0.2:{a}"),
        format!("localhost:{a}"),
        "example.com".to_string(),
    ]
    .iter()
    .map(|host| blocked(host))
    .collect();
    assert_eq!(lines, expected);
    assert!(proxy.blocked_since(Instant::now()).is_empty());
}

/// Admits every target as a person would: public addresses only.
struct ApproveAll;

impl HopGate for ApproveAll {
    fn admit<'a>(&'a self, _: &'a Target, _: &'a str) -> GateFuture<'a> {
        Box::pin(async { Ok(Reach::Approved) })
    }
}

#[tokio::test]
async fn an_approved_name_that_resolves_to_loopback_is_still_refused() {
    let origin = server().await;
    let proxy = start(Arc::new(ApproveAll));
    let authority = format!("localhost:{}", origin.addr.port());
    assert_blocked(&connect(&proxy, &authority).await, &authority);
    assert!(origin.requests().is_empty());
}

/// A listener on every address of this machine (IPv4 and IPv6 where the
/// kernel has both), non-blocking: whatever reaches its port is queued.
fn listener_on_every_address() -> (std::net::TcpListener, bool) {
    let (listener, v6) = match std::net::TcpListener::bind("[::]:0") {
        Ok(listener) => (listener, true),
        Err(_) => (std::net::TcpListener::bind("0.0.0.0:0").unwrap(), false),
    };
    listener.set_nonblocking(true).unwrap();
    (listener, v6)
}

/// Loopback and this machine by every other spelling, approved by the
/// gate: each is refused, and the listener behind them is never reached
/// (its accept queue, looked at after every answer, stays empty).
#[tokio::test]
async fn an_approved_loopback_address_in_any_spelling_is_still_refused() {
    let (origin, v6) = listener_on_every_address();
    let port = origin.local_addr().unwrap().port();
    let proxy = start(Arc::new(ApproveAll));
    let mut hosts = vec!["0.0.0.0", "127.1", "2130706433", "0x7f000001", "127.0.0.1"];
    if v6 {
        hosts.extend(["[::1]", "[::ffff:127.0.0.1]", "[::]", "[::ffff:7f00:1]"]);
    }
    for host in hosts {
        let authority = format!("{host}:{port}");
        let tunnelled = connect(&proxy, &authority).await;
        assert!(
            tunnelled.starts_with("HTTP/1.1 403 "),
            "{authority}: {tunnelled}"
        );
        let plain = get(&proxy, &format!("http://{authority}/page")).await;
        assert!(plain.starts_with("HTTP/1.1 403 "), "{authority}: {plain}");
        let reached = origin.accept();
        assert!(
            reached
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "{authority} reached the listener: {reached:?}"
        );
    }
}

#[tokio::test]
async fn a_client_that_never_sends_is_dropped_and_its_task_ends() {
    let limits = ProxyLimits {
        head: Duration::from_millis(300),
        ..ProxyLimits::default()
    };
    let proxy = Proxy::start(headless(""), limits).unwrap();
    let silent = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    wait_for(|| proxy.clients() == 1).await;
    // The client never sends: the proxy closing it (EOF, no answer) is
    // the head timeout at work.
    assert_eq!(read_all(silent).await, "");
    wait_for(|| proxy.clients() == 0).await;
}

#[tokio::test]
async fn clients_past_the_limit_get_503_and_dropping_the_proxy_ends_every_client() {
    let limits = ProxyLimits {
        max_clients: 1,
        ..ProxyLimits::default()
    };
    let proxy = Proxy::start(headless(""), limits).unwrap();
    let silent = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    wait_for(|| proxy.clients() == 1).await;
    let busy = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    let busy = read_all(busy).await;
    assert!(busy.starts_with("HTTP/1.1 503 "), "{busy}");
    let port = proxy.port();
    drop(proxy);
    assert_eq!(read_all(silent).await, "");
    // The listener goes with its task, which the same stop ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the port still accepts"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_head_past_the_size_limit_is_refused() {
    let limits = ProxyLimits {
        max_head: 1024,
        ..ProxyLimits::default()
    };
    let proxy = Proxy::start(headless(""), limits).unwrap();
    let mut client = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    let long = format!("GET http://example.com/{} HTTP/1.1\r\n", "a".repeat(2048));
    client.write_all(long.as_bytes()).await.unwrap();
    let answer = read_all(client).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
}

/// Sends `fd` over the route's bridge as a command's namespace would.
fn send_over_bridge(route: &ProxyRoute, fd: impl AsFd) {
    let fds = [fd.as_fd().as_raw_fd()];
    let byte = [0u8];
    sendmsg::<()>(
        route.bridge.as_raw_fd(),
        &[IoSlice::new(&byte)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .unwrap();
}

#[tokio::test]
async fn clients_passed_over_the_bridge_are_served_like_accepted_ones() {
    let origin = server().await;
    let proxy = start(headless(&format!("127.0.0.1:{}", origin.addr.port())));
    let url = format!("http://127.0.0.1:{}/page", origin.addr.port());

    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    send_over_bridge(&proxy.route(), &theirs);
    drop(theirs);
    ours.set_nonblocking(true).unwrap();
    let answer = get_via(tokio::net::UnixStream::from_std(ours).unwrap(), &url).await;
    assert!(answer.ends_with(PAGE), "{answer}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (accepted, _) = listener.accept().unwrap();
    send_over_bridge(&proxy.route(), &accepted);
    drop(accepted);
    let answer = get_via(
        client,
        &format!("http://127.0.0.1:{}/other", origin.addr.port()),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
    assert_eq!(origin.requests().len(), 2);
}

/// Answers with the next scripted decision, and counts the questions.
struct Person {
    answers: Mutex<Vec<ApprovalDecision>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Person {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answers.lock().unwrap().pop();
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            answer
        })
    }
}

#[tokio::test]
async fn an_unlisted_host_is_asked_once_and_the_answer_is_shared_with_browse_url() {
    let person = Arc::new(Person {
        answers: Mutex::new(vec![ApprovalDecision::ApprovedForSession]),
        asked: Mutex::new(Vec::new()),
    });
    let browser = Arc::new(Browser::new(
        NetRules::default(),
        approvals(ApprovalPolicy::OnRequest, Some(person.clone())),
    ));
    let proxy = start(browser.admission());
    // Three connections at once: one question, answered for the session
    // (the name resolves to loopback, so the private check refuses it
    // after the person allowed it).
    let (first, second, third) = tokio::join!(
        connect(&proxy, "localhost:443"),
        connect(&proxy, "localhost:443"),
        get(&proxy, "http://localhost:443/"),
    );
    for answer in [first, second, third] {
        assert_blocked(&answer, "localhost");
    }
    let asked = person.asked.lock().unwrap().clone();
    assert!(
        matches!(&asked[..], [ApprovalRequest::Browse { host, .. }] if host == "localhost:443"),
        "{asked:?}"
    );
    let target = Target::new("localhost", 443);
    let reach = browser
        .admission()
        .admit(&target, "https://localhost/")
        .await;
    assert_eq!(reach, Ok(Reach::Approved));
    assert_eq!(
        person.asked.lock().unwrap().len(),
        1,
        "browse_url asked again"
    );
}

#[tokio::test]
async fn a_denied_host_is_refused_with_the_line() {
    let person = Arc::new(Person {
        answers: Mutex::new(vec![ApprovalDecision::Denied { reason: None }]),
        asked: Mutex::new(Vec::new()),
    });
    let browser = Browser::new(
        NetRules::default(),
        approvals(ApprovalPolicy::Untrusted, Some(person.clone())),
    );
    let proxy = start(browser.admission());
    assert_blocked(
        &get(&proxy, "http://example.com:8080/x").await,
        "example.com:8080",
    );
    assert_eq!(person.asked.lock().unwrap().len(), 1);
}

#[test]
fn the_route_variables_point_at_the_proxy_and_nothing_bypasses_it() {
    let mut command = tokio::process::Command::new("env");
    command.env("NO_PROXY", "*").env("no_proxy", "*");
    route_command(&mut command, 4242);
    let set: Vec<(String, Option<String>)> = command
        .as_std()
        .get_envs()
        .map(|(name, value)| {
            let value = value.map(|v| v.to_string_lossy().into_owned());
            (name.to_string_lossy().into_owned(), value)
        })
        .collect();
    for name in PROXY_VARIABLES {
        assert!(
            set.contains(&(name.into(), Some("http://127.0.0.1:4242".into()))),
            "{set:?}"
        );
    }
    assert!(set.contains(&("NO_PROXY".into(), None)), "{set:?}");
    assert!(set.contains(&("no_proxy".into(), None)), "{set:?}");
}

async fn wait_for(condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
