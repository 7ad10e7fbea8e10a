//! One web request as `browse_url` makes it: GET, redirects followed by
//! hand, every hop admitted by a [`HopGate`] (the host rules and the
//! approval policy) before it is sent, every connection made only to the
//! addresses the [`FilteringResolver`] kept.
//!
//! Bounds: at most [`FetchLimits::max_hops`] redirects (a loop is named),
//! [`FetchLimits::total`] of network time across all hops (the time the
//! person takes to approve a host does not count), an idle limit between
//! two chunks of the body, and at most [`FetchLimits::max_read_bytes`]
//! read: a page cut by the size or a timeout is returned with the reason,
//! so a trickling server costs at most the total time. A body whose
//! content type is binary is never read.
//!
//! No cookies, no proxy from the environment, no credentials: the request
//! carries only a plain `User-Agent`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Url;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Target;
use super::resolve::FilteringResolver;

/// The `User-Agent` of every request.
pub const USER_AGENT: &str = concat!("fido/", env!("CARGO_PKG_VERSION"));

/// The bounds of one fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchLimits {
    pub connect: Duration,
    /// Network time of the whole fetch, every hop together.
    pub total: Duration,
    /// Longest wait for the next chunk of a body.
    pub idle: Duration,
    /// Bytes of body read at most; reading stops there.
    pub max_read_bytes: usize,
    /// Redirects followed at most.
    pub max_hops: usize,
}

impl Default for FetchLimits {
    fn default() -> Self {
        FetchLimits {
            connect: Duration::from_secs(10),
            total: Duration::from_secs(30),
            idle: Duration::from_secs(10),
            max_read_bytes: 2 * 1024 * 1024,
            max_hops: 10,
        }
    }
}

/// How a hop was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Listed in `network_allow`: it may be an IP address or resolve to a
    /// private one.
    Listed,
    /// Approved by the person: only public addresses.
    Approved,
}

/// Why a hop may not be fetched: one sentence for the model, written by
/// the gate (the browse tool's rules and the person's answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HopRefused(pub String);

pub type GateFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Reach, HopRefused>> + Send + 'a>>;

/// Decides whether a hop may be fetched; `Err` is the refusal, told to the
/// model. Called for the first URL and for every redirect.
pub trait HopGate: Send + Sync {
    fn admit<'a>(&'a self, target: &'a Target, url: &'a str) -> GateFuture<'a>;
}

/// What came back.
#[derive(Debug)]
pub struct Fetched {
    /// The URL after every redirect.
    pub url: Url,
    pub redirects: usize,
    pub status: reqwest::StatusCode,
    pub content_type: Option<String>,
    /// The length the server announced.
    pub content_length: Option<u64>,
    /// `None` when the content type is binary: nothing was read.
    pub body: Option<Body>,
}

