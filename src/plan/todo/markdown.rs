//! Approved plan Markdown → plan items, text copied verbatim.
//!
//! The reference's rules:
//! - `##`+ headings are groups; the `#` title names the plan. A heading
//!   whose text is context (`Summary`, `Key findings`, `Not adopted`,
//!   `Assumptions`, `Risks`, …) skips its whole subtree.
//! - Each top-level bullet (unordered or numbered) is one item: its first
//!   line is the subject, its nested lines are kept, dedented, as the plan
//!   text, so nothing in the plan is paraphrased or dropped.
//! - A paragraph lead-in such as `Not adopted:` skips the list after it.
//! - A non-context section with prose but no bullets becomes one item named
//!   by its heading. `Verification` / definition-of-done bullets are items.
//! - Fenced code never starts an item.
//!
//! Whitespace is JavaScript's `\s` (the reference is TypeScript), so the
//! same plan gives the same items byte for byte.

/// One actionable plan item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanItem {
    /// Nearest `##`+ heading above the item, verbatim (`""` without one).
    pub group: String,
    /// The bullet's first line without its marker, or the heading of a
    /// bullet-less section.
    pub subject: String,
    /// Nested lines under the bullet, dedented, verbatim.
    pub detail: Option<String>,
}

/// Section and lead-in labels that describe the plan rather than name work,
/// matched at the start of the label, up to a word boundary.
const CONTEXT_LABELS: &[&str] = &[
    "summary",
    "overview",
    "context",
    "background",
    "key findings",
    "findings",
    "not adopted",
    "non-goals",
    "out of scope",
    "assumptions",
    "risks",
    "open questions",
    "notes",
    "references",
    "alternatives considered",
    "alternatives",
    "rejected",
];

/// JavaScript's `\s` (and what `trim()` removes).
pub(crate) fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

fn js_trim(text: &str) -> &str {
    text.trim_matches(is_js_space)
}

fn indent_of(line: &str) -> usize {
    line.chars().take_while(|c| is_js_space(*c)).count()
}

/// `^(#{1,6})\s+(.+?)\s*#*\s*$` → `(level, text)`.
fn heading(line: &str) -> Option<(usize, String)> {
    let level = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after: Vec<char> = line.chars().skip(level).collect();
    let spaces = after.iter().take_while(|c| is_js_space(**c)).count();
    if spaces == 0 {
        return None;
    }
    // `\s+` is greedy: it takes every space unless the text would be empty.
    let start = if spaces < after.len() {
        spaces
    } else if spaces >= 2 {
        spaces - 1
    } else {
        return None;
    };
    let rest = &after[start..];
    // `(.+?)`: the shortest non-empty prefix whose remainder is `\s*#*\s*`.
    let text_len = (1..=rest.len()).find(|&n| closing_tail(&rest[n..]))?;
    Some((level, rest[..text_len].iter().collect()))
}

/// Whether `tail` is `\s*#*\s*`.
fn closing_tail(tail: &[char]) -> bool {
    let mut i = 0;
    while i < tail.len() && is_js_space(tail[i]) {
        i += 1;
    }
    while i < tail.len() && tail[i] == '#' {
        i += 1;
    }
    while i < tail.len() && is_js_space(tail[i]) {
        i += 1;
    }
    i == tail.len()
}

/// `^([-*+]|\d+[.)])\s+(.*)$` on a line without its indentation → the text
/// after the marker.
fn bullet(text: &str) -> Option<&str> {
    let marker_len = match text.chars().next()? {
        '-' | '*' | '+' => 1,
        c if c.is_ascii_digit() => {
            let digits = text.chars().take_while(char::is_ascii_digit).count();
            match text[digits..].chars().next() {
                Some('.') | Some(')') => digits + 1,
                _ => return None,
            }
        }
        _ => return None,
    };
    let rest = &text[marker_len..];
    let body = rest.trim_start_matches(is_js_space);
    (body.len() < rest.len()).then_some(body)
}

/// `^\s*(```|~~~)`.
fn is_fence(line: &str) -> bool {
    let text = line.trim_start_matches(is_js_space);
    text.starts_with("```") || text.starts_with("~~~")
}

/// The label without Markdown emphasis and a leading section number.
fn plain_label(text: &str) -> String {
    let text: String = text
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`'))
        .collect();
    js_trim(strip_section_number(&text)).to_string()
}

/// `^\d+(\.\d+)*[.)]?\s+` removed.
fn strip_section_number(text: &str) -> &str {
    let bytes = text.as_bytes();
    let digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut i = digits(0);
    if i == 0 {
        return text;
    }
    while i < bytes.len() && bytes[i] == b'.' && digits(i + 1) > 0 {
        i += 1 + digits(i + 1);
    }
    if i < bytes.len() && (bytes[i] == b'.' || bytes[i] == b')') {
        i += 1;
    }
    let rest = &text[i..];
    let body = rest.trim_start_matches(is_js_space);
    if body.len() < rest.len() { body } else { text }
}

fn is_context_label(text: &str) -> bool {
    let label = plain_label(text).to_ascii_lowercase();
    CONTEXT_LABELS.iter().any(|word| {
        label.starts_with(word)
            && !label[word.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The first `#` heading, else the first heading, else the first non-empty
