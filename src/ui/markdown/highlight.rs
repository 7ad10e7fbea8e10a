//! Syntax highlighting of fenced code: a small lexical highlighter
//! (keywords, strings, comments, numbers) for the languages an agent
//! shows most, instead of a grammar engine.
//!
//! Why not syntect or tree-sitter: they add megabytes of grammars and
//! regex engines to the binary and load them at start-up or first use;
//! this adds a few kilobytes, needs no loading, and colours a line in
//! well under a microsecond. It is lexical only (no scopes or types), which
//! is what a terminal transcript needs. Unknown languages stay plain.
//!
//! Block comments carry over between lines ([`Highlighter`] keeps that
//! one bit of state); strings do not span lines.

use ratatui::style::Style;

use crate::ui::theme;

/// The lexical rules of one language family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rules {
    keywords: &'static [&'static str],
    line_comment: &'static [&'static str],
    block_comment: Option<(&'static str, &'static str)>,
    quotes: &'static [char],
}

const RUST: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while",
];
const C_LIKE: &[&str] = &[
    "auto",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "final",
    "finally",
    "for",
    "func",
    "function",
    "go",
    "if",
    "import",
    "interface",
    "let",
    "namespace",
    "new",
    "null",
    "nil",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "struct",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "type",
    "typedef",
    "var",
    "void",
    "while",
    "async",
    "await",
    "yield",
    "int",
    "char",
    "float",
    "double",
    "long",
    "unsigned",
    "bool",
    "string",
    "defer",
    "range",
    "chan",
    "select",
    "undefined",
    "of",
    "from",
    "#include",
    "#define",
];
const PYTHON: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "False", "finally", "for", "from", "global", "if", "import", "in", "is",
    "lambda", "None", "nonlocal", "not", "or", "pass", "raise", "return", "True", "try", "while",
    "with", "yield", "self",
];
const SHELL: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "in", "do", "done", "while", "until", "case",
    "esac", "function", "return", "export", "local", "echo", "cd", "set", "unset", "exit",
];
const DATA: &[&str] = &["true", "false", "null", "yes", "no"];

fn rules_for(lang: &str) -> Option<Rules> {
    let lang = lang.trim().to_ascii_lowercase();
    let lang = lang.split([',', ' ']).next().unwrap_or("");
    let c_comments = Some(("/*", "*/"));
    Some(match lang {
        "rust" | "rs" => Rules {
            keywords: RUST,
            line_comment: &["//"],
            block_comment: c_comments,
            quotes: &['"'],
        },
        "c" | "h" | "cpp" | "c++" | "cc" | "hpp" | "java" | "js" | "javascript" | "jsx" | "ts"
        | "typescript" | "tsx" | "go" | "golang" | "swift" | "kotlin" | "kt" | "cs" | "csharp"
        | "scala" | "dart" => Rules {
            keywords: C_LIKE,
            line_comment: &["//"],
            block_comment: c_comments,
            quotes: &['"', '\'', '`'],
        },
        "python" | "py" => Rules {
            keywords: PYTHON,
            line_comment: &["#"],
            block_comment: None,
            quotes: &['"', '\''],
        },
        "sh" | "bash" | "zsh" | "shell" | "console" | "fish" => Rules {
            keywords: SHELL,
            line_comment: &["#"],
            block_comment: None,
            quotes: &['"', '\''],
        },
        "toml" | "ini" | "yaml" | "yml" | "json" | "jsonc" => Rules {
            keywords: DATA,
            line_comment: &["#", "//"],
            block_comment: None,
            quotes: &['"', '\''],
        },
        _ => return None,
    })
}

/// Highlights one code block line by line.
#[derive(Debug, Clone)]
pub struct Highlighter {
    rules: Option<Rules>,
    in_block_comment: bool,
}

impl Highlighter {
    /// For the info string of a fence (` ```rust `); unknown: plain text.
    pub fn new(lang: &str) -> Highlighter {
        Highlighter {
            rules: rules_for(lang),
            in_block_comment: false,
        }
    }

