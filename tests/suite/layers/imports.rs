//! The crate's import graph as its source text draws it, for
//! [`super`]'s checks: each non-test file's paths (`crate::a::b`,
//! `super::x`, `self::x`, and every leaf of a `use` list), resolved to the
//! module they name, and from them the arrows among the direct children
//! (files and subfolders) of any one folder.
//!
//! Test code may reach anywhere, so each file is read up to its first
//! `#[cfg(test)]` (test modules close their files here), files and folders
//! named `tests` (or `*_tests.rs`) are skipped, and so are comments and doc
//! comments (which name modules freely).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub type Edges = BTreeMap<String, BTreeSet<String>>;

/// One non-test source file: its module path (`src/a/b.rs` and
/// `src/a/b/mod.rs` are `["a", "b"]`, `src/lib.rs` is `[]`) and its code.
#[derive(Clone)]
pub struct SourceFile {
    pub module: Vec<String>,
    pub code: String,
}

impl SourceFile {
    /// The file's non-test code, without comments.
    pub fn new(module: &[&str], text: &str) -> Self {
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        SourceFile {
            module: module.iter().map(|s| s.to_string()).collect(),
            code: without_comments(code),
        }
    }
}

pub fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every non-test Rust file under `src/`.
pub fn source_files() -> Vec<SourceFile> {
    let src = src_dir();
    let mut paths = Vec::new();
    collect_rust_files(&src, &mut paths);
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            let module = module_path(&src, path);
            let module: Vec<&str> = module.iter().map(String::as_str).collect();
            SourceFile::new(&module, &text)
        })
        .collect()
}

/// Every folder that holds modules, `[]` (`src/` itself) first.
pub fn folders(files: &[SourceFile]) -> BTreeSet<Vec<String>> {
    files
        .iter()
        .flat_map(|file| (0..file.module.len()).map(|n| file.module[..n].to_vec()))
        .collect()
}

/// The arrows among the direct children of `folder`: child `a` imports
/// child `b` when a file in `a` names a path into `b`, directly or through
/// an item the folder's own module file re-exports from `b`.
pub fn folder_edges(files: &[SourceFile], folder: &[String]) -> Edges {
    let depth = folder.len();
    let inside: Vec<&SourceFile> = files
        .iter()
        .filter(|f| f.module.len() > depth && f.module.starts_with(folder))
        .collect();
    let mut edges: Edges = inside
        .iter()
        .map(|f| (f.module[depth].clone(), BTreeSet::new()))
        .collect();
    let reexports = reexports(files, folder, &edges);
    for file in inside {
        let from = &file.module[depth];
        for (target, _) in resolved_paths(file) {
            if target.len() <= depth || !target.starts_with(folder) {
                continue;
            }
            let name = &target[depth];
            let to = match edges.contains_key(name) {
                true => name,
                false => match reexports.get(name) {
                    Some(child) => child,
                    None => continue,
                },
            };
            if to != from {
                let to = to.clone();
                edges.entry(from.clone()).or_default().insert(to);
            }
        }
    }
    edges
}

/// The names the folder's own module file binds to an item of one of its
/// children (`pub use fixture::{ProbeFixture, ...}` binds `ProbeFixture` to
/// `fixture`), so that `super::ProbeFixture` is an arrow to `fixture`.
fn reexports(
    files: &[SourceFile],
    folder: &[String],
    children: &Edges,
) -> BTreeMap<String, String> {
    let depth = folder.len();
    files
        .iter()
        .filter(|f| f.module == folder)
        .flat_map(resolved_paths)
        .filter(|(target, _)| target.len() > depth + 1 && target.starts_with(folder))
        .filter(|(target, _)| children.contains_key(&target[depth]))
        .map(|(target, bound)| (bound, target[depth].clone()))
        .collect()
}

/// A cycle through `start`, if there is one.
pub fn path_back(edges: &Edges, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![vec![start.to_string()]];
    let mut seen = BTreeSet::new();
    while let Some(path) = stack.pop() {
        let last = path.last()?.clone();
        for next in edges.get(&last).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(next.clone());
                return Some(cycle);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push(longer);
            }
        }
    }
    None
}

