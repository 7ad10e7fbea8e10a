//! Fido's events as ACP session updates: streamed text, tool calls with
//! their kind, status, locations and diffs, and the plan. Pure: the caller
//! sends what [`Updates::of`] returns, in order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Diff, Meta, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionUpdate, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use serde_json::{Value, json};

use crate::agent::streamed_text::StreamedText;
use crate::protocol::plan::{PlanSnapshot, Status, TaskStatus};
use crate::protocol::tool_facts::{FileAction, FileChange, FileLine, PatchCall};
use crate::protocol::{EventKind, Message, ToolFacts};
use crate::tools::capability::{Capabilities, Capability, Reads, Writes};

/// The tools whose `summary` is the path they work on.
const PATH_TOOLS: &[&str] = &["read_file", "list_files", "patch", "mkdir", "rm", "rmdir"];

/// What a session's translation remembers between events.
#[derive(Debug, Default)]
pub struct Updates {
    workspace: PathBuf,
    /// What each of the session's tools may do: the kind of its calls.
    tools: Capabilities,
    /// The message being streamed: what was sent of it, and what waits
    /// (a call the model may be writing into its text).
    text: StreamedText,
    /// Tool calls started and not yet finished, oldest first: an approval
    /// asked meanwhile belongs to the latest.
    open_calls: Vec<String>,
    /// The facts of each finished `patch` and `bash_exec`, which say where
    /// each edit landed and how the command ended (their diffs and output
    /// come in a later event).
    finished: HashMap<String, ToolFacts>,
}

impl Updates {
    pub fn new(workspace: &Path, tools: Capabilities) -> Updates {
        Updates {
            workspace: workspace.to_path_buf(),
            tools,
            ..Updates::default()
        }
    }

    /// With `tool_call_fallback`: the model's text is held from where a
    /// call written into it could start until the message is whole.
    pub fn holding_text_calls(self, on: bool) -> Updates {
        Updates {
            text: StreamedText::new(on),
            ..self
        }
    }

    /// The call an approval asked now is about, if one is running.
    pub fn running_call(&self) -> Option<&str> {
        self.open_calls.last().map(String::as_str)
    }

    /// The updates one event makes (often none).
    pub fn of(&mut self, event: &EventKind) -> Vec<SessionUpdate> {
        match event {
            EventKind::AssistantDelta { text } => chunk(self.text.fragment(text)),
            EventKind::AssistantText { text } => chunk(self.text.whole(text)),
            EventKind::ToolCall { id, name, summary } => {
                // A message whose calls took all of its text ends here.
                self.text.forget();
                self.open_calls.push(id.clone());
                vec![SessionUpdate::ToolCall(self.tool_call(id, name, summary))]
            }
            EventKind::ToolResult {
                id,
                name,
                ok,
                summary,
                facts,
            } => {
                self.open_calls.retain(|open| open != id);
                let facts = facts.as_deref();
                if let Some(facts) =
                    facts.filter(|_| ["patch", "bash_exec"].contains(&name.as_str()))
                {
                    self.finished.insert(id.clone(), facts.clone());
                }
                vec![tool_result(id, *ok, summary, facts, &self.workspace)]
            }
            EventKind::ToolOutput {
                id,
                name,
                arguments,
                content,
            } => self.tool_output(id, name, arguments, content),
            EventKind::ReasoningDelta { text } => vec![SessionUpdate::AgentThoughtChunk(
                ContentChunk::new(ContentBlock::from(text.as_str())),
            )],
            EventKind::PlanUpdated { plan } => vec![SessionUpdate::Plan(plan_update(plan))],
            EventKind::Error { message } => vec![message_chunk(&format!("\n\n[fido] {message}\n"))],
            EventKind::Retrying { .. } | EventKind::Compacted { .. } => {
                // Fragments already sent cannot be taken back; the whole
                // message that follows is not sent again either.
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn tool_call(&self, id: &str, name: &str, summary: &str) -> ToolCall {
        let title = if summary.is_empty() {
            name.to_string()
        } else {
            format!("{name} {summary}")
        };
        let mut call = ToolCall::new(id.to_string(), title)
            .kind(tool_kind(self.tools.of(name)))
            .status(ToolCallStatus::InProgress)
            .raw_input(json!({ "tool": name, "summary": summary }));
        if PATH_TOOLS.contains(&name) && !summary.is_empty() {
            call = call.locations(vec![ToolCallLocation::new(self.workspace.join(summary))]);
        }
        call
    }

    /// A finished `patch`: its edits as diffs (old and new text), and the
    /// lines they landed on; a `bash_exec`: the tail of its output; a
    /// write `delegate`: its change set's hunks as diffs.
    fn tool_output(
        &mut self,
        id: &str,
        name: &str,
        arguments: &str,
        content: &str,
    ) -> Vec<SessionUpdate> {
        let facts = self.finished.remove(id).unwrap_or_default();
        let fields = match name {
            "patch" => match patch_fields(&self.workspace, arguments, facts.file.as_ref()) {
                Some(fields) => fields,
                None => return Vec::new(),
            },
            "bash_exec" if !content.is_empty() => {
                let mut text = format!("```\n{content}\n```");
                if let Some(run) = &facts.command {
                    text.push_str(&format!("\n{}", run.exit));
                }
                ToolCallUpdateFields::new().content(vec![text_content(&text)])
            }
            // A write subagent's change set (its unified diff).
            "delegate" => {
                let (diffs, locations) = super::unified::change_set(&self.workspace, content);
                if diffs.is_empty() {
                    return Vec::new();
                }
                ToolCallUpdateFields::new()
                    .content(diffs)
                    .locations(locations)
            }
            _ => return Vec::new(),
        };
        vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id.to_string(),
            fields,
        ))]
    }
}

