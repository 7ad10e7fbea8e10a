use std::sync::Mutex;
use std::time::Duration;

use super::*;
use crate::provider::Provider;
use crate::provider::http::test_server::{Reply, TestServer, sse_head};

fn conversation() -> (Vec<Message>, Vec<ToolSpec>) {
    let messages = vec![
        Message::System {
            content: "you are fido".into(),
        },
        Message::user("list the files"),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "call_1".into(),
                name: "list_files".into(),
                arguments: "{\"path\": \".\"}".into(),
            }],
        },
        Message::Tool {
            tool_call_id: "call_1".into(),
            name: "list_files".into(),
            content: "README.md".into(),
            is_error: false,
        },
        Message::Assistant {
            content: Some("Done.".into()),
            tool_calls: vec![],
        },
    ];
    let tools = vec![ToolSpec {
        name: "list_files".into(),
        description: "List files.".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    (messages, tools)
}

#[test]
fn request_body_shape() {
    let (messages, tools) = conversation();
    let body = request_body(
        "m",
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
            "model": "m",
            "messages": [
                {"role": "system", "content": "you are fido"},
                {"role": "user", "content": "list the files"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "list_files", "arguments": "{\"path\": \".\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "README.md"},
                {"role": "assistant", "content": "Done."},
            ],
            "tools": [{"type": "function", "function": {
                "name": "list_files", "description": "List files.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
            }}],
            "tool_choice": "auto",
            "stream": true,
            "stream_options": {"include_usage": true},
        })
    );
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "tools",
            "tool_choice",
            "stream",
            "stream_options"
        ]
    );
}

#[test]
fn request_body_is_deterministic() {
    let (messages, tools) = conversation();
    let bytes = |m: &[Message], t: &[ToolSpec]| {
        serde_json::to_vec(&request_body(
            "m",
            ChatRequest {
                messages: m,
                tools: t,
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
        ))
        .unwrap()
    };
    let first = bytes(&messages, &tools);
    // A deep copy through serde (as the subagent fork does) changes nothing.
    let copied: Vec<Message> =
        serde_json::from_str(&serde_json::to_string(&messages).unwrap()).unwrap();
    let copied_tools: Vec<ToolSpec> =
        serde_json::from_str(&serde_json::to_string(&tools).unwrap()).unwrap();
    assert_eq!(first, bytes(&messages, &tools));
    assert_eq!(first, bytes(&copied, &copied_tools));
    // And the conversation is a prefix: a longer one starts with the same bytes.
    let text = String::from_utf8(first).unwrap();
    let prefix = &text[..text.find("\"tools\"").unwrap()];
    let mut longer = messages.clone();
    longer.push(Message::user("more"));
    let longer = String::from_utf8(bytes(&longer, &tools)).unwrap();
    assert!(longer.starts_with(&prefix[..prefix.len() - 3]));
}

#[test]
fn no_tools_omits_tools_and_tool_choice() {
    let body = request_body(
        "m",
        ChatRequest {
            messages: &[Message::user("hi")],
            tools: &[],
            max_output_tokens: None,
            tool_choice: Default::default(),
        },
    );
    assert!(body.get("tools").is_none());
    assert!(body.get("tool_choice").is_none());
}

#[test]
fn a_text_only_answer_keeps_the_tools_and_says_none() {
    let (messages, tools) = conversation();
    let request = |tool_choice| ChatRequest {
        messages: &messages,
        tools: &tools,
        max_output_tokens: None,
        tool_choice,
    };
    let auto = request_body("m", request(ToolChoice::Auto));
    let none = request_body("m", request(ToolChoice::None));
    assert_eq!(auto["tool_choice"], "auto");
    assert_eq!(none["tool_choice"], "none");
    assert_eq!(none["tools"], auto["tools"]);
    let no_tools = request_body(
        "m",
        ChatRequest {
            tools: &[],
            ..request(ToolChoice::None)
        },
    );
    assert!(no_tools.get("tool_choice").is_none());
}

#[test]
fn an_empty_final_answer_is_empty_text_never_null_content() {
    let messages = vec![
        Message::System {
            content: "s".into(),
        },
        Message::Assistant {
            content: Some(String::new()),
            tool_calls: vec![],
        },
        Message::Assistant {
            content: Some(String::new()),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            }],
        },
    ];
    let uncapped = ChatRequest {
        messages: &messages,
        tools: &[],
        max_output_tokens: None,
        tool_choice: Default::default(),
    };
    let body = request_body("m", uncapped);
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": ""})
    );
    assert_eq!(body["messages"][2]["content"], Value::Null);
    let bytes = request_bytes("m", uncapped).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), body);
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert!(body.get("max_tokens").is_none());

    let capped = ChatRequest {
        max_output_tokens: Some(512),
        ..uncapped
    };
    let local: Value =
        serde_json::from_slice(&request_bytes_with("m", capped, CapField::MaxTokens).unwrap())
            .unwrap();
    assert_eq!(local["max_tokens"], json!(512));
    assert!(local.get("max_completion_tokens").is_none());
    let hosted: Value = serde_json::from_slice(
        &request_bytes_with("m", capped, CapField::MaxCompletionTokens).unwrap(),
    )
    .unwrap();
    assert_eq!(hosted["max_completion_tokens"], json!(512));
    assert!(hosted.get("max_tokens").is_none());
}

