//! The `script` provider: plays a JSON file of assistant turns, for demos,
//! tests and offline runs. It is a script and says so (`script:<file>` as its
//! model name); it never pretends to be a model.
//!
//! File format:
//!
//! ```json
//! {
//!   "description": "optional, ignored",
//!   "turns": [
//!     {"text": "Let me look.", "tool_calls": [{"name": "list_files", "arguments": {}}]},
//!     {"text": "Done."}
//!   ],
//!   "subagent_turns": [
//!     {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
//!     {"text": "{\"summary\": \"README.md says: {{read_file}}\"}"}
//!   ]
//! }
//! ```
//!
//! `turns` are the main agent's. `subagent_turns` (optional) are played for
//! every subagent the script's `delegate` calls start: the child is a real
//! process whose requests reach this provider through the parent's gateway,
//! which says who asks ([`Provider::complete_for`]); each subagent plays the
//! list from its start. A text may quote an earlier tool result of its own
//! conversation: `{{TOOL}}` is the latest result of the tool `TOOL` — a
//! `delegate` result's summary (or, when it failed, why), else the result's
//! non-empty lines, joined. In a text that is a JSON object (it starts with
//! `{`) the quote is escaped as a JSON string's content.
//!
//! Invariants:
//! - The file is validated completely on load; a bad script never starts a run.
//!   Every turn has non-empty `text`, at least one tool call, or both; every
//!   call has a non-empty `name` and an `arguments` object (missing means `{}`);
//!   unknown keys are refused, so a typo is not silently ignored.
//! - Request number k of the main agent plays turn k, request k of each
//!   subagent its subagent turn k; without `subagent_turns`, request k of
//!   anyone plays turn k. Past the last turn every request fails with
//!   [`ProviderError::Script`].
//! - Tool call ids are `script-call-N`, numbered through the whole file from 1,
//!   so they are unique and the same on every run. Usage is always zero.

/// The built-in demo: plans, lists the workspace, delegates one question to
/// a sandboxed subagent, completes the plan and answers with its result.
const DEMO_SCRIPT: &str = include_str!("demo.script.json");

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value};

mod quote;

use super::{
    ChatRequest, Completion, CompletionFuture, FinishReason, NoticeSink, Provider, ProviderError,
    ProviderNotice,
};
use crate::protocol::{Identity, Message, ToolCall, Usage};

/// One assistant turn of a script, ready to be returned.
#[derive(Debug, Clone, PartialEq)]
struct Turn {
    text: Option<String>,
    tool_calls: Vec<ToolCall>,
}

/// Plays a script; see the module docs for the file format.
#[derive(Debug)]
pub struct ScriptProvider {
    path: String,
    model: String,
    turns: Vec<Turn>,
    /// The turns every subagent plays (none: subagents take the next of
    /// `turns`, in request order with the main agent, as every script
    /// written before `subagent_turns` expects).
    subagent_turns: Vec<Turn>,
    /// Requests of the main agent so far.
    requests: AtomicUsize,
    /// Requests of each subagent so far, by agent id.
    subagent_requests: Mutex<HashMap<String, usize>>,
}

impl ScriptProvider {
    /// Reads and validates the script at `path`.
    /// The demo script built into the binary, played when the script
    /// provider is chosen without `FIDO_SCRIPT`.
    pub fn demo() -> Result<Self, ProviderError> {
        ScriptProvider::from_json("built-in demo script", "demo", DEMO_SCRIPT)
    }

