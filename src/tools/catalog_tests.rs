//! The catalog's schemas and the `Args` types behind them cannot drift: for
//! every built-in tool, a call holding every advertised property parses,
//! leaving out any one property parses exactly when the schema does not
//! require it, and a property the schema does not name is refused. Each
//! tool's name is written once, in its `NAME`, and the catalog is the
//! recorded one byte for byte.

use serde_json::{Map, Value, json};

use super::delegate::{Delegate, ProfileOffer};
use super::{ToolCatalog, TypedTool};
use crate::plan::PlanFlavour;

/// A value the schema allows: the first enum value, the minimum, one item,
/// every property of an object.
fn example(schema: &Value) -> Value {
    if let Some(values) = schema["enum"].as_array() {
        return values[0].clone();
    }
    match schema["type"].as_str() {
        Some("string") => json!("x"),
        Some("integer") => schema.get("minimum").cloned().unwrap_or(json!(1)),
        Some("boolean") => json!(true),
        Some("array") => json!([example(&schema["items"])]),
        Some("object") => {
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            let object: Map<String, Value> = properties
                .iter()
                .map(|(name, property)| (name.clone(), example(property)))
                .collect();
            Value::Object(object)
        }
        other => panic!("no example for type {other:?} in {schema}"),
    }
}

/// Every call that leaves one property out of `call` (at any depth), named
/// by its path, with whether the schema requires that property.
fn omissions(schema: &Value, call: &Value) -> Vec<(String, Value, bool)> {
    let mut found = Vec::new();
    if let Some(properties) = schema["properties"].as_object() {
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        for (name, property) in properties {
            let mut without = call.clone();
            without.as_object_mut().map(|o| o.remove(name));
            found.push((name.clone(), without, required.contains(&json!(name))));
            for (path, inner, needed) in omissions(property, &call[name]) {
                let mut nested = call.clone();
                nested[name] = inner;
                found.push((format!("{name}.{path}"), nested, needed));
            }
        }
    }
    if schema["type"] == "array" {
        for (path, inner, needed) in omissions(&schema["items"], &call[0]) {
            found.push((format!("[0].{path}"), json!([inner]), needed));
        }
    }
    found
}

fn parses<T: TypedTool>(call: &Value) -> Result<(), String> {
    serde_json::from_value::<T::Args>(call.clone())
        .map(drop)
        .map_err(|err| err.to_string())
}

/// Checks one tool's `parameters` against its `Args`; returns its name.
fn check_schema<T: TypedTool>(tool: &T) -> &'static str {
    let schema = tool.parameters();
    let full = example(&schema);
    let name = T::NAME;
    assert!(
        parses::<T>(&full).is_ok(),
        "{name}: {full} must parse: {:?}",
        parses::<T>(&full)
    );
    for (path, call, required) in omissions(&schema, &full) {
        let parsed = parses::<T>(&call);
        assert_eq!(
            parsed.is_err(),
            required,
            "{name}: leaving out {path}: {parsed:?}"
        );
    }
    assert_eq!(schema["additionalProperties"], false, "{name}");
    let mut extra = full.clone();
    extra["not_in_the_schema"] = json!(1);
    assert!(
        parses::<T>(&extra).is_err(),
        "{name}: an unknown property must be refused"
    );
    name
}

#[test]
fn every_typed_schema_is_exactly_what_its_args_parse() {
    let profiles = Delegate::new(vec![ProfileOffer {
        name: "reviewer".into(),
        description: "Reviews".into(),
    }]);
    let checked = [
        check_schema(&super::list_files::ListFiles),
        check_schema(&super::read_file::ReadFile),
        check_schema(&super::ripgrep::Ripgrep),
        check_schema(&super::browse_url::BrowseUrl),
        check_schema(&super::patch::Patch),
        check_schema(&super::mkdir::Mkdir),
        check_schema(&super::rm::Rm),
        check_schema(&super::rmdir::Rmdir),
        check_schema(&super::bash_exec::BashExec),
        check_schema(&super::ask_user::AskUser),
        check_schema(&Delegate::default()),
        check_schema(&profiles),
    ];
    // The plan tools take their arguments as JSON and check them in
    // `crate::plan` (to word each rejection); every other tool is checked.
    let plan_tools = [
        super::update_plan::UpdatePlan::NAME,
        super::todo::Todo::NAME,
    ];
    for flavour in [PlanFlavour::UpdatePlan, PlanFlavour::Todo] {
        for name in ToolCatalog::standard(flavour).names() {
            assert!(
                checked.contains(&name.as_str()) || plan_tools.contains(&name.as_str()),
                "{name} is in the catalog but its schema is not checked"
            );
        }
    }
    // The profiles' `agent` property was among those checked.
    assert!(profiles.parameters()["properties"].get("profile").is_some());
}

