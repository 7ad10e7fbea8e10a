//! Self-tests of the fake model server with a tiny raw HTTP/1.1 client, and
//! (in the child modules) of the invariant checker and the process helpers:
//! no fido involved.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::server::NO_REPLY_LEFT;
use crate::common::sse;
use crate::common::{FakeServer, Reply};

mod invariants;
mod process;

/// What the raw client saw.
struct Response {
    status: u16,
    head: String,
    /// The body, de-chunked when it was chunked.
    body: Vec<u8>,
    /// The HTTP chunks of a chunked body, in order.
    chunks: Vec<Vec<u8>>,
    /// Whether a chunked body ended with its terminating chunk.
    complete: bool,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `data:` payloads of the SSE body, in order.
    fn data(&self) -> Vec<String> {
        self.text()
            .split("\n\n")
            .filter_map(|event| {
                event
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .map(str::to_owned)
            })
            .collect()
    }
}

fn request_bytes(path: &str, body: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Authorization: Bearer test-key\r\n{extra_headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// One request on a fresh connection with `Connection: close`; reads to EOF.
fn post(server: &FakeServer, path: &str, body: &str) -> Response {
    let mut stream = connect(server);
    stream
        .write_all(&request_bytes(path, body, "Connection: close\r\n"))
        .unwrap_or_else(|e| panic!("write: {e}"));
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .unwrap_or_else(|e| panic!("read: {e}"));
    parse_response(&bytes)
}

fn connect(server: &FakeServer) -> TcpStream {
    let stream = TcpStream::connect(server.addr()).unwrap_or_else(|e| panic!("connect: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap_or_else(|e| panic!("timeout: {e}"));
    stream
}

fn parse_response(bytes: &[u8]) -> Response {
    let split = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head in {:?}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8_lossy(&bytes[..split]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    let rest = &bytes[split + 4..];
    let mut response = Response {
        status,
        head,
        body: Vec::new(),
        chunks: Vec::new(),
        complete: false,
    };
    if !response
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        response.body = rest.to_vec();
        response.complete = true;
        return response;
    }
    let mut at = 0;
    while let Some(line_end) = rest[at..].windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[at..at + line_end]).into_owned();
        let size = usize::from_str_radix(size_text.trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        at += line_end + 2;
        if size == 0 {
            response.complete = true;
            break;
        }
        let Some(chunk) = rest.get(at..at + size) else {
            break;
        };
        response.chunks.push(chunk.to_vec());
        response.body.extend_from_slice(chunk);
        at += size + 2;
    }
    response
}

const CHAT: &str = "/v1/chat/completions";

#[test]
fn sse_text_turn_arrives_event_by_event_and_ends_with_done() {
    let events = sse::text_turn("hello, wörld");
    let server = FakeServer::start(vec![Reply::sse(events.clone())]);
    let response = post(&server, CHAT, r#"{"model":"m","messages":[]}"#);

    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(
        response.complete,
        "the stream must end with the terminating chunk"
    );
    let chunks: Vec<String> = response
        .chunks
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    assert_eq!(chunks, events, "every SSE event is its own HTTP chunk");

    let data = response.data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "hello, wörld");
    let content_deltas = chunks
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|s| !s.is_empty())
        })
        .count();
    assert!(content_deltas > 1, "text comes in several deltas");
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = &chunks[chunks.len() - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 100);
    assert_eq!(usage["usage"]["completion_tokens"], 20);
    assert_eq!(usage["usage"]["total_tokens"], 120);
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 60);
}

#[test]
fn tool_call_turn_streams_id_and_name_first_then_argument_fragments() {
    let arguments = r#"{"path":"a.txt"}"#;
    let events = sse::tool_call_turn(&[
        ("call_1", "read_file", arguments),
        ("call_2", "list_files", "{}"),
    ]);
    let server = FakeServer::start(vec![Reply::sse(events)]);
    let data = post(&server, CHAT, "{}").data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect();

    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    let call = &first["tool_calls"][0];
    assert_eq!(call["index"], 0);
    assert_eq!(call["id"], "call_1");
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "read_file");
    assert!(
        !call["function"]["arguments"]
            .as_str()
            .unwrap_or("")
            .is_empty()
    );

    let mut rebuilt = [String::new(), String::new()];
    for chunk in &chunks {
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = call["index"].as_u64().unwrap_or(99) as usize;
            if index == 0 && call.get("id").is_none() {
                assert!(
                    call["function"].get("name").is_none(),
                    "later deltas carry only arguments"
                );
            }
            rebuilt[index].push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    assert_eq!(rebuilt, [arguments.to_owned(), "{}".to_owned()]);
    assert_eq!(
        chunks[chunks.len() - 2]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));
}

