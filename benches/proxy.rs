//! The latency the allowlist proxy adds to a command's request: a tiny
//! HTTP GET to a loopback server over a fresh connection each time,
//! direct, through the proxy as plain HTTP (absolute form) and through a
//! CONNECT tunnel, interleaved so all see the same machine load. Beside
//! them, the same GET by `browse_url`'s fetcher (`net::fetch`: the gate,
//! a client per hop, the filtering resolver), the network part of the
//! tool, over the direct one.
//!
//! `cargo bench --bench proxy` (`BENCH_RUNS`, default 300 each). Prints
//! min / p50 / p99 / max of each and the p50 each way adds; exits non-zero
//! when either adds more than the target at p50.

#[path = "support.rs"]
#[allow(dead_code)]
mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use fido::net::NetRules;
use fido::net::fetch::HopGate;
use fido::net::proxy::{Proxy, ProxyLimits};
use fido::protocol::{ApprovalPolicy, SafetySettings, SandboxMode};
use fido::tools::approval::Approvals;
use fido::tools::web::Browser;
use support::Sorted;

const DEFAULT_RUNS: usize = 300;
/// What the proxy may add to one request at p50, in ms.
const TARGET_ADDED_MS: f64 = 1.0;
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("proxy bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A loopback server that answers every request with [`ANSWER`], on a
/// thread of its own.
fn origin() -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = stream.write_all(ANSWER);
        }
    });
    Ok(addr)
}

/// How one request reaches the origin.
#[derive(Clone, Copy)]
enum Way {
    Direct,
    Plain,
    Connect,
}

/// One GET of `url` by `browse_url`'s fetcher, in ms.
fn browse(runtime: &tokio::runtime::Runtime, gate: &dyn HopGate, url: &str) -> Result<f64, String> {
    let limits = fido::net::fetch::FetchLimits::default();
    let cancel = tokio_util::sync::CancellationToken::new();
    let start = Instant::now();
    let fetched = runtime
        .block_on(fido::net::fetch::fetch(url, gate, &limits, &cancel))
        .map_err(|e| format!("browse: {e}"))?;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    match fetched.body {
        Some(body) if body.bytes == b"ok" => Ok(elapsed),
        _ => Err("browse: not the answer".into()),
    }
}

/// One request over a fresh connection and its whole answer, in ms.
fn request(way: Way, origin: SocketAddr, proxy: SocketAddr) -> Result<f64, String> {
    let io = |e: std::io::Error| e.to_string();
    let start = Instant::now();
    let mut stream = match way {
        Way::Direct => TcpStream::connect(origin),
        Way::Plain | Way::Connect => TcpStream::connect(proxy),
    }
    .map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    let target = match way {
        Way::Direct | Way::Connect => "/".to_string(),
        Way::Plain => format!("http://{origin}/"),
    };
    if let Way::Connect = way {
        let connect = format!("CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n");
        stream.write_all(connect.as_bytes()).map_err(io)?;
        let mut established = [0u8; 39];
        stream.read_exact(&mut established).map_err(io)?;
        if !established.starts_with(b"HTTP/1.1 200 ") {
            return Err(format!(
                "CONNECT: {}",
                String::from_utf8_lossy(&established)
            ));
        }
    }
    let get = format!("GET {target} HTTP/1.1\r\nHost: {origin}\r\n\r\n");
    stream.write_all(get.as_bytes()).map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(io)?;
    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
    if !answer.ends_with(b"\r\n\r\nok") {
        return Err(format!("answer: {}", String::from_utf8_lossy(&answer)));
    }
    Ok(elapsed)
}

/// The session's admission with only `origin` listed, nobody to ask.
fn gate(origin: SocketAddr) -> Result<Arc<dyn HopGate>, String> {
    let rules = NetRules {
        allow: fido::net::rules::parse_list(&origin.to_string()).map_err(|e| e.to_string())?,
        deny: Vec::new(),
    };
    let settings = SafetySettings {
        sandbox_mode: SandboxMode::WorkspaceWrite,
        approval_policy: ApprovalPolicy::Never,
        network: fido::protocol::NetworkAccess::Off,
    };
    Ok(Browser::new(rules, Approvals::new(settings, None)).admission())
}

