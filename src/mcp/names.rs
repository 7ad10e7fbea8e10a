//! The catalog names of MCP tools: `mcp__SERVER__TOOL`, in the charset and
//! length every provider accepts (`^[a-zA-Z0-9_-]{1,64}$`, OpenAI's and
//! Anthropic's rule).

use std::collections::HashSet;

/// Longest tool name the providers accept.
pub const MAX_NAME: usize = 64;

/// The prefix of every MCP tool in the catalog.
pub const PREFIX: &str = "mcp__";

/// `mcp__SERVER__TOOL` with every other character replaced by `_`; a name
/// too long is cut and given a hash of the full name, and a name already
/// `taken` gets one too, so two remote tools never share a catalog name.
pub fn exposed_name(server: &str, tool: &str, taken: &HashSet<String>) -> String {
    let full = format!("{PREFIX}{}__{}", clean(server), clean(tool));
    if full.len() <= MAX_NAME && !taken.contains(&full) {
        return full;
    }
    // Hash the raw names: two tools whose cleaned names collide still differ.
    let suffix = format!("_{:08x}", fnv32(&format!("{server}\u{0}{tool}")));
    let mut cut: String = full.chars().take(MAX_NAME - suffix.len()).collect();
    cut.push_str(&suffix);
    cut
}

fn clean(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if cleaned.is_empty() {
        "_".into()
    } else {
        cleaned
    }
}

fn fnv32(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_prefixed_and_cleaned() {
        let none = HashSet::new();
        assert_eq!(
            exposed_name("time", "get_current_time", &none),
            "mcp__time__get_current_time"
        );
        assert_eq!(
            exposed_name("fs", "read.file/v2", &none),
            "mcp__fs__read_file_v2"
        );
        assert_eq!(exposed_name("fs", "", &none), "mcp__fs___");
    }

    #[test]
    fn long_or_taken_names_stay_valid_and_distinct() {
        let none = HashSet::new();
        let long = exposed_name("server", &"x".repeat(100), &none);
        assert!(valid(&long), "{long}");
        let other = exposed_name("server", &"x".repeat(101), &none);
        assert_ne!(long, other);

        let taken: HashSet<String> = ["mcp__fs__a_b".to_string()].into();
        let second = exposed_name("fs", "a.b", &taken);
        assert!(valid(&second) && second != "mcp__fs__a_b", "{second}");
        assert!(valid(&exposed_name("ünï", "çødé", &none)));
    }
}
