//! Small text helpers for anything shown to a person or put in an event:
//! stripping terminal escape sequences and control characters, showing them
//! escaped instead (for a terminal or a log outside the TUI), and cutting
//! text short on a character boundary; and the short forms of counts and
//! durations that the UI and the engine's command output share.

use std::borrow::Cow;

/// Removes ANSI escape sequences (CSI, OSC and two-byte escapes) and control
/// characters other than newline and tab; newlines and tabs become spaces
/// when `single_line` is set.
pub fn sanitize(text: &str, single_line: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => skip_escape(&mut chars),
            // C1 control introducers (CSI, OSC …) in their 8-bit form.
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' => skip_osc(&mut chars),
            '\n' | '\t' | '\r' if single_line => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            // Bidirectional overrides can disguise text in a terminal.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => skip_csi(chars),
        Some(']') | Some('P') | Some('X') | Some('^') | Some('_') => skip_osc(chars),
        // A two-byte escape such as `ESC c`: the second byte is gone too.
        _ => {}
    }
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    // Parameters and intermediates, then one final byte in 0x40..=0x7e.
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            break;
        }
    }
}

fn skip_osc(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    // Ends at BEL or at ST (`ESC \` or 0x9c).
    while let Some(c) = chars.next() {
        match c {
            '\u{07}' | '\u{9c}' => break,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                break;
            }
            _ => {}
        }
    }
}

/// Shows every character a terminal would act on, other than newline and
/// tab, as a visible escape: C0 controls and DEL as `\x1b`, carriage
/// return as `\r`, C1 controls, bidirectional overrides and invisible
/// format characters as `\u{9b}`. Unlike [`sanitize`], nothing is lost and
/// nothing acts, whether or not the output is a terminal.
pub fn escape(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| c != '\n' && c != '\t' && acts_on_terminal(c))
}

/// [`escape`] for one line: newlines and tabs are escaped too (`\n`,
/// `\t`), so the text cannot start a line of its own (a file name in a
/// listing, a value in a log line).
pub fn escape_line(text: &str) -> Cow<'_, str> {
    escape_where(text, acts_on_terminal)
}

/// A value quoted in a log line: [`escape_line`], cut to `max_chars`
/// characters with the size of the whole (`… (5242880 bytes)`).
pub fn for_log(text: &str, max_chars: usize) -> String {
    // Only the head is escaped: a 5 MB value costs its first characters.
    let head_end = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(at, _)| at);
    let escaped = escape_line(&text[..head_end]);
    if head_end == text.len() && escaped.chars().count() <= max_chars {
        return escaped.into_owned();
    }
    let mut out: String = escaped.chars().take(max_chars).collect();
    out.push_str(&format!("… ({} bytes)", text.len()));
    out
}

/// JSON text for a terminal: the characters JSON leaves raw in strings but
/// a terminal acts on (DEL, C1 controls, bidirectional overrides) as `\u`
/// escapes. Outside strings JSON text is ASCII, so every such character is
/// inside a string, and the result parses to the same value.
pub fn json_for_terminal(json: &str) -> Cow<'_, str> {
    // JSON escapes C0 controls in strings itself; raw ones are the layout
    // of pretty-printed JSON (newlines, indents).
    let left_raw = |c: char| c as u32 >= 0x7f && acts_on_terminal(c);
    if !json.chars().any(left_raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if left_raw(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal acts on `c` or shows it as nothing: C0 and C1
/// controls, DEL, bidirectional marks, overrides and isolates, zero-width
/// and invisible format characters, line and paragraph separators.
fn acts_on_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
        )
}

