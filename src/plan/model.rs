//! The plan: one normalised object shared by the model (tool result), the
//! UI (`plan_updated`), the state file and `fido plan show --json`.
//!
//! `validate` turns the model's raw arguments into a plan or explains, in
//! one sentence that names the offending item, what is wrong and what shape
//! is expected. It never panics on any JSON value.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer};
use serde_json::Value;

// The shapes are the wire's (`plan_updated` carries them); their logic is here.
pub use crate::protocol::plan::{PlanChanges, PlanItem, PlanState, Status};

/// Most items a plan may hold.
pub const MAX_ITEMS: usize = 20;
pub const MAX_ID_CHARS: usize = 40;
pub const MAX_TITLE_CHARS: usize = 120;
pub const MAX_DETAILS_CHARS: usize = 600;
pub const MAX_NEXT_ACTION_CHARS: usize = 240;
pub const MAX_REASON_CHARS: usize = 240;
pub const MAX_EVIDENCE_ENTRIES: usize = 8;
pub const MAX_EVIDENCE_CHARS: usize = 240;

impl Status {
    /// Whether the item still needs work before the turn can honestly end.
    pub fn is_open(self) -> bool {
        match self {
            Status::Pending | Status::InProgress => true,
            Status::Blocked | Status::Done => false,
        }
    }
}

impl PlanState {
    pub fn open_items(&self) -> impl Iterator<Item = &PlanItem> {
        self.items.iter().filter(|i| i.status.is_open())
    }

    /// The next version with these items; `changes` computed against `self`.
    pub fn successor(&self, reason: String, items: Vec<PlanItem>, now: String) -> PlanState {
        let changes = diff(&self.items, &items);
        PlanState {
            // A hand-edited file may hold any u64; never panic on overflow.
            version: self.version.saturating_add(1),
            updated_at: Some(now),
            reason,
            items,
            changes,
        }
    }
}

fn diff(before: &[PlanItem], after: &[PlanItem]) -> PlanChanges {
    let old: BTreeMap<&str, Status> = before.iter().map(|i| (i.id.as_str(), i.status)).collect();
    let new: BTreeSet<&str> = after.iter().map(|i| i.id.as_str()).collect();
    PlanChanges {
        added: after
            .iter()
            .filter(|i| !old.contains_key(i.id.as_str()))
            .map(|i| i.id.clone())
            .collect(),
        dropped: before
            .iter()
            .filter(|i| !new.contains(i.id.as_str()))
            .map(|i| i.id.clone())
            .collect(),
        status_changed: after
            .iter()
            .filter_map(|i| {
                let was = old.get(i.id.as_str())?;
                (*was != i.status)
                    .then(|| format!("{}: {} → {}", i.id, was.as_str(), i.status.as_str()))
            })
            .collect(),
    }
}

/// What the model must send, for error messages.
pub const EXPECTED_SHAPE: &str = r#"{"reason": "why the plan changed", "items": [{"id": "inspect", "title": "Read the parser", "status": "pending" | "in_progress" | "blocked" | "done", "details"?: "…", "dependencies"?: ["other-id"], "next_action"?: "…" (required unless done), "evidence"?: ["cargo test: 12 passed"] (required for done)}]}"#;

/// Why `update_plan`'s arguments were refused: one sentence for the
/// model, naming what to send instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

/// Validates the raw `update_plan` arguments into `(reason, items)`.
pub fn validate(args: &Value) -> Result<(String, Vec<PlanItem>), Rejected> {
    checked(args).map_err(Rejected)
}

fn checked(args: &Value) -> Result<(String, Vec<PlanItem>), String> {
    let Some(object) = args.as_object() else {
        return Err(format!("the arguments must be an object: {EXPECTED_SHAPE}"));
    };
    for key in object.keys() {
        if key != "reason" && key != "items" {
            return Err(format!(
                "unknown argument `{}`; update_plan takes only `reason` and `items`: {EXPECTED_SHAPE}",
                crate::text::short(key, 40)
            ));
        }
    }
    let reason = match object.get("reason") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) | None => {
            return Err(
                "`reason` is required: one short sentence saying why the plan changed".into(),
            );
        }
        Some(other) => return Err(format!("`reason` must be a string, not {}", kind(other))),
    };
    check_len("reason", &reason, MAX_REASON_CHARS)?;
    let raw_items = match object.get("items") {
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "`items` must be an array of item objects, not {}: {EXPECTED_SHAPE}",
                kind(other)
            ));
        }
        None => {
            return Err(format!(
                "`items` is required (send [] for an empty plan): {EXPECTED_SHAPE}"
            ));
        }
    };
    if raw_items.len() > MAX_ITEMS {
        return Err(format!(
            "the plan has {} items; at most {MAX_ITEMS} are allowed — merge small steps",
            raw_items.len()
        ));
    }
    let mut items = Vec::with_capacity(raw_items.len());
    for (index, raw) in raw_items.iter().enumerate() {
        items.push(item(index, raw)?);
    }
    check_plan(&items)?;
    Ok((reason, items))
}