    pub fn load(path: &Path) -> Result<Self, ProviderError> {
        let label = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProviderError::Script {
            path: label.clone(),
            detail: format!("cannot read the file: {e}"),
        })?;
        let file_name = path
            .file_name()
            .map_or_else(|| label.clone(), |n| n.to_string_lossy().into_owned());
        ScriptProvider::from_json(&label, &file_name, &text)
    }

    /// Builds a provider from script text; `path` names it in errors and
    /// `file_name` in the model name (`script:<file_name>`).
    pub fn from_json(path: &str, file_name: &str, text: &str) -> Result<Self, ProviderError> {
        let error = |detail: String| ProviderError::Script {
            path: path.to_owned(),
            detail,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| {
            // serde_json appends the position to its message; say it once.
            let message = e.to_string();
            let suffix = format!(" at line {} column {}", e.line(), e.column());
            let message = message.strip_suffix(&suffix).unwrap_or(&message);
            error(format!(
                "not valid JSON at line {}, column {}: {message}",
                e.line(),
                e.column()
            ))
        })?;
        let (turns, subagent_turns) =
            parse_script(&value).map_err(|shape| error(shape.to_string()))?;
        Ok(ScriptProvider {
            path: path.to_owned(),
            model: format!("script:{file_name}"),
            turns,
            subagent_turns,
            requests: AtomicUsize::new(0),
            subagent_requests: Mutex::default(),
        })
    }

    /// How many turns the script has.
    pub fn turn_count(&self) -> usize {
        self.turns.len()
    }
}

/// The main agent's turns and the subagents' turns.
type Tracks = (Vec<Turn>, Vec<Turn>);

/// What is wrong with a script's shape, where it is: the detail of
/// `ProviderError::Script`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum ScriptShape {
    #[error("the script must be a JSON object with a \"turns\" array")]
    NotAnObject,
    #[error(
        "unknown key \"{0}\" (a script has \"turns\", optional \"subagent_turns\" and an optional \"description\")"
    )]
    UnknownKey(String),
    #[error("the script has no \"turns\" array")]
    NoTurns,
    /// `turns` or `subagent_turns` is not an array.
    #[error("\"{0}\" must be an array")]
    NotAnArray(&'static str),
    #[error("the script has no turns")]
    NoMainTurns,
    /// `subagent_turns` is empty.
    #[error("\"{0}\" has no turns")]
    EmptyTrack(&'static str),
    /// What is wrong with turn `index` (from 1): `what` is "turn" or
    /// "subagent turn".
    #[error("{what} {index}: {source}")]
    Turn {
        what: &'static str,
        index: usize,
        source: TurnShape,
    },
}

/// What is wrong with one turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum TurnShape {
    #[error("a turn must be a JSON object")]
    NotAnObject,
    #[error("unknown key \"{0}\" (a turn has \"text\" and/or \"tool_calls\")")]
    UnknownKey(String),
    #[error("\"text\" must be a string")]
    TextNotAString,
    #[error("\"tool_calls\" must be an array")]
    CallsNotAnArray,
    #[error("a turn needs non-empty \"text\", \"tool_calls\", or both")]
    Empty,
    /// What is wrong with tool call `index` (from 1).
    #[error("tool call {index}: {source}")]
    Call { index: usize, source: CallShape },
}

/// What is wrong with one tool call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum CallShape {
    #[error("a tool call must be a JSON object")]
    NotAnObject,
    #[error("unknown key \"{0}\" (a tool call has \"name\" and \"arguments\")")]
    UnknownKey(String),
    #[error("\"name\" must be a non-empty string")]
    NoName,
    /// `arguments` is not an object but this kind of value.
    #[error("\"arguments\" must be a JSON object, got {0}")]
    ArgumentsNotAnObject(&'static str),
}

fn parse_script(value: &Value) -> Result<Tracks, ScriptShape> {
    let top = value.as_object().ok_or(ScriptShape::NotAnObject)?;
    if let Some(key) = top
        .keys()
        .find(|k| !matches!(k.as_str(), "turns" | "subagent_turns" | "description"))
    {
        return Err(ScriptShape::UnknownKey(key.clone()));
    }
    let mut next_id = 1;
    let turns =
        parse_turns(top.get("turns"), "turns", &mut next_id)?.ok_or(ScriptShape::NoTurns)?;
    let subagent_turns =
        parse_turns(top.get("subagent_turns"), "subagent_turns", &mut next_id)?.unwrap_or_default();
    Ok((turns, subagent_turns))
}