    /// One line (without its newline) as styled pieces.
    pub fn line(&mut self, line: &str) -> Vec<(String, Style)> {
        let Some(rules) = self.rules else {
            return vec![(line.to_string(), theme::code_plain())];
        };
        let mut out: Vec<(String, Style)> = Vec::new();
        let mut push = |text: &str, style: Style| {
            if text.is_empty() {
                return;
            }
            match out.last_mut() {
                Some((last, last_style)) if *last_style == style => last.push_str(text),
                _ => out.push((text.to_string(), style)),
            }
        };
        let mut rest = line;
        while !rest.is_empty() {
            if self.in_block_comment {
                let close = rules.block_comment.map_or("", |(_, close)| close);
                match rest.find(close).filter(|_| !close.is_empty()) {
                    Some(at) => {
                        push(&rest[..at + close.len()], theme::code_comment());
                        rest = &rest[at + close.len()..];
                        self.in_block_comment = false;
                    }
                    None => {
                        push(rest, theme::code_comment());
                        rest = "";
                    }
                }
                continue;
            }
            if rules.line_comment.iter().any(|c| rest.starts_with(c)) {
                push(rest, theme::code_comment());
                break;
            }
            if let Some((open, _)) = rules.block_comment
                && rest.starts_with(open)
            {
                self.in_block_comment = true;
                push(open, theme::code_comment());
                rest = &rest[open.len()..];
                continue;
            }
            let Some(first) = rest.chars().next() else {
                break;
            };
            let (token, style) = if rules.quotes.contains(&first) {
                (string_token(rest, first), theme::code_string())
            } else if first.is_ascii_digit() {
                (word_token(rest), theme::code_number())
            } else if is_word_char(first) || first == '#' {
                let word = word_token(rest);
                let style = if rules.keywords.contains(&word) {
                    theme::code_keyword()
                } else {
                    theme::code_plain()
                };
                (word, style)
            } else {
                (&rest[..first.len_utf8()], theme::code_plain())
            };
            push(token, style);
            rest = &rest[token.len()..];
        }
        out
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A word (identifier, keyword or number), a leading `#` included.
fn word_token(text: &str) -> &str {
    let start = usize::from(text.starts_with('#'));
    let end = text[start..]
        .char_indices()
        .find(|(_, c)| !(is_word_char(*c) || *c == '.'))
        .map_or(text.len(), |(at, _)| at + start);
    &text[..end.max(1)]
}

/// A quoted string up to its closing quote (backslash escapes skipped), or
/// to the end of the line.
fn string_token(text: &str, quote: char) -> &str {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == quote {
            return &text[..at + c.len_utf8()];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn styles_of(lang: &str, line: &str) -> Vec<(String, Style)> {
        Highlighter::new(lang).line(line)
    }

    #[test]
    fn rust_keywords_strings_numbers_and_comments_get_their_styles() {
        let pieces = styles_of("rust", r#"let x = "a \" b" + 42; // note"#);
        let find = |text: &str| {
            pieces
                .iter()
                .find(|(t, _)| t.contains(text))
                .map(|(_, s)| *s)
                .unwrap()
        };
        assert_eq!(find("let"), theme::code_keyword());
        assert_eq!(find("\"a \\\" b\""), theme::code_string());
        assert_eq!(find("42"), theme::code_number());
        assert_eq!(find("// note"), theme::code_comment());
        let text: String = pieces.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, r#"let x = "a \" b" + 42; // note"#, "nothing lost");
    }

    #[test]
    fn block_comments_carry_over_lines_and_unknown_languages_stay_plain() {
        let mut h = Highlighter::new("c");
        assert_eq!(h.line("/* open")[0].1, theme::code_comment());
        assert_eq!(h.line("still */ int")[0].1, theme::code_comment());
        assert_eq!(
            styles_of("klingon", "let x"),
            vec![("let x".to_string(), theme::code_plain())]
        );
        for line in ["\"", "#", "é\"", "1.2.3", "'"] {
            let text: String = styles_of("python", line).into_iter().map(|p| p.0).collect();
            assert_eq!(text, line);
        }
    }
}