fn run(chunks: &[&str]) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
    let mut acc = ChatStreamAccumulator::default();
    let mut notices = Vec::new();
    for chunk in chunks {
        match acc.push(chunk) {
            Ok(n) => notices.extend(n),
            Err(e) => return (Err(e), notices),
        }
    }
    (acc.finish(), notices)
}

fn assistant(c: &Completion) -> (Option<&str>, &[ToolCall]) {
    match &c.message {
        Message::Assistant {
            content,
            tool_calls,
        } => (content.as_deref(), tool_calls),
        other => panic!("not an assistant message: {other:?}"),
    }
}

#[test]
fn text_deltas_and_usage() {
    let (result, notices) = run(&[
        r#"{"id":"x","object":"chat.completion.chunk","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hel","reasoning_content":"hmm"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":null}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"total_tokens":107,"prompt_tokens_details":{"cached_tokens":64}}}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    assert_eq!(assistant(&completion), (Some("Hello"), &[][..]));
    assert_eq!(completion.finish_reason, FinishReason::Stop);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 100,
            cached_tokens: 64,
            completion_tokens: 7
        }
    );
    assert_eq!(
        notices,
        vec![
            ProviderNotice::TextDelta("Hel".into()),
            ProviderNotice::ReasoningDelta("hmm".into()),
            ProviderNotice::TextDelta("lo".into())
        ]
    );
}

/// A refusal is the answer's text, shown as it streams, and the answer
/// ends refused though the stream said `stop`; a content filter ends it
/// refused too. The same in a whole (unstreamed) response.
#[test]
fn a_refusal_is_the_text_of_a_refused_answer() {
    let (result, notices) = run(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't "}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"refusal":"help."},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    assert_eq!(assistant(&completion), (Some("I can't help."), &[][..]));
    assert_eq!(completion.finish_reason, FinishReason::Refusal);
    assert_eq!(notices[0], ProviderNotice::TextDelta("I can't ".into()));
    let (filtered, _) = run(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Par"},"finish_reason":"content_filter"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(filtered.unwrap().finish_reason, FinishReason::Refusal);
    let mut whole = ChatStreamAccumulator::default();
    whole
        .push_complete_response(
            br#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"No."},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
    let completion = whole.finish().unwrap();
    assert_eq!(assistant(&completion), (Some("No."), &[][..]));
    assert_eq!(completion.finish_reason, FinishReason::Refusal);
}

#[test]
fn usage_without_details_has_zero_cached() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1}}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason, FinishReason::Length);
    assert_eq!(
        completion.usage,
        Usage {
            prompt_tokens: 5,
            cached_tokens: 0,
            completion_tokens: 1
        }
    );
}

