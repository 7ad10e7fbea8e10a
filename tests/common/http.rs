//! The HTTP/1.1 wire of the fake server: reading requests (with a
//! `Content-Length` or chunked body) and writing each [`Reply`] variant.
//!
//! A private child of `server.rs` (declared there with `#[path]`, so it
//! resolves the same from the tests and from `benches/exec.rs`).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{RecordedRequest, Reply};

/// Largest request head accepted; a client sending more is cut off.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Reads one request; `None` when the client closed the connection or sent
/// something that is not HTTP/1.1. Bytes after the request stay in `buffer`.
pub(super) async fn read_request(
    stream: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> Option<RecordedRequest> {
    let head_len = loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            break at + 4;
        }
        if buffer.len() > MAX_HEAD_BYTES || !read_more(stream, buffer).await {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_len]).into_owned();
    buffer.drain(..head_len);

    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };

    let raw_body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        read_chunked_body(stream, buffer).await?
    } else {
        let length = header("content-length").map_or(Some(0), |v| v.parse::<usize>().ok())?;
        read_exact(stream, buffer, length).await?
    };
    Some(RecordedRequest::new(method, path, headers, raw_body))
}

async fn read_chunked_body(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let size_line = read_line(stream, buffer).await?;
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).ok()?;
        if size == 0 {
            // Trailers, if any, end with an empty line.
            while !read_line(stream, buffer).await?.is_empty() {}
            return Some(body);
        }
        body.extend(read_exact(stream, buffer, size).await?);
        read_line(stream, buffer).await?;
    }
}

async fn read_line(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(at) = find(buffer, b"\r\n") {
            let line = String::from_utf8_lossy(&buffer[..at]).into_owned();
            buffer.drain(..at + 2);
            return Some(line);
        }
        if buffer.len() > MAX_HEAD_BYTES || !read_more(stream, buffer).await {
            return None;
        }
    }
}

async fn read_exact(stream: &mut TcpStream, buffer: &mut Vec<u8>, len: usize) -> Option<Vec<u8>> {
    while buffer.len() < len {
        if !read_more(stream, buffer).await {
            return None;
        }
    }
    Some(buffer.drain(..len).collect())
}

/// Appends what the socket has; false on end of stream or error.
async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

const SSE_HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                          Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Writes the reply; `Ok(true)` when the connection may serve another request.
pub(super) async fn write_reply(stream: &mut TcpStream, reply: Reply) -> std::io::Result<bool> {
    match reply {
        Reply::Sse { events, delay } => {
            write_events(stream, &events, delay).await?;
            send(stream, b"0\r\n\r\n").await?;
            Ok(true)
        }
        Reply::Error {
            status,
            headers,
            body,
        } => {
            let content_type = if body.trim_start().starts_with('{') {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n",
                reason_phrase(status),
                body.len()
            );
            for (name, value) in &headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            head.push_str(&body);
            send(stream, head.as_bytes()).await?;
            Ok(true)
        }
        Reply::Stall { events, hang } => {
            write_events(stream, &events, Duration::ZERO).await?;
            match hang {
                Some(hang) => tokio::time::sleep(hang).await,
                None => wait_for_client_to_leave(stream).await,
            }
            Ok(false)
        }
        Reply::Disconnect { events } => {
            write_events(stream, &events, Duration::ZERO).await?;
            Ok(false)
        }
        Reply::Raw { chunks, delay } => {
            for (i, chunk) in chunks.iter().enumerate() {
                if i > 0 && !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                send(stream, chunk).await?;
            }
            Ok(false)
        }
    }
}

/// The SSE response head, then each event as one chunk.
async fn write_events(
    stream: &mut TcpStream,
    events: &[String],
    delay: Duration,
) -> std::io::Result<()> {
    send(stream, SSE_HEAD).await?;
    for (i, event) in events.iter().enumerate() {
        if i > 0 && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut chunk = format!("{:x}\r\n", event.len()).into_bytes();
        chunk.extend_from_slice(event.as_bytes());
        chunk.extend_from_slice(b"\r\n");
        send(stream, &chunk).await?;
    }
    Ok(())
}

async fn send(stream: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Reads and discards until the client closes its side (or the server is dropped).
async fn wait_for_client_to_leave(stream: &mut TcpStream) {
    let mut sink = [0u8; 1024];
    while let Ok(n) = stream.read(&mut sink).await {
        if n == 0 {
            return;
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Unknown",
    }
}
