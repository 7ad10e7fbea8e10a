use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::provider::Provider;
use crate::provider::http::test_server::{Reply, TestServer};
use crate::provider::sse::SseDecoder;

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn tool_result(id: &str, content: &str, is_error: bool) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        name: "t".into(),
        content: content.into(),
        is_error,
    }
}

fn tools() -> Vec<ToolSpec> {
    ["list_files", "read_file"]
        .iter()
        .map(|name| ToolSpec {
            name: (*name).into(),
            description: format!("{name} tool"),
            parameters: json!({"type": "object", "properties": {}}),
        })
        .collect()
}

fn conversation() -> Vec<Message> {
    vec![
        Message::System {
            content: "you are fido".into(),
        },
        Message::user("look around"),
        Message::Assistant {
            content: Some("Looking.".into()),
            tool_calls: vec![
                call("toolu_1", "list_files", "{}"),
                call("toolu_2", "read_file", "{\"path\": \"README.md\"}"),
                call("toolu_3", "read_file", "{not json"),
            ],
        },
        tool_result("toolu_1", "README.md", false),
        tool_result("toolu_2", "# Fido", false),
        tool_result("toolu_3", "invalid arguments", true),
        Message::user("and then?"),
    ]
}

#[test]
fn a_text_only_answer_keeps_the_tools_and_sets_tool_choice_none() {
    let messages = conversation();
    let tools = tools();
    let request = |tool_choice| ChatRequest {
        messages: &messages,
        tools: &tools,
        max_output_tokens: None,
        tool_choice,
    };
    let auto = request_body("claude", 1024, request(ToolChoice::Auto));
    let none = request_body("claude", 1024, request(ToolChoice::None));
    assert!(auto.get("tool_choice").is_none());
    assert_eq!(none["tool_choice"], json!({"type": "none"}));
    assert_eq!(none["tools"], auto["tools"]);
}

#[test]
fn request_body_mapping() {
    let messages = conversation();
    let tools = tools();
    let body = request_body(
        "claude",
        1024,
        ChatRequest {
            messages: &messages,
            tools: &tools,
            max_output_tokens: None,
            tool_choice: Default::default(),
        },
    );
    assert_eq!(
        body,
        json!({
            "model": "claude",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": "you are fido", "cache_control": {"type": "ephemeral"}}],
            "tools": [
                {"name": "list_files", "description": "list_files tool", "input_schema": {"type": "object", "properties": {}}},
                {"name": "read_file", "description": "read_file tool", "input_schema": {"type": "object", "properties": {}},
                 "cache_control": {"type": "ephemeral"}},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "look around"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "README.md"}},
                    {"type": "tool_use", "id": "toolu_3", "name": "read_file", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "README.md"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "# Fido"},
                    {"type": "tool_result", "tool_use_id": "toolu_3", "content": "invalid arguments", "is_error": true},
                    {"type": "text", "text": "and then?", "cache_control": {"type": "ephemeral"}},
                ]},
            ],
            "stream": true,
        })
    );
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "model",
            "max_tokens",
            "system",
            "tools",
            "messages",
            "stream"
        ]
    );
}

