//! The control socket's protocol (contract of `fido agents` and `fido
//! cancel`): each Fido session listens on `.fido-state/run/<pid>.sock` in
//! its workspace. A client connects, writes one [`ControlRequest`] as a
//! JSON line, reads one [`ControlReply`] line, and the connection closes.
//! Only the socket owner's uid is served; anyone else reads `refused`.

use serde::{Deserialize, Serialize};

use super::SubagentPhase;

/// Version of this protocol; a reply from a different one is reported,
/// not guessed at.
pub const CONTROL_VERSION: u32 = 1;

/// Longest request line the server reads.
pub const MAX_REQUEST_BYTES: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlRequest {
    /// The subagents running now (`list_agents` on the wire, which
    /// other Fido processes of the workspace speak).
    #[serde(rename = "list_agents")]
    ListSubagents,
    /// Cancel one running subagent cooperatively (`agent_id`), or every
    /// one (`None`): each parent records the partial or cancelled result
    /// and goes on.
    Cancel {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_id: Option<String>,
    },
}

/// One running subagent as `fido agents` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningSubagent {
    pub agent_id: String,
    /// The Fido process that supervises it.
    pub parent_pid: u32,
    /// The subagent process (`None` while it is being spawned).
    pub child_pid: Option<u32>,
    /// `starting`, `reasoning` or a tool name (as in `subagent` events).
    pub phase: SubagentPhase,
    pub elapsed_ms: u64,
    /// Prompt + completion tokens used so far.
    pub tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_item: Option<String>,
}

/// One subagent of the session as the engine's record has it (the answer
/// to `Op::ListSubagents`): the ones that ended stay, with how they ended.
/// The TUI's `/agents` shows them all, the control socket the running ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSubagent {
    pub agent_id: String,
    /// The subagent process (`None` while it is being spawned).
    #[serde(default)]
    pub child_pid: Option<u32>,
    /// The last phase it reported: a final one once it ended normally.
    pub phase: SubagentPhase,
    /// Its run has not ended yet.
    pub running: bool,
    /// So far while it runs; at its end once it ended.
    pub elapsed_ms: u64,
    /// Prompt + completion tokens used.
    pub tokens: u64,
    pub plan_item: Option<String>,
    /// Its last lifecycle detail, sanitised: what it is doing while it
    /// runs, its one-line result once it ended.
    pub detail: String,
}

impl SessionSubagent {
    /// How `fido agents` shows it, under the Fido process `parent_pid`.
    pub fn running_under(&self, parent_pid: u32) -> RunningSubagent {
        RunningSubagent {
            agent_id: self.agent_id.clone(),
            parent_pid,
            child_pid: self.child_pid,
            phase: self.phase.clone(),
            elapsed_ms: self.elapsed_ms,
            tokens: self.tokens,
            plan_item: self.plan_item.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlReply {
    /// `agents` on the wire, which other Fido processes speak.
    #[serde(rename = "agents")]
    Subagents {
        version: u32,
        parent_pid: u32,
        agents: Vec<RunningSubagent>,
    },
    /// The subagents asked to stop (empty: none matched).
    Cancelled {
        version: u32,
        parent_pid: u32,
        agent_ids: Vec<String>,
    },
    /// The peer is not the socket owner's uid (or its credentials could
    /// not be read).
    Refused { message: String },
    /// The request could not be read.
    Error { message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fido agents` reads these bytes (recorded when `phase` was a
    /// `String`): each phase, a tool name with odd characters included,
    /// comes back as it was sent.
    #[test]
    fn running_agents_keep_their_wire_format() {
        for phase in [
            "starting",
            "reasoning",
            "read_file",
            "nested_delegation_rejected",
            "a tool name well past forty characters long, with \\u001b escapes",
        ] {
            let line = format!(
                r#"{{"type":"agents","version":1,"parent_pid":7,"agents":[{{"agent_id":"subagent-1","parent_pid":7,"child_pid":8,"phase":"{phase}","elapsed_ms":5,"tokens":9,"plan_item":"fix"}}]}}"#
            );
            let reply: ControlReply = serde_json::from_str(&line).unwrap();
            assert_eq!(serde_json::to_string(&reply).unwrap(), line);
        }
    }

    #[test]
    fn requests_and_replies_are_tagged_json_lines() {
        let cancel = ControlRequest::Cancel {
            agent_id: Some("subagent-0badcafe".into()),
        };
        let line = serde_json::to_string(&cancel).unwrap();
        assert_eq!(line, r#"{"type":"cancel","agent_id":"subagent-0badcafe"}"#);
        assert_eq!(
            serde_json::from_str::<ControlRequest>(r#"{"type":"cancel"}"#).unwrap(),
            ControlRequest::Cancel { agent_id: None }
        );
        assert_eq!(
            serde_json::to_string(&ControlRequest::ListSubagents).unwrap(),
            r#"{"type":"list_agents"}"#
        );
        let refused = ControlReply::Refused {
            message: "no".into(),
        };
        let text = serde_json::to_string(&refused).unwrap();
        assert_eq!(
            serde_json::from_str::<ControlReply>(&text).unwrap(),
            refused
        );
    }
}
