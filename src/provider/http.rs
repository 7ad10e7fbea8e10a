//! One HTTP attempt of a streaming provider: send the body, map the status,
//! read the event stream with timeouts. Shared by the OpenAI and Anthropic
//! providers; the retry loop around it lives in [`super::retry`].
//!
//! Invariants:
//! - The whole attempt, from send to the last byte, is bounded by
//!   [`HttpPolicy::request_timeout`] ([`ProviderError::RequestTimeout`]).
//! - Once the response headers are in, every body chunk is awaited at most
//!   [`HttpPolicy::idle_timeout`] ([`ProviderError::IdleTimeout`]). The wait
//!   for the headers is bounded by the request timeout only: a local server may
//!   legitimately think for minutes over a long prompt before answering.
//! - Error bodies are never returned whole: at most [`EXCERPT_CHARS`]
//!   characters, preferring the API's own `error.message`.
//! - Reading stops as soon as the handler has seen the end of the answer, so a
//!   server that keeps the connection open afterwards costs nothing.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};

use super::sse::{DEFAULT_EVENT_LIMIT, SseDecoder, SseEvent};
use super::{HttpPolicy, ProviderError};

/// Longest error-body excerpt kept in a [`ProviderError`].
pub(crate) const EXCERPT_CHARS: usize = 300;

/// Largest error body read to make the excerpt.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// Consumes one response. Implemented once, by the streaming skeleton
/// around a codec's pure stream accumulator.
pub(crate) trait StreamHandler {
    /// One SSE event. Returns `true` once the answer is complete, after which
    /// no more of the body is read.
    fn event(&mut self, event: SseEvent) -> Result<bool, ProviderError>;
    /// A successful reply that is plain JSON instead of an event stream (a
    /// server that ignored `"stream": true`, or a proxy reporting an error).
    fn json_body(&mut self, body: &[u8]) -> Result<(), ProviderError>;
}

/// The client every request of one provider goes through. Reqwest defaults
/// otherwise (including its proxy handling from the environment); only the
/// connect timeout is set, to min(10 s, request timeout).
pub(crate) fn build_client(policy: &HttpPolicy) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(policy.request_timeout.min(Duration::from_secs(10)))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Joins a base URL and a path, without doubling the slash.
pub(crate) fn join_url(base_url: &str, path: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), path)
}

/// Refuses a URL reqwest could not send to, with a sentence that names it.
pub(crate) fn check_url(url: &str) -> Result<(), ProviderError> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => Ok(()),
        Ok(_) => Err(ProviderError::Config(format!(
            "the model server URL must be http:// or https://, got {url}"
        ))),
        Err(e) => Err(ProviderError::Config(format!(
            "the model server URL {url} is not valid: {e}"
        ))),
    }
}

/// Serialises a request body (keys in insertion order).
pub(crate) fn to_bytes(body: &serde_json::Value) -> Result<Vec<u8>, ProviderError> {
    serde_json::to_vec(body)
        .map_err(|e| ProviderError::Config(format!("cannot serialise the request: {e}")))
}

/// One attempt: POST `body` to `url` and feed the reply to `handler`.
pub(crate) async fn post_stream(
    client: &reqwest::Client,
    policy: &HttpPolicy,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
    handler: &mut (dyn StreamHandler + Send),
) -> Result<(), ProviderError> {
    let attempt = async {
        let response = client
            .post(url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|source| ProviderError::Connect {
                url: url.to_owned(),
                source,
            })?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now()));
            // A body that cannot be read still leaves the status to report.
            let body = read_body(response, policy, ERROR_BODY_LIMIT)
                .await
                .unwrap_or_default();
            return Err(status_error(status, retry_after, &body));
        }
        let is_json = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        if is_json {
            let body = read_body(response, policy, DEFAULT_EVENT_LIMIT).await?;
            return handler.json_body(&body);
        }
        read_events(response, policy, handler).await
    };
    tokio::time::timeout(policy.request_timeout, attempt)
        .await
        .map_err(|_| ProviderError::RequestTimeout {
            after: policy.request_timeout,
        })?
}

