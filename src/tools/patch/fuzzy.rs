//! When `old_text` is not in the file exactly: a match that differs only in
//! whitespace (applied when it is unique, never when ambiguous), else the
//! closest region of the file and what differs from it.
//!
//! Matching is by whole lines: two lines are the same when they are equal
//! after trimming (indentation, trailing spaces, `\r`). Blank lines at the
//! start or end of `old_text` are ignored.

use std::collections::BTreeSet;

/// Longest region shown in a not-found error, in lines.
const SHOWN_LINES: usize = 12;

/// Longest line shown in a not-found error, in characters.
const SHOWN_CHARS: usize = 120;

/// A whitespace-only match of `old_text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Loose {
    /// Exactly one region matches: its byte range, 1-based lines, and the
    /// replacement text re-indented to the file.
    Unique {
        start: usize,
        end: usize,
        first_line: usize,
        last_line: usize,
        replacement: String,
    },
    /// Several regions match (their first lines): nothing is applied.
    Ambiguous(Vec<usize>),
    None,
}

struct Line<'a> {
    /// Byte offset of the line start.
    at: usize,
    /// The line without its terminator.
    text: &'a str,
}

fn lines(text: &str) -> Vec<Line<'_>> {
    let mut at = 0;
    text.split_inclusive('\n')
        .map(|raw| {
            let line = Line {
                at,
                text: raw.trim_end_matches(['\n', '\r']),
            };
            at += raw.len();
            line
        })
        .collect()
}

/// The lines of `old_text` that count: blank lines at either end dropped.
fn needle_lines(needle: &str) -> Vec<&str> {
    let all: Vec<&str> = needle.lines().collect();
    let first = all.iter().position(|l| !l.trim().is_empty());
    let last = all.iter().rposition(|l| !l.trim().is_empty());
    match (first, last) {
        (Some(first), Some(last)) => all[first..=last].to_vec(),
        _ => Vec::new(),
    }
}

fn indent(line: &str) -> &str {
    &line[..line.len() - line.trim_start().len()]
}

/// Finds `needle` in `text` ignoring whitespace at line ends and starts.
pub(super) fn loose_match(text: &str, needle: &str, new_text: &str) -> Loose {
    let file = lines(text);
    let wanted = needle_lines(needle);
    if wanted.is_empty() || wanted.len() > file.len() {
        return Loose::None;
    }
    let starts: Vec<usize> = (0..=file.len() - wanted.len())
        .filter(|&s| {
            wanted
                .iter()
                .enumerate()
                .all(|(i, w)| file[s + i].text.trim() == w.trim())
        })
        .collect();
    match starts.as_slice() {
        [] => Loose::None,
        [start] => {
            let first = &file[*start];
            let last = &file[start + wanted.len() - 1];
            let pairs: Vec<(&str, &str)> = (0..wanted.len())
                .map(|i| (indent(wanted[i]), indent(file[start + i].text)))
                .collect();
            Loose::Unique {
                start: first.at,
                end: last.at + last.text.len(),
                first_line: start + 1,
                last_line: start + wanted.len(),
                replacement: reindent(new_text, &pairs, text.contains("\r\n")),
            }
        }
        many => Loose::Ambiguous(many.iter().map(|s| s + 1).collect()),
    }
}

/// `new_text` indented like the file: line `k` maps the model's indentation
/// of old_text line `k` to the file's (`pairs`); lines past the end of
/// old_text use the first mapping that changes anything.
fn reindent(new_text: &str, pairs: &[(&str, &str)], crlf: bool) -> String {
    let body = new_text.strip_suffix('\n').unwrap_or(new_text);
    let shift = pairs.iter().find(|(from, to)| from != to).copied();
    let lines: Vec<String> = body
        .split('\n')
        .enumerate()
        .map(|(k, line)| {
            let line = line.trim_end_matches('\r');
            let (from, to) = pairs.get(k).copied().or(shift).unwrap_or(("", ""));
            match line.strip_prefix(from) {
                Some(rest) if from != to && !line.trim().is_empty() => format!("{to}{rest}"),
                _ => line.to_string(),
            }
        })
        .collect();
    lines.join(if crlf { "\r\n" } else { "\n" })
}

