//! A fake model server: real HTTP/1.1 on `127.0.0.1:0`, scripted replies,
//! every request recorded.
//!
//! Theory of operation: [`FakeServer::start`] binds the port synchronously
//! (so [`FakeServer::base_url`] is valid at once) and serves from its own
//! thread with its own single-threaded tokio runtime, so it works the same
//! from a plain `#[test]`, a `#[tokio::test]` or a bench. Each request to a
//! model endpoint (`POST …/chat/completions` or `POST …/messages`) is
//! recorded and answered by the next [`Reply`] of the script, in arrival
//! order. When the script is exhausted the request is still recorded and
//! answered with HTTP 500 and [`NO_REPLY_LEFT`], so a test that forgot a
//! reply sees it at once. Any other method or path gets 404 without using
//! the script, unless [`FakeServer::route`] gave it a fixed JSON answer
//! (llama.cpp's `GET /props`, say). Dropping the server stops it: stalled streams are cut and
//! every socket is closed.
//!
//! Framing: SSE replies use `Transfer-Encoding: chunked` on a keep-alive
//! connection; every SSE event is one HTTP chunk written by its own
//! `write` call with `TCP_NODELAY` set, so each event leaves as its own
//! segment. Faults ([`Reply::Stall`], [`Reply::Disconnect`], [`Reply::Raw`])
//! close the connection afterwards.
//!
//! The wire format lives in `http.rs`, a private child module.
//!
//! This file is shared with `benches/exec.rs` through `#[path]`: it only uses
//! `std`, `tokio`, `serde_json` and its child `http.rs`, nothing else from
//! `tests/common`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use http::{read_request, write_reply};

#[path = "http.rs"]
mod http;

/// Body of the HTTP 500 sent when a request arrives after the last scripted reply.
pub const NO_REPLY_LEFT: &str = "fake server: no scripted reply left";

/// How the server answers one model request.
///
/// SSE `events` are complete wire events, e.g. `"data: {…}\n\n"` or
/// `"event: message_start\ndata: {…}\n\n"`; the `sse` module builds them.
/// They are written verbatim, so malformed data is just another string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `200 text/event-stream`: every event as its own chunk, `delay` before
    /// each event after the first, then the terminating chunk. The
    /// connection stays open for the next request.
    Sse {
        events: Vec<String>,
        delay: Duration,
    },
    /// An HTTP error with extra headers (e.g. `Retry-After`) and a body,
    /// sent with `Content-Length`; the connection stays open.
    Error {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// `200 text/event-stream` and `events`, then silence for `hang`
    /// (`None`: until the client leaves or the server is dropped), then the
    /// connection is closed without the terminating chunk.
    Stall {
        events: Vec<String>,
        hang: Option<Duration>,
    },
    /// `200 text/event-stream` and `events`, then the socket is closed
    /// without the terminating chunk (a stream cut mid-way).
    Disconnect { events: Vec<String> },
    /// Bytes written verbatim (status line and headers included), one
    /// `write` per chunk with `delay` between chunks, then the connection
    /// is closed. Use a few milliseconds of delay so the client reads the
    /// chunks separately.
    Raw {
        chunks: Vec<Vec<u8>>,
        delay: Duration,
    },
}

impl Reply {
    /// A normal SSE stream.
    pub fn sse(events: Vec<String>) -> Reply {
        Reply::Sse {
            events,
            delay: Duration::ZERO,
        }
    }

    /// A slow but healthy SSE stream: `delay` before every event after the first.
    pub fn sse_with_delay(events: Vec<String>, delay: Duration) -> Reply {
        Reply::Sse { events, delay }
    }

    /// An HTTP error with a body and no extra headers.
    pub fn error(status: u16, body: &str) -> Reply {
        Reply::error_with_headers(status, &[], body)
    }

    /// An HTTP error with extra headers, e.g. `&[("Retry-After", "2")]`.
    pub fn error_with_headers(status: u16, headers: &[(&str, &str)], body: &str) -> Reply {
        Reply::Error {
            status,
            headers: headers
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            body: body.to_owned(),
        }
    }

    /// HTTP 429 with `Retry-After: <seconds>` and an OpenAI-style error body.
    pub fn rate_limited(retry_after_secs: u64) -> Reply {
        let seconds = retry_after_secs.to_string();
        Reply::error_with_headers(
            429,
            &[("Retry-After", &seconds)],
            r#"{"error":{"message":"Rate limit reached","type":"rate_limit_exceeded"}}"#,
        )
    }