/// The turns under `key` (`None` when the key is absent); call ids go on
/// from `next_id`.
fn parse_turns(
    value: Option<&Value>,
    key: &'static str,
    next_id: &mut usize,
) -> Result<Option<Vec<Turn>>, ScriptShape> {
    let Some(value) = value else {
        return Ok(None);
    };
    let turns = value.as_array().ok_or(ScriptShape::NotAnArray(key))?;
    if turns.is_empty() {
        return Err(if key == "turns" {
            ScriptShape::NoMainTurns
        } else {
            ScriptShape::EmptyTrack(key)
        });
    }
    let what = if key == "turns" {
        "turn"
    } else {
        "subagent turn"
    };
    turns
        .iter()
        .enumerate()
        .map(|(i, turn)| {
            parse_turn(turn, next_id).map_err(|source| ScriptShape::Turn {
                what,
                index: i + 1,
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn parse_turn(turn: &Value, next_id: &mut usize) -> Result<Turn, TurnShape> {
    let turn = turn.as_object().ok_or(TurnShape::NotAnObject)?;
    if let Some(key) = turn
        .keys()
        .find(|k| !matches!(k.as_str(), "text" | "tool_calls"))
    {
        return Err(TurnShape::UnknownKey(key.clone()));
    }
    let text = match turn.get("text") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()).filter(|s| !s.is_empty()),
        Some(_) => return Err(TurnShape::TextNotAString),
    };
    let calls = match turn.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(calls)) => calls.as_slice(),
        Some(_) => return Err(TurnShape::CallsNotAnArray),
    };
    if text.is_none() && calls.is_empty() {
        return Err(TurnShape::Empty);
    }
    let mut tool_calls = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let call = parse_call(call, *next_id).map_err(|source| TurnShape::Call {
            index: i + 1,
            source,
        })?;
        *next_id += 1;
        tool_calls.push(call);
    }
    Ok(Turn { text, tool_calls })
}

fn parse_call(call: &Value, id: usize) -> Result<ToolCall, CallShape> {
    let call = call.as_object().ok_or(CallShape::NotAnObject)?;
    if let Some(key) = call
        .keys()
        .find(|k| !matches!(k.as_str(), "name" | "arguments"))
    {
        return Err(CallShape::UnknownKey(key.clone()));
    }
    let name = call
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or(CallShape::NoName)?;
    let arguments = match call.get("arguments") {
        None => Map::new(),
        Some(Value::Object(object)) => object.clone(),
        Some(other) => return Err(CallShape::ArgumentsNotAnObject(kind_of(other))),
    };
    Ok(ToolCall {
        id: format!("script-call-{id}"),
        name: name.to_owned(),
        arguments: Value::Object(arguments).to_string(),
    })
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Provider for ScriptProvider {
    fn name(&self) -> &str {
        "script"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn complete<'a>(
        &'a self,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        Box::pin(std::future::ready(self.play(
            &Identity::Main,
            &request,
            notices,
        )))
    }

    fn complete_for<'a>(
        &'a self,
        identity: &'a Identity,
        request: ChatRequest<'a>,
        notices: NoticeSink<'a>,
    ) -> CompletionFuture<'a> {
        Box::pin(std::future::ready(self.play(identity, &request, notices)))
    }
}

