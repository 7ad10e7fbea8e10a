//! Normalisation of a subagent's final text into the `delegate_result` the
//! parent receives. The text is untrusted: it is parsed leniently (a JSON
//! object, a fenced JSON block, or prose, which makes the result `partial`)
//! and bounded (findings count, field lengths, total size). Whatever is cut
//! is said in `uncertainties`, never dropped silently.

use serde::Deserialize;
use serde_json::Value;

use crate::protocol::delegate::{
    Confidence, DelegateResult, DelegateStatus, DelegateUsage, Finding,
};
use crate::text;

pub const MAX_FINDINGS: usize = 20;
pub const MAX_LIST_ENTRIES: usize = 10;
pub const MAX_SUMMARY_CHARS: usize = 2_000;
pub const MAX_CLAIM_CHARS: usize = 600;
pub const MAX_ENTRY_CHARS: usize = 400;
pub const MAX_FILE_CHARS: usize = 300;
/// Upper bound of the serialised result placed in the parent's history.
pub const MAX_RESULT_BYTES: usize = 24 * 1024;

/// Builds the result from the child's final text. `run_status` is what the
/// runner saw (a timeout or cancel makes even a good answer `partial`).
pub fn normalise(
    agent_id: &str,
    run_status: DelegateStatus,
    final_text: &str,
    usage: DelegateUsage,
) -> DelegateResult {
    let mut notes = Vec::new();
    let mut result = DelegateResult {
        usage: Some(usage),
        ..DelegateResult::empty(agent_id, run_status)
    };
    match parse_object(final_text) {
        Some(object) => {
            match object.get("summary").and_then(Value::as_str) {
                Some(summary) if !summary.trim().is_empty() => {
                    result.summary = bounded(summary, MAX_SUMMARY_CHARS, "summary", &mut notes);
                }
                _ => {
                    result.status = worse(result.status, DelegateStatus::Partial);
                    notes.push("[Fido] the subagent's result had no summary".into());
                }
            }
            if let Some(claimed) = object.get("status") {
                // The subagent may say it did less than the runner saw, never
                // more; a status it made up claims nothing.
                let claimed =
                    DelegateStatus::deserialize(claimed).unwrap_or(DelegateStatus::Completed);
                result.status = worse(result.status, claimed);
            }
            result.findings = findings(object.get("findings"), &mut notes);
            result.recommended_next_steps = strings(
                object.get("recommended_next_steps"),
                "recommended_next_steps",
                &mut notes,
            );
            result.tests_to_run = strings(object.get("tests_to_run"), "tests_to_run", &mut notes);
            result.uncertainties =
                strings(object.get("uncertainties"), "uncertainties", &mut notes);
        }
        None => {
            let prose = text::sanitize(final_text, false);
            let prose = prose.trim();
            result.status = worse(result.status, DelegateStatus::Partial);
            if prose.is_empty() {
                result.summary = "The subagent returned no final output.".into();
            } else {
                result.summary = bounded(prose, MAX_SUMMARY_CHARS, "summary", &mut notes);
                notes.push(
                    "[Fido] the subagent answered in prose instead of the JSON result; its findings are unstructured".into(),
                );
            }
        }
    }
    result.uncertainties.extend(notes);
    fit_total(&mut result);
    result
}

