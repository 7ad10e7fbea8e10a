//! Small text helpers for anything shown to a person or put in an event:
//! stripping terminal escape sequences and control characters, and cutting
//! text short on a character boundary; and the short forms of counts and
//! durations that the UI and the engine's command output share.

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
}