#[test]
fn requests_are_recorded_with_path_headers_and_body() {
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("a")),
        Reply::sse(sse::text_turn("b")),
    ]);
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": true});
    post(&server, CHAT, &body.to_string());
    post(&server, "/v1/messages", r#"{"model":"claude"}"#);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, CHAT);
    assert_eq!(requests[0].header("Authorization"), Some("Bearer test-key"));
    assert_eq!(*requests[0].body(), body);
    assert_eq!(requests[0].messages().len(), 1);
    assert!(!requests[0].is_anthropic());
    assert!(requests[1].is_anthropic());
    assert_eq!(requests[1].body()["model"], "claude");
    assert_eq!(server.unused_replies(), 0);
}

#[test]
fn chunked_request_bodies_are_read() {
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("ok"))]);
    let mut stream = connect(&server);
    let request = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                   Transfer-Encoding: chunked\r\n\r\n7\r\n{\"a\":1,\r\n6\r\n\"b\":2}\r\n0\r\n\r\n";
    stream
        .write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parse_response(&bytes).status, 200);
    assert_eq!(*server.requests()[0].body(), json!({"a": 1, "b": 2}));
}

#[test]
fn keep_alive_connection_serves_requests_in_script_order() {
    let server = FakeServer::start(vec![
        Reply::sse(sse::text_turn("first")),
        Reply::error(503, "busy"),
        Reply::sse(sse::text_turn("third")),
    ]);
    let mut stream = connect(&server);
    let mut bytes = Vec::new();
    for _ in 0..2 {
        stream
            .write_all(&request_bytes(CHAT, "{}", ""))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    stream
        .write_all(&request_bytes(CHAT, "{}", "Connection: close\r\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    stream
        .read_to_end(&mut bytes)
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&bytes);
    let first = text
        .find("\"firs")
        .unwrap_or_else(|| panic!("no first reply in {text}"));
    let busy = text
        .find("503 Service Unavailable")
        .unwrap_or_else(|| panic!("no 503 in {text}"));
    let third = text
        .find("\"thir")
        .unwrap_or_else(|| panic!("no third reply in {text}"));
    assert!(first < busy && busy < third);
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn error_replies_carry_status_headers_and_body() {
    let server = FakeServer::start(vec![
        Reply::rate_limited(7),
        Reply::error_with_headers(
            503,
            &[("Retry-After", "2"), ("X-Test", "yes")],
            "overloaded",
        ),
    ]);
    let limited = post(&server, CHAT, "{}");
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("7"));
    assert_eq!(limited.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_slice(&limited.body).unwrap_or_else(|e| panic!("{e}"));
    assert!(body["error"]["message"].is_string());

    let busy = post(&server, CHAT, "{}");
    assert_eq!(busy.status, 503);
    assert_eq!(busy.header("Retry-After"), Some("2"));
    assert_eq!(busy.header("x-test"), Some("yes"));
    assert_eq!(busy.text(), "overloaded");
}

#[test]
fn exhausted_script_answers_500_and_records_the_request() {
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("only"))]);
    assert_eq!(post(&server, CHAT, "{}").status, 200);
    let extra = post(&server, CHAT, r#"{"n":2}"#);
    assert_eq!(extra.status, 500);
    assert_eq!(extra.text(), NO_REPLY_LEFT);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body()["n"], 2);
}

#[test]
fn other_paths_get_404_without_using_the_script() {
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("kept"))]);
    let response = post(&server, "/v1/models", "");
    assert_eq!(response.status, 404);
    assert!(response.text().contains("/v1/models"));
    assert_eq!(server.unused_replies(), 1);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.model_requests().len(), 0);
}

#[test]
fn disconnect_closes_mid_stream_without_the_terminating_chunk() {
    let events = sse::text_turn("cut short");
    let server = FakeServer::start(vec![Reply::disconnect(events[..2].to_vec())]);
    let response = post(&server, CHAT, "{}");
    assert_eq!(response.status, 200);
    assert!(!response.complete);
    assert_eq!(response.chunks.len(), 2);
    assert!(!response.text().contains("[DONE]"));
}