#[test]
fn request_body_is_deterministic() {
    let messages = conversation();
    let tools = tools();
    let bytes = |m: &[Message]| {
        serde_json::to_vec(&request_body(
            "claude",
            1024,
            ChatRequest {
                messages: m,
                tools: &tools,
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
        ))
        .unwrap()
    };
    let copied: Vec<Message> =
        serde_json::from_str(&serde_json::to_string(&messages).unwrap()).unwrap();
    assert_eq!(bytes(&messages), bytes(&messages));
    assert_eq!(bytes(&messages), bytes(&copied));
}

#[test]
fn roles_alternate_and_empty_messages_vanish() {
    let messages = vec![
        Message::user("a"),
        Message::user("b"),
        Message::Assistant {
            content: Some(String::new()),
            tool_calls: vec![],
        },
        Message::user(""),
        Message::user("c"),
        Message::Assistant {
            content: Some("x".into()),
            tool_calls: vec![],
        },
        Message::Assistant {
            content: None,
            tool_calls: vec![call("t1", "list_files", "")],
        },
    ];
    let body = request_body(
        "m",
        1,
        ChatRequest {
            messages: &messages,
            tools: &[],
            max_output_tokens: None,
            tool_choice: Default::default(),
        },
    );
    assert!(body.get("system").is_none());
    assert!(body.get("tools").is_none());
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"},
                {"type": "text", "text": "c"},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_use", "id": "t1", "name": "list_files", "input": {},
                 "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
}

#[test]
fn tools_json_marks_only_the_last_tool() {
    let json = tools_json(&tools());
    assert!(json[0].get("cache_control").is_none());
    assert_eq!(json[1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(tools_json(&[]), json!([]));
}

/// A stream as the API sends it (shape from the Messages streaming docs).
const RECORDED: &str = "event: message_start\n\
data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\
\n\
event: ping\n\
data: {\"type\": \"ping\"}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"I'll check \"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the file.\"}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":0}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"read_file\",\"input\":{}}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"READ\"}}\n\
\n\
event: content_block_delta\n\
data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ME.md\\\"}\"}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":1}\n\
\n\
event: content_block_start\n\
data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_02\",\"name\":\"list_files\",\"input\":{}}}\n\
\n\
event: content_block_stop\n\
data: {\"type\":\"content_block_stop\",\"index\":2}\n\
\n\
event: message_delta\n\
data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":89}}\n\
\n\
event: message_stop\n\
data: {\"type\":\"message_stop\"}\n\
\n";

fn run(stream: &str) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
    let mut decoder = SseDecoder::default();
    let mut events = decoder.feed(stream.as_bytes()).unwrap();
    events.extend(decoder.finish().unwrap());
    let mut acc = MessagesStreamAccumulator::default();
    let mut notices = Vec::new();
    for event in events {
        match acc.push(event.event.as_deref(), &event.data) {
            Ok(n) => notices.extend(n),
            Err(e) => return (Err(e), notices),
        }
    }
    (acc.finish(), notices)
}

#[test]
fn recorded_stream() {
    let (result, notices) = run(RECORDED);
    let completion = result.unwrap();
    assert_eq!(
        completion.message,
        Message::Assistant {
            content: Some("I'll check the file.".into()),
            tool_calls: vec![
                call("toolu_01", "read_file", "{\"path\": \"README.md\"}"),
                call("toolu_02", "list_files", "{}"),
            ],
        }
    );
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 2125,
            cached_tokens: 2000,
            completion_tokens: 89,
        }
    );
    assert_eq!(
        notices,
        vec![
            ProviderNotice::TextDelta("I'll check ".into()),
            ProviderNotice::TextDelta("the file.".into()),
            ProviderNotice::ToolCallStarted {
                name: "read_file".into()
            },
            ProviderNotice::ToolCallStarted {
                name: "list_files".into()
            },
        ]
    );
}

fn text_stream(stop_reason: &str, with_stop: bool) -> String {
    let mut s = String::from(
        "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n\
         data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
         data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n",
    );
    if !stop_reason.is_empty() {
        s.push_str(&format!(
            "data: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop_reason}\"}},\"usage\":{{\"output_tokens\":2}}}}\n\n"
        ));
    }
    if with_stop {
        s.push_str("data: {\"type\":\"message_stop\"}\n\n");
    }
    s
}

#[test]
fn stop_reasons_and_usage_without_cache_fields() {
    for (reason, expected) in [
        ("end_turn", FinishReason::Stop),
        ("stop_sequence", FinishReason::Stop),
        ("max_tokens", FinishReason::Length),
        ("tool_use", FinishReason::ToolCalls),
        ("refusal", FinishReason::Refusal),
    ] {
        let completion = run(&text_stream(reason, true)).0.unwrap();
        assert_eq!(completion.finish_reason, expected, "{reason}");
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 3,
                cached_tokens: 0,
                completion_tokens: 2
            }
        );
    }
}

#[test]
fn truncation_rules() {
    assert!(matches!(
        run(&text_stream("", false)).0,
        Err(ProviderError::StreamTruncated)
    ));
    // A stop reason without message_stop is a complete answer.
    let completion = run(&text_stream("end_turn", false)).0.unwrap();
    assert_eq!(
        completion.message,
        Message::Assistant {
            content: Some("ok".into()),
            tool_calls: vec![]
        }
    );
}

