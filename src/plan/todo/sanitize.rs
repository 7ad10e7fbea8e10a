//! Display sanitising of model- and plan-controlled text, as the reference
//! does it before text reaches a terminal: complete CSI and OSC sequences are
//! dropped whole (no printable remnant such as `[31m`), any other escape
//! takes its next character with it, newlines, carriage returns, tabs and
//! the Unicode line/paragraph separators become spaces (a field cannot
//! change the layout), other C0/C1 controls disappear, and bidi controls
//! are removed (a field cannot reorder how neighbouring output reads).
//!
//! The passes run one after the other over the whole text, in the
//! reference's order, so odd inputs come out the same as there. Stored text
//! keeps the raw string; only what is shown goes through here.

const ESC: char = '\u{1b}';
const CSI_8BIT: char = '\u{9b}';
const OSC_8BIT: char = '\u{9d}';
const ST_8BIT: char = '\u{9c}';
const BEL: char = '\u{07}';

/// `text` made safe to show on one line of a terminal.
pub fn display(text: &str) -> String {
    let text = strip_csi(text);
    let text = strip_osc(&text);
    let text = strip_two_char_escapes(&text);
    text.chars()
        .filter_map(|c| match c {
            '\u{2028}' | '\u{2029}' | '\n' | '\r' | '\t' => Some(' '),
            '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => None,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => None,
            c => Some(c),
        })
        .collect()
}

/// `(?:ESC\[|\x9b)[0-?]*[ -/]*[@-~]`, removed wherever it matches.
fn strip_csi(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let body = match chars[i] {
            ESC if chars.get(i + 1) == Some(&'[') => Some(i + 2),
            CSI_8BIT => Some(i + 1),
            _ => None,
        };
        if let Some(mut j) = body {
            while chars.get(j).is_some_and(|c| ('0'..='?').contains(c)) {
                j += 1;
            }
            while chars.get(j).is_some_and(|c| (' '..='/').contains(c)) {
                j += 1;
            }
            if chars.get(j).is_some_and(|c| ('@'..='~').contains(c)) {
                i = j + 1;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// `(?:ESC\]|\x9d)[^\x07\x9c\x1b]*(?:\x07|\x9c|ESC\\)?`: an OSC with its
/// payload; an unterminated one swallows the rest, as a terminal would.
fn strip_osc(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let body = match chars[i] {
            ESC if chars.get(i + 1) == Some(&']') => Some(i + 2),
            OSC_8BIT => Some(i + 1),
            _ => None,
        };
        let Some(mut j) = body else {
            out.push(chars[i]);
            i += 1;
            continue;
        };
        while chars
            .get(j)
            .is_some_and(|c| !matches!(*c, BEL | ST_8BIT | ESC))
        {
            j += 1;
        }
        match chars.get(j) {
            Some(&BEL) | Some(&ST_8BIT) => j += 1,
            Some(&ESC) if chars.get(j + 1) == Some(&'\\') => j += 2,
            _ => {}
        }
        i = j;
    }
    out
}

/// `ESC.`: an escape and the character after it (not a line terminator).
fn strip_two_char_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ESC
            && chars
                .peek()
                .is_some_and(|n| !matches!(n, '\n' | '\r' | '\u{2028}' | '\u{2029}'))
        {
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}