/// Each tool file without its tests.
const SOURCES: [(&str, &str); 18] = [
    ("approval.rs", include_str!("approval.rs")),
    ("ask_user.rs", include_str!("ask_user.rs")),
    ("bash_exec.rs", include_str!("bash_exec.rs")),
    ("browse_url.rs", include_str!("browse_url.rs")),
    ("delegate.rs", include_str!("delegate.rs")),
    ("guard.rs", include_str!("guard.rs")),
    ("list_files.rs", include_str!("list_files.rs")),
    ("mkdir.rs", include_str!("mkdir.rs")),
    ("mod.rs", include_str!("mod.rs")),
    ("names.rs", include_str!("names.rs")),
    ("page.rs", include_str!("page.rs")),
    ("patch.rs", include_str!("patch.rs")),
    ("read_file.rs", include_str!("read_file.rs")),
    ("ripgrep.rs", include_str!("ripgrep.rs")),
    ("rm.rs", include_str!("rm.rs")),
    ("rmdir.rs", include_str!("rmdir.rs")),
    ("update_plan.rs", include_str!("update_plan.rs")),
    ("web.rs", include_str!("web.rs")),
];

/// The text of `source` before its tests.
fn code(source: &str) -> &str {
    source.split("#[cfg(test)]").next().unwrap_or(source)
}

#[test]
fn each_tool_name_is_written_once_as_a_string() {
    // `todo`'s name is `crate::plan::todo::TOOL_NAME`, beside its state.
    for name in ToolCatalog::standard(PlanFlavour::UpdatePlan).names() {
        let literal = format!("\"{name}\"");
        let places: Vec<(&str, usize)> = SOURCES
            .iter()
            .map(|(file, source)| (*file, code(source).matches(&literal).count()))
            .filter(|(_, count)| *count > 0)
            .collect();
        assert_eq!(places.len(), 1, "{literal} is written in {places:?}");
        assert_eq!(places[0].1, 1, "{literal} is written in {places:?}");
    }
}

/// The specs as `fido tool list` advertised them before the schemas were
/// derived from the `Args` types (its `function` objects); the provider's
/// prompt cache depends on every byte.
#[test]
fn the_catalog_is_the_recorded_one_byte_for_byte() {
    let recorded = [
        (
            ToolCatalog::standard(PlanFlavour::UpdatePlan),
            include_str!("../../tests/fixtures/catalog/update_plan.json"),
        ),
        (
            ToolCatalog::with_extra(
                PlanFlavour::Todo,
                vec![ProfileOffer {
                    name: "reviewer".into(),
                    description: "Reviews a diff".into(),
                }],
                Vec::new(),
            ),
            include_str!("../../tests/fixtures/catalog/todo_with_a_profile.json"),
        ),
    ];
    for (catalog, expected) in recorded {
        let printed = serde_json::to_string_pretty(catalog.specs()).unwrap();
        assert!(printed == expected, "the catalog changed:\n{printed}");
    }
}

/// A call's arguments that do not read are refused in these words (the
/// tool's name goes before them).
#[test]
fn unreadable_arguments_are_refused_with_the_reason() {
    let refused = |raw: &str| super::parse_arguments(raw).unwrap_err().to_string();
    assert_eq!(refused("[]"), "arguments must be a JSON object");
    assert_eq!(
        refused("{"),
        "arguments are not valid JSON (EOF while parsing an object at line 1 column 1); send one JSON object matching the tool's schema"
    );
    assert_eq!(super::parse_arguments(" ").unwrap(), json!({}));
}