/// What holds across items: unique ids, at most one in progress, known
/// dependencies without loops.
fn check_plan(items: &[PlanItem]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for (index, item) in items.iter().enumerate() {
        if !seen.insert(item.id.as_str()) {
            return Err(format!(
                "item \"{}\" (items[{index}]): the id is used twice; ids must be unique",
                item.id
            ));
        }
    }
    let in_progress: Vec<&str> = items
        .iter()
        .filter(|i| i.status == Status::InProgress)
        .map(|i| i.id.as_str())
        .collect();
    if in_progress.len() > 1 {
        return Err(format!(
            "items {} are all in_progress; keep at most one item in_progress",
            in_progress
                .iter()
                .map(|id| format!("\"{id}\""))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for item in items {
        for dep in &item.dependencies {
            if dep == &item.id {
                return Err(format!("item \"{}\": it depends on itself", item.id));
            }
            if !seen.contains(dep.as_str()) {
                return Err(format!(
                    "item \"{}\": dependency \"{}\" is not an id in this plan (unknown id); list every item you keep, with its existing id",
                    item.id,
                    crate::text::short(dep, 40)
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(items) {
        return Err(format!(
            "dependencies form a cycle: {}; a plan's dependencies must not loop",
            cycle.join(" → ")
        ));
    }
    Ok(())
}

/// An item as the model sent it: each field as the JSON it holds
/// (`Some(Value::Null)` for an explicit `null`, `None` when absent, so the
/// messages can tell them apart), and every other key, in order, to be
/// named. Any JSON object deserializes into it.
#[derive(Deserialize)]
struct RawItem {
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    title: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    status: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    details: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    dependencies: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    next_action: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    evidence: Option<Value>,
    #[serde(flatten)]
    unknown: serde_json::Map<String, Value>,
}

/// A field that is there, `null` included.
fn present<'de, D: Deserializer<'de>>(value: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(value).map(Some)
}

fn item(index: usize, raw: &Value) -> Result<PlanItem, String> {
    let at = |what: &str| format!("items[{index}]: {what}");
    let fields = match raw {
        Value::Object(_) => RawItem::deserialize(raw).map_err(|err| at(&err.to_string()))?,
        _ => {
            return Err(at(&format!(
                "each item must be an object, not {}: {EXPECTED_SHAPE}",
                kind(raw)
            )));
        }
    };
    let id = item_id(fields.id.as_ref()).map_err(|what| at(&what))?;
    let named = |what: &str| format!("item \"{id}\" (items[{index}]): {what}");
    known_fields(&fields.unknown).map_err(|what| named(&what))?;
    let title = required_title(fields.title.as_ref()).map_err(|what| named(&what))?;
    check_len(&named("`title`"), &title, MAX_TITLE_CHARS)?;
    let status = required_status(fields.status.as_ref()).map_err(|what| named(&what))?;
    let text = |value: &Option<Value>, key: &str, max: usize| {
        optional_text(value.as_ref(), &named(&format!("`{key}`")), max)
    };
    let details = text(&fields.details, "details", MAX_DETAILS_CHARS)?;
    let next_action = text(&fields.next_action, "next_action", MAX_NEXT_ACTION_CHARS)?;
    let list = |value: &Option<Value>, key: &str, entries: usize, chars: usize| {
        text_list(value.as_ref(), &named(&format!("`{key}`")), entries, chars)
    };
    let dependencies = list(
        &fields.dependencies,
        "dependencies",
        MAX_ITEMS,
        MAX_ID_CHARS,
    )?;
    let evidence = list(
        &fields.evidence,
        "evidence",
        MAX_EVIDENCE_ENTRIES,
        MAX_EVIDENCE_CHARS,
    )?;
    let mut unique_deps = BTreeSet::new();
    if let Some(dup) = dependencies
        .iter()
        .find(|d| !unique_deps.insert(d.as_str()))
    {
        return Err(named(&format!("dependency \"{dup}\" is listed twice")));
    }
    check_complete(status, next_action.is_some(), !evidence.is_empty())
        .map_err(|what| named(&what))?;
    Ok(PlanItem {
        id,
        title,
        status,
        details,
        dependencies,
        next_action,
        evidence,
    })
}

/// The trimmed id: 1 to [`MAX_ID_CHARS`] of letters, digits, `-`, `_`, `.`.
fn item_id(value: Option<&Value>) -> Result<String, String> {
    let id = match value {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(other) => return Err(format!("`id` must be a string, not {}", kind(other))),
        None => return Err("`id` is required (short and readable, e.g. \"inspect\")".into()),
    };
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(format!("`id` must be 1 to {MAX_ID_CHARS} characters"));
    }
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "id \"{}\" must use only letters, digits, '-', '_' and '.' (e.g. \"write-tests\")",
            crate::text::short(&id, 40)
        ));
    }
    Ok(id)
}

/// The first key that is no item field, named.
fn known_fields(unknown: &serde_json::Map<String, Value>) -> Result<(), String> {
    match unknown.keys().next() {
        Some(key) => Err(format!(
            "unknown field `{}`; items have id, title, status, details, dependencies, next_action, evidence",
            crate::text::short(key, 40)
        )),
        None => Ok(()),
    }
}

fn required_title(value: Option<&Value>) -> Result<String, String> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(Value::String(_)) | None => Err("`title` is required".into()),
        Some(other) => Err(format!("`title` must be a string, not {}", kind(other))),
    }
}

fn required_status(value: Option<&Value>) -> Result<Status, String> {
    match value {
        Some(Value::String(s)) => Status::parse(s).ok_or_else(|| {
            format!(
                "status \"{}\" is not one of pending, in_progress, blocked, done",
                crate::text::short(s, 30)
            )
        }),
        Some(other) => Err(format!(
            "`status` must be one of the strings \"pending\", \"in_progress\", \"blocked\", \"done\", not {}",
            kind(other)
        )),
        None => Err("`status` is required: pending, in_progress, blocked or done".into()),
    }
}

/// An open item says what happens next; a done one carries its proof.
fn check_complete(status: Status, has_next_action: bool, has_evidence: bool) -> Result<(), String> {
    match status {
        Status::Pending | Status::InProgress | Status::Blocked if !has_next_action => Err(format!(
            "`next_action` is required for a {} item: say what happens next",
            status.as_str()
        )),
        Status::Done if !has_evidence => Err(
            "a done item needs `evidence`: concise proof such as the test command and its result (e.g. \"cargo test: 42 passed\")"
                .into(),
        ),
        Status::Pending | Status::InProgress | Status::Blocked | Status::Done => Ok(()),
    }
}

fn optional_text(value: Option<&Value>, what: &str, max: usize) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            check_len(what, s, max)?;
            Ok(Some(s.to_string()))
        }
        Some(other) => Err(format!("{what} must be a string, not {}", kind(other))),
    }
}