#[test]
fn error_event_is_api_error() {
    let stream = format!(
        "{}event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}}}\n\n",
        text_stream("", false)
    );
    match run(&stream).0 {
        Err(ProviderError::Api { message }) => {
            assert_eq!(message, "overloaded_error: Overloaded")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn thinking_blocks_and_unknown_events_are_ignored() {
    let stream = "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n\
        data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n\
        data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"x\"}}\n\n\
        data: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        data: {\"type\":\"something_new\",\"x\":1}\n\n\
        data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\n\
        data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n\
        data: {\"type\":\"message_stop\"}\n\n";
    let (result, notices) = run(stream);
    let completion = result.unwrap();
    assert_eq!(
        completion.message,
        Message::Assistant {
            content: Some("done".into()),
            tool_calls: vec![]
        }
    );
    assert_eq!(notices, vec![ProviderNotice::TextDelta("done".into())]);
}

#[test]
fn recorded_stream_survives_any_chunking() {
    let bytes = RECORDED.as_bytes();
    let expected = run(RECORDED).0.unwrap();
    for split in (0..bytes.len()).step_by(7) {
        let mut decoder = SseDecoder::default();
        let mut acc = MessagesStreamAccumulator::default();
        let mut events = decoder.feed(&bytes[..split]).unwrap();
        events.extend(decoder.feed(&bytes[split..]).unwrap());
        events.extend(decoder.finish().unwrap());
        for event in events {
            acc.push(event.event.as_deref(), &event.data).unwrap();
        }
        assert_eq!(acc.finish().unwrap(), expected);
    }
}

#[tokio::test]
async fn over_http_with_headers() {
    let server = TestServer::start(vec![
        Reply::sse(RECORDED),
        Reply::sse(RECORDED),
        Reply::sse(RECORDED),
    ])
    .await;
    let policy = HttpPolicy {
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(5),
        max_retries: 0,
        retry_base: Duration::from_millis(1),
        retry_max: Duration::from_millis(10),
    };
    let provider = AnthropicProvider::new(
        format!("{}/", server.url),
        Some("sk-ant".into()),
        "claude".into(),
        policy,
        2048,
    )
    .unwrap();
    assert_eq!(provider.name(), "anthropic");
    let seen = Mutex::new(Vec::new());
    let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
    let messages = conversation();
    let tools = tools();
    let request = ChatRequest {
        messages: &messages,
        tools: &tools,
        max_output_tokens: None,
        tool_choice: Default::default(),
    };
    let completion = provider.complete(request, &sink).await.unwrap();
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(seen.into_inner().unwrap().len(), 4);
    let recorded = &server.requests()[0];
    assert!(recorded.head.starts_with("post /v1/messages "));
    assert!(recorded.head.contains("x-api-key: sk-ant\r\n"));
    assert!(recorded.head.contains("anthropic-version: 2023-06-01\r\n"));
    assert!(recorded.head.contains("content-type: application/json\r\n"));
    let expected = serde_json::to_vec(&request_body("claude", 2048, request)).unwrap();
    assert_eq!(recorded.body, expected);

    // A request whose window leaves less room asks for less; never more
    // than the provider's own cap.
    for (cap, sent) in [(Some(300), 300), (Some(9000), 2048)] {
        let capped = ChatRequest {
            max_output_tokens: cap,
            ..request
        };
        let noop = |_: ProviderNotice| {};
        provider.complete(capped, &noop).await.unwrap();
        let body: Value = serde_json::from_slice(&server.requests().last().unwrap().body).unwrap();
        assert_eq!(body["max_tokens"], json!(sent));
    }
}

#[tokio::test]
async fn overloaded_status_is_retryable_server_error() {
    let server = TestServer::start(vec![Reply::status(
        529,
        "content-type: application/json\r\n",
        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}",
    )])
    .await;
    let policy = HttpPolicy {
        max_retries: 0,
        ..HttpPolicy::default()
    };
    let provider =
        AnthropicProvider::new(server.url.clone(), None, "claude".into(), policy, 10).unwrap();
    let messages = [Message::user("hi")];
    let result = provider
        .complete(
            ChatRequest {
                messages: &messages,
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
            &|_| {},
        )
        .await;
    match result {
        Err(ProviderError::Server { status: 529, body }) => {
            assert_eq!(body, "overloaded_error: Overloaded")
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!server.requests()[0].head.contains("x-api-key"));
}

/// A tool call's `input` given whole at block start counts against the
/// answer's size limit like streamed deltas: without it, 256 calls of one
/// 16 MiB event each held 4 GiB (seen while writing the fuzz targets).
#[test]
fn block_start_input_counts_against_the_answer_limit() {
    let big = "x".repeat(crate::provider::MAX_ANSWER_BYTES / 2);
    let mut accumulator = MessagesStreamAccumulator::default();
    let mut result = Ok(Vec::new());
    for index in 0..3 {
        let event = json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": {"a": big}},
        });
        result = accumulator.push(None, &event.to_string());
        if result.is_err() {
            break;
        }
    }
    assert!(
        matches!(result, Err(ProviderError::AnswerTooLarge { .. })),
        "{result:?}"
    );
}