async fn read_events(
    response: reqwest::Response,
    policy: &HttpPolicy,
    handler: &mut (dyn StreamHandler + Send),
) -> Result<(), ProviderError> {
    let mut stream = response.bytes_stream();
    let mut decoder = SseDecoder::default();
    loop {
        let next = tokio::time::timeout(policy.idle_timeout, stream.next())
            .await
            .map_err(|_| ProviderError::IdleTimeout {
                after: policy.idle_timeout,
            })?;
        let ended = next.is_none();
        let events = match next {
            None => decoder.finish(),
            Some(Err(source)) => return Err(ProviderError::StreamInterrupted { source }),
            Some(Ok(chunk)) => decoder.feed(&chunk),
        }
        .map_err(|e| ProviderError::MalformedStream {
            detail: e.to_string(),
        })?;
        for event in events {
            if handler.event(event)? {
                return Ok(());
            }
        }
        if ended {
            return Ok(());
        }
    }
}

/// Reads a whole body, chunk by chunk under the idle timeout, keeping at
/// most `limit` bytes (the rest is dropped, not an error).
async fn read_body(
    response: reqwest::Response,
    policy: &HttpPolicy,
    limit: usize,
) -> Result<Vec<u8>, ProviderError> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    loop {
        let next = tokio::time::timeout(policy.idle_timeout, stream.next())
            .await
            .map_err(|_| ProviderError::IdleTimeout {
                after: policy.idle_timeout,
            })?;
        match next {
            None => return Ok(body),
            Some(Err(source)) => return Err(ProviderError::StreamInterrupted { source }),
            Some(Ok(chunk)) => {
                let room = limit.saturating_sub(body.len());
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if body.len() >= limit {
                    return Ok(body);
                }
            }
        }
    }
}

/// Maps a non-success status to its error: 401/403 credentials, 429 rate
/// limit, 408 and 5xx server trouble (worth a retry), any other refusal.
pub(crate) fn status_error(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> ProviderError {
    let code = status.as_u16();
    let raw = String::from_utf8_lossy(body);
    if let Some(overflow) = super::limits::overflow_in(&raw).filter(|_| code < 500) {
        return ProviderError::ContextOverflow {
            status: code,
            body: excerpt(body),
            n_ctx: overflow.n_ctx,
        };
    }
    if let Some(field) = super::limits::malformed_request_field(code, &raw) {
        return ProviderError::MalformedRequest {
            status: code,
            body: excerpt(body),
            field,
        };
    }
    let body = excerpt(body);
    match code {
        401 | 403 => ProviderError::Unauthorized { status: code, body },
        429 => ProviderError::RateLimited { retry_after, body },
        408 | 500..=599 => ProviderError::Server { status: code, body },
        _ => ProviderError::BadRequest { status: code, body },
    }
}

/// A short, single-line excerpt of an error body: the API's
/// `error.message` (or `message`, or a string `error`) when the body is JSON
/// that has one, else the text itself; whitespace collapsed, cut at
/// [`EXCERPT_CHARS`] characters.
pub(crate) fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| api_error_message(&v));
    let text = message.as_deref().unwrap_or(&text);
    shorten(text)
}

/// Collapses whitespace and control characters and cuts at [`EXCERPT_CHARS`].
pub(crate) fn shorten(text: &str) -> String {
    let mut out = String::new();
    for (i, word) in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => {
            out.truncate(cut);
            out.push('…');
            out
        }
        None => out,
    }
}

/// The human part of an API error object, in the shapes OpenAI-compatible
/// servers and Anthropic use: `{"error": {"message"}}`, `{"error": "…"}`,
/// `{"message"}`.
pub(crate) fn api_error_message(value: &serde_json::Value) -> Option<String> {
    let error = value.get("error").unwrap_or(value);
    if let Some(text) = error.as_str() {
        return Some(text.to_owned());
    }
    let message = error.get("message").and_then(|m| m.as_str())?;
    match error.get("type").and_then(|t| t.as_str()) {
        Some(kind) if !kind.is_empty() => Some(format!("{kind}: {message}")),
        _ => Some(message.to_owned()),
    }
}

