//! What a server says about its limits: the context window it serves
//! (llama.cpp `/props`, `/v1/models` metadata, Ollama `/api/show`, known
//! hosted defaults), and how to read its refusals — a request too large for
//! the window, or a request the server could not parse.
//!
//! Everything here is pure text and JSON handling except [`discover`], which
//! makes at most three short GET/POST requests to a local server; a server
//! that answers none of them simply leaves the window unknown.

use std::time::Duration;

use serde_json::{Value, json};

/// The longest answer a request asks for when the configuration names no
/// `max_output_tokens`.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

/// How long each discovery request may take: a local server answers in
/// milliseconds, and a missing endpoint must not delay the first turn.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(3);

/// Ollama's own default `num_ctx` when a model file sets none: what it
/// actually serves, whatever the model was trained for.
const OLLAMA_DEFAULT_NUM_CTX: u32 = 4096;

/// The window of well-known hosted models, by name prefix (longest first
/// where prefixes overlap).
const KNOWN_WINDOWS: &[(&str, u32)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-5", 400_000),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
];

/// The context window of a hosted model known by name, if any.
pub fn known_window(model: &str) -> Option<u32> {
    let model = model.to_ascii_lowercase();
    KNOWN_WINDOWS
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map(|(_, window)| *window)
}

/// Asks an OpenAI-compatible server for its context window: llama.cpp's
/// `/props`, then `/v1/models` metadata, then Ollama's `/api/show`. `base_url`
/// is the URL `/chat/completions` is appended to.
pub(crate) async fn discover(
    client: &reqwest::Client,
    base_url: &str,
    model: &str,
    headers: reqwest::header::HeaderMap,
) -> Option<u32> {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let get = |url: String| {
        let request = client.get(url).headers(headers.clone());
        fetch_json(request)
    };
    let show = client
        .post(format!("{root}/api/show"))
        .headers(headers.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(json!({ "model": model }).to_string());
    // The three asks go out together (one round trip, not three, before
    // the first model request); the answers are read in order of trust.
    let (props, models, show) = tokio::join!(
        get(format!("{root}/props")),
        get(format!("{base}/models")),
        fetch_json(show)
    );
    if let Some(n_ctx) = props.as_ref().and_then(props_window) {
        tracing::info!(n_ctx, "context window from the server's /props");
        return Some(n_ctx);
    }
    if let Some(n_ctx) = models.as_ref().and_then(|m| models_window(m, model)) {
        tracing::info!(n_ctx, "context window from the server's model list");
        return Some(n_ctx);
    }
    if let Some(n_ctx) = show.as_ref().and_then(ollama_window) {
        tracing::info!(n_ctx, "context window from Ollama's /api/show");
        return Some(n_ctx);
    }
    None
}

/// The most model names a list keeps: a front end's menu, not a catalog.
const MAX_LISTED_MODELS: usize = 200;

/// The models a server lists at `url` (OpenAI's and Anthropic's
/// `{"data": [{"id": …}]}`); empty where it answers nothing usable.
pub(crate) async fn list_models(
    client: &reqwest::Client,
    url: &str,
    headers: reqwest::header::HeaderMap,
) -> Vec<String> {
    let request = client.get(url).headers(headers);
    fetch_json(request)
        .await
        .map(|list| model_ids(&list))
        .unwrap_or_default()
}

/// The model ids of a model list, in its order: printable names only,
/// no duplicates, at most [`MAX_LISTED_MODELS`].
pub fn model_ids(list: &Value) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    let entries = list.get("data").and_then(Value::as_array);
    for id in entries
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("id")?.as_str())
    {
        let printable = !id.is_empty() && id.len() <= 200 && !id.chars().any(char::is_control);
        if printable && !ids.iter().any(|known| known == id) {
            ids.push(id.to_string());
        }
        if ids.len() == MAX_LISTED_MODELS {
            break;
        }
    }
    ids
}

async fn fetch_json(request: reqwest::RequestBuilder) -> Option<Value> {
    let response = request.timeout(DISCOVERY_TIMEOUT).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let body = response.bytes().await.ok()?;
    serde_json::from_slice(&body).ok()
}

/// llama.cpp `/props`: the per-slot window is
/// `default_generation_settings.n_ctx`; older builds put `n_ctx` at the top.
pub fn props_window(props: &Value) -> Option<u32> {
    props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(as_window)
}

/// `/v1/models` metadata: the entry for `model` (else the only or first
/// one), with a runtime window under any of the names servers use.
pub fn models_window(models: &Value, model: &str) -> Option<u32> {
    let data = models.get("data")?.as_array()?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| data.first())?;
    [
        "/meta/n_ctx",
        "/context_length",
        "/context_window",
        "/max_model_len",
        "/max_context_length",
        "/meta/n_ctx_train",
    ]
    .iter()
    .find_map(|pointer| entry.pointer(pointer).and_then(as_window))
}

/// Ollama `/api/show`: `num_ctx` from the model's parameters, else Ollama's
/// default, never more than the model's trained `*.context_length`.
pub fn ollama_window(show: &Value) -> Option<u32> {
    let trained = show
        .get("model_info")?
        .as_object()?
        .iter()
        .find(|(key, _)| key.ends_with(".context_length"))
        .and_then(|(_, value)| as_window(value));
    let configured = show
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(|params| {
            params.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u32>().ok())
                    .flatten()
            })
        });
    let served = configured.unwrap_or(OLLAMA_DEFAULT_NUM_CTX);
    Some(trained.map_or(served, |trained| served.min(trained)))
}

