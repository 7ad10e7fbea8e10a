//! tests/RELIABILITY.md stays true: every test a row names exists at the
//! path it gives, and the process tests it lists (the subagent, parent and
//! hook rows) look through `/proc` for what is left, as its preamble says.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// What looks through `/proc` for leftovers (tests/common/process.rs and
/// the suites' own rigs), called by a test or by a helper it calls.
const LEFTOVER_CHECKS: &[&str] = &[
    "assert_nothing_left(",
    "assert_no_processes(",
    "run_exec(",
    "run_in(",
    "wait_in(",
    "assert_fido_gone(",
    "pids_with(",
    "pids_running(",
    "processes_in(",
    "processes_with(",
    "assert_no_process_left(",
    "assert_no_server_left(",
    "assert_clean(",
    "processes(",
];

/// The sections whose rows are process tests.
const PROCESS_SECTIONS: &[&str] = &["Subagent", "Parent", "User hooks"];

/// A test a row names: the file as written, and the function if any.
#[derive(Debug)]
struct Named {
    section: String,
    file: String,
    function: Option<String>,
}

/// Every `path.rs::name` (and `path/with/slash.rs`) in backquotes, `…`
/// standing for the file named before it.
fn named_tests(text: &str) -> Vec<Named> {
    let mut named = Vec::new();
    let mut section = String::new();
    let mut previous = String::new();
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("## ") {
            section = title.to_owned();
        }
        for code in line.split('`').skip(1).step_by(2) {
            let (file, function) = match code.split_once("::") {
                Some((file, function)) => (file, Some(function)),
                None => (code, None),
            };
            let is_path = |f: &str| {
                f.ends_with(".rs") && f.chars().all(|c| c.is_alphanumeric() || "_/.".contains(c))
            };
            let file = if file == "…" && function.is_some() {
                previous.clone()
            } else if is_path(file) && (function.is_some() || file.contains('/')) {
                file.to_owned()
            } else {
                continue;
            };
            let function = function.filter(|f| f.chars().all(|c| c.is_alphanumeric() || c == '_'));
            previous.clone_from(&file);
            named.push(Named {
                section: section.clone(),
                file,
                function: function.map(str::to_owned),
            });
        }
    }
    named
}

/// The source files a row's path stands for: the file, and a module's
/// test files beside it (`x_tests.rs`, `x/…`).
fn sources(file: &str) -> Vec<PathBuf> {
    let root = Path::new(ROOT);
    let base = if file.starts_with("src/") || file.starts_with("tests/") {
        root.join(file)
    } else {
        root.join("tests/suite").join(file)
    };
    let stem = base.with_extension("");
    let mut found: Vec<PathBuf> = [
        base.clone(),
        PathBuf::from(format!("{}_tests.rs", stem.display())),
    ]
    .into_iter()
    .filter(|p| p.is_file())
    .collect();
    let mut folders = vec![stem];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found
}

/// The body of `fn name` (or `mod name`) in `source`, braces matched.
fn body<'a>(source: &'a str, name: &str) -> Option<&'a str> {
    let start = ["fn ", "mod "].iter().find_map(|kind| {
        source
            .match_indices(&format!("{kind}{name}"))
            .find_map(|(at, m)| {
                let next = source[at + m.len()..].chars().next()?;
                (!next.is_alphanumeric() && next != '_').then_some(at)
            })
    })?;
    let open = start + source[start..].find('{')?;
    let end = open + matching_brace(&source[open..])?;
    Some(&source[open..=end])
}

/// Where the brace that opens `code` closes, braces in string and
/// character literals (raw ones too) not counted.
fn matching_brace(code: &str) -> Option<usize> {
    let bytes = code.as_bytes();
    let mut depth = 0usize;
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            b'r' if matches!(bytes.get(at + 1), Some(b'#' | b'"')) && !is_word(bytes, at) => {
                let hashes = bytes[at + 1..].iter().take_while(|b| **b == b'#').count();
                let close = format!("\"{}", "#".repeat(hashes));
                let from = at + 2 + hashes;
                at = from + code.get(from..)?.find(&close)? + close.len() - 1;
            }
            b'"' => {
                at += 1;
                while bytes.get(at)? != &b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if bytes.get(at + 2) == Some(&b'\'') => at += 2,
            b'\'' if bytes.get(at + 1) == Some(&b'\\') => {
                at += code.get(at + 2..)?.find('\'')? + 2;
            }
            _ => {}
        }
        at += 1;
    }
    None
}

