//! The little of HTTP/1 the proxy speaks: a client's request head, read
//! and parsed into a tunnel or a forwarded request, and the proxy's own
//! short answers.

use std::net::IpAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::net::Target;

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect { target: Target },
    /// A plain HTTP request in absolute form.
    Forward {
        target: Target,
        /// The URL as the client gave it (for the approval prompt).
        url: String,
        /// The head to send the origin: origin form, hop-by-hop headers
        /// dropped, `Connection: close`.
        head: Vec<u8>,
    },
}

impl Request {
    pub fn target(&self) -> &Target {
        match self {
            Request::Connect { target } | Request::Forward { target, .. } => target,
        }
    }

    /// The URL shown when the person is asked about the host.
    pub fn url(&self) -> String {
        match self {
            Request::Connect { target } if target.port == 443 => format!("https://{target}/"),
            Request::Connect { target } => format!("{target} (a tunnel)"),
            Request::Forward { url, .. } => url.clone(),
        }
    }
}

/// A request the proxy answers itself, with this status and reason.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub status: u16,
    pub text: String,
}

impl Refusal {
    pub fn new(status: u16, text: impl Into<String>) -> Refusal {
        Refusal {
            status,
            text: text.into(),
        }
    }

    fn bad(text: impl Into<String>) -> Refusal {
        Refusal::new(400, text)
    }
}

/// How reading a head ended, when it did not end in a head.
#[derive(Debug)]
pub(super) enum HeadError {
    /// The client closed or broke the connection first.
    Closed,
    /// More than the limit without the end of a head.
    TooLarge,
}

/// The request head (through the blank line) and whatever followed it in
/// the same reads (the start of a body, or of a tunnel's first bytes).
pub(super) async fn read_head<C: AsyncRead + Unpin>(
    client: &mut C,
    max: usize,
) -> Result<(Vec<u8>, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let searched_to = buf.len().saturating_sub(3);
        let n = match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadError::Closed),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = find(&buf[searched_to..], b"\r\n\r\n") {
            let end = searched_to + at + 4;
            if end > max {
                return Err(HeadError::TooLarge);
            }
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > max {
            return Err(HeadError::TooLarge);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The request a head asks for.
pub(super) fn parse(head: &[u8]) -> Result<Request, Refusal> {
    let text =
        std::str::from_utf8(head).map_err(|_| Refusal::bad("the request head is not text"))?;
    let mut lines = text.trim_end_matches("\r\n").split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(uri), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::bad(format!(
            "`{request_line}` is not a request line"
        )));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Refusal::bad(format!("{version} is not HTTP/1")));
    }
    let headers = headers(lines)?;
    if method.eq_ignore_ascii_case("CONNECT") {
        return Ok(Request::Connect {
            target: authority(uri)?,
        });
    }
    forward(method, uri, version, &headers)
}

/// The header lines as name and value.
fn headers<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Vec<(&'a str, &'a str)>, Refusal> {
    lines
        .map(|line| match line.split_once(':') {
            Some((name, value)) if !name.is_empty() && !name.contains([' ', '\t']) => {
                Ok((name, value.trim()))
            }
            _ => Err(Refusal::bad(format!("`{line}` is not a header line"))),
        })
        .collect()
}