impl ScriptProvider {
    /// The next turn of `identity`'s track, its quotes filled from the
    /// request's messages.
    fn play(
        &self,
        identity: &Identity,
        request: &ChatRequest<'_>,
        notices: NoticeSink<'_>,
    ) -> Result<Completion, ProviderError> {
        let (track, number, whose) = match identity {
            Identity::Subagent { agent_id } if !self.subagent_turns.is_empty() => {
                let mut counts = self
                    .subagent_requests
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let count = counts.entry(agent_id.clone()).or_default();
                *count += 1;
                (&self.subagent_turns, *count - 1, "subagent ")
            }
            _ => (
                &self.turns,
                self.requests.fetch_add(1, Ordering::SeqCst),
                "",
            ),
        };
        let Some(turn) = track.get(number) else {
            return Err(ProviderError::Script {
                path: self.path.clone(),
                detail: format!(
                    "the script has no {whose}turn left for request {}; it has {} {whose}turns",
                    number + 1,
                    track.len()
                ),
            });
        };
        let text = turn
            .text
            .as_deref()
            .map(|text| quote::fill(text, request.messages));
        if let Some(text) = &text {
            notices(ProviderNotice::TextDelta(text.clone()));
        }
        for call in &turn.tool_calls {
            notices(ProviderNotice::ToolCallStarted {
                name: call.name.clone(),
            });
        }
        Ok(Completion {
            message: Message::Assistant {
                content: text,
                tool_calls: turn.tool_calls.clone(),
            },
            finish_reason: if turn.tool_calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            },
            usage: Usage::default(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn script(text: &str) -> Result<ScriptProvider, ProviderError> {
        ScriptProvider::from_json("t.json", "t.json", text)
    }

    fn detail(result: Result<ScriptProvider, ProviderError>) -> String {
        match result {
            Err(ProviderError::Script { detail, .. }) => detail,
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(_) => panic!("the script was accepted"),
        }
    }

    async fn play(
        provider: &ScriptProvider,
    ) -> (Result<Completion, ProviderError>, Vec<ProviderNotice>) {
        let seen = Mutex::new(Vec::new());
        let sink = |n: ProviderNotice| seen.lock().unwrap().push(n);
        let result = provider
            .complete(
                ChatRequest {
                    messages: &[],
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
    async fn plays_turns_in_order_then_says_it_is_done() {
        let provider = script(
            r#"{"turns": [
                {"text": "Looking.", "tool_calls": [
                    {"name": "list_files", "arguments": {}},
                    {"name": "read_file", "arguments": {"path": "README.md", "limit": 5}}
                ]},
                {"tool_calls": [{"name": "read_file"}]},
                {"text": "Done."}
            ]}"#,
        )
        .unwrap();
        assert_eq!(provider.name(), "script");
        assert_eq!(provider.model(), "script:t.json");
        assert_eq!(provider.turn_count(), 3);

        let (result, notices) = play(&provider).await;
        let completion = result.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::ToolCalls);
        assert_eq!(completion.usage, Usage::default());
        assert_eq!(
            completion.message,
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![
                    ToolCall {
                        id: "script-call-1".into(),
                        name: "list_files".into(),
                        arguments: "{}".into()
                    },
                    ToolCall {
                        id: "script-call-2".into(),
                        name: "read_file".into(),
                        arguments: "{\"path\":\"README.md\",\"limit\":5}".into()
                    },
                ],
            }
        );
        assert_eq!(
            notices,
            vec![
                ProviderNotice::TextDelta("Looking.".into()),
                ProviderNotice::ToolCallStarted {
                    name: "list_files".into()
                },
                ProviderNotice::ToolCallStarted {
                    name: "read_file".into()
                },
            ]
        );

        let (result, _) = play(&provider).await;
        assert_eq!(
            result.unwrap().message,
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "script-call-3".into(),
                    name: "read_file".into(),
                    arguments: "{}".into()
                }],
            }
        );

        let (result, notices) = play(&provider).await;
        let completion = result.unwrap();
        assert_eq!(completion.finish_reason, FinishReason::Stop);
        assert_eq!(notices, vec![ProviderNotice::TextDelta("Done.".into())]);