/// `text` as a message chunk, unless there is none.
fn chunk(text: String) -> Vec<SessionUpdate> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![message_chunk(&text)]
    }
}

fn message_chunk(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text)))
}

pub fn text_content(text: &str) -> ToolCallContent {
    ToolCallContent::Content(agent_client_protocol::v1::schema::Content::new(
        ContentBlock::from(text),
    ))
}

/// A finished call: its status and summary, and what it did (the tool's
/// facts) in `_meta.fido`.
/// A finished call: its status and summary, its facts in `_meta.fido`,
/// and the lines it showed (`read_file`'s window, `ripgrep`'s matches) as
/// locations, so the editor can follow along.
fn tool_result(
    id: &str,
    ok: bool,
    summary: &str,
    facts: Option<&ToolFacts>,
    workspace: &Path,
) -> SessionUpdate {
    let status = if ok {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    let mut fields = ToolCallUpdateFields::new()
        .status(status)
        .raw_output(json!({ "ok": ok, "summary": summary }));
    if !summary.is_empty() {
        fields = fields.content(vec![text_content(summary)]);
    }
    let lines = facts.map_or(&[][..], |facts| facts.lines.as_slice());
    if !lines.is_empty() {
        let at = |shown: &FileLine| {
            let line = u32::try_from(shown.line).unwrap_or(u32::MAX);
            ToolCallLocation::new(workspace.join(&shown.path)).line(line)
        };
        fields = fields.locations(lines.iter().map(at).collect::<Vec<_>>());
    }
    let mut update = ToolCallUpdate::new(id.to_string(), fields);
    if let Some(Ok(facts)) = facts.map(serde_json::to_value) {
        update = update.meta(fido_meta(facts));
    }
    SessionUpdate::ToolCallUpdate(update)
}

/// What an editor shows for a call of a tool that may do `capability`
/// (`None`: a name the catalog does not hold): its widest effect. What
/// runs outside Fido, asks the person or starts a subagent is `other`.
pub fn tool_kind(capability: Option<Capability>) -> ToolKind {
    let Some(capability) = capability else {
        return ToolKind::Other;
    };
    if !capability.confined || capability.needs_person || capability.starts_subagent {
        return ToolKind::Other;
    }
    if capability.changes_plan {
        return ToolKind::Think;
    }
    if capability.executes {
        return ToolKind::Execute;
    }
    match (capability.writes, capability.network, capability.reads) {
        (Some(Writes::Removes), _, _) => ToolKind::Delete,
        (Some(Writes::Files), _, _) => ToolKind::Edit,
        (None, true, _) => ToolKind::Fetch,
        (None, false, Some(Reads::File)) => ToolKind::Read,
        (None, false, Some(Reads::Tree)) => ToolKind::Search,
        (None, false, None) => ToolKind::Other,
    }
}

/// A `patch` call's diffs, one per edit (its old and new text), or the
/// whole new text of a written file; the locations are the file at each
/// line the tool's facts name.
fn patch_fields(
    workspace: &Path,
    arguments: &str,
    change: Option<&FileChange>,
) -> Option<ToolCallUpdateFields> {
    let args = PatchCall::parse(arguments)?;
    let path = workspace.join(&args.path);
    let diffs: Vec<ToolCallContent> = match (args.edits, args.content) {
        (Some(edits), _) => edits
            .into_iter()
            .map(|edit| {
                ToolCallContent::Diff(
                    Diff::new(path.clone(), edit.new_text).old_text(edit.old_text),
                )
            })
            .collect(),
        (None, Some(content)) => vec![ToolCallContent::Diff(Diff::new(path.clone(), content))],
        (None, None) => return None,
    };
    let lines = match change.map(|change| &change.action) {
        Some(FileAction::Edited { at_lines, .. }) => at_lines.as_slice(),
        _ => &[],
    };
    let locations = if lines.is_empty() {
        vec![ToolCallLocation::new(path)]
    } else {
        lines
            .iter()
            .map(|&line| {
                ToolCallLocation::new(path.clone()).line(u32::try_from(line).unwrap_or(u32::MAX))
            })
            .collect()
    };
    Some(
        ToolCallUpdateFields::new()
            .content(diffs)
            .locations(locations),
    )
}

/// A resumed session's history as the updates that show it again: the
/// user's messages, the model's text, and each tool call with its result
/// (the internal plan restores left out).
pub fn replay(history: &[Message], workspace: &Path, tools: &Capabilities) -> Vec<SessionUpdate> {
    let updates = Updates::new(workspace, tools.clone());
    let mut out = Vec::new();
    for message in history.iter().filter(|m| !m.is_plan_restore()) {
        match message {
            Message::System { .. } => {}
            Message::User { content } => out.push(SessionUpdate::UserMessageChunk(
                ContentChunk::new(ContentBlock::from(content.as_str())),
            )),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                    out.push(message_chunk(text));
                }
                for call in tool_calls {
                    out.push(SessionUpdate::ToolCall(updates.tool_call(
                        &call.id,
                        &call.name,
                        &call.summary(),
                    )));
                }
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => out.push(tool_result(
                tool_call_id,
                !is_error,
                &crate::text::summary(content, 120),
                None,
                workspace,
            )),
        }
    }
    out
}