/// The not-found explanation: the closest region of the file, with line
/// numbers, and what differs from `old_text` (whitespace, a changed, missing
/// or extra line).
pub(super) fn closest_region(text: &str, needle: &str) -> String {
    let file = lines(text);
    let wanted = needle_lines(needle);
    let Some((start, len)) = best_window(&file, &wanted) else {
        return "No line of old_text occurs in the file; read the file (read_file) and copy old_text exactly from it.".to_string();
    };
    let region = &file[start..start + len];
    let mut shown = String::new();
    for (i, line) in region.iter().take(SHOWN_LINES).enumerate() {
        shown.push_str(&format!("{:>5}| {}\n", start + i + 1, cut(line.text)));
    }
    if region.len() > SHOWN_LINES {
        shown.push_str("     | …\n");
    }
    let differences = differences(region, start, &wanted);
    format!(
        "The closest region of the file is lines {}-{}:\n{shown}What differs: {}. Copy old_text exactly from these lines.",
        start + 1,
        start + len,
        differences.join("; ")
    )
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The window (start, length) of the file sharing the most lines with the
/// needle, in order; lengths one shorter or longer than the needle are
/// tried so a missing or extra line is found. `None` when nothing matches.
fn best_window(file: &[Line<'_>], wanted: &[&str]) -> Option<(usize, usize)> {
    let n = wanted.len();
    if n == 0 || file.is_empty() {
        return None;
    }
    // Only windows that align some needle line with an equal file line.
    let mut starts = BTreeSet::new();
    for (f, line) in file.iter().enumerate() {
        for (w, want) in wanted.iter().enumerate() {
            if !want.trim().is_empty() && line.text.trim() == want.trim() {
                starts.insert(f.saturating_sub(w));
                starts.insert(f.saturating_sub(w + 1));
            }
        }
    }
    if starts.is_empty() {
        return similar_line(file, wanted).map(|start| (start, n.min(file.len() - start)));
    }
    let mut best: Option<(usize, usize, usize)> = None;
    for &start in &starts {
        for len in [n, n.saturating_sub(1), n + 1] {
            if len == 0 || start + len > file.len() {
                continue;
            }
            let window: Vec<&str> = file[start..start + len].iter().map(|l| l.text).collect();
            let score = common_lines(&window, wanted);
            let better = match best {
                None => score > 0,
                Some((s, _, l)) => score > s || (score == s && len.abs_diff(n) < l.abs_diff(n)),
            };
            if better {
                best = Some((score, start, len));
            }
        }
    }
    best.map(|(_, start, len)| (start, len))
}

/// Where a window would start that aligns the needle line and the file line
/// sharing the most words, when no line is equal.
fn similar_line(file: &[Line<'_>], wanted: &[&str]) -> Option<usize> {
    let words = |line: &str| -> BTreeSet<String> {
        line.split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    let wanted_words: Vec<BTreeSet<String>> = wanted.iter().map(|l| words(l)).collect();
    let mut best: Option<(usize, usize)> = None;
    for (f, line) in file.iter().enumerate() {
        let have = words(line.text);
        for (w, want) in wanted_words.iter().enumerate() {
            let shared = have.intersection(want).count();
            if shared > 0 && best.is_none_or(|(s, _)| shared > s) {
                best = Some((shared, f.saturating_sub(w)));
            }
        }
    }
    best.map(|(_, start)| start)
}

/// Length of the longest common subsequence of trimmed lines.
fn common_lines(a: &[&str], b: &[&str]) -> usize {
    lcs_table(a, b)[0][0]
}

fn lcs_table(a: &[&str], b: &[&str]) -> Vec<Vec<usize>> {
    let mut table = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            table[i][j] = if a[i].trim() == b[j].trim() {
                table[i + 1][j + 1] + 1
            } else {
                table[i + 1][j].max(table[i][j + 1])
            };
        }
    }
    table
}

/// What differs between the file region (starting at 0-based `start`) and
/// the needle, line by line, from their alignment.
fn differences(region: &[Line<'_>], start: usize, wanted: &[&str]) -> Vec<String> {
    let file: Vec<&str> = region.iter().map(|l| l.text).collect();
    let table = lcs_table(&file, wanted);
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    let mut whitespace = Vec::new();
    while i < file.len() || j < wanted.len() {
        let line = start + i + 1;
        if i < file.len() && j < wanted.len() && file[i].trim() == wanted[j].trim() {
            if file[i] != wanted[j] {
                whitespace.push(line.to_string());
            }
            i += 1;
            j += 1;
        } else if i < file.len()
            && j < wanted.len()
            && table[i + 1][j] == table[i][j + 1]
            && table[i][j] == table[i + 1][j + 1]
        {
            out.push(format!(
                "line {line} is `{}` in the file but `{}` in old_text",
                cut(file[i].trim()),
                cut(wanted[j].trim())
            ));
            i += 1;
            j += 1;
        } else if j < wanted.len() && (i == file.len() || table[i][j + 1] >= table[i + 1][j]) {
            out.push(format!(
                "old_text has an extra line `{}` that the file does not have before line {line}",
                cut(wanted[j].trim())
            ));
            j += 1;
        } else {
            out.push(format!(
                "old_text is missing line {line} of the file, `{}`",
                cut(file[i].trim())
            ));
            i += 1;
        }
    }
    if !whitespace.is_empty() {
        out.push(format!(
            "whitespace or indentation differs on line{} {}",
            if whitespace.len() == 1 { "" } else { "s" },
            whitespace.join(", ")
        ));
    }
    if out.is_empty() {
        out.push("only whitespace".to_string());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_whitespace_only_match_is_found_and_reindented() {
        let text = "x = 1\ndef f():\n        return 1\n";
        let Loose::Unique {
            start,
            end,
            first_line,
            last_line,
            replacement,
        } = loose_match(text, "def f():\n    return 1\n", "def f():\n    return 2\n")
        else {
            panic!("no unique match");
        };
        assert_eq!((first_line, last_line), (2, 3));
        assert_eq!(&text[start..end], "def f():\n        return 1");
        assert_eq!(replacement, "def f():\n        return 2");
        // Trailing spaces and CRLF line endings are whitespace too.
        let crlf = "a  \r\n  b\r\n";
        let Loose::Unique { replacement, .. } = loose_match(crlf, "a\nb", "a\nc") else {
            panic!("no crlf match");
        };
        assert_eq!(replacement, "a\r\n  c");
    }

    #[test]
    fn an_ambiguous_whitespace_match_is_reported_not_applied() {
        let text = "if a:\n    x = 1\nif a:\n  x = 1\n";
        assert_eq!(
            loose_match(text, "if a:\nx = 1", "y"),
            Loose::Ambiguous(vec![1, 3])
        );
        assert_eq!(loose_match(text, "if b:", "y"), Loose::None);
    }

    #[test]
    fn the_closest_region_names_changed_missing_and_extra_lines() {
        let text = "fn main() {\n    let x = 42;\n    println!(\"{x}\");\n}\n";
        let changed = closest_region(text, "fn main() {\n    let x = 41;\n");
        assert!(changed.contains("lines 1-2"), "{changed}");
        assert!(changed.contains("    2|     let x = 42;"), "{changed}");
        assert!(
            changed.contains("line 2 is `let x = 42;` in the file but `let x = 41;` in old_text"),
            "{changed}"
        );
        let missing = closest_region(text, "fn main() {\n    println!(\"{x}\");\n}");
        assert!(
            missing.contains("old_text is missing line 2 of the file, `let x = 42;`"),
            "{missing}"
        );
        let extra = closest_region(text, "let x = 42;\n// note\nprintln!(\"{x}\");");
        assert!(
            extra.contains("old_text has an extra line `// note`"),
            "{extra}"
        );
        let none = closest_region(text, "completely different");
        assert!(none.contains("No line of old_text occurs"), "{none}");
    }
}
