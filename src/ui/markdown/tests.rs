use ratatui::style::Modifier;

use super::*;

fn text_of(lines: &[Line<'_>]) -> Vec<String> {
    lines.iter().map(|line| line.to_string()).collect()
}

/// The style of the first span holding the first word of `needle` (the
/// wrapper cuts text into words).
fn style_of(lines: &[Line<'_>], needle: &str) -> Style {
    let word = needle.split(' ').next().unwrap_or(needle);
    lines
        .iter()
        .flat_map(|line| line.spans.iter())
        .find(|span| span.content.contains(word))
        .map(|span| span.style)
        .unwrap_or_else(|| panic!("{needle:?} not rendered in {:?}", text_of(lines)))
}

#[test]
fn emphasis_headings_and_inline_code_lose_their_markup_and_gain_styles() {
    let lines = render("## Summary\n\nThe answer is **42**, *maybe*, `x + 1`.", 60);
    assert_eq!(
        text_of(&lines),
        ["Summary", "", "The answer is 42, maybe, x + 1."]
    );
    assert!(
        style_of(&lines, "Summary")
            .add_modifier
            .contains(Modifier::BOLD)
    );
    assert!(style_of(&lines, "42").add_modifier.contains(Modifier::BOLD));
    assert!(
        style_of(&lines, "maybe")
            .add_modifier
            .contains(Modifier::ITALIC)
    );
    assert_eq!(style_of(&lines, "x + 1"), theme::inline_code());
}

#[test]
fn nested_lists_hang_their_continuation_lines_under_the_text() {
    let lines = render(
        "- first item wraps here\n  - nested one\n- second\n\n1. one\n2. two",
        16,
    );
    assert_eq!(
        text_of(&lines),
        [
            "• first item",
            "  wraps here",
            "  ◦ nested one",
            "• second",
            "",
            "1. one",
            "2. two"
        ]
    );
}

#[test]
fn quotes_links_rules_and_task_lists() {
    let lines = render(
        "> quoted **text**\n\nsee [the docs](https://example.org/x)\n\n---\n\n- [x] done",
        30,
    );
    let text = text_of(&lines);
    assert_eq!(text[0], "│ quoted text");
    assert_eq!(text[2], "see the docs");
    assert_eq!(text[3], "(https://example.org/x)");
    assert!(text[5].starts_with("───"));
    assert_eq!(text[7], "• [x] done");
    assert_eq!(style_of(&lines, "the docs"), theme::link());
}

#[test]
fn fenced_code_keeps_its_text_and_is_highlighted() {
    let lines = render(
        "```rust\nfn main() {\n    let s = \"hi\";\n}\n```\nafter",
        40,
    );
    assert_eq!(
        text_of(&lines),
        ["  fn main() {", "      let s = \"hi\";", "  }", "", "after"]
    );
    assert_eq!(style_of(&lines, "fn"), theme::code_keyword());
    assert_eq!(style_of(&lines, "\"hi\""), theme::code_string());
}

#[test]
fn tables_align_when_they_fit_and_stack_when_narrow() {
    let table = "| name | size |\n|:-----|-----:|\n| a | 1 |\n| bbbb | 22 |";
    let wide = text_of(&render(table, 40));
    assert_eq!(
        wide,
        ["name │ size", "─────┼─────", "a    │    1", "bbbb │   22"]
    );
    let narrow = text_of(&render(table, 8));
    assert_eq!(
        narrow,
        ["name: a", "size: 1", "", "name:", "  bbbb", "size: 22"]
    );
}

#[test]
fn no_line_is_wider_than_the_width_whatever_the_text() {
    let samples = [
        "日本語のテキストです。とても長い文章を書いています。",
        "emoji 👩‍👩‍👧‍👦 family and flags 🇫🇷🇩🇪 in a row",
        "combining e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}",
        "> - quoted list with `code` and a [link](http://x.y/zzzzzzzzzzzzzzzzzz)",
        "| a | b | c |\n|---|---|---|\n| 日本 | 👍 | x |",
        "```\nlongcodelinewithoutanyspaceswhatsoever\n```",
        "averyveryveryverylongwordwithoutspaces",
    ];
    for text in samples {
        for width in 1..30 {
            let lines = render(text, width);
            // Below the width of the quote bar and list marker only the
            // prefix itself may stick out.
            if width < 6 {
                continue;
            }
            for line in lines {
                assert!(line.width() <= width, "{text:?} at {width}: {line:?}");
            }
        }
    }
}

#[test]
fn an_unclosed_fence_mid_stream_still_shows_its_code() {
    let text = text_of(&render("text\n\n```python\nprint(1)", 30));
    assert_eq!(text, ["text", "", "  print(1)"]);
}

#[test]
fn a_table_inside_a_list_item_is_indented_without_repeating_the_marker() {
    let text = text_of(&render(
        "- item\n\n  | a | b |\n  |---|---|\n  | 1 | 2 |",
        30,
    ));
    assert_eq!(text[0], "• item");
    assert!(
        text.iter().skip(1).all(|line| !line.contains('•')),
        "{text:?}"
    );
    assert!(text.iter().any(|line| line == "  1 │ 2"), "{text:?}");
}