/// The whole plan, every entry, as ACP's plan update: Fido's statuses
/// mapped to `pending`, `in_progress` and `completed`, and everything else
/// it knows of an entry (its id, a blocked status, details, evidence) in
/// the entry's `_meta.fido`.
pub fn plan_update(plan: &PlanSnapshot) -> Plan {
    let (entries, about) = match plan {
        PlanSnapshot::UpdatePlan(state) => (
            state
                .items
                .iter()
                .map(|item| {
                    let status = match item.status {
                        Status::Pending | Status::Blocked => PlanEntryStatus::Pending,
                        Status::InProgress => PlanEntryStatus::InProgress,
                        Status::Done => PlanEntryStatus::Completed,
                    };
                    entry(&item.title, status, serde_json::to_value(item))
                })
                .collect(),
            json!({ "flavour": "update_plan", "version": state.version, "reason": state.reason }),
        ),
        PlanSnapshot::Todo(todo) => (
            todo.tasks
                .iter()
                .filter(|task| task.status != TaskStatus::Deleted)
                .map(|task| {
                    let status = match task.status {
                        TaskStatus::InProgress => PlanEntryStatus::InProgress,
                        TaskStatus::Completed => PlanEntryStatus::Completed,
                        TaskStatus::Pending | TaskStatus::Deferred | TaskStatus::Deleted => {
                            PlanEntryStatus::Pending
                        }
                    };
                    entry(&task.subject, status, serde_json::to_value(task))
                })
                .collect(),
            json!({ "flavour": "todo", "action": todo.action }),
        ),
    };
    Plan::new(entries).meta(fido_meta(about))
}

fn entry(
    title: &str,
    status: PlanEntryStatus,
    fields: Result<Value, serde_json::Error>,
) -> PlanEntry {
    let entry = PlanEntry::new(title, PlanEntryPriority::Medium, status);
    match fields {
        Ok(fields) => entry.meta(fido_meta(fields)),
        Err(_) => entry,
    }
}

