//! IPC frames between the parent and a subagent process (see
//! `crate::subagent` for the theory of operation). Every frame is one
//! length-prefixed JSON object; `type` names the variant.

use serde::{Deserialize, Serialize};

use super::{Message, Usage};

/// Why the model stopped (`finish_reason` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A final answer (or the stream simply ended).
    Stop,
    /// The model wants tool calls run.
    ToolCalls,
    /// The output hit the token limit.
    Length,
    /// The model or the provider refused: a `refusal` in the message, a
    /// content filter, Anthropic's `refusal` stop reason.
    Refusal,
    /// Anything else the provider said (content filter, …).
    Other,
}

/// Whether the model may call tools in its answer (`tool_choice` on the
/// wire). `None` keeps the tools advertised, so the prompt and its cached
/// prefix stay the same, while asking for a text answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model answers in text.
    None,
}

impl ToolChoice {
    pub fn is_auto(&self) -> bool {
        *self == ToolChoice::Auto
    }
}

pub use super::plan::PlanFlavour;

/// How the child sees its own end (`Final.status`); the parent
/// normalises it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildStatus {
    Completed,
    Partial,
    Failed,
    /// The loop guard ended the turn: the model kept repeating itself
    /// (`text` says how).
    Looped,
}

/// Bumped on any incompatible change; both sides check it first.
/// 2: `ChildStatus::Looped`. (`Browse` and `BrowseResult` were added
/// without a bump: new frames only, which an older child never sends, and
/// the child is always the parent's own binary.)
pub const PROTOCOL_VERSION: u32 = 2;

/// Parent → child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ParentFrame {
    /// The deep fork and everything the child needs to run; sent once,
    /// after the child's `Hello`.
    Fork(Box<ForkFrame>),
    /// The complete answer to request `request_id`.
    ModelDone {
        request_id: u64,
        message: Message,
        finish_reason: FinishReason,
        usage: Usage,
    },
    /// Request `request_id` failed for good.
    ModelError { request_id: u64, message: String },
    /// Stop now and send what you have as a `Final` (timeout or cancel).
    Cancel { reason: String },
    /// The result of the child's `McpCall` `call_id`, as the tool result.
    McpResult {
        call_id: u64,
        ok: bool,
        content: String,
    },
    /// The result of the child's `Browse` `call_id`, as the tool result.
    BrowseResult {
        call_id: u64,
        ok: bool,
        content: String,
    },
}

/// The fork: the child's starting conversation and its limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForkFrame {
    pub version: u32,
    pub agent_id: String,
    /// The parent's messages at call time, the bootstrap result for the
    /// `delegate` call and a result for every other call of that message.
    pub messages: Vec<Message>,
    /// The subagent instructions (task, reason, scope, rules, output
    /// format), sent as the user turn that starts the subagent's work.
    pub instructions: String,
    pub max_steps: u32,
    /// The plan tool the session advertises, so the child builds the same
    /// catalog byte for byte.
    pub plan_tool: PlanFlavour,
    /// The model's context window as the parent's provider knows it, so the
    /// child compacts in time (its gateway cannot ask the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// The session's MCP tools, in catalog order: the child advertises them
    /// too and sends their calls to the parent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_tools: Vec<super::mcp::McpToolSpec>,
    /// The session's subagent profiles as `delegate` offers them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiles: Vec<super::delegate::ProfileOffer>,
    /// `RLIMIT_NPROC` for the child and its commands, which the parent
    /// counted while the child started; `None` when it could not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_limit: Option<u64>,
    /// The session runs calls the model writes into its text
    /// (`tool_call_fallback`): the child's loop does too, as it runs the
    /// same model.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_call_fallback: bool,
}

/// The `fork` frame serialised from borrowed parts, byte for byte what
/// `ParentFrame::Fork` would be: a large fork is encoded once, never copied
/// to be sent. `messages` is already JSON (the parent encodes it on the
/// blocking pool while the child starts).
#[derive(Debug, Serialize)]
pub struct ForkFrameRef<'a> {
    #[serde(rename = "type")]
    pub kind: ForkTag,
    pub version: u32,
    pub agent_id: &'a str,
    pub messages: &'a serde_json::value::RawValue,
    pub instructions: &'a str,
    pub max_steps: u32,
    pub plan_tool: PlanFlavour,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub mcp_tools: &'a [super::mcp::McpToolSpec],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub profiles: &'a [super::delegate::ProfileOffer],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_limit: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tool_call_fallback: bool,
}