fn worse(a: DelegateStatus, b: DelegateStatus) -> DelegateStatus {
    let rank = |s| match s {
        DelegateStatus::Completed => 0,
        DelegateStatus::Partial => 1,
        DelegateStatus::Failed => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// A JSON object from the whole text, a fenced block, or the outermost braces.
fn parse_object(raw: &str) -> Option<serde_json::Map<String, Value>> {
    let as_object = |s: &str| match serde_json::from_str::<Value>(s.trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    };
    if let Some(map) = as_object(raw) {
        return Some(map);
    }
    let mut rest = raw;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(0, |i| i + 1);
        let Some(end) = after[body_start..].find("```") else {
            break;
        };
        if let Some(map) = as_object(&after[body_start..body_start + end]) {
            return Some(map);
        }
        rest = &after[body_start + end + 3..];
    }
    let (start, end) = (raw.find('{')?, raw.rfind('}')?);
    (start < end)
        .then(|| as_object(&raw[start..=end]))
        .flatten()
}

fn bounded(value: &str, max: usize, field: &str, notes: &mut Vec<String>) -> String {
    let clean = text::sanitize(value, false);
    let clean = clean.trim();
    if clean.chars().count() > max {
        notes.push(format!("[Fido] {field} was cut to {max} characters"));
    }
    text::short(clean, max)
}

fn strings(value: Option<&Value>, field: &str, notes: &mut Vec<String>) -> Vec<String> {
    let Some(Value::Array(items)) = value else {
        return Vec::new();
    };
    let mut out: Vec<String> = items
        .iter()
        .filter_map(|v| match v {
            Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
            Value::Null => None,
            other => Some(other.to_string()),
        })
        .collect();
    if out.len() > MAX_LIST_ENTRIES {
        notes.push(format!(
            "[Fido] {} {field} entries beyond the limit of {MAX_LIST_ENTRIES} were dropped",
            out.len() - MAX_LIST_ENTRIES
        ));
        out.truncate(MAX_LIST_ENTRIES);
    }
    out.iter()
        .map(|s| bounded(s, MAX_ENTRY_CHARS, field, notes))
        .collect()
}

fn findings(value: Option<&Value>, notes: &mut Vec<String>) -> Vec<Finding> {
    let Some(Value::Array(items)) = value else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut malformed = 0;
    for item in items {
        let Some(object) = item.as_object() else {
            malformed += 1;
            continue;
        };
        let Some(claim) = object.get("claim").and_then(Value::as_str) else {
            malformed += 1;
            continue;
        };
        let line = match object.get("line") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim().parse().ok(),
            _ => None,
        };
        // A confidence it did not state, or made up, is low.
        let confidence = object
            .get("confidence")
            .and_then(|c| Confidence::deserialize(c).ok())
            .unwrap_or(Confidence::Low);
        out.push(Finding {
            file: bounded(
                object.get("file").and_then(Value::as_str).unwrap_or(""),
                MAX_FILE_CHARS,
                "findings.file",
                notes,
            ),
            line,
            claim: bounded(claim, MAX_CLAIM_CHARS, "findings.claim", notes),
            confidence,
        });
    }
    if malformed > 0 {
        notes.push(format!(
            "[Fido] {malformed} findings without a claim were dropped"
        ));
    }
    if out.len() > MAX_FINDINGS {
        notes.push(format!(
            "[Fido] {} findings beyond the limit of {MAX_FINDINGS} were dropped",
            out.len() - MAX_FINDINGS
        ));
        out.truncate(MAX_FINDINGS);
    }
    out
}