fn text_list(
    value: Option<&Value>,
    what: &str,
    max_entries: usize,
    max_chars: usize,
) -> Result<Vec<String>, String> {
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(format!(
                "{what} must be an array of strings, not {}",
                kind(other)
            ));
        }
    };
    if list.len() > max_entries {
        return Err(format!(
            "{what} has {} entries; at most {max_entries} are allowed — keep it concise",
            list.len()
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for entry in list {
        let Value::String(s) = entry else {
            return Err(format!(
                "{what} must hold only strings, not {}",
                kind(entry)
            ));
        };
        let s = s.trim();
        if s.is_empty() {
            return Err(format!("{what} holds an empty string"));
        }
        check_len(what, s, max_chars)?;
        out.push(s.to_string());
    }
    Ok(out)
}

fn check_len(what: &str, text: &str, max: usize) -> Result<(), String> {
    let n = text.chars().count();
    if n > max {
        return Err(format!(
            "{what} is {n} characters; keep it to at most {max} (record concise facts, not full output)"
        ));
    }
    Ok(())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A dependency cycle as a list of ids (first id repeated at the end).
fn find_cycle(items: &[PlanItem]) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Active,
        Finished,
    }
    let index: BTreeMap<&str, usize> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (item.id.as_str(), i))
        .collect();
    let mut marks = vec![Mark::New; items.len()];
    for start in 0..items.len() {
        if marks[start] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (node, next dependency to look at).
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::Active;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(dep) = items[node].dependencies.get(*next) {
                *next += 1;
                let Some(&target) = index.get(dep.as_str()) else {
                    continue;
                };
                match marks[target] {
                    Mark::New => {
                        marks[target] = Mark::Active;
                        stack.push((target, 0));
                    }
                    Mark::Active => {
                        let from = stack.iter().position(|(n, _)| *n == target).unwrap_or(0);
                        let mut cycle: Vec<String> = stack[from..]
                            .iter()
                            .map(|(n, _)| items[*n].id.clone())
                            .collect();
                        cycle.push(items[target].id.clone());
                        return Some(cycle);
                    }
                    Mark::Finished => {}
                }
            } else {
                marks[node] = Mark::Finished;
                stack.pop();
            }
        }
    }
    None
}

#[cfg(test)]
pub(super) mod tests;