/// `Retry-After` as seconds (`120`, also `1.5`) or an HTTP date, relative to
/// `now`; a date in the past means no wait.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 2 ", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn status_mapping() {
        let e = |s: u16| status_error(StatusCode::from_u16(s).unwrap(), None, b"x");
        assert!(matches!(
            e(401),
            ProviderError::Unauthorized { status: 401, .. }
        ));
        assert!(matches!(
            e(403),
            ProviderError::Unauthorized { status: 403, .. }
        ));
        assert!(matches!(
            e(400),
            ProviderError::BadRequest { status: 400, .. }
        ));
        assert!(matches!(
            e(404),
            ProviderError::BadRequest { status: 404, .. }
        ));
        assert!(matches!(
            e(422),
            ProviderError::BadRequest { status: 422, .. }
        ));
        assert!(matches!(e(429), ProviderError::RateLimited { .. }));
        assert!(matches!(e(500), ProviderError::Server { status: 500, .. }));
        assert!(matches!(e(529), ProviderError::Server { status: 529, .. }));
        assert!(!e(400).is_retryable());
        assert!(e(503).is_retryable());
    }

    #[test]
    fn excerpts_are_short_and_prefer_the_api_message() {
        let long = "x".repeat(5000);
        let e = excerpt(long.as_bytes());
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(
            excerpt(br#"{"error": {"message": "bad key", "type": "auth"}}"#),
            "auth: bad key"
        );
        assert_eq!(excerpt(br#"{"error": "nope"}"#), "nope");
        assert_eq!(
            excerpt(b"line one\n\n  line\ttwo\x1b[31m"),
            "line one line two [31m"
        );
        let multi = "é".repeat(400);
        assert_eq!(excerpt(multi.as_bytes()).chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn urls_join_without_double_slash() {
        assert_eq!(
            join_url("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(join_url("http://h", "/v1/messages"), "http://h/v1/messages");
    }
}

/// A scripted HTTP/1.1 server on 127.0.0.1 for provider tests: it answers
/// connections in order with canned replies and records each request.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod test_server {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// One canned reply: byte pieces written with a pause before each, then
    /// the connection is closed, or held open silently when `hold_open`.
    #[derive(Debug, Clone)]
    pub(crate) struct Reply {
        pub parts: Vec<(Duration, Vec<u8>)>,
        pub hold_open: bool,
    }

    impl Reply {
        /// A 200 event stream with this body, closed at the end.
        pub(crate) fn sse(body: &str) -> Self {
            Reply {
                parts: vec![
                    (Duration::ZERO, sse_head().into_bytes()),
                    (Duration::ZERO, body.as_bytes().to_vec()),
                ],
                hold_open: false,
            }
        }

        /// A complete reply with a status, extra header lines and a body.
        pub(crate) fn status(status: u16, headers: &str, body: &str) -> Self {
            let text = format!(
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                body.len()
            );
            Reply {
                parts: vec![(Duration::ZERO, text.into_bytes())],
                hold_open: false,
            }
        }
    }

    pub(crate) fn sse_head() -> String {
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_owned()
    }

    /// What the server received: the request head (lowercased) and the body.
    #[derive(Debug, Clone)]
    pub(crate) struct Recorded {
        pub head: String,
        pub body: Vec<u8>,
    }

    pub(crate) struct TestServer {
        pub url: String,
        pub requests: Arc<Mutex<Vec<Recorded>>>,
    }

    impl TestServer {
        pub(crate) async fn start(replies: Vec<Reply>) -> TestServer {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let requests = Arc::new(Mutex::new(Vec::new()));
            let recorded = Arc::clone(&requests);
            tokio::spawn(async move {
                for reply in replies {
                    let Ok((mut socket, _)) = listener.accept().await else {
                        return;
                    };
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let head_end = loop {
                        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break p + 4;
                        }
                        let n = socket.read(&mut chunk).await.unwrap();
                        assert!(n > 0, "client closed before sending a request");
                        buf.extend_from_slice(&chunk[..n]);
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                    while buf.len() < head_end + length {
                        let n = socket.read(&mut chunk).await.unwrap();
                        assert!(n > 0, "client closed in the middle of the body");
                        buf.extend_from_slice(&chunk[..n]);
                    }
                    recorded.lock().unwrap().push(Recorded {
                        head,
                        body: buf[head_end..head_end + length].to_vec(),
                    });
                    for (pause, bytes) in reply.parts {
                        tokio::time::sleep(pause).await;
                        if socket.write_all(&bytes).await.is_err() {
                            break;
                        }
                        let _ = socket.flush().await;
                    }
                    if reply.hold_open {
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                            drop(socket);
                        });
                    }
                }
            });
            TestServer { url, requests }
        }

        pub(crate) fn requests(&self) -> Vec<Recorded> {
            self.requests.lock().unwrap().clone()
        }
    }
}