/// Drops findings from the end until the whole result fits, saying so.
fn fit_total(result: &mut DelegateResult) {
    let size = |r: &DelegateResult| serde_json::to_vec(r).map_or(0, |v| v.len());
    let mut dropped = 0;
    while size(result) > MAX_RESULT_BYTES && !result.findings.is_empty() {
        result.findings.pop();
        dropped += 1;
    }
    if dropped > 0 {
        result.uncertainties.push(format!(
            "[Fido] {dropped} findings were dropped to keep the result under {} KiB",
            MAX_RESULT_BYTES / 1024
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage() -> DelegateUsage {
        DelegateUsage::default()
    }

    #[test]
    fn json_fenced_json_and_prose() {
        let json = r#"{"summary": "Parsed in config.rs", "findings": [{"file": "src/config.rs", "line": 42, "claim": "load reads env", "confidence": "high"}], "recommended_next_steps": ["check flags"], "tests_to_run": ["cargo test config"], "uncertainties": []}"#;
        let r = normalise("subagent-1", DelegateStatus::Completed, json, usage());
        assert_eq!(r.status, DelegateStatus::Completed);
        assert_eq!(r.identity.agent_id, "subagent-1");
        assert_eq!(r.findings[0].line, Some(42));
        assert_eq!(r.findings[0].confidence, Confidence::High);
        assert_eq!(r.tests_to_run, ["cargo test config"]);

        let fenced = format!("Here you go:\n```json\n{json}\n```\nbye");
        let r = normalise("subagent-1", DelegateStatus::Completed, &fenced, usage());
        assert_eq!(r.status, DelegateStatus::Completed);
        assert_eq!(r.summary, "Parsed in config.rs");

        let r = normalise(
            "subagent-1",
            DelegateStatus::Completed,
            "It is in config.rs, I think.",
            usage(),
        );
        assert_eq!(r.status, DelegateStatus::Partial);
        assert_eq!(r.summary, "It is in config.rs, I think.");
        assert!(r.uncertainties.iter().any(|u| u.contains("prose")));
    }

    #[test]
    fn a_subagent_may_claim_less_but_never_more() {
        let r = normalise(
            "s",
            DelegateStatus::Partial,
            r#"{"summary": "x", "status": "completed"}"#,
            usage(),
        );
        assert_eq!(r.status, DelegateStatus::Partial);
        let r = normalise(
            "s",
            DelegateStatus::Completed,
            r#"{"summary": "x", "status": "partial"}"#,
            usage(),
        );
        assert_eq!(r.status, DelegateStatus::Partial);
    }

    /// The status and confidence words are delegate_result's own; a word
    /// the subagent made up claims nothing and states no confidence.
    #[test]
    fn made_up_words_claim_nothing() {
        let finding = |confidence: &str| {
            format!(r#"{{"file": "a.rs", "line": 1, "claim": "c", "confidence": "{confidence}"}}"#)
        };
        let text = format!(
            r#"{{"summary": "x", "status": "done", "findings": [{}, {}, {}]}}"#,
            finding("medium"),
            finding("certain"),
            finding("high")
        );
        let r = normalise("s", DelegateStatus::Completed, &text, usage());
        assert_eq!(r.status, DelegateStatus::Completed);
        let confidences: Vec<Confidence> = r.findings.iter().map(|f| f.confidence).collect();
        assert_eq!(
            confidences,
            [Confidence::Medium, Confidence::Low, Confidence::High]
        );
        let failed = r#"{"summary": "x", "status": "failed"}"#;
        let r = normalise("s", DelegateStatus::Completed, failed, usage());
        assert_eq!(r.status, DelegateStatus::Failed);
    }

    #[test]
    fn oversized_results_are_cut_with_a_note() {
        let findings: Vec<String> = (0..60)
            .map(|i| {
                format!(
                    r#"{{"file": "f{i}.rs", "line": {i}, "claim": "{}", "confidence": "low"}}"#,
                    "c".repeat(2_000)
                )
            })
            .collect();
        let text = format!(
            r#"{{"summary": "{}", "findings": [{}]}}"#,
            "s".repeat(5_000),
            findings.join(",")
        );
        let r = normalise("s", DelegateStatus::Completed, &text, usage());
        assert!(r.findings.len() <= MAX_FINDINGS);
        assert!(r.summary.chars().count() <= MAX_SUMMARY_CHARS);
        assert!(
            r.findings
                .iter()
                .all(|f| f.claim.chars().count() <= MAX_CLAIM_CHARS)
        );
        assert!(serde_json::to_vec(&r).unwrap().len() <= MAX_RESULT_BYTES + 1024);
        assert!(
            r.uncertainties
                .iter()
                .any(|u| u.contains("beyond the limit"))
        );
        assert!(r.uncertainties.iter().any(|u| u.contains("cut to")));
    }

    #[test]
    fn control_characters_never_reach_the_parent() {
        let r = normalise(
            "s",
            DelegateStatus::Completed,
            "{\"summary\": \"ok\\u001b[31m red\"}",
            usage(),
        );
        assert_eq!(r.summary, "ok red");
    }
}
