//! An MCP `tools/call` result as the text of a tool result: text blocks as
//! they are, every other block described in one line (the model gets no
//! base64), structured content as JSON when there is no text, and the
//! whole capped like other tools' output (head and tail kept).

use serde_json::Value;

/// The text of one call's result, cut to `cap` bytes.
pub fn result_text(result: &Value, cap: usize) -> String {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut parts: Vec<String> = blocks.iter().map(describe_block).collect();
    if parts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        parts.push(structured.to_string());
    }
    let text = if parts.is_empty() {
        "(the tool returned no content)".to_string()
    } else {
        parts.join("\n")
    };
    cap_text(&text, cap)
}

/// Whether the server flagged the result as an error.
pub fn is_error(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

fn describe_block(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => media(field("type"), field("mimeType"), field("data")),
        "resource" => embedded_resource(block.get("resource").unwrap_or(&Value::Null)),
        "resource_link" => format!("[resource link: {}]", field("uri")),
        other => format!(
            "[{} content]",
            if other.is_empty() { "unknown" } else { other }
        ),
    }
}

fn media(kind: &str, mime: &str, base64: &str) -> String {
    let mime = if mime.is_empty() { kind } else { mime };
    format!("[{mime}, {} bytes]", decoded_len(base64))
}

fn embedded_resource(resource: &Value) -> String {
    let field = |name: &str| resource.get(name).and_then(Value::as_str);
    let uri = field("uri").unwrap_or("");
    match (field("text"), field("blob")) {
        (Some(text), _) => format!("[resource {uri}]\n{text}"),
        (None, Some(blob)) => {
            let mime = field("mimeType").unwrap_or("binary");
            format!("[resource {uri}: {mime}, {} bytes]", decoded_len(blob))
        }
        (None, None) => format!("[resource {uri}]"),
    }
}

/// Bytes that `base64` decodes to.
fn decoded_len(base64: &str) -> usize {
    let digits = base64.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = base64.bytes().rev().take_while(|&b| b == b'=').count();
    (digits * 3 / 4).saturating_sub(padding)
}

/// `text` within `cap` bytes: the head and the tail, the middle elided,
/// cut on character boundaries.
pub fn cap_text(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let head_end = floor_boundary(text, cap / 2);
    let tail_start = ceil_boundary(text, text.len() - (cap - cap / 2));
    format!(
        "{}\n[… {} bytes of output elided …]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_kept_and_other_blocks_are_described() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "aGVsbG8gd29ybGQ="},
            {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///b", "mimeType": "application/pdf", "blob": "AAAAAA=="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "hologram"}
        ]});
        assert_eq!(
            result_text(&result, 10_000),
            "hello\n[image/png, 11 bytes]\n[audio/wav, 3 bytes]\n[resource file:///a]\nbody\n[resource file:///b: application/pdf, 4 bytes]\n[resource link: file:///c]\n[hologram content]"
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_text() {
        let result = json!({"content": [], "structuredContent": {"a": 1}});
        assert_eq!(result_text(&result, 100), "{\"a\":1}");
        assert_eq!(
            result_text(&json!({}), 100),
            "(the tool returned no content)"
        );
        assert!(is_error(&json!({"isError": true})));
        assert!(!is_error(&json!({"content": []})));
    }

    #[test]
    fn long_results_keep_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(100);
        let capped = cap_text(&text, 21);
        // 10 bytes of head, 11 of tail rounded up to a boundary: 5 and 5.
        assert_eq!(capped, "ééééé\n[… 180 bytes of output elided …]\nééééé");
        assert!(capped.contains("bytes of output elided"));
        assert_eq!(cap_text("short", 21), "short");
    }
}