#[test]
fn stall_sends_the_first_events_then_hangs_then_closes() {
    let events = sse::text_turn("slow");
    let hang = Duration::from_millis(300);
    let server = FakeServer::start(vec![Reply::stall(events[..1].to_vec(), hang)]);
    let mut stream = connect(&server);
    stream
        .write_all(&request_bytes(CHAT, "{}", "Connection: close\r\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    let mut first = [0u8; 4096];
    let n = stream.read(&mut first).unwrap_or_else(|e| panic!("{e}"));
    assert!(n > 0);
    let head_at = Instant::now();
    let mut rest = first[..n].to_vec();
    stream
        .read_to_end(&mut rest)
        .unwrap_or_else(|e| panic!("{e}"));
    // Lower bounds only, which load cannot break: the connection stays
    // silent for the hang, and that silence comes after the head (a server
    // that held the head back until the end would close right after it).
    assert!(
        start.elapsed() >= hang,
        "the connection stays silent for the hang"
    );
    assert!(
        head_at.elapsed() >= hang / 2,
        "the head arrives before the stall, not with the close"
    );
    let response = parse_response(&rest);
    assert!(!response.complete);
    assert_eq!(response.chunks.len(), 1);
}

#[test]
fn dropping_the_server_ends_a_stall_forever() {
    let server = FakeServer::start(vec![Reply::stall_forever(
        sse::text_turn("never")[..1].to_vec(),
    )]);
    let mut stream = connect(&server);
    stream
        .write_all(&request_bytes(CHAT, "{}", ""))
        .unwrap_or_else(|e| panic!("{e}"));
    server.wait_for_requests(1, Duration::from_secs(5));
    // A stall that outlived the server would make this read time out.
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(server);
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .unwrap_or_else(|e| panic!("the stall outlived the server: {e}"));
    assert!(!parse_response(&bytes).complete);
}

#[test]
fn sse_split_delivers_bytes_in_pieces_that_cut_utf8() {
    // Small on purpose: one byte a write, 1 ms apart.
    let events = vec![sse::data(&json!({"t": "né✓"})), sse::done()];
    let server = FakeServer::start(vec![Reply::sse_split(&events, 1, Duration::from_millis(1))]);
    let mut stream = connect(&server);
    stream
        .write_all(&request_bytes(CHAT, "{}", "Connection: close\r\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut reads = 0;
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 65536];
    loop {
        let n = stream.read(&mut buffer).unwrap_or_else(|e| panic!("{e}"));
        if n == 0 {
            break;
        }
        reads += 1;
        bytes.extend_from_slice(&buffer[..n]);
    }
    assert!(reads > 10, "the body arrives in many reads, got {reads}");
    let response = parse_response(&bytes);
    assert_eq!(response.status, 200);
    assert_eq!(response.header("connection"), Some("close"));
    assert_eq!(response.text(), events.concat());
}

#[test]
fn malformed_event_is_sent_verbatim() {
    let server = FakeServer::start(vec![Reply::malformed_event()]);
    let data = post(&server, CHAT, "{}").data();
    assert!(serde_json::from_str::<Value>(&data[0]).is_err());
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn works_from_an_async_test_too() {
    let server = FakeServer::start(vec![Reply::sse(sse::text_turn("async"))]);
    let mut stream = tokio::net::TcpStream::connect(server.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(&request_bytes(CHAT, "{}", "Connection: close\r\n"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = Vec::new();
    stream
        .read_to_end(&mut bytes)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(parse_response(&bytes).complete);
    drop(server);
}

#[test]
fn fragments_never_cut_a_character() {
    assert_eq!(sse::fragments("hello", 4), ["hell", "o"]);
    assert_eq!(sse::fragments("", 4), Vec::<&str>::new());
    assert_eq!(sse::fragments("aé✓b", 3), ["aé", "✓", "b"]);
    assert_eq!(sse::fragments("aé✓b", 2), ["a", "é", "✓", "b"]);
}

#[test]
fn anthropic_turns_are_named_events() {
    let events = sse::anthropic_tool_use_turn(&[("toolu_1", "read_file", r#"{"path":"a"}"#)]);
    assert!(events[0].starts_with("event: message_start\ndata: "));
    assert!(
        events
            .last()
            .is_some_and(|e| e.starts_with("event: message_stop\n"))
    );
    let joined = events.concat();
    assert!(joined.contains(r#""stop_reason":"tool_use""#));
    assert!(
        sse::anthropic_text_turn("hi")
            .concat()
            .contains(r#""text":"hi""#)
    );
}