/// The `type` of a [`ForkFrameRef`]: always `fork`, the tag
/// `ParentFrame::Fork` has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForkTag {
    Fork,
}

/// Child → parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChildFrame {
    /// First frame, after the child connected and sandboxed itself.
    Hello {
        version: u32,
        pid: u32,
        /// `None` when the sandbox is in force as configured; else why not.
        sandbox_error: Option<String>,
        sandbox_summary: String,
        /// What the sandbox does not enforce (best-effort mode); shown to
        /// the user, never buried in a log.
        #[serde(default)]
        sandbox_warnings: Vec<String>,
    },
    /// Ask the parent's gateway for a completion of `fork.messages[..fork_prefix]`
    /// followed by `tail` (only what the child added, so a large fork is not
    /// sent back on every step).
    ModelRequest {
        request_id: u64,
        fork_prefix: usize,
        tail: Vec<Message>,
        /// [`catalog_fingerprint`] of the tools the child's own loop
        /// advertises; the parent refuses a request whose catalog is not
        /// byte for byte its own.
        #[serde(default)]
        catalog: String,
        /// The output cap the child's loop computed from the window.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_output_tokens: Option<u32>,
        /// Whether this answer may call tools (the loop guard asks for
        /// text after a repeated call).
        #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
        tool_choice: ToolChoice,
    },
    /// What the child is doing; the parent sanitises it again.
    Lifecycle {
        phase: super::SubagentPhase,
        detail: String,
    },
    /// The child's own plan after a change (its plan tool's result, kept
    /// in its memory); the parent bounds it and shows it under the child's
    /// id.
    Plan { plan: super::plan::PlanSnapshot },
    /// The raw final output; the parent normalises it.
    Final { status: ChildStatus, text: String },
    /// Call MCP tool `tool` (a catalog name) with `arguments` (a JSON
    /// object, as the model wrote it) through the parent's connection.
    McpCall {
        call_id: u64,
        tool: String,
        arguments: String,
    },
    /// Run `browse_url` for the child: the parent fetches (the child has
    /// no network) under its own host lists and approval policy.
    Browse {
        call_id: u64,
        url: String,
        /// Bytes of text wanted at most; the parent bounds it again.
        max_bytes: usize,
    },
}