/// line, else `plan`; Markdown emphasis stripped.
pub fn plan_title(markdown: &str) -> String {
    let lines: Vec<&str> = markdown.split('\n').map(js_trim).collect();
    let title_heading = lines.iter().find(|l| {
        l.starts_with('#')
            && l[1..].starts_with(is_js_space)
            && l[1..].chars().any(|c| !is_js_space(c))
    });
    let found = title_heading.or_else(|| lines.iter().find(|l| heading(l).is_some()));
    let raw = match found {
        Some(line) => heading(line).map_or_else(|| line.to_string(), |(_, text)| text),
        None => lines
            .iter()
            .find(|l| !l.is_empty())
            .map_or_else(String::new, |l| l.to_string()),
    };
    let title: String = raw
        .chars()
        .filter(|c| !matches!(c, '*' | '_' | '`'))
        .collect();
    match js_trim(&title) {
        "" => "plan".to_string(),
        title => title.to_string(),
    }
}

struct Current {
    item: PlanItem,
    base: usize,
    lines: Vec<String>,
    /// A skipped bullet swallows its nested lines too.
    discard: bool,
}

/// Plan Markdown → its actionable items, in order.
pub fn parse_plan_items(markdown: &str) -> Vec<PlanItem> {
    let mut parser = Parser::default();
    let normalized = markdown.replace("\r\n", "\n").replace('\r', "\n");
    for line in normalized.split('\n') {
        parser.line(line);
    }
    parser.flush_section();
    parser.items
}

#[derive(Default)]
struct Parser {
    items: Vec<PlanItem>,
    /// `(level, is context)` of the open headings.
    headings: Vec<(usize, bool)>,
    group: String,
    section_skipped: bool,
    list_skipped: bool,
    section_has_items: bool,
    section_has_prose: bool,
    current: Option<Current>,
    in_fence: bool,
}

impl Parser {
    fn flush_item(&mut self) {
        let Some(current) = self.current.take() else {
            return;
        };
        if current.discard {
            return;
        }
        let mut lines = dedent(&current.lines);
        while lines.last().is_some_and(|l| js_trim(l).is_empty()) {
            lines.pop();
        }
        let mut item = current.item;
        if !lines.is_empty() {
            item.detail = Some(lines.join("\n"));
        }
        self.items.push(item);
    }

    fn flush_section(&mut self) {
        self.flush_item();
        if !self.group.is_empty()
            && !self.section_skipped
            && !self.section_has_items
            && self.section_has_prose
        {
            self.items.push(PlanItem {
                group: self.group.clone(),
                subject: self.group.clone(),
                detail: None,
            });
        }
    }

    /// A heading: the section before it ends, and it names the group of
    /// the items that follow (unless it is the title, level 1).
    fn start_section(&mut self, level: usize, text: String) {
        self.flush_section();
        while self.headings.last().is_some_and(|(l, _)| *l >= level) {
            self.headings.pop();
        }
        self.headings.push((level, is_context_label(&text)));
        self.group = if level == 1 { String::new() } else { text };
        self.section_skipped = self
            .headings
            .iter()
            .any(|(level, context)| *level > 1 && *context);
        self.list_skipped = false;
        self.section_has_items = false;
        self.section_has_prose = false;
    }

    /// A bullet at item level: the item before it ends, and this one starts.
    fn start_item(&mut self, body: &str, indent: usize) {
        self.flush_item();
        // A bare marker (`- `) names no work: as an item it would be a
        // task with a blank subject, which `create` refuses and a plan
        // item can never have edited or deleted.
        let discard = self.section_skipped || self.list_skipped || js_trim(body).is_empty();
        self.current = Some(Current {
            item: PlanItem {
                group: self.group.clone(),
                subject: js_trim(body).to_string(),
                detail: None,
            },
            base: indent,
            lines: Vec::new(),
            discard,
        });
        if !discard {
            self.section_has_items = true;
        }
    }

    fn line(&mut self, line: &str) {
        if is_fence(line) {
            self.in_fence = !self.in_fence;
        }
        if self.in_fence || is_fence(line) {
            if let Some(current) = &mut self.current {
                current.lines.push(line.to_string());
            } else if !self.section_skipped && !self.list_skipped {
                self.section_has_prose = true;
            }
            return;
        }

        if indent_of(line) == 0
            && let Some((level, text)) = heading(line)
        {
            self.start_section(level, text);
            return;
        }

        if js_trim(line).is_empty() {
            if let Some(current) = &mut self.current {
                current.lines.push(line.to_string());
            }
            return;
        }

        let indent = indent_of(line);
        if let Some(current) = &mut self.current
            && indent > current.base
        {
            current.lines.push(line.to_string());
            return;
        }

        let trimmed_start = line.trim_start_matches(is_js_space);
        if let Some(body) = bullet(trimmed_start) {
            self.start_item(body, indent);
            return;
        }

        // A paragraph at item level ends the current list.
        self.flush_item();
        if self.section_skipped {
            return;
        }
        let text = js_trim(line);
        self.list_skipped = is_context_label(text) && text.ends_with(':');
        if !self.list_skipped {
            self.section_has_prose = true;
        }
    }
}

/// Removes the smallest common indentation of the non-blank lines.
fn dedent(lines: &[String]) -> Vec<String> {
    let cut = lines
        .iter()
        .filter(|l| !js_trim(l).is_empty())
        .map(|l| indent_of(l))
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.chars().skip(cut.min(indent_of(l))).collect())
        .collect()
}
