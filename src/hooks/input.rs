//! What a hook reads on stdin: one JSON object with the fields Claude Code
//! and Codex send (`session_id`, `transcript_path`, `cwd`,
//! `hook_event_name`, and the event's own), so a script written for them
//! runs unchanged.

use serde::Serialize;
use serde_json::Value;

use super::HookEvent;
use crate::protocol::delegate::DelegateStatus;

/// An event's own fields; `hook_event_name` is its tag.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "hook_event_name")]
pub enum HookInput {
    SessionStart {
        source: SessionSource,
    },
    UserPromptSubmit {
        prompt: String,
    },
    PreToolUse {
        tool_name: String,
        tool_input: Value,
        tool_use_id: String,
    },
    PostToolUse {
        tool_name: String,
        tool_input: Value,
        /// `{"ok": bool, "content": text}`: the result the model gets.
        tool_response: Value,
        tool_use_id: String,
    },
    PermissionRequest {
        tool_name: String,
        tool_input: Value,
        tool_use_id: String,
        /// The approval the person would be asked for, as the
        /// `approval_requested` event carries it.
        request: Value,
    },
    SubagentStart {
        agent_id: String,
        /// The task, sanitised and cut short.
        task: String,
    },
    SubagentStop {
        agent_id: String,
        task: String,
        /// The `delegate_result` status: `completed`, `partial` or
        /// `failed`.
        status: DelegateStatus,
        /// The result's summary, cut short.
        summary: String,
    },
    PreCompact {
        trigger: CompactTrigger,
    },
    Stop {
        /// The turn goes on because a Stop hook blocked its end already.
        stop_hook_active: bool,
        last_assistant_message: Option<String>,
    },
}

/// How the session of a `SessionStart` began (its `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionSource {
    /// A new session.
    Startup,
    /// A journaled session taken up again (`--resume`).
    Resume,
}

/// Why a `PreCompact` runs (its `trigger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactTrigger {
    /// The person asked for it (`/compact`).
    Manual,
    /// The context grew past its budget, or the server refused its size.
    Auto,
}

impl HookInput {
    pub fn event(&self) -> HookEvent {
        match self {
            HookInput::SessionStart { .. } => HookEvent::SessionStart,
            HookInput::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            HookInput::PreToolUse { .. } => HookEvent::PreToolUse,
            HookInput::PostToolUse { .. } => HookEvent::PostToolUse,
            HookInput::PermissionRequest { .. } => HookEvent::PermissionRequest,
            HookInput::SubagentStart { .. } => HookEvent::SubagentStart,
            HookInput::SubagentStop { .. } => HookEvent::SubagentStop,
            HookInput::PreCompact { .. } => HookEvent::PreCompact,
            HookInput::Stop { .. } => HookEvent::Stop,
        }
    }

    /// The tool the event is about, which matchers select on.
    pub fn tool_name(&self) -> Option<&str> {
        match self {
            HookInput::PreToolUse { tool_name, .. }
            | HookInput::PostToolUse { tool_name, .. }
            | HookInput::PermissionRequest { tool_name, .. } => Some(tool_name),
            HookInput::SessionStart { .. }
            | HookInput::UserPromptSubmit { .. }
            | HookInput::SubagentStart { .. }
            | HookInput::SubagentStop { .. }
            | HookInput::PreCompact { .. }
            | HookInput::Stop { .. } => None,
        }
    }

    /// Tool arguments as the model sent them: the parsed object, or the
    /// raw text when they are not JSON.
    pub fn tool_input(arguments: &str) -> Value {
        if arguments.trim().is_empty() {
            return Value::Object(Default::default());
        }
        serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
    }
}

/// The session facts every input carries.
#[derive(Debug, Clone, Default)]
pub struct SessionFacts {
    pub session_id: Option<String>,
    pub transcript_path: Option<String>,
    pub cwd: String,
}

/// The whole stdin object: the session facts, then the event's fields.
pub fn stdin_json(facts: &SessionFacts, input: &HookInput) -> Vec<u8> {
    let mut object = serde_json::Map::new();
    object.insert(
        "session_id".into(),
        Value::String(facts.session_id.clone().unwrap_or_default()),
    );
    if let Some(path) = &facts.transcript_path {
        object.insert("transcript_path".into(), Value::String(path.clone()));
    }
    object.insert("cwd".into(), Value::String(facts.cwd.clone()));
    if let Ok(Value::Object(fields)) = serde_json::to_value(input) {
        object.extend(fields);
    }
    let mut bytes = serde_json::to_vec(&Value::Object(object)).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_carries_the_session_facts_and_the_events_fields() {
        let facts = SessionFacts {
            session_id: Some("s1".into()),
            transcript_path: Some("/t/s1.jsonl".into()),
            cwd: "/w".into(),
        };
        let input = HookInput::PreToolUse {
            tool_name: "read_file".into(),
            tool_input: HookInput::tool_input(r#"{"path":"a"}"#),
            tool_use_id: "call_1".into(),
        };
        let json: Value = serde_json::from_slice(&stdin_json(&facts, &input)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "session_id": "s1",
                "transcript_path": "/t/s1.jsonl",
                "cwd": "/w",
                "hook_event_name": "PreToolUse",
                "tool_name": "read_file",
                "tool_input": {"path": "a"},
                "tool_use_id": "call_1",
            })
        );
        assert_eq!(
            HookInput::tool_input("not json"),
            Value::String("not json".into())
        );
    }

    /// `source` and `trigger` are the words Claude Code's scripts test for.
    #[test]
    fn session_start_and_pre_compact_keep_their_words() {
        let fields = |input: HookInput| -> Value {
            serde_json::from_slice(&stdin_json(&SessionFacts::default(), &input)).unwrap()
        };
        for (source, word) in [
            (SessionSource::Startup, "startup"),
            (SessionSource::Resume, "resume"),
        ] {
            let json = fields(HookInput::SessionStart { source });
            assert_eq!(json["hook_event_name"], "SessionStart");
            assert_eq!(json["source"], word);
        }
        for (trigger, word) in [
            (CompactTrigger::Manual, "manual"),
            (CompactTrigger::Auto, "auto"),
        ] {
            let json = fields(HookInput::PreCompact { trigger });
            assert_eq!(json["hook_event_name"], "PreCompact");
            assert_eq!(json["trigger"], word);
        }
    }
}