#[derive(Debug)]
pub struct Body {
    pub bytes: Vec<u8>,
    /// Why reading stopped before the end, if it did.
    pub cut: Option<Cut>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The read limit, in bytes, was reached.
    Size(usize),
    /// The server sent nothing for this long.
    Idle(Duration),
    /// The fetch's total time ran out.
    Total(Duration),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FetchError {
    #[error("{0}")]
    BadUrl(String),
    #[error("{0}")]
    Refused(String),
    #[error("redirect loop: {0}")]
    Loop(String),
    #[error("more than {0} redirects; the last one pointed to {1}")]
    TooManyRedirects(usize, String),
    #[error("no answer from {host} within {} s", after.as_secs_f32())]
    Timeout { host: String, after: Duration },
    #[error("cancelled")]
    Cancelled,
    #[error("cannot fetch {url}: {message}")]
    Failed { url: String, message: String },
}

/// Fetches `url`, stopping at once when `cancel` fires.
pub async fn fetch(
    url: &str,
    gate: &dyn HopGate,
    limits: &FetchLimits,
    cancel: &CancellationToken,
) -> Result<Fetched, FetchError> {
    tokio::select! {
        _ = cancel.cancelled() => Err(FetchError::Cancelled),
        fetched = follow(url, gate, limits) => fetched,
    }
}

/// The hops, from `url` to the first answer that is not a redirect.
async fn follow(
    url: &str,
    gate: &dyn HopGate,
    limits: &FetchLimits,
) -> Result<Fetched, FetchError> {
    let mut url = checked_url(url)?;
    let mut chain = vec![url.clone()];
    let mut left = limits.total;
    loop {
        let target = target_of(&url)?;
        let reach = gate
            .admit(&target, url.as_str())
            .await
            .map_err(|refused| FetchError::Refused(refused.0))?;
        let started = Instant::now();
        let deadline = started + left;
        let response = send(&url, &target, reach, limits, deadline).await?;
        let Some(next) = redirect_of(&response, &url)? else {
            return read(response, url, chain.len() - 1, limits, deadline).await;
        };
        left = left.saturating_sub(started.elapsed());
        if chain.contains(&next) {
            let hops: Vec<&str> = chain.iter().map(Url::as_str).collect();
            return Err(FetchError::Loop(format!("{} -> {next}", hops.join(" -> "))));
        }
        if chain.len() > limits.max_hops {
            return Err(FetchError::TooManyRedirects(
                limits.max_hops,
                next.to_string(),
            ));
        }
        chain.push(next.clone());
        url = next;
    }
}

/// `text` as a URL Fido may fetch: http or https, a host, no credentials
/// (the fragment, which never goes on the wire, is dropped).
pub fn checked_url(text: &str) -> Result<Url, FetchError> {
    let bad = |why: String| Err(FetchError::BadUrl(why));
    let mut url = match Url::parse(text.trim()) {
        Ok(url) => url,
        Err(err) => {
            return bad(format!(
                "`{text}` is not a URL ({err}); give a full http(s):// URL"
            ));
        }
    };
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return bad(format!(
                "only http and https URLs can be browsed, not {other}:"
            ));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return bad(
            "a URL with credentials (user:password@) is refused; Fido never sends credentials"
                .into(),
        );
    }
    if url.host_str().is_none_or(str::is_empty) {
        return bad(format!("`{text}` has no host"));
    }
    url.set_fragment(None);
    Ok(url)
}

fn target_of(url: &Url) -> Result<Target, FetchError> {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => Ok(Target::new(host, port)),
        _ => Err(FetchError::BadUrl(format!("`{url}` has no host or port"))),
    }
}

/// Sends the request of one hop.
async fn send(
    url: &Url,
    target: &Target,
    reach: Reach,
    limits: &FetchLimits,
    deadline: Instant,
) -> Result<reqwest::Response, FetchError> {
    let refusal = Arc::new(Mutex::new(None));
    let failed = |message: String| FetchError::Failed {
        url: url.to_string(),
        message,
    };
    let client = client(reach, refusal.clone(), limits).map_err(|e| failed(e.to_string()))?;
    let request = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, ACCEPT)
        .send();
    match tokio::time::timeout_at(deadline, request).await {
        Ok(Ok(response)) => Ok(response),
        Ok(Err(err)) => match refusal.lock().ok().and_then(|slot| slot.clone()) {
            Some(refused) => Err(FetchError::Refused(refused)),
            None => Err(failed(error_chain(&err))),
        },
        Err(_) => Err(FetchError::Timeout {
            host: target.to_string(),
            after: limits.total,
        }),
    }
}

const ACCEPT: &str = "text/html, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5";

/// A client for one hop: no redirects, no proxy, no cookies, and names
/// resolved through the filter for `reach`.
fn client(
    reach: Reach,
    refusal: Arc<Mutex<Option<String>>>,
    limits: &FetchLimits,
) -> reqwest::Result<reqwest::Client> {
    let resolver = FilteringResolver {
        allow_private: reach == Reach::Listed,
        refusal,
    };
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(limits.connect)
        .user_agent(USER_AGENT)
        .dns_resolver(Arc::new(resolver))
        .build()
}