/// Whether the byte before `at` continues a word (`for`, `bar"`: no raw
/// string starts there).
fn is_word(bytes: &[u8], at: usize) -> bool {
    at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_')
}

/// Whether `name`'s body, or a function of the same file it calls (three
/// calls deep), checks for leftovers.
fn checks_leftovers(source: &str, name: &str, depth: usize, seen: &mut Vec<String>) -> bool {
    let Some(body) = body(source, name) else {
        return false;
    };
    if LEFTOVER_CHECKS.iter().any(|check| body.contains(check)) {
        return true;
    }
    if depth == 3 {
        return false;
    }
    let calls: Vec<String> = body
        .match_indices('(')
        .filter_map(|(at, _)| {
            let before = &body[..at];
            let start = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            (start < at).then(|| before[start..].to_owned())
        })
        .collect();
    calls.into_iter().any(|call| {
        if seen.contains(&call) {
            return false;
        }
        seen.push(call.clone());
        checks_leftovers(source, &call, depth + 1, seen)
    })
}

fn reliability() -> Vec<Named> {
    let text = std::fs::read_to_string(Path::new(ROOT).join("tests/RELIABILITY.md")).unwrap();
    named_tests(&text)
}

#[test]
fn every_test_reliability_names_exists_where_it_says() {
    let named = reliability();
    assert!(named.len() > 150, "{} names read", named.len());
    let missing: Vec<String> = named
        .iter()
        .filter(|n| {
            let sources = sources(&n.file);
            let Some(function) = &n.function else {
                return sources.is_empty();
            };
            !sources.iter().any(|path| {
                let source = std::fs::read_to_string(path).unwrap_or_default();
                body(&source, function).is_some()
            })
        })
        .map(|n| format!("{}::{}", n.file, n.function.as_deref().unwrap_or("")))
        .collect();
    assert!(
        missing.is_empty(),
        "named in RELIABILITY.md, not found: {missing:#?}"
    );
}

#[test]
fn the_process_tests_reliability_lists_look_for_leftovers() {
    let named = reliability();
    let process: Vec<&Named> = named
        .iter()
        .filter(|n| PROCESS_SECTIONS.contains(&n.section.as_str()) && !n.file.starts_with("src/"))
        .filter(|n| n.function.is_some())
        .collect();
    assert!(process.len() > 20, "{} process tests read", process.len());
    let unchecked: Vec<String> = process
        .iter()
        .filter(|n| {
            let function = n.function.as_deref().unwrap_or_default();
            let source = std::fs::read_to_string(&sources(&n.file)[0]).unwrap();
            !checks_leftovers(&source, function, 0, &mut Vec::new())
        })
        .map(|n| format!("{}::{}", n.file, n.function.as_deref().unwrap_or("")))
        .collect();
    assert!(
        unchecked.is_empty(),
        "no look at /proc for leftovers: {unchecked:#?}"
    );
}

#[test]
fn the_reader_finds_names_and_bodies() {
    let text = "## Parent\n| a | b | `x.rs::one`, `…::two` and `src/a/b.rs` tests, `a.rs`, `Tmux::gone` |\n";
    let named = named_tests(text);
    let read: Vec<(&str, Option<&str>)> = named
        .iter()
        .map(|n| (n.file.as_str(), n.function.as_deref()))
        .collect();
    assert_eq!(
        read,
        [
            ("x.rs", Some("one")),
            ("x.rs", Some("two")),
            ("src/a/b.rs", None)
        ]
    );
    assert_eq!(named[0].section, "Parent");
    let source = "fn helper() { run_in(x) }\nfn one_more() {}\nfn one() { if x { helper() } }\n";
    assert_eq!(body(source, "one"), Some("{ if x { helper() } }"));
    let literals = r##"fn lit() { let a = "{\"}"; let b = r#"{"#; let c = '{'; let d = '\''; }"##;
    assert_eq!(
        body(literals, "lit").map(str::len),
        Some(literals.len() - 9)
    );
    assert!(checks_leftovers(source, "one", 0, &mut Vec::new()));
    assert!(!checks_leftovers(source, "one_more", 0, &mut Vec::new()));
}