#[test]
fn empty_content_is_none() {
    let (result, notices) = run(&[
        r#"{"choices":[{"index":0,"delta":{"content":""},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    assert_eq!(assistant(&result.unwrap()).0, None);
    assert!(notices.is_empty());
}

#[test]
fn tool_call_fragments_merge_by_index() {
    let (result, notices) = run(&[
        r#"{"choices":[{"index":0,"delta":{"content":"Let me look."}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_files","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\":\n  \"a b.txt\"}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    let (text, calls) = assistant(&completion);
    assert_eq!(text, Some("Let me look."));
    assert_eq!(
        calls,
        &[
            ToolCall {
                id: "call_a".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\n  \"a b.txt\"}".into()
            },
            ToolCall {
                id: "call_b".into(),
                name: "list_files".into(),
                arguments: "{}".into()
            },
        ]
    );
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        notices,
        vec![
            ProviderNotice::TextDelta("Let me look.".into()),
            ProviderNotice::ToolCallStarted {
                name: "read_file".into()
            },
            ProviderNotice::ToolCallStarted {
                name: "list_files".into()
            },
        ]
    );
}

#[test]
fn tool_calls_with_stop_reason_are_still_returned() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"list_files","arguments":""}}]},"finish_reason":"stop"}]}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
    let calls = assistant(&completion).1;
    assert_eq!(calls.len(), 1);
    // Blank arguments become an empty object.
    assert_eq!(calls[0].arguments, "{}");
}

#[test]
fn missing_index_falls_back_to_id_then_last_call() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"one","arguments":"{\"x\""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"two","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ]);
    let completion = result.unwrap();
    let calls = assistant(&completion).1;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.as_str()),
        ("a", "{\"x\":1}")
    );
    assert_eq!((calls[1].id.as_str(), calls[1].name.as_str()), ("b", "two"));
}

#[test]
fn whole_calls_reusing_index_zero_stay_apart() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"two","arguments":"{\"k\":2}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ]);
    let completion = result.unwrap();
    let names: Vec<&str> = assistant(&completion)
        .1
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["one", "two"]);
}

#[test]
fn missing_ids_are_generated() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"one","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ]);
    assert_eq!(assistant(&result.unwrap()).1[0].id, "call_0");
}