fn escape_where(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !escaped(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// Cuts `text` to at most `max_chars` characters, ending with `…` when cut.
pub fn short(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let keep = max_chars.saturating_sub(1);
    let mut out: String = text.chars().take(keep).collect();
    out.push('…');
    out
}

/// A one-line, sanitised, short summary for events and the activity bar.
pub fn summary(text: &str, max_chars: usize) -> String {
    short(sanitize(text, true).trim(), max_chars)
}

/// `count` and `noun`, the noun plural unless the count is one:
/// `1 finding`, `0 findings`, `3 findings` (nouns whose plural adds `s`).
pub fn counted(count: impl Into<u64>, noun: &str) -> String {
    let count: u64 = count.into();
    match count {
        1 => format!("1 {noun}"),
        _ => format!("{count} {noun}s"),
    }
}

/// Token counts for people: `950`, `1.8k`.
pub fn tokens(n: impl Into<u64>) -> String {
    let n: u64 = n.into();
    if n < 1000 {
        n.to_string()
    } else {
        format!("{:.1}k", n as f64 / 1000.0)
    }
}

/// An elapsed time for people, in whole seconds: `42s`, `3m05s`.
pub fn elapsed(ms: u64) -> String {
    let secs = ms / 1000;
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escape_sequences_and_controls() {
        let raw = "a\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}b\u{0}c\u{7f}d\u{9b}2Je";
        assert_eq!(sanitize(raw, false), "ared bcde");
    }

    #[test]
    fn single_line_folds_whitespace_controls() {
        assert_eq!(sanitize("a\nb\t\tc\r\n", true), "a b c ");
        assert_eq!(sanitize("a\nb", false), "a\nb");
    }

    #[test]
    fn short_cuts_on_char_boundaries() {
        assert_eq!(short("héllo wörld", 5), "héll…");
        assert_eq!(short("abc", 3), "abc");
        assert_eq!(summary(" x\u{1b}[1my\n ", 10), "xy");
    }

    #[test]
    fn counted_says_one_thing_in_the_singular() {
        assert_eq!(super::counted(1u32, "finding"), "1 finding");
        assert_eq!(super::counted(0u32, "finding"), "0 findings");
        assert_eq!(super::counted(3u32, "finding"), "3 findings");
    }

    #[test]
    fn tokens_and_elapsed_times_read_short() {
        assert_eq!(super::tokens(950u64), "950");
        assert_eq!(super::tokens(2_500u64), "2.5k");
        assert_eq!(super::elapsed(4_999), "4s");
        assert_eq!(super::elapsed(185_000), "3m05s");
    }

    #[test]
    fn escape_shows_what_would_act_and_keeps_the_rest() {
        let raw = "a\u{1b}]52;c;cm0gLXJmIH4vKg==\u{7}b\u{9b}2J\r\u{202e}txt.exe\u{7f}\né\tz";
        assert_eq!(
            escape(raw),
            "a\\x1b]52;c;cm0gLXJmIH4vKg==\\x07b\\u{9b}2J\\r\\u{202e}txt.exe\\x7f\né\tz"
        );
        assert!(matches!(escape("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(
            escape_line("a\nsrc/x.rs:1:forged\t"),
            "a\\nsrc/x.rs:1:forged\\t"
        );
    }

    #[test]
    fn log_values_are_escaped_and_capped_with_their_size() {
        let big = "\u{1b}".repeat(5 * 1024 * 1024);
        let logged = for_log(&big, 200);
        assert!(logged.starts_with("\\x1b\\x1b"));
        assert!(
            logged.ends_with("… (5242880 bytes)"),
            "{}",
            &logged[logged.len() - 40..]
        );
        assert!(logged.chars().count() < 230);
        assert_eq!(for_log("short", 200), "short");
    }

    #[test]
    fn json_for_a_terminal_escapes_c1_and_bidi_and_parses_the_same() {
        let value = serde_json::json!({"text": "x\u{9b}31m\u{202e}y\u{7f}\u{1b}"});
        let plain = serde_json::to_string(&value).unwrap();
        assert!(
            plain.contains('\u{9b}'),
            "serde_json leaves C1 raw: {plain}"
        );
        let shown = json_for_terminal(&plain);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(
            shown.contains("\\u009b") && shown.contains("\\u202e"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        let shown = json_for_terminal(&pretty);
        assert_eq!(shown.lines().count(), 3, "{shown}");
        assert!(
            !shown.chars().any(|c| c.is_control() && c != '\n'),
            "{shown}"
        );
    }
}