/// The next URL when `response` is a redirect with a `Location`.
fn redirect_of(response: &reqwest::Response, url: &Url) -> Result<Option<Url>, FetchError> {
    if !response.status().is_redirection() {
        return Ok(None);
    }
    let Some(location) = response.headers().get(reqwest::header::LOCATION) else {
        return Ok(None);
    };
    let refused = |why: String| {
        FetchError::Refused(format!("the redirect from {url} was not followed: {why}"))
    };
    let location = location
        .to_str()
        .map_err(|_| refused("its Location is not text".into()))?;
    let next = url
        .join(location)
        .map_err(|err| refused(format!("`{location}` is not a URL ({err})")))?;
    checked_url(next.as_str())
        .map(Some)
        .map_err(|err| refused(err.to_string()))
}

/// The final answer: its head, and its body unless it is binary.
async fn read(
    mut response: reqwest::Response,
    url: Url,
    redirects: usize,
    limits: &FetchLimits,
    deadline: Instant,
) -> Result<Fetched, FetchError> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let binary = content_type.as_deref().map(ContentKind::of) == Some(ContentKind::Binary);
    let body = if binary {
        None
    } else {
        Some(read_body(&mut response, &url, limits, deadline).await?)
    };
    Ok(Fetched {
        status: response.status(),
        content_length: response.content_length(),
        url,
        redirects,
        content_type,
        body,
    })
}

/// Reads the body chunk by chunk until its end, the read limit, the idle
/// limit or the deadline.
async fn read_body(
    response: &mut reqwest::Response,
    url: &Url,
    limits: &FetchLimits,
    deadline: Instant,
) -> Result<Body, FetchError> {
    let mut bytes = Vec::new();
    loop {
        let wait_until = deadline.min(Instant::now() + limits.idle);
        let chunk = match tokio::time::timeout_at(wait_until, response.chunk()).await {
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => return Ok(Body { bytes, cut: None }),
            Ok(Err(err)) => {
                return Err(FetchError::Failed {
                    url: url.to_string(),
                    message: format!(
                        "the body broke off after {} bytes: {}",
                        bytes.len(),
                        error_chain(&err)
                    ),
                });
            }
            Err(_) => {
                let cut = if Instant::now() >= deadline {
                    Cut::Total(limits.total)
                } else {
                    Cut::Idle(limits.idle)
                };
                return Ok(Body {
                    bytes,
                    cut: Some(cut),
                });
            }
        };
        let room = limits.max_read_bytes - bytes.len();
        if chunk.len() >= room {
            bytes.extend_from_slice(&chunk[..room]);
            let cut = Cut::Size(limits.max_read_bytes);
            return Ok(Body {
                bytes,
                cut: Some(cut),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
}

/// An error and its causes, one sentence.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What a content type holds, as far as reading it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    Html,
    /// Text of any other kind: plain, JSON, XML, source code.
    Text,
    Binary,
}

impl ContentKind {
    /// The kind of a `Content-Type` value (parameters such as the charset
    /// are ignored).
    pub fn of(content_type: &str) -> ContentKind {
        let essence = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        let (kind, subtype) = essence.split_once('/').unwrap_or((essence.as_str(), ""));
        match (kind, subtype) {
            ("text", "html") | ("application", "xhtml+xml") => ContentKind::Html,
            ("text", _) => ContentKind::Text,
            ("application", subtype) if is_text_application(subtype) => ContentKind::Text,
            _ => ContentKind::Binary,
        }
    }
}

/// `application/…` types that are text.
fn is_text_application(subtype: &str) -> bool {
    const TEXT: &[&str] = &[
        "json",
        "xml",
        "javascript",
        "ecmascript",
        "x-javascript",
        "x-sh",
        "x-shellscript",
        "yaml",
        "x-yaml",
        "toml",
        "x-toml",
        "sql",
        "graphql",
        "csv",
        "x-www-form-urlencoded",
        "x-ndjson",
        "markdown",
    ];
    TEXT.contains(&subtype) || subtype.ends_with("+json") || subtype.ends_with("+xml")
}

#[cfg(test)]
#[path = "fetch_tests.rs"]
mod tests;