#[test]
fn error_in_stream_is_api_error() {
    let (result, _) = run(&[
        r#"{"choices":[{"delta":{"content":"x"}}]}"#,
        r#"{"error":{"message":"context length exceeded","type":"invalid_request_error"}}"#,
    ]);
    match result {
        Err(ProviderError::Api { message }) => {
            assert_eq!(message, "invalid_request_error: context length exceeded")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn truncation_rules() {
    // Nothing said the answer was over.
    let (result, _) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#]);
    assert!(matches!(result, Err(ProviderError::StreamTruncated)));
    // A finish_reason without [DONE] is a complete answer.
    let (result, _) = run(&[r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#]);
    assert_eq!(assistant(&result.unwrap()).0, Some("x"));
    // [DONE] without a finish_reason too.
    let (result, _) = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#, "[DONE]"]);
    assert_eq!(result.unwrap().finish_reason, FinishReason::Stop);
}

#[test]
fn malformed_json_is_malformed_stream() {
    let (result, _) = run(&["{not json"]);
    assert!(matches!(result, Err(ProviderError::MalformedStream { .. })));
}

#[test]
fn complete_json_response_is_accepted() {
    let mut acc = ChatStreamAccumulator::default();
    let notices = acc
        .push_complete_response(
            br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi","tool_calls":[{"id":"c1","type":"function","function":{"name":"list_files","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        )
        .unwrap();
    assert_eq!(notices.len(), 2);
    let completion = acc.finish().unwrap();
    assert_eq!(assistant(&completion).0, Some("hi"));
    assert_eq!(assistant(&completion).1[0].id, "c1");
    assert_eq!(completion.usage.prompt_tokens, 3);
}

// --- over HTTP, against a scripted server on 127.0.0.1 ---

fn quick_policy() -> HttpPolicy {
    HttpPolicy {
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(5),
        max_retries: 2,
        retry_base: Duration::from_millis(1),
        retry_max: Duration::from_millis(20),
    }
}

const GOOD_STREAM: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
    data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":1}}\n\n\
    data: [DONE]\n\n";

async fn complete_with(
    provider: &OpenAiProvider,
) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
    let seen = Mutex::new(Vec::new());
    let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
    let messages = [Message::user("hi")];
    let result = provider
        .complete(
            ChatRequest {
                messages: &messages,
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            },
            &sink,
        )
        .await;
    (result, seen.into_inner().unwrap())
}

#[tokio::test]
async fn streams_a_completion_over_http() {
    let server = TestServer::start(vec![Reply::sse(GOOD_STREAM)]).await;
    let provider = OpenAiProvider::new(
        format!("{}/v1/", server.url),
        Some("sk-test".into()),
        "m".into(),
        quick_policy(),
    )
    .unwrap();
    let (result, notices) = complete_with(&provider).await;
    let completion = result.unwrap();
    assert_eq!(assistant(&completion).0, Some("Hi"));
    assert_eq!(completion.usage.prompt_tokens, 4);
    assert_eq!(notices, vec![ProviderNotice::TextDelta("Hi".into())]);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].head.starts_with("post /v1/chat/completions "));
    assert!(
        requests[0]
            .head
            .contains("authorization: bearer sk-test\r\n")
    );
    let expected = serde_json::to_vec(&request_body(
        "m",
        ChatRequest {
            messages: &[Message::user("hi")],
            tools: &[],
            // The provider always sends its cap (max_output_tokens, 4096).
            max_output_tokens: Some(4096),
            tool_choice: Default::default(),
        },
    ))
    .unwrap();
    assert_eq!(requests[0].body, expected);
}

#[tokio::test]
async fn the_output_cap_is_the_lower_of_the_request_and_the_provider() {
    let server = TestServer::start(vec![Reply::sse(GOOD_STREAM), Reply::sse(GOOD_STREAM)]).await;
    let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy())
        .unwrap()
        .with_max_output_tokens(1000);
    let noop = |_: ProviderNotice| {};
    for cap in [Some(300), Some(5000)] {
        let request = ChatRequest {
            messages: &[Message::user("hi")],
            tools: &[],
            max_output_tokens: cap,
            tool_choice: Default::default(),
        };
        provider.complete(request, &noop).await.unwrap();
    }
    let caps: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["max_tokens"].clone())
        .collect();
    assert_eq!(caps, vec![json!(300), json!(1000)]);
    let hosted = OpenAiProvider::new(
        "https://api.openai.com/v1".into(),
        Some("k".into()),
        "gpt-4.1-mini".into(),
        quick_policy(),
    )
    .unwrap();
    assert_eq!(hosted.context_window().await, Some(1_047_576));
}