fn as_window(value: &Value) -> Option<u32> {
    value
        .as_u64()
        .filter(|n| *n >= 256)
        .and_then(|n| u32::try_from(n).ok())
}

/// A refusal because the prompt does not fit the window, in the three shapes
/// servers use: llama.cpp `exceed_context_size_error` (with `n_ctx`),
/// OpenAI `context_length_exceeded`, Anthropic `prompt is too long`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overflow {
    /// The window the server named, when it named one.
    pub n_ctx: Option<u32>,
}

/// Reads an error body (JSON or the text of an error message) as an
/// overflow refusal.
pub fn overflow_in(text: &str) -> Option<Overflow> {
    let lower = text.to_ascii_lowercase();
    let is_overflow = [
        "exceed_context_size_error",
        "exceeds the available context size",
        "context_length_exceeded",
        "maximum context length",
        "prompt is too long",
    ]
    .iter()
    .any(|needle| lower.contains(needle));
    if !is_overflow {
        return None;
    }
    let from_json = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/n_ctx").and_then(as_window));
    let n_ctx = from_json.or_else(|| {
        [
            "available context size (",
            "maximum context length is ",
            "tokens > ",
        ]
        .iter()
        .find_map(|phrase| number_after(&lower, phrase))
    });
    Some(Overflow { n_ctx })
}

fn number_after(text: &str, phrase: &str) -> Option<u32> {
    let rest = &text[text.find(phrase)? + phrase.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().filter(|n| *n >= 256)
}

/// A 5xx whose body says the request itself is malformed (llama.cpp's
/// `Failed to parse tool call arguments`, `invalid request`): sending the same
/// bytes again cannot help. Returns the request field it points at, when the
/// message names one.
pub fn malformed_request_field(status: u16, text: &str) -> Option<Option<String>> {
    if !(500..=599).contains(&status) {
        return None;
    }
    let lower = text.to_ascii_lowercase();
    let malformed = [
        "failed to parse",
        "invalid request",
        "parse_error",
        "invalid json",
    ]
    .iter()
    .any(|needle| lower.contains(needle));
    if !malformed {
        return None;
    }
    let field = if lower.contains("tool call arguments") || lower.contains("tool_call") {
        Some("messages[].tool_calls[].function.arguments".to_string())
    } else {
        quoted_field(text)
    };
    Some(field)
}

/// The first `'name'` or `` `name` `` in a message, if it looks like a field.
fn quoted_field(text: &str) -> Option<String> {
    for quote in ['\'', '`'] {
        let mut parts = text.split(quote);
        parts.next();
        if let Some(name) = parts.next()
            && !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c))
        {
            return Some(name.to_string());
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn windows_from_props_models_and_ollama() {
        let props = json!({"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1});
        assert_eq!(props_window(&props), Some(8192));
        assert_eq!(props_window(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(props_window(&json!({"model_path": "x"})), None);

        let models = json!({"data": [
            {"id": "other", "meta": {"n_ctx_train": 32768}},
            {"id": "qwen", "max_model_len": 16384}
        ]});
        assert_eq!(models_window(&models, "qwen"), Some(16384));
        assert_eq!(models_window(&models, "unknown"), Some(32768));
        assert_eq!(models_window(&json!({"data": []}), "x"), None);

        let show = json!({"parameters": "stop \"<|im_end|>\"\nnum_ctx 8192",
                          "model_info": {"qwen2.context_length": 32768}});
        assert_eq!(ollama_window(&show), Some(8192));
        let bare = json!({"model_info": {"llama.context_length": 131072}});
        assert_eq!(ollama_window(&bare), Some(OLLAMA_DEFAULT_NUM_CTX));
        assert_eq!(ollama_window(&json!({"error": "not found"})), None);
    }

    #[test]
    fn known_hosted_windows() {
        assert_eq!(known_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(known_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_window("qwen2.5-coder"), None);
    }

    #[test]
    fn the_three_overflow_shapes_and_their_window() {
        let llama = r#"{"error":{"code":400,"message":"request (10030 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10030,"n_ctx":8192}}"#;
        assert_eq!(overflow_in(llama), Some(Overflow { n_ctx: Some(8192) }));
        let openai = r#"{"error":{"message":"This model's maximum context length is 16385 tokens. However, your messages resulted in 17000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert_eq!(overflow_in(openai), Some(Overflow { n_ctx: Some(16385) }));
        let anthropic = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert_eq!(
            overflow_in(anthropic),
            Some(Overflow {
                n_ctx: Some(200_000)
            })
        );
        // The excerpt the subagent gateway forwards still names the window.
        let excerpt = "exceed_context_size_error: request (10030 tokens) exceeds the available context size (8192 tokens), try increasing it";
        assert_eq!(overflow_in(excerpt).unwrap().n_ctx, Some(8192));
        assert_eq!(overflow_in("invalid_request_error: bad role"), None);
    }

    #[test]
    fn malformed_requests_name_their_field() {
        let body = r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error","type":"server_error"}}"#;
        assert_eq!(
            malformed_request_field(500, body),
            Some(Some("messages[].tool_calls[].function.arguments".into()))
        );
        assert_eq!(
            malformed_request_field(500, "invalid request: 'messages' must be an array"),
            Some(Some("messages".into()))
        );
        assert_eq!(malformed_request_field(500, "out of memory"), None);
        assert_eq!(malformed_request_field(400, body), None);
    }
}