/// The graph's cycles, one for each node no cycle found so far passes.
pub fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    for start in edges.keys() {
        if found.iter().any(|cycle| cycle.contains(start)) {
            continue;
        }
        if let Some(cycle) = path_back(edges, start) {
            found.push(cycle);
        }
    }
    found
}

fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut module: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
        module.pop();
    }
    module
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "tests" || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        if path.is_dir() {
            collect_rust_files(&path, files);
        } else if name.ends_with(".rs") && name != "main.rs" {
            files.push(path);
        }
    }
}

/// The code without `//` and `/* */` comments.
fn without_comments(code: &str) -> String {
    let mut rest = code;
    let mut kept = String::new();
    while let Some(start) = rest.find("/*") {
        kept.push_str(&rest[..start]);
        rest = rest[start..]
            .find("*/")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    kept.push_str(rest);
    kept.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path the file names that starts at `crate`, `super` or `self`,
/// and every `use` path, resolved to an absolute module path, with the name a `use` binds it to.
fn resolved_paths(file: &SourceFile) -> Vec<(Vec<String>, String)> {
    let code = file.code.as_str();
    let mut paths = Vec::new();
    for (at, _) in code.char_indices() {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':') {
            continue;
        }
        let rest = &code[at..];
        let starts = ["crate::", "super::", "self::", "$crate::"];
        let tree = if starts.iter().any(|s| rest.starts_with(s)) {
            use_tree(rest.trim_start_matches('$'), Vec::new())
        } else if let Some(used) = relative_use(rest) {
            use_tree(used, vec!["self".to_string()])
        } else {
            continue;
        };
        paths.extend(
            tree.into_iter()
                .filter_map(|(p, b)| Some((resolve(&file.module, &p)?, b))),
        );
    }
    paths
}

/// The path of a `use` that starts at a name in scope (`use fixture::X`
/// in a module file names its child `fixture`).
fn relative_use(text: &str) -> Option<&str> {
    let used = text.strip_prefix("use")?;
    if !used.starts_with(char::is_whitespace) {
        return None;
    }
    let used = used.trim_start();
    let absolute = ["crate::", "super::", "self::", "::", "$crate::"];
    (!absolute.iter().any(|s| used.starts_with(s))).then_some(used)
}

/// `crate`, `self` and `super` replaced by the module they stand for.
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut segments = path.iter().peekable();
    let mut resolved = match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        _ => module.to_vec(),
    };
    while let Some(segment) = segments.next_if(|s| *s == "self" || *s == "super") {
        if segment == "super" {
            resolved.pop()?;
        }
    }
    resolved.extend(segments.cloned());
    Some(resolved)
}

/// The leaves of the path (or `use` tree) at the start of `text`, each with
/// the name it binds (its last segment, or its `as` alias).
fn use_tree(text: &str, prefix: Vec<String>) -> Vec<(Vec<String>, String)> {
    let mut path = prefix;
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            return group_items(group)
                .into_iter()
                .flat_map(|item| use_tree(item, path.clone()))
                .collect();
        }
        let ident: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if ident.is_empty() {
            let bound = path.last().cloned().unwrap_or_default();
            return vec![(path, bound)];
        }
        rest = rest[ident.len()..].trim_start();
        // `self` in a group (`io::{self, Read}`) names the group's prefix.
        if ident != "self" || path.is_empty() {
            path.push(ident);
        }
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => {
                return vec![(
                    path.clone(),
                    alias(rest).unwrap_or_else(|| path[path.len() - 1].clone()),
                )];
            }
        }
    }
}

/// The name after `as`, when the text starts with one.
fn alias(text: &str) -> Option<String> {
    let after = text.strip_prefix("as")?;
    after.starts_with(char::is_whitespace).then(|| {
        after
            .trim_start()
            .chars()
            .take_while(|c| is_ident(*c))
            .collect()
    })
}

/// The items of a `{a, b::{c, d}}` group whose `{` was just read.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.retain(|item| !item.trim().is_empty());
    items
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}