        match play(&provider).await.0 {
            Err(ProviderError::Script { detail, .. }) => assert_eq!(
                detail,
                "the script has no turn left for request 4; it has 3 turns"
            ),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn validation_errors_are_specific() {
        let cases: &[(&str, &str)] = &[
            (
                "{\"turns\": [\n  {\"text\": }\n]}",
                "not valid JSON at line 2, column 12: expected value",
            ),
            (
                "[]",
                "the script must be a JSON object with a \"turns\" array",
            ),
            ("{}", "the script has no \"turns\" array"),
            (r#"{"turns": []}"#, "the script has no turns"),
            (
                r#"{"turns": [{"text": "a"}, {"text": ""}]}"#,
                "turn 2: a turn needs non-empty \"text\", \"tool_calls\", or both",
            ),
            (
                r#"{"turns": [{"tool_calls": []}]}"#,
                "turn 1: a turn needs non-empty \"text\", \"tool_calls\", or both",
            ),
            (
                r#"{"turns": [{"tool_calls": [{"name": "x", "arguments": "{}"}]}]}"#,
                "turn 1: tool call 1: \"arguments\" must be a JSON object, got a string",
            ),
            (
                r#"{"turns": [{"tool_calls": [{"arguments": {}}]}]}"#,
                "turn 1: tool call 1: \"name\" must be a non-empty string",
            ),
            (
                r#"{"turns": [{"text": "a", "tool_call": []}]}"#,
                "turn 1: unknown key \"tool_call\" (a turn has \"text\" and/or \"tool_calls\")",
            ),
            (
                r#"{"turns": [{"text": 3}]}"#,
                "turn 1: \"text\" must be a string",
            ),
            (r#"{"turns": {}}"#, "\"turns\" must be an array"),
            (
                r#"{"turns": [{"text": "a"}], "subagent_turns": []}"#,
                "\"subagent_turns\" has no turns",
            ),
            (
                r#"{"turns": [{"text": "a"}], "turn": []}"#,
                "unknown key \"turn\" (a script has \"turns\", optional \"subagent_turns\" and an optional \"description\")",
            ),
            (
                r#"{"turns": [{"tool_calls": [1]}]}"#,
                "turn 1: tool call 1: a tool call must be a JSON object",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(detail(script(text)), *expected, "{text}");
        }
    }

    #[test]
    fn load_reports_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.json");
        match ScriptProvider::load(&path) {
            Err(e @ ProviderError::Script { .. }) => {
                let message = e.to_string();
                assert!(message.contains("nope.json"), "{message}");
                assert!(message.contains("cannot read the file"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn built_in_demo_is_valid() {
        let provider = ScriptProvider::demo().unwrap();
        assert_eq!(provider.model(), "script:demo");
        let names = |turns: &[Turn]| -> Vec<String> {
            turns
                .iter()
                .flat_map(|t| t.tool_calls.iter().map(|c| c.name.clone()))
                .collect()
        };
        assert_eq!(
            names(&provider.turns),
            [
                "update_plan",
                "list_files",
                "update_plan",
                "delegate",
                "update_plan"
            ]
        );
        assert_eq!(names(&provider.subagent_turns), ["read_file"]);
        let last = provider.turns.last().unwrap();
        assert!(last.tool_calls.is_empty());
        assert!(last.text.as_deref().unwrap().contains("{{delegate}}"));
    }

    /// The main agent and each subagent play their own tracks, each from
    /// its start, however their requests interleave.
    #[tokio::test]
    async fn each_subagent_plays_the_subagent_turns_from_the_start() {
        let provider = script(
            r#"{"turns": [{"text": "main 1"}, {"text": "main 2"}],
                "subagent_turns": [{"text": "sub 1"}, {"text": "sub 2"}]}"#,
        )
        .unwrap();
        let (a, b) = (
            Identity::subagent("subagent-a"),
            Identity::subagent("subagent-b"),
        );
        let mut played = Vec::new();
        for who in [&Identity::Main, &a, &b, &a, &Identity::Main, &b] {
            let request = ChatRequest {
                messages: &[],
                tools: &[],
                max_output_tokens: None,
                tool_choice: Default::default(),
            };
            let completion = provider.complete_for(who, request, &|_| {}).await.unwrap();
            let Message::Assistant { content, .. } = completion.message else {
                panic!()
            };
            played.push(content.unwrap());
        }
        assert_eq!(
            played,
            ["main 1", "sub 1", "sub 1", "sub 2", "main 2", "sub 2"]
        );
        let request = ChatRequest {
            messages: &[],
            tools: &[],
            max_output_tokens: None,
            tool_choice: Default::default(),
        };
        match provider.complete_for(&a, request, &|_| {}).await {
            Err(ProviderError::Script { detail, .. }) => assert_eq!(
                detail,
                "the script has no subagent turn left for request 3; it has 2 subagent turns"
            ),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            detail(script(
                r#"{"turns": [{"text": "a"}], "subagent_turns": [{"text": 1}]}"#
            )),
            "subagent turn 1: \"text\" must be a string"
        );
    }
}