#[tokio::test]
async fn no_key_sends_no_authorization() {
    let server = TestServer::start(vec![Reply::sse(GOOD_STREAM)]).await;
    let provider =
        OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
    assert!(complete_with(&provider).await.0.is_ok());
    assert!(!server.requests()[0].head.contains("authorization"));
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_excerpted() {
    let body = format!(
        "{{\"error\":{{\"message\":\"bad key {}\"}}}}",
        "x".repeat(2000)
    );
    let server = TestServer::start(vec![Reply::status(401, "", &body)]).await;
    let provider = OpenAiProvider::new(
        server.url.clone(),
        Some("k".into()),
        "m".into(),
        quick_policy(),
    )
    .unwrap();
    match complete_with(&provider).await.0 {
        Err(ProviderError::Unauthorized { status: 401, body }) => {
            assert!(body.starts_with("bad key xxx"));
            assert!(body.chars().count() <= 301);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn rate_limit_and_server_errors_are_retried() {
    let server = TestServer::start(vec![
        Reply::status(429, "retry-after: 0\r\n", "slow down"),
        Reply::status(503, "", "busy"),
        Reply::sse(GOOD_STREAM),
    ])
    .await;
    let provider =
        OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
    let (result, notices) = complete_with(&provider).await;
    assert!(result.is_ok());
    let retries: Vec<u32> = notices
        .iter()
        .filter_map(|n| match n {
            ProviderNotice::Retrying { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [1, 2]);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn persistent_server_errors_give_up() {
    let server = TestServer::start(vec![Reply::status(500, "", "boom"); 3]).await;
    let provider =
        OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
    match complete_with(&provider).await.0 {
        Err(ProviderError::GaveUp { attempts: 3, last }) => {
            assert!(matches!(*last, ProviderError::Server { status: 500, .. }))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn bad_request_and_long_retry_after() {
    let server = TestServer::start(vec![
        Reply::status(400, "", "bad"),
        Reply::status(429, "retry-after: 3600\r\n", "later"),
    ])
    .await;
    let provider =
        OpenAiProvider::new(server.url.clone(), None, "m".into(), quick_policy()).unwrap();
    assert!(matches!(
        complete_with(&provider).await.0,
        Err(ProviderError::BadRequest { status: 400, .. })
    ));
    match complete_with(&provider).await.0 {
        Err(ProviderError::RateLimited { retry_after, .. }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(3600)))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn silence_is_an_idle_timeout() {
    let stalled = Reply {
        parts: vec![
            (Duration::ZERO, sse_head().into_bytes()),
            (
                Duration::ZERO,
                b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec(),
            ),
        ],
        hold_open: true,
    };
    let server = TestServer::start(vec![stalled]).await;
    let policy = HttpPolicy {
        idle_timeout: Duration::from_millis(200),
        max_retries: 0,
        ..quick_policy()
    };
    let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
    let (result, notices) = complete_with(&provider).await;
    assert!(matches!(result, Err(ProviderError::IdleTimeout { .. })));
    assert_eq!(notices, vec![ProviderNotice::TextDelta("x".into())]);
}

#[tokio::test]
async fn slow_trickle_hits_the_request_timeout() {
    let chunk = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n".to_vec();
    let mut parts = vec![(Duration::ZERO, sse_head().into_bytes())];
    parts.extend((0..50).map(|_| (Duration::from_millis(50), chunk.clone())));
    let server = TestServer::start(vec![Reply {
        parts,
        hold_open: false,
    }])
    .await;
    let policy = HttpPolicy {
        request_timeout: Duration::from_millis(400),
        idle_timeout: Duration::from_millis(300),
        max_retries: 0,
        ..quick_policy()
    };
    let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
    assert!(matches!(
        complete_with(&provider).await.0,
        Err(ProviderError::RequestTimeout { .. })
    ));
}

#[tokio::test]
async fn closed_mid_stream_is_truncated() {
    let server = TestServer::start(vec![Reply::sse(
        "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
    )])
    .await;
    let policy = HttpPolicy {
        max_retries: 0,
        ..quick_policy()
    };
    let provider = OpenAiProvider::new(server.url.clone(), None, "m".into(), policy).unwrap();
    assert!(matches!(
        complete_with(&provider).await.0,
        Err(ProviderError::StreamTruncated)
    ));
}

#[tokio::test]
async fn unreachable_server_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let policy = HttpPolicy {
        max_retries: 0,
        ..quick_policy()
    };
    let provider = OpenAiProvider::new(url, None, "m".into(), policy).unwrap();
    assert!(matches!(
        complete_with(&provider).await.0,
        Err(ProviderError::Connect { .. })
    ));
}

#[test]
fn bad_urls_are_config_errors() {
    for url in ["127.0.0.1:8080/v1", "ftp://host", "not a url"] {
        assert!(matches!(
            OpenAiProvider::new(url.into(), None, "m".into(), HttpPolicy::default()),
            Err(ProviderError::Config(_))
        ));
    }
}

#[test]
fn a_runaway_answer_is_stopped_at_the_size_limit_with_a_clear_error() {
    let piece = "x".repeat(64 * 1024);
    let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{"content":"{piece}"}}}}]}}"#);
    let mut acc = ChatStreamAccumulator::default();
    let mut pushed = 0;
    let err = loop {
        match acc.push(&chunk) {
            Ok(_) => pushed += piece.len(),
            Err(err) => break err,
        }
        assert!(
            pushed <= 2 * crate::provider::MAX_ANSWER_BYTES,
            "never stopped"
        );
    };
    assert!(pushed <= crate::provider::MAX_ANSWER_BYTES);
    assert!(!err.is_retryable(), "the same flood again would not help");
    assert!(err.to_string().contains("8 MiB"), "{err}");

    let calls: String = (0..300)
        .map(|i| format!(r#"{{"index":{i},"id":"c{i}","function":{{"name":"read_file","arguments":"{{}}"}}}}"#))
        .collect::<Vec<_>>()
        .join(",");
    let chunk = format!(r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{calls}]}}}}]}}"#);
    let err = ChatStreamAccumulator::default().push(&chunk).unwrap_err();
    assert!(err.to_string().contains("256 tool calls"), "{err}");
}