    /// Sends `events`, then stays silent for `hang` and closes the connection.
    pub fn stall(events: Vec<String>, hang: Duration) -> Reply {
        Reply::Stall {
            events,
            hang: Some(hang),
        }
    }

    /// Sends `events`, then stays silent until the client gives up or the
    /// server is dropped.
    pub fn stall_forever(events: Vec<String>) -> Reply {
        Reply::Stall { events, hang: None }
    }

    /// Sends `events`, then closes the socket without ending the stream.
    pub fn disconnect(events: Vec<String>) -> Reply {
        Reply::Disconnect { events }
    }

    /// Raw bytes in the given network chunks, `delay` between them.
    pub fn raw(chunks: Vec<Vec<u8>>, delay: Duration) -> Reply {
        Reply::Raw { chunks, delay }
    }

    /// A complete SSE response (`Connection: close`, no length) whose body,
    /// the concatenated `events`, is cut into pieces of `piece_len` bytes
    /// regardless of UTF-8 or event boundaries, `delay` between pieces. With
    /// `piece_len` 1 every multi-byte character is split across reads.
    pub fn sse_split(events: &[String], piece_len: usize, delay: Duration) -> Reply {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                     Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
        let body = events.concat().into_bytes();
        let mut chunks = vec![head.to_vec()];
        chunks.extend(body.chunks(piece_len.max(1)).map(<[u8]>::to_vec));
        Reply::Raw { chunks, delay }
    }

    /// A stream whose first event is not JSON, then `[DONE]`.
    pub fn malformed_event() -> Reply {
        Reply::sse(vec![
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hel\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ])
    }
}

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query as sent, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names lowercased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    pub raw_body: Vec<u8>,
    /// `raw_body` parsed on first use: a zero-latency server answers without
    /// parsing a large body first (the benches' forks are 200 KiB to 10 MB).
    parsed: OnceLock<Value>,
}

impl RecordedRequest {
    pub fn new(
        method: String,
        path: String,
        headers: Vec<(String, String)>,
        raw_body: Vec<u8>,
    ) -> RecordedRequest {
        RecordedRequest {
            method,
            path,
            headers,
            raw_body,
            parsed: OnceLock::new(),
        }
    }

