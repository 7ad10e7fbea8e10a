//! The module layout as the README draws it, checked on the source: no
//! cycle between top-level modules, no import from a lower layer to a
//! higher one ([`RANKS`]), and the UI reaches the engine only through
//! `protocol` (commands in, events out).
//!
//! Test code may reach anywhere, so each file is read up to its first
//! `#[cfg(test)]` (test modules close their files here), and folders or
//! files named `tests` are skipped.

mod imports;

use std::collections::{BTreeMap, BTreeSet};

use imports::{Edges, SourceFile, cycles, folder_edges, folders, source_files, src_dir};

const MODULES: &[&str] = &[
    "acp",
    "agent",
    "changes",
    "cli",
    "config",
    "git",
    "hooks",
    "mcp",
    "net",
    "plan",
    "process",
    "procfs",
    "protocol",
    "provider",
    "runtime",
    "sandbox",
    "sandbox_check",
    "store",
    "subagent",
    "text",
    "tools",
    "ui",
    "workspace",
];

/// The layer of each top-level module, lowest first, as the design puts
/// them (the README's module table): a module may import its own layer and
/// those below, never one above. The ranks are not read off the imports; a
/// new arrow from a low layer to a high one fails until the design says
/// otherwise here.
const RANKS: &[(&str, u32)] = &[
    // The leaves and the boundary every other module speaks.
    ("text", 0),
    ("workspace", 0),
    ("protocol", 0),
    // What `/proc` says of a process (its start time tells a reused pid
    // apart); the sweep, the orphan records and change sets share it.
    ("procfs", 0),
    // The one way a child of Fido is started, signalled and reaped (its
    // group, death signal, environment, cgroup); git and all above use it.
    ("process", 0),
    // The one hardened git runner every git process of Fido goes through.
    ("git", 0),
    // Services on the protocol and the leaves alone: the model providers,
    // process isolation (the sandbox core knows no diagnostic and no
    // delegation) and the session store.
    ("provider", 1),
    ("sandbox", 1),
    ("store", 1),
    // Fido's own network access: the host rules, the private-address
    // check and the fetcher (tools use it; a command proxy will too).
    ("net", 1),
    // Write delegation's worktrees and change sets, on git and the undo
    // journal.
    ("changes", 1),
    // `fido sandbox check`'s diagnostic: it confines real children with the
    // sandbox core and makes a real worktree with `changes`, so it sits
    // above both; nothing but the command line reads its report.
    ("sandbox_check", 2),
    // The plan and its todo list, kept in the store.
    ("plan", 2),
    // User hooks: config types, the runner (process groups) and the
    // events it reports; the tools' approvals and the agent call them.
    ("hooks", 2),
    // The model's tools, on the services below and the policy (hooks, the
    // plan) they obey.
    ("tools", 3),
    // The turn loop: a provider, the tools, the plan.
    ("agent", 4),
    // MCP servers, started and spoken to; each owns its settings type.
    ("mcp", 4),
    // Delegation: child sessions of the agent, each in its own sandbox
    // (and, to write, its own worktree), with the MCP tools it may use; it
    // owns its limits (`subagent::DelegationLimits`) and reads no
    // configuration.
    ("subagent", 5),
    // The configuration: reads and layers the files, and composes the
    // settings types their consumers own (the subagent's limits among
    // them, so it sits above `subagent`); only the composition root
    // (runtime), the front ends and the command line read it.
    ("config", 6),
    // The UI (which sees only the boundary) and the composition root that
    // wires every service for a session; the command line starts both.
    ("ui", 8),
    ("runtime", 8),
    // The ACP agent: a front end over the runtime, for editors; only the
    // command line starts it.
    ("acp", 9),
    ("cli", 10),
];

/// What the UI may import besides itself: the boundary and two leaves.
const UI_MAY_USE: &[&str] = &["protocol", "text", "workspace"];

#[test]
fn top_level_modules_form_no_cycle() {
    let edges = module_edges();
    if let Some(cycle) = cycles(&edges).first() {
        panic!(
            "a module cycle: {}\n{}",
            cycle.join(" -> "),
            render(&edges, &ranks())
        );
    }
}

/// Inside every folder too (`src/` itself, each module's folder, each of
/// their subfolders), the direct children import one another without a
/// circle: each concept has one home the others import.
#[test]
fn no_folder_holds_an_import_cycle() {
    let files = source_files();
    let found = folder_cycles(&files);
    assert!(
        found.is_empty(),
        "{} import cycle(s) among a folder's children:\n{}",
        found.len(),
        found.join("\n")
    );
}