/// `host:port` of a CONNECT (an IPv6 address in brackets).
fn authority(text: &str) -> Result<Target, Refusal> {
    let bad = || Refusal::bad(format!("CONNECT needs host:port, not `{text}`"));
    let (host, port) = match text.strip_prefix('[') {
        Some(rest) => rest.split_once("]:").ok_or_else(bad)?,
        None => text.rsplit_once(':').ok_or_else(bad)?,
    };
    let port = match port.parse::<u16>() {
        Ok(port) if port > 0 => port,
        _ => return Err(bad()),
    };
    let valid = host.parse::<IpAddr>().is_ok()
        || (!host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
    if !valid {
        return Err(bad());
    }
    Ok(Target::new(host, port))
}

/// Headers that concern one connection only, never forwarded. The body's
/// own framing (`Content-Length`, `Transfer-Encoding`) is kept: the body
/// is relayed byte for byte.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// A plain request in absolute form, made into the origin's head.
fn forward(
    method: &str,
    uri: &str,
    version: &str,
    headers: &[(&str, &str)],
) -> Result<Request, Refusal> {
    let Some(after_scheme) = strip_prefix_ignore_case(uri, "http://") else {
        return Err(Refusal::bad(format!(
            "`{uri}` is not an absolute http:// URL (use CONNECT for https)"
        )));
    };
    let url = reqwest::Url::parse(uri).map_err(|err| Refusal::bad(format!("`{uri}`: {err}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refusal::bad("a URL with credentials is refused"));
    }
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Err(Refusal::bad(format!("`{uri}` has no host")));
    };
    let path_at = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
    let path = match &after_scheme[path_at..] {
        "" => "/".to_string(),
        query if query.starts_with('?') => format!("/{query}"),
        path => path.to_string(),
    };
    let host_header = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let mut head = format!("{method} {path} {version}\r\nHost: {host_header}\r\n");
    for (name, value) in headers {
        if !dropped(name, headers) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    Ok(Request::Forward {
        target: Target::new(host, port),
        url: url.to_string(),
        head: head.into_bytes(),
    })
}

/// Whether header `name` stays with this hop: a hop-by-hop header, one
/// that `Connection` names, or `Host` (written from the URL).
fn dropped(name: &str, headers: &[(&str, &str)]) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower == "host" || HOP_BY_HOP.contains(&lower.as_str()) {
        return true;
    }
    headers
        .iter()
        .filter(|(header, _)| header.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .any(|listed| listed.trim().eq_ignore_ascii_case(&lower))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Writes the proxy's own answer and closes the connection.
pub(super) async fn answer<C: AsyncWrite + Unpin>(client: &mut C, refusal: &Refusal) {
    let body = format!("{}\n", refusal.text);
    let response = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        refusal.status,
        reason(refusal.status),
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// The answer that opens a tunnel.
pub(super) const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarded_head(request: &str) -> String {
        match parse(request.as_bytes()).unwrap() {
            Request::Forward { head, .. } => String::from_utf8(head).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_absolute_request_goes_to_the_origin_in_origin_form_without_hop_headers() {
        let head = forwarded_head(
            "GET http://Example.com:8080/a/b?c=1 HTTP/1.1\r\nHost: example.com:8080\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nAccept: */*\r\n\r\n",
        );
        assert_eq!(
            head,
            "GET /a/b?c=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let head = forwarded_head("GET http://example.com?q HTTP/1.0\r\n\r\n");
        assert!(
            head.starts_with("GET /?q HTTP/1.0\r\nHost: example.com\r\n"),
            "{head}"
        );
    }

    #[test]
    fn connect_names_host_and_port() {
        let request = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(request.target(), &Target::new("::1", 8443));
        let request = parse(b"CONNECT Example.com:443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(request.target(), &Target::new("example.com", 443));
        assert_eq!(request.url(), "https://example.com:443/");
    }

    #[test]
    fn malformed_heads_are_refused_with_400() {
        for head in [
            "CONNECT example.com HTTP/1.1\r\n\r\n",
            "CONNECT example.com:0 HTTP/1.1\r\n\r\n",
            "CONNECT a/b:443 HTTP/1.1\r\n\r\n",
            "GET /relative HTTP/1.1\r\n\r\n",
            "GET https://example.com/ HTTP/1.1\r\n\r\n",
            "GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n",
            "GET http://example.com/ HTTP/2\r\n\r\n",
            "GET http://example.com/ HTTP/1.1\r\nno colon\r\n\r\n",
            "GET\r\n\r\n",
        ] {
            let refusal = parse(head.as_bytes()).unwrap_err();
            assert_eq!(refusal.status, 400, "{head:?}");
        }
    }

    #[tokio::test]
    async fn a_head_is_split_from_what_follows_and_bounded() {
        let (mut client, mut server) = tokio::io::duplex(1 << 16);
        client
            .write_all(b"CONNECT a:1 HTTP/1.1\r\n\r\nhello")
            .await
            .unwrap();
        let (head, rest) = read_head(&mut server, 1024).await.unwrap();
        assert_eq!(head, b"CONNECT a:1 HTTP/1.1\r\n\r\n");
        assert_eq!(rest, b"hello");
        client.write_all(&[b'x'; 2048]).await.unwrap();
        assert!(matches!(
            read_head(&mut server, 1024).await,
            Err(HeadError::TooLarge)
        ));
        drop(client);
        assert!(matches!(
            read_head(&mut server, 1024).await,
            Err(HeadError::Closed)
        ));
    }
}