    /// The body parsed as JSON; `Value::Null` when it is empty or not JSON
    /// (`raw_body` still holds it).
    pub fn body(&self) -> &Value {
        self.parsed
            .get_or_init(|| serde_json::from_slice(&self.raw_body).unwrap_or(Value::Null))
    }

    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `body.messages`, or an empty slice.
    pub fn messages(&self) -> &[Value] {
        self.body()
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Whether this is an Anthropic Messages request (`…/messages`).
    pub fn is_anthropic(&self) -> bool {
        route_path(&self.path).ends_with("/messages")
    }

    /// Whether this request asked a model (and so used a scripted reply).
    pub fn is_model_request(&self) -> bool {
        is_model_route(&self.method, &self.path)
    }
}

/// When the server had a request whole and when it began its answer (the
/// reply picked and recorded, the first byte about to be written): the
/// server's own share of a request's latency, which the acp bench takes
/// out of what its client measures.
#[derive(Debug, Clone, Copy)]
pub struct ServedAt {
    pub received: Instant,
    pub answering: Instant,
}

/// The running server. Dropping it shuts it down.
pub struct FakeServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Binds `127.0.0.1:0` and serves `script` in order. Panics when the
    /// port or the runtime cannot be set up.
    pub fn start(script: Vec<Reply>) -> FakeServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("fake server: cannot bind 127.0.0.1:0: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("fake server: cannot set non-blocking: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("fake server: no local address: {e}"));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("fake server: cannot build a tokio runtime: {e}"));
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                script: script.into(),
                keyed: Vec::new(),
                requests: Vec::new(),
                served: Vec::new(),
                routes: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        let (stop, stopped) = oneshot::channel();
        let serving = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("fake-model-server-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(accept_loop(listener, serving, stopped));
                // Dropping the runtime here cancels every connection task,
                // which closes their sockets (stalled streams included).
                drop(runtime);
            })
            .unwrap_or_else(|e| panic!("fake server: cannot spawn its thread: {e}"));
        FakeServer {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT/v1`, the value for `FIDO_BASE_URL` (openai).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// `http://127.0.0.1:PORT`, without a path.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Only the model requests (the ones that consumed a reply or hit the
    /// end of the script), in arrival order.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|r| r.is_model_request())
            .cloned()
            .collect()
    }

    /// [`ServedAt`] of each model request, in the order of
    /// [`FakeServer::model_requests`].
    pub fn model_requests_served_at(&self) -> Vec<ServedAt> {
        let state = self.shared.lock();
        state
            .requests
            .iter()
            .zip(&state.served)
            .filter(|(request, _)| request.is_model_request())
            .map(|(_, served)| *served)
            .collect()
    }

    /// Scripted replies not used yet.
    pub fn unused_replies(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// Answers every `method path` request (not a model route) with HTTP 200
    /// and this JSON, e.g. `route("GET", "/props", …)`.
    pub fn route(&self, method: &str, path: &str, json: &str) {
        self.shared
            .lock()
            .routes
            .push((method.to_owned(), path.to_owned(), json.to_owned()));
    }

    /// Answers the first model request whose last message contains
    /// `needle` with `reply`, before the script and once. For requests
    /// that race (parallel subagents): each is told apart by its content,
    /// not by its arrival order.
    pub fn push_keyed(&self, needle: &str, reply: Reply) {
        self.shared.lock().keyed.push((needle.to_owned(), reply));
    }

    /// Appends a reply to the end of the script.
    pub fn push_reply(&self, reply: Reply) {
        self.shared.lock().script.push_back(reply);
    }

    /// Blocks until at least `count` model requests were received (Fido's
    /// context-window discovery GETs do not count), and returns every
    /// request; panics after `timeout`. Blocking: from async code call it
    /// through `spawn_blocking`.
    pub fn wait_for_requests(&self, count: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        while state.model_request_count() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                panic!(
                    "fake server: waited {timeout:?} for {count} model request(s), got {}",
                    state.model_request_count()
                );
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        state.requests.clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    script: VecDeque<Reply>,
    /// Replies picked by the content of the request's last message.
    keyed: Vec<(String, Reply)>,
    requests: Vec<RecordedRequest>,
    /// One per request, at the same index.
    served: Vec<ServedAt>,
    /// Fixed answers of non-model routes: method, path, JSON body.
    routes: Vec<(String, String, String)>,
}

impl State {
    fn model_request_count(&self) -> usize {
        self.requests
            .iter()
            .filter(|r| r.is_model_request())
            .count()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the request, `received` whole at that instant, and picks
    /// its answer.
    fn answer(&self, request: RecordedRequest, received: Instant) -> Reply {
        // One lock for both, so the n-th recorded model request is the one
        // that got the n-th reply even when requests race.
        let mut state = self.lock();
        // Only a keyed reply needs the body parsed before the answer.
        let keyed = (request.is_model_request() && !state.keyed.is_empty()).then(|| {
            let last = request.messages().last().map(Value::to_string)?;
            let at = state
                .keyed
                .iter()
                .position(|(needle, _)| last.contains(needle.as_str()))?;
            Some(state.keyed.remove(at).1)
        });
        let reply = if let Some(Some(reply)) = keyed {
            reply
        } else if request.is_model_request() {
            state.script.pop_front().unwrap_or_else(|| {
                // Shown with the output of the failing test.
                eprintln!("{NO_REPLY_LEFT}: {} {}", request.method, request.path);
                Reply::error(500, NO_REPLY_LEFT)
            })
        } else if let Some((_, _, json)) = state
            .routes
            .iter()
            .find(|(m, p, _)| *m == request.method && p == route_path(&request.path))
        {
            Reply::error(200, json)
        } else {
            let body = format!(
                "fake server: unexpected {} {}",
                request.method, request.path
            );
            Reply::error(404, &body)
        };
        state.requests.push(request);
        state.served.push(ServedAt {
            received,
            answering: Instant::now(),
        });
        drop(state);
        self.changed.notify_all();
        reply
    }
}

fn route_path(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

fn is_model_route(method: &str, path: &str) -> bool {
    let path = route_path(path);
    // `/responses`: the OpenAI Responses API, which the peer bench's Codex
    // speaks (Fido does not).
    method == "POST"
        && (path.ends_with("/chat/completions")
            || path.ends_with("/messages")
            || path.ends_with("/responses"))
}

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: oneshot::Receiver<()>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                // Out of descriptors or similar: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

/// Serves requests on one connection until the client closes it or a
/// reply ends the connection.
async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut buffer = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buffer).await {
        let received = Instant::now();
        let client_closes = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let reply = shared.answer(request, received);
        match write_reply(&mut stream, reply).await {
            Ok(true) if !client_closes => {}
            Ok(_) | Err(_) => break,
        }
    }
    let _ = stream.shutdown().await;
}
