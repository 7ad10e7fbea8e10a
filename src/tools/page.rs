//! What the model reads of a fetched page (`browse_url`'s result): a head
//! (final URL, status, content type, redirects), then HTML converted to
//! Markdown (scripts, styles and other non-content dropped) or other text
//! as it is, cut at the call's `max_bytes` with a note. Binary content is
//! refused, naming its type and size.

use std::borrow::Cow;

use super::ToolOutput;
use crate::net::fetch::{ContentKind, Cut, Fetched};

/// The most `max_bytes` may ask for.
pub const HARD_MAX_BYTES: usize = 400_000;
/// How much of a body without a content type is checked for NUL bytes.
const SNIFF_BYTES: usize = 8 * 1024;

/// What the model reads of `fetched`, at most `max_bytes` of body text.
pub async fn render(fetched: Fetched, max_bytes: usize) -> ToolOutput {
    let head = head(&fetched);
    let Some(body) = fetched.body else {
        return binary(
            &fetched.url,
            fetched.content_type.as_deref(),
            fetched.content_length,
        );
    };
    let declared = fetched.content_type.as_deref().map(ContentKind::of);
    let kind = match declared {
        Some(kind) => kind,
        None => sniff(&body.bytes),
    };
    let text = match kind {
        ContentKind::Binary => {
            return binary(&fetched.url, None, Some(body.bytes.len() as u64));
        }
        ContentKind::Text => String::from_utf8_lossy(&body.bytes).into_owned(),
        ContentKind::Html => {
            let html = String::from_utf8_lossy(&body.bytes).into_owned();
            match super::html::readable(html).await {
                Ok(text) => text,
                Err(err) => {
                    return ToolOutput::error(format!(
                        "cannot read the HTML of {}: {err}",
                        fetched.url
                    ));
                }
            }
        }
    };
    let text = crate::text::sanitize(&text, false);
    let mut content = format!("{head}\n\n{}", capped(&text, max_bytes));
    if let Some(cut) = body.cut {
        content.push_str(&format!("\n\n[{}]", cut_note(cut)));
    }
    let failed = fetched.status.is_client_error() || fetched.status.is_server_error();
    ToolOutput {
        ok: !failed,
        content,
        details: None,
        plan: None,
        facts: None,
    }
}

fn head(fetched: &Fetched) -> String {
    let mut head = format!("URL: {}\nStatus: {}", fetched.url, fetched.status);
    if let Some(content_type) = &fetched.content_type {
        head.push_str(&format!(
            "\nContent-Type: {}",
            crate::text::summary(content_type, 200)
        ));
    }
    if fetched.redirects > 0 {
        head.push_str(&format!("\nRedirects: {}", fetched.redirects));
    }
    head
}

fn binary(url: &reqwest::Url, content_type: Option<&str>, size: Option<u64>) -> ToolOutput {
    let what = match content_type {
        Some(content_type) => format!("content type {}", crate::text::summary(content_type, 200)),
        None => "no content type, and its first bytes are binary".into(),
    };
    let size = match size {
        Some(bytes) => crate::text::counted(bytes, "byte"),
        None => "size not given".into(),
    };
    ToolOutput::error(format!(
        "{url} is binary ({what}, {size}); browse_url returns text only, so it was not downloaded"
    ))
}

/// The kind of a body whose server named no content type.
fn sniff(bytes: &[u8]) -> ContentKind {
    let start = &bytes[..bytes.len().min(SNIFF_BYTES)];
    if start.contains(&0) {
        return ContentKind::Binary;
    }
    let opening = String::from_utf8_lossy(&start[..start.len().min(512)]).to_ascii_lowercase();
    let opening = opening.trim_start();
    if opening.starts_with("<!doctype html") || opening.starts_with("<html") {
        ContentKind::Html
    } else {
        ContentKind::Text
    }
}

/// `text` cut to at most `max_bytes` on a character boundary, with a note
/// when it was cut.
fn capped(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}\n\n[cut: showing {end} of {} bytes of text; call again with a larger max_bytes (at most {HARD_MAX_BYTES}) to see more]",
        &text[..end],
        text.len()
    ))
}

fn cut_note(cut: Cut) -> String {
    match cut {
        Cut::Size(bytes) => format!(
            "cut: the page is larger than {} KB; only that much was read",
            bytes / 1024
        ),
        Cut::Idle(after) => format!(
            "cut: the server sent nothing for {} s, so this is only what arrived before",
            after.as_secs_f32()
        ),
        Cut::Total(after) => format!(
            "cut: the fetch ran out of its {} s, so this is only what arrived in time",
            after.as_secs_f32()
        ),
    }
}