/// `{"fido": value}`, the `_meta` Fido's own fields travel in.
pub fn fido_meta(value: Value) -> Meta {
    let mut meta = Meta::new();
    meta.insert("fido".into(), value);
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tool_facts::{CommandExit, CommandRun};

    fn to_json(update: &SessionUpdate) -> Value {
        serde_json::to_value(update).unwrap()
    }

    /// What the standard catalog's tools may do.
    fn catalog_tools() -> Capabilities {
        crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::Todo).capabilities()
    }

    /// The kind an editor shows for a call of `name`, as sent (`other`,
    /// ACP's default, is left out of the frame).
    fn shown_kind(tools: &Capabilities, name: &str) -> String {
        let updates = Updates::new(Path::new("/w"), tools.clone());
        let call = to_json(&SessionUpdate::ToolCall(updates.tool_call("c1", name, "")));
        call["kind"].as_str().unwrap_or("other").to_string()
    }

    #[test]
    fn a_calls_kind_is_its_tools_widest_effect() {
        let tools = crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan)
            .capabilities();
        for (name, kind) in [
            ("list_files", "search"),
            ("read_file", "read"),
            ("ripgrep", "search"),
            ("browse_url", "fetch"),
            ("patch", "edit"),
            ("mkdir", "edit"),
            ("rm", "delete"),
            ("rmdir", "delete"),
            ("bash_exec", "execute"),
            ("ask_user", "other"),
            ("update_plan", "think"),
            ("delegate", "other"),
            ("not_a_tool", "other"),
        ] {
            assert_eq!(shown_kind(&tools, name), kind, "{name}");
        }
        assert_eq!(shown_kind(&catalog_tools(), "todo"), "think");
    }

    #[test]
    fn the_kind_comes_from_what_a_tool_declares_not_its_name() {
        let shell = Capability {
            executes: true,
            ..Capability::NONE
        };
        let tools = Capabilities::new([
            ("run_tests".to_string(), shell),
            ("read_file".to_string(), Capability::OUTSIDE),
            ("mcp__docs__get".to_string(), Capability::OUTSIDE_READ_ONLY),
        ]);
        assert_eq!(shown_kind(&tools, "run_tests"), "execute");
        // What runs outside every sandbox is `other`, whatever its name.
        assert_eq!(shown_kind(&tools, "read_file"), "other");
        assert_eq!(shown_kind(&tools, "mcp__docs__get"), "other");
    }

    #[test]
    fn streamed_text_is_not_sent_twice() {
        let mut updates = Updates::new(Path::new("/w"), catalog_tools());
        let first = updates.of(&EventKind::AssistantDelta { text: "Hel".into() });
        assert_eq!(to_json(&first[0])["sessionUpdate"], "agent_message_chunk");
        // Only what the fragments did not bring comes with the whole.
        let rest = updates.of(&EventKind::AssistantText {
            text: "Hello".into(),
        });
        assert_eq!(to_json(&rest[0])["content"]["text"], "lo");
        updates.of(&EventKind::AssistantDelta { text: "Hi".into() });
        assert!(
            updates
                .of(&EventKind::AssistantText { text: "Hi".into() })
                .is_empty()
        );
        let whole = updates.of(&EventKind::AssistantText { text: "Bye".into() });
        assert_eq!(to_json(&whole[0])["content"]["text"], "Bye");
    }

    /// With `tool_call_fallback`, a call the model writes into its text
    /// never reaches the editor as text: it comes as the tool call.
    #[test]
    fn a_call_written_into_the_text_is_shown_as_a_call_not_as_text() {
        let mut updates = Updates::new(Path::new("/w"), catalog_tools()).holding_text_calls(true);
        let mut sent = Vec::new();
        for piece in [
            "Reading.\n",
            "```json\n{\"name\": \"read_file\", ",
            "\"arguments\": {\"path\": \"a\"}}\n```",
        ] {
            sent.extend(updates.of(&EventKind::AssistantDelta { text: piece.into() }));
        }
        sent.extend(updates.of(&EventKind::AssistantText {
            text: "Reading.\n".into(),
        }));
        sent.extend(updates.of(&EventKind::ToolCall {
            id: "text_call_0".into(),
            name: "read_file".into(),
            summary: "a".into(),
        }));
        let shown: Vec<Value> = sent.iter().map(to_json).collect();
        let text: String = shown
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str())
            .collect();
        assert_eq!(text, "Reading.\n");
        assert_eq!(shown.last().unwrap()["sessionUpdate"], "tool_call");
    }

    #[test]
    fn a_patch_becomes_diffs_with_old_and_new_text_at_its_lines() {
        let mut updates = Updates::new(Path::new("/w"), catalog_tools());
        let call = updates.of(&EventKind::ToolCall {
            id: "c1".into(),
            name: "patch".into(),
            summary: "src/a.rs".into(),
        });
        let call = to_json(&call[0]);
        assert_eq!(call["kind"], "edit");
        assert_eq!(call["status"], "in_progress");
        assert_eq!(call["locations"][0]["path"], "/w/src/a.rs");
        assert_eq!(updates.running_call(), Some("c1"));
        // The summary names other lines: the facts decide.
        let facts = ToolFacts {
            file: Some(FileChange {
                path: "src/a.rs".into(),
                action: FileAction::Edited {
                    at_lines: vec![3, 9],
                    added: 2,
                    removed: 2,
                },
            }),
            ..ToolFacts::default()
        };
        let result = updates.of(&EventKind::ToolResult {
            id: "c1".into(),
            name: "patch".into(),
            ok: true,
            summary: "Edited src/a.rs at lines 4, 7: 2 edits".into(),
            facts: Some(Box::new(facts)),
        });
        assert_eq!(updates.running_call(), None);
        let result = to_json(&result[0]);
        assert_eq!(result["_meta"]["fido"]["file"]["action"], "edited");
        assert_eq!(result["_meta"]["fido"]["file"]["at_lines"], json!([3, 9]));
        let args = json!({"path": "src/a.rs", "edits": [
            {"old_text": "a", "new_text": "b"}, {"old_text": "c", "new_text": "d"}]});
        let output = updates.of(&EventKind::ToolOutput {
            id: "c1".into(),
            name: "patch".into(),
            arguments: args.to_string(),
            content: String::new(),
        });
        let output = to_json(&output[0]);
        assert_eq!(output["content"][1]["type"], "diff");
        assert_eq!(output["content"][1]["oldText"], "c");
        assert_eq!(output["content"][1]["newText"], "d");
        assert_eq!(output["locations"][1]["line"], 9);
    }

    /// A search's matched lines, and where a read starts, reach the editor
    /// as locations with their lines, so it can follow along.
    #[test]
    fn the_lines_a_call_showed_are_its_locations() {
        let mut updates = Updates::new(Path::new("/w"), catalog_tools());
        updates.of(&EventKind::ToolCall {
            id: "g1".into(),
            name: "ripgrep".into(),
            summary: "needle".into(),
        });
        let at = |path: &str, line| FileLine {
            path: path.into(),
            line,
        };
        let facts = ToolFacts {
            lines: vec![at("src/a.rs", 4), at("src/b.rs", 12)],
            ..ToolFacts::default()
        };
        let result = updates.of(&EventKind::ToolResult {
            id: "g1".into(),
            name: "ripgrep".into(),
            ok: true,
            summary: "src/a.rs:4:needle".into(),
            facts: Some(Box::new(facts)),
        });
        let result = to_json(&result[0]);
        assert_eq!(
            result["locations"],
            json!([{"path": "/w/src/a.rs", "line": 4}, {"path": "/w/src/b.rs", "line": 12}])
        );
    }

    /// A command that prints an exit line of its own and exits 3: the
    /// update says 3, from the facts.
    #[test]
    fn a_commands_exit_comes_from_its_facts() {
        let mut updates = Updates::new(Path::new("/w"), catalog_tools());
        updates.of(&EventKind::ToolCall {
            id: "b1".into(),
            name: "bash_exec".into(),
            summary: "./check".into(),
        });
        let facts = ToolFacts {
            command: Some(CommandRun {
                exit: CommandExit::Code { code: 3 },
                elapsed_ms: 5,
                output_bytes: 12,
            }),
            ..ToolFacts::default()
        };
        let result = updates.of(&EventKind::ToolResult {
            id: "b1".into(),
            name: "bash_exec".into(),
            ok: false,
            summary: "exit code: 0 exit code: 3".into(),
            facts: Some(Box::new(facts)),
        });
        let result = to_json(&result[0]);
        assert_eq!(result["status"], "failed");
        assert_eq!(
            result["_meta"]["fido"]["command"]["exit"],
            json!({"kind": "exited", "code": 3})
        );
        let output = updates.of(&EventKind::ToolOutput {
            id: "b1".into(),
            name: "bash_exec".into(),
            arguments: r#"{"command":"./check"}"#.into(),
            content: "exit code: 0".into(),
        });
        assert_eq!(
            to_json(&output[0])["content"][0]["content"]["text"],
            "```\nexit code: 0\n```\nexit code: 3"
        );
        // Without facts (a result restored from the journal), no meta.
        let bare = tool_result("b2", true, "ok", None, Path::new("/w"));
        assert!(to_json(&bare).get("_meta").is_none());
    }
}