/// The checker itself, on source written here: a circle through a `use`
/// list, a `super::` path and a re-export of the folder's module file is
/// caught in the folder it lies in, and removing one arrow clears it.
#[test]
fn a_cycle_inside_a_folder_is_caught() {
    let parent = SourceFile::new(&["diag"], "mod probe; mod table;\npub use table::Row;");
    let table = SourceFile::new(&["diag", "table"], "use super::{probe::{self, Probe}};");
    let probe = |code| SourceFile::new(&["diag", "probe"], code);
    let elsewhere = SourceFile::new(&["other"], "use crate::diag::table::Row;");
    for code in ["use super::Row;", "fn f() -> crate::diag::table::Row {}"] {
        let files = [
            parent.clone(),
            table.clone(),
            probe(code),
            elsewhere.clone(),
        ];
        assert_eq!(
            folder_cycles(&files),
            ["diag: probe -> table -> probe"],
            "{code}"
        );
        // One level up the same files draw only `other -> diag`.
        let top = folder_edges(&files, &[]);
        assert_eq!(top["other"], BTreeSet::from(["diag".to_string()]));
        assert!(top["diag"].is_empty());
    }
    let files = [parent, table, probe("// use super::Row;\n"), elsewhere];
    assert!(folder_cycles(&files).is_empty());
}

/// Each folder's cycles, as `folder: a -> b -> a`.
fn folder_cycles(files: &[SourceFile]) -> Vec<String> {
    let mut found = Vec::new();
    for folder in folders(files) {
        let edges = folder_edges(files, &folder);
        let name = if folder.is_empty() {
            "src".to_string()
        } else {
            folder.join("/")
        };
        for cycle in cycles(&edges) {
            found.push(format!("{name}: {}", cycle.join(" -> ")));
        }
    }
    found
}

#[test]
fn no_module_imports_a_higher_layer() {
    let edges = module_edges();
    let ranks = ranks();
    let mut unranked: Vec<String> = MODULES
        .iter()
        .filter(|m| !ranks.contains_key(**m))
        .map(|m| m.to_string())
        .collect();
    unranked.extend(
        src_modules()
            .into_iter()
            .filter(|m| !MODULES.contains(&m.as_str())),
    );
    assert!(unranked.is_empty(), "modules without a layer: {unranked:?}");
    let upward = upward_edges(&edges, &ranks);
    assert!(
        upward.is_empty(),
        "imports from a lower layer to a higher one: {upward:?}\n{}",
        render(&edges, &ranks)
    );
}

/// The checker itself: an arrow from a low layer to a high one is caught,
/// arrows down and within a layer are not.
#[test]
fn an_upward_import_is_caught() {
    let ranks = ranks();
    let mut edges = module_edges();
    assert!(upward_edges(&edges, &ranks).is_empty());
    edges
        .entry("protocol".into())
        .or_default()
        .insert("text".into());
    edges.entry("cli".into()).or_default().insert("text".into());
    assert!(upward_edges(&edges, &ranks).is_empty());
    edges
        .entry("store".into())
        .or_default()
        .insert("agent".into());
    assert_eq!(
        upward_edges(&edges, &ranks),
        [("store".to_string(), "agent".to_string())]
    );
    assert!(render(&edges, &ranks).contains("store (1) -> agent (4)  UPWARD"));
}

#[test]
fn the_ui_reaches_the_engine_only_through_protocol() {
    let edges = module_edges();
    let used = edges.get("ui").cloned().unwrap_or_default();
    let beyond: Vec<_> = used
        .iter()
        .filter(|m| !UI_MAY_USE.contains(&m.as_str()))
        .collect();
    assert!(beyond.is_empty(), "ui imports {beyond:?}");
    // The check reads real imports: protocol is among them.
    assert!(used.contains("protocol"), "{used:?}");
}

fn ranks() -> BTreeMap<String, u32> {
    RANKS.iter().map(|(m, r)| (m.to_string(), *r)).collect()
}

/// The imports whose target sits in a higher layer than their source.
fn upward_edges(edges: &Edges, ranks: &BTreeMap<String, u32>) -> Vec<(String, String)> {
    let rank = |m: &str| ranks.get(m).copied().unwrap_or(u32::MAX);
    edges
        .iter()
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from, to)))
        .filter(|(from, to)| rank(to) > rank(from))
        .map(|(from, to)| (from.clone(), to.clone()))
        .collect()
}

/// The module graph, one module a line from the lowest layer up, each with
/// its layer and its imports (an upward one marked).
fn render(edges: &Edges, ranks: &BTreeMap<String, u32>) -> String {
    let mut modules: Vec<(&String, &u32)> = ranks.iter().collect();
    modules.sort_by_key(|(m, r)| (**r, *m));
    let mut text = String::from("module graph (layer):\n");
    for (module, rank) in modules {
        text.push_str(&format!("{module} ({rank})\n"));
        for to in edges.get(module).into_iter().flatten() {
            let to_rank = ranks.get(to).copied().unwrap_or(u32::MAX);
            let mark = if to_rank > *rank { "  UPWARD" } else { "" };
            text.push_str(&format!("  {module} ({rank}) -> {to} ({to_rank}){mark}\n"));
        }
    }
    text
}

/// The top-level modules as `src/` holds them (a folder or a `.rs` file
/// beside `lib.rs`).
fn src_modules() -> BTreeSet<String> {
    std::fs::read_dir(src_dir())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "lib.rs" && name != "main.rs")
        .map(|name| name.trim_end_matches(".rs").to_owned())
        .collect()
}

/// Which top-level modules each one names, outside its tests.
fn module_edges() -> Edges {
    folder_edges(&source_files(), &[])
}