fn bench() -> Result<bool, String> {
    let runs = support::env_count("BENCH_RUNS", DEFAULT_RUNS)?;
    let runtime = support::runtime()?;
    let origin = origin()?;
    let gate = gate(origin)?;
    let proxy = {
        let _entered = runtime.enter();
        Proxy::start(gate.clone(), ProxyLimits::default()).map_err(|e| format!("proxy: {e}"))?
    };
    let proxy_addr = SocketAddr::from(([127, 0, 0, 1], proxy.port()));
    let url = format!("http://{origin}/");
    let ways = [Way::Direct, Way::Plain, Way::Connect];
    let mut times: [Vec<f64>; 4] = Default::default();
    for round in 0..runs + 10 {
        let mut ms = [0.0; 4];
        for (i, way) in ways.iter().enumerate() {
            ms[i] = request(*way, origin, proxy_addr)?;
        }
        ms[3] = browse(&runtime, &*gate, &url)?;
        // The first ten rounds warm up.
        if round >= 10 {
            for (kept, ms) in times.iter_mut().zip(ms) {
                kept.push(ms);
            }
        }
    }
    let [direct, plain, connect, browsed] = times.map(Sorted::new);
    report_browse(&direct, &browsed);
    report(&direct, &plain, &connect)
}

/// `browse_url`'s fetch over the direct GET: reported, no target (the
/// tool's own budget is its 30 s fetch limit).
fn report_browse(direct: &Sorted, browsed: &Sorted) {
    let added = browsed.median() - direct.median();
    println!(
        "browse_url fetch    n={} min {:.3} ms  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
        browsed.len(),
        browsed.min(),
        browsed.median(),
        browsed.quantile(0.99),
        browsed.max()
    );
    support::table_row(
        "proxy",
        "the same GET by `browse_url`'s fetcher (gate, a client per hop, filtering resolver): added at p50 over the direct GET",
        &format!(
            "+{added:.3} ms ({:.3} → {:.3} ms p50; p99 {:.3} → {:.3}, n = {})",
            direct.median(),
            browsed.median(),
            direct.quantile(0.99),
            browsed.quantile(0.99),
            browsed.len()
        ),
        "— (reported)",
        &format!("{:.3} ms: the same GET direct", direct.median()),
    );
}

fn report(direct: &Sorted, plain: &Sorted, connect: &Sorted) -> Result<bool, String> {
    for (name, s) in [
        ("direct", direct),
        ("proxy, plain HTTP", plain),
        ("proxy, CONNECT", connect),
    ] {
        println!(
            "{name:<18} n={} min {:.3} ms  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            s.len(),
            s.min(),
            s.median(),
            s.quantile(0.99),
            s.max()
        );
    }
    let mut met = true;
    for (what, s) in [
        ("plain HTTP (absolute-form GET)", plain),
        ("CONNECT tunnel, then GET", connect),
    ] {
        let added = s.median() - direct.median();
        support::table_row(
            "proxy",
            &format!(
                "a tiny GET over a fresh loopback connection through the allowlist proxy, {what}: added at p50"
            ),
            &format!(
                "+{added:.3} ms ({:.3} → {:.3} ms p50; p99 {:.3} → {:.3}, n = {})",
                direct.median(),
                s.median(),
                direct.quantile(0.99),
                s.quantile(0.99),
                s.len()
            ),
            &format!("≤ {TARGET_ADDED_MS} ms added"),
            &format!("{:.3} ms: the same GET direct", direct.median()),
        );
        met &= support::wall_clock_target(
            &format!("added by the proxy, {what}, at p50"),
            added,
            support::Bound::AtMost,
            TARGET_ADDED_MS,
            "ms",
        );
    }
    Ok(met)
}
