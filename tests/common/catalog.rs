//! The tool catalog on both sides of a delegation: the fingerprint of the
//! tools a request advertised to the model (the parent's catalog, as its
//! gateway sent it) and the fingerprints the subagent processes computed of
//! their own catalogs, read from the log (`RUST_LOG=info`: the child logs
//! `tool catalog built … catalog=<fingerprint>` and the parent copies the
//! child's stderr into its own).

use fido::protocol::ToolSpec;
use fido::protocol::ipc::catalog_fingerprint;
use serde_json::Value;

/// The fingerprint of the `tools` an OpenAI-style request `body` advertised,
/// computed as a subagent computes it of its own catalog.
pub fn advertised_fingerprint(body: &Value) -> String {
    let tools = body["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a request without tools: {body}"));
    let specs: Vec<ToolSpec> = tools
        .iter()
        .map(|tool| {
            let function = &tool["function"];
            ToolSpec {
                name: function["name"].as_str().unwrap_or_default().to_owned(),
                description: function["description"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                parameters: function["parameters"].clone(),
            }
        })
        .collect();
    catalog_fingerprint(&specs)
}

/// Every catalog fingerprint a subagent logged, in log order.
pub fn child_catalogs(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains("subagent stderr") && line.contains("tool catalog built"))
        .filter_map(|line| {
            let (_, rest) = line.split_once("catalog=")?;
            Some(rest.chars().take_while(char::is_ascii_hexdigit).collect())
        })
        .collect()
}