/// Streams recorded verbatim from llama.cpp's `llama-server` with
/// Qwen2.5-Coder-0.5B (`tests/fixtures/sse/README.md` has the requests).
const LLAMA_TEXT: &[u8] = include_bytes!("../../../tests/fixtures/sse/llama-text.sse");
const LLAMA_TOOL: &[u8] = include_bytes!("../../../tests/fixtures/sse/llama-tool.sse");

/// The whole decode path, SSE framing included, in reads of `read` bytes.
fn decode_recorded(stream: &[u8], read: usize) -> (Completion, String) {
    let mut decoder = crate::provider::sse::SseDecoder::default();
    let mut acc = ChatStreamAccumulator::default();
    let mut live = String::new();
    let mut push = |events: Vec<SseEvent>, acc: &mut ChatStreamAccumulator| {
        for event in events {
            for notice in acc.push(&event.data).unwrap() {
                if let ProviderNotice::TextDelta(text) = notice {
                    live.push_str(&text);
                }
            }
        }
    };
    for piece in stream.chunks(read) {
        push(decoder.feed(piece).unwrap(), &mut acc);
    }
    push(decoder.finish().unwrap(), &mut acc);
    assert!(acc.is_done(), "[DONE] not seen in {read}-byte reads");
    (acc.finish().unwrap(), live)
}

/// What the recording says, read with serde_json alone: every
/// `delta.content`, and the usage chunk.
fn recorded_content_and_usage(stream: &[u8]) -> (String, Value) {
    let text = std::str::from_utf8(stream).unwrap();
    let mut content = String::new();
    let mut usage = Value::Null;
    for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        for choice in chunk["choices"].as_array().unwrap() {
            content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
        }
        if !chunk["usage"].is_null() {
            usage = chunk["usage"].clone();
        }
    }
    (content, usage)
}

#[test]
fn a_recorded_llama_text_stream_decodes_to_its_answer_in_any_reads() {
    let (content, usage) = recorded_content_and_usage(LLAMA_TEXT);
    assert_eq!(content.len(), 3508, "the recording changed");
    assert!(content.starts_with("Sure, here's a simple Rust program"));
    for read in [1, 7, 4096, LLAMA_TEXT.len()] {
        let (completion, live) = decode_recorded(LLAMA_TEXT, read);
        assert_eq!(assistant(&completion), (Some(content.as_str()), &[][..]));
        assert_eq!(live, content, "the live notices are the answer");
        assert_eq!(completion.finish_reason, FinishReason::Stop);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 67,
                cached_tokens: 24,
                completion_tokens: 806
            }
        );
    }
    assert_eq!(usage["completion_tokens"], 806);
}

#[test]
fn a_recorded_llama_tool_stream_decodes_to_one_read_file_call() {
    for read in [1, 5, LLAMA_TOOL.len()] {
        let (completion, live) = decode_recorded(LLAMA_TOOL, read);
        let (text, calls) = assistant(&completion);
        assert_eq!(text, None);
        assert!(live.is_empty());
        assert_eq!(
            calls,
            &[ToolCall {
                id: "i5x0SclqCF8o0H6kIWndWQ3HosWjQshQ".into(),
                name: "read_file".into(),
                arguments: "{\n    \"path\": \"src/lib.rs\"\n  }".into(),
            }]
        );
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            completion.usage,
            Usage {
                prompt_tokens: 191,
                cached_tokens: 5,
                completion_tokens: 31
            }
        );
    }
}
