//! The shape of the source: no file of `src/` holds more than 700 lines of
//! non-test code, and no function runs over 80 lines, except a reducer
//! whose match arms are one line each (listed below, each with why). A
//! failure lists every offender with its length, longest first.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 700;
const MAX_FN_LINES: usize = 80;

/// Functions allowed past [`MAX_FN_LINES`]: `file:function`, and why.
const LONG_ON_PURPOSE: &[(&str, &str)] = &[];

#[test]
fn no_source_file_holds_more_than_700_lines_of_non_test_code() {
    let mut over: Vec<(usize, String)> = source_files()
        .iter()
        .map(|file| (Shape::of(file).code_lines, shown(file)))
        .filter(|(lines, _)| *lines > MAX_FILE_LINES)
        .collect();
    over.sort_by(|a, b| b.cmp(a));
    assert!(
        over.is_empty(),
        "files over {MAX_FILE_LINES} lines: {over:#?}"
    );
}

#[test]
fn no_function_runs_over_80_lines() {
    let mut over: Vec<(usize, String)> = Vec::new();
    for file in source_files() {
        for (name, lines) in Shape::of(&file).functions {
            let key = format!("{}:{name}", shown(&file));
            let allowed = LONG_ON_PURPOSE.iter().any(|(k, _)| *k == key);
            if lines > MAX_FN_LINES && !allowed {
                over.push((lines, key));
            }
        }
    }
    over.sort_by(|a, b| b.cmp(a));
    assert!(
        over.is_empty(),
        "functions over {MAX_FN_LINES} lines: {over:#?}"
    );
}

#[test]
fn the_measure_sees_code_not_strings_comments_or_tests() {
    let code = r##"
/// fn not_a_function() {
fn short() -> &'static str {
    let s = "}}} fn inside_a_string() {";
    let r = r#"{ "# ;
    let c = '{';
    s
}

#[cfg(test)]
mod tests {
    fn hidden() {}
}
"##;
    let shape = Shape::of_code(code);
    assert_eq!(shape.functions, vec![("short".to_string(), 6)]);
    assert_eq!(shape.code_lines, 9, "the test module does not count");
}

fn shown(file: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    file.strip_prefix(&root)
        .unwrap_or(file)
        .display()
        .to_string()
}

/// The non-test source files of `src/`: files in a `tests` folder or named
/// `tests.rs` / `*_tests.rs` are tests.
fn source_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files.retain(|f| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let in_tests = f.components().any(|c| c.as_os_str() == "tests");
        !in_tests && name != "tests.rs" && !name.ends_with("_tests.rs")
    });
    files.sort();
    files
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// What the measure found in one file.
#[derive(Debug)]
struct Shape {
    /// Lines outside `#[cfg(test)] mod … { … }` blocks.
    code_lines: usize,
    /// Each function outside test modules: its name and lines from `fn` to
    /// its closing brace.
    functions: Vec<(String, usize)>,
}

impl Shape {
    fn of(file: &Path) -> Shape {
        Shape::of_code(&std::fs::read_to_string(file).unwrap())
    }

    fn of_code(text: &str) -> Shape {
        let lines: Vec<String> = blank_literals(text).lines().map(str::to_string).collect();
        let in_test = test_module_lines(&lines);
        let code_lines = in_test.iter().filter(|t| !**t).count();
        let functions = (0..lines.len())
            .filter(|&i| !in_test[i])
            .filter_map(|i| Some((fn_name(&lines[i])?, body_lines(&lines, i)?)))
            .collect();
        Shape {
            code_lines,
            functions,
        }
    }
}

/// Marks the lines of `#[cfg(test)]` modules (attribute to closing brace).
fn test_module_lines(lines: &[String]) -> Vec<bool> {
    let mut in_test = vec![false; lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim().starts_with("#[") {
            j += 1;
        }
        let is_mod = lines.get(j).is_some_and(|l| {
            let l = l.trim_start();
            l.starts_with("mod ") || l.starts_with("pub mod ") || l.starts_with("pub(crate) mod ")
        });
        if !is_mod {
            i += 1;
            continue;
        }
        let end = if lines[j].trim_end().ends_with(';') {
            Some(j)
        } else {
            block_end(lines, j)
        };
        let end = end.unwrap_or(lines.len() - 1);
        in_test[i..=end].iter_mut().for_each(|t| *t = true);
        i = end + 1;
    }
    in_test
}

/// The name of the function a line starts, if it starts one.
fn fn_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(name[..end].to_string())
}

/// Lines from `start` to the brace that closes the body opened after it;
/// `None` for a declaration without a body.
fn body_lines(lines: &[String], start: usize) -> Option<usize> {
    for (offset, line) in lines[start..].iter().enumerate() {
        if line.contains('{') {
            return block_end(lines, start + offset).map(|end| end - start + 1);
        }
        if line.contains(';') {
            return None;
        }
    }
    None
}

/// The line whose `}` closes the first `{` at or after line `start`.
fn block_end(lines: &[String], start: usize) -> Option<usize> {
    let mut depth = 0i64;
    let mut opened = false;
    for (offset, line) in lines[start..].iter().enumerate() {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
            if opened && depth == 0 {
                return Some(start + offset);
            }
        }
    }
    None
}

/// `text` with comments, strings and char literals blanked (newlines
/// kept), so braces inside them do not count.
fn blank_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let skip = literal_len(&chars, i);
        if skip == 0 {
            out.push(chars[i]);
            i += 1;
        } else {
            let end = (i + skip).min(chars.len());
            out.extend(
                chars[i..end]
                    .iter()
                    .map(|&c| if c == '\n' { '\n' } else { ' ' }),
            );
            i = end;
        }
    }
    out
}

/// The length of the comment, string or char literal at `i`, else 0.
fn literal_len(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let rest = |from: usize, pat: &str| -> Option<usize> {
        let pat: Vec<char> = pat.chars().collect();
        (from..chars.len()).find(|&k| chars[k..].starts_with(&pat))
    };
    match (at(i), at(i + 1)) {
        ('/', '/') => rest(i, "\n").unwrap_or(chars.len()) - i,
        ('/', '*') => block_comment_len(chars, i),
        ('"', _) => quoted_len(chars, i, '"'),
        ('r', '"' | '#') if i == 0 || !is_ident(at(i - 1)) => raw_string_len(chars, i),
        ('\'', _) if at(i + 2) == '\'' || (at(i + 1) == '\\' && at(i + 3) != '\0') => {
            quoted_len(chars, i, '\'')
        }
        _ => 0,
    }
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn block_comment_len(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i + 1 < chars.len() {
        match (chars[i], chars[i + 1]) {
            ('/', '*') => {
                depth += 1;
                i += 2;
            }
            ('*', '/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i - start;
                }
            }
            _ => i += 1,
        }
    }
    chars.len() - start
}

/// A `"…"` or `'…'` literal with backslash escapes.
fn quoted_len(chars: &[char], start: usize, quote: char) -> usize {
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            c if c == quote => return i + 1 - start,
            _ => i += 1,
        }
    }
    chars.len() - start
}

/// `r"…"`, `r#"…"#`, …; 0 when `r` starts no raw string (`r#ident`).
fn raw_string_len(chars: &[char], start: usize) -> usize {
    let hashes = chars[start + 1..].iter().take_while(|&&c| c == '#').count();
    let open = start + 1 + hashes;
    if chars.get(open) != Some(&'"') {
        return 0;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (open + 1..chars.len())
        .find(|&k| chars[k..].starts_with(&close))
        .map_or(chars.len() - start, |k| k + close.len() - start)
}