/// A fingerprint of a tool catalog as serialised (64-bit FNV-1a, hex):
/// equal catalogs give equal fingerprints, and any change of a name,
/// description, schema or order changes it.
pub fn catalog_fingerprint(tools: &[super::ToolSpec]) -> String {
    let bytes = serde_json::to_vec(tools).unwrap_or_default();
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed fields keep the wire spellings the other side reads.
    #[test]
    fn typed_fields_keep_their_wire_names() {
        let json = |value: Result<String, serde_json::Error>| value.unwrap();
        assert_eq!(
            json(serde_json::to_string(&FinishReason::ToolCalls)),
            "\"tool_calls\""
        );
        assert_eq!(
            json(serde_json::to_string(&FinishReason::Length)),
            "\"length\""
        );
        assert_eq!(
            json(serde_json::to_string(&PlanFlavour::UpdatePlan)),
            "\"update_plan\""
        );
        assert_eq!(json(serde_json::to_string(&PlanFlavour::Todo)), "\"todo\"");
        assert_eq!(
            json(serde_json::to_string(&ChildStatus::Partial)),
            "\"partial\""
        );
        for flavour in [PlanFlavour::UpdatePlan, PlanFlavour::Todo] {
            // On the wire the flavour is its tool's name.
            assert_eq!(
                serde_json::to_string(&flavour).unwrap(),
                format!("\"{}\"", flavour.tool_name())
            );
        }
        let bad = r#"{"type":"final","status":"done","text":"x"}"#;
        assert!(serde_json::from_str::<ChildFrame>(bad).is_err());
    }

    /// The browse frames as they go on the wire, and back.
    #[test]
    fn browse_frames_keep_their_wire_format() {
        let call = ChildFrame::Browse {
            call_id: 7,
            url: "https://example.com/".into(),
            max_bytes: 1000,
        };
        let text = serde_json::to_string(&call).unwrap();
        assert_eq!(
            text,
            r#"{"type":"browse","call_id":7,"url":"https://example.com/","max_bytes":1000}"#
        );
        assert_eq!(serde_json::from_str::<ChildFrame>(&text).unwrap(), call);
        let result = ParentFrame::BrowseResult {
            call_id: 7,
            ok: false,
            content: "Error: no".into(),
        };
        let text = serde_json::to_string(&result).unwrap();
        assert_eq!(
            text,
            r#"{"type":"browse_result","call_id":7,"ok":false,"content":"Error: no"}"#
        );
        assert_eq!(serde_json::from_str::<ParentFrame>(&text).unwrap(), result);
    }

    /// The child's lifecycle frames, byte for byte (recorded when `phase`
    /// was a `String`): the parent sanitises the phase, so the frame keeps
    /// whatever the child sent.
    #[test]
    fn lifecycle_frames_keep_their_wire_format() {
        for phase in [
            "reasoning",
            "bash_exec",
            "nested_delegation_rejected",
            "completed",
            "a tool name well past forty characters long, with \\u001b escapes",
        ] {
            let line = format!(r#"{{"type":"lifecycle","phase":"{phase}","detail":"d"}}"#);
            let frame: ChildFrame = serde_json::from_str(&line).unwrap();
            assert_eq!(serde_json::to_string(&frame).unwrap(), line);
        }
    }

    /// A model request keeps its old bytes when it asks nothing special,
    /// and carries the cap and a text-only answer when it does.
    #[test]
    fn a_model_request_carries_its_cap_and_tool_choice_only_when_set() {
        let plain =
            r#"{"type":"model_request","request_id":1,"fork_prefix":2,"tail":[],"catalog":"c"}"#;
        let frame: ChildFrame = serde_json::from_str(plain).unwrap();
        assert_eq!(serde_json::to_string(&frame).unwrap(), plain);
        let narrowed = ChildFrame::ModelRequest {
            request_id: 1,
            fork_prefix: 2,
            tail: Vec::new(),
            catalog: "c".into(),
            max_output_tokens: Some(512),
            tool_choice: ToolChoice::None,
        };
        let line = serde_json::to_string(&narrowed).unwrap();
        assert!(
            line.ends_with(r#","max_output_tokens":512,"tool_choice":"none"}"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<ChildFrame>(&line).unwrap(), narrowed);
    }

    #[test]
    fn catalog_fingerprints_follow_every_byte() {
        let spec = |name: &str| super::super::ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        };
        let a = catalog_fingerprint(&[spec("a"), spec("b")]);
        assert_eq!(a, catalog_fingerprint(&[spec("a"), spec("b")]));
        assert_ne!(a, catalog_fingerprint(&[spec("b"), spec("a")]));
        assert_ne!(a, catalog_fingerprint(&[spec("a")]));
        assert_eq!(a.len(), 16);
    }

    #[test]
    fn the_borrowed_fork_frame_is_the_fork_frame() {
        let messages = vec![
            Message::System {
                content: "s".into(),
            },
            Message::user("u"),
        ];
        let encoded = serde_json::value::to_raw_value(&messages).unwrap();
        let borrowed = ForkFrameRef {
            kind: ForkTag::Fork,
            version: PROTOCOL_VERSION,
            agent_id: "subagent-1",
            messages: &encoded,
            instructions: "do it",
            max_steps: 7,
            plan_tool: PlanFlavour::UpdatePlan,
            context_window: Some(8192),
            mcp_tools: &[],
            profiles: &[],
            process_limit: Some(300),
            tool_call_fallback: true,
        };
        let owned = ParentFrame::Fork(Box::new(ForkFrame {
            version: PROTOCOL_VERSION,
            agent_id: "subagent-1".into(),
            messages: messages.clone(),
            instructions: "do it".into(),
            max_steps: 7,
            plan_tool: PlanFlavour::UpdatePlan,
            context_window: Some(8192),
            mcp_tools: Vec::new(),
            profiles: Vec::new(),
            process_limit: Some(300),
            tool_call_fallback: true,
        }));
        let bytes = serde_json::to_vec(&borrowed).unwrap();
        assert_eq!(bytes, serde_json::to_vec(&owned).unwrap());
        assert_eq!(
            serde_json::from_slice::<ParentFrame>(&bytes).unwrap(),
            owned
        );
    }
}
