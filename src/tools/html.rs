//! HTML to readable text for `browse_url`: Markdown through `htmd`, or,
//! for a page nested too deeply, the plain text.
//!
//! A hostile page of a hundred thousand nested `<div>`s must neither abort
//! the process nor hold a core for minutes: `htmd`'s walk recurses once per
//! level (the stack would overflow), and the parser's scope checks take
//! time in proportion to the depth at every tag (quadratic in all). So a
//! cheap scan of the tags first estimates the nesting ([`estimated_depth`]);
//! past [`MAX_MARKDOWN_DEPTH`] the tags are stripped without parsing
//! ([`stripped`]). Otherwise the page is parsed, the tree's real depth is
//! measured without recursion, and only a tree within the limit is walked
//! to Markdown. The conversion runs on a thread of its own with a stack
//! far larger than that depth needs, off the async runtime.

use std::rc::Rc;

use markup5ever_rcdom::{Node, NodeData};

/// Elements whose content is not text a reader sees.
pub const SKIPPED_TAGS: [&str; 9] = [
    "script", "style", "noscript", "template", "iframe", "svg", "canvas", "object", "embed",
];
/// Deepest tree converted to Markdown.
const MAX_MARKDOWN_DEPTH: usize = 256;
/// Stack of the converting thread: far more than 256 levels take.
const CONVERTER_STACK: usize = 16 * 1024 * 1024;
/// Elements after which the plain text breaks the line.
const BLOCKS: [&str; 16] = [
    "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article",
    "header", "footer",
];

/// Why a page could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("cannot start the HTML converter: {0}")]
    Thread(#[source] std::io::Error),
    #[error("the HTML converter stopped")]
    Stopped,
    /// The parser refused the page.
    #[error(transparent)]
    Parse(std::io::Error),
}

/// `html` as Markdown (or plain text, see the module), converted on a
/// thread of its own.
pub async fn readable(html: String) -> Result<String, HtmlError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("fido-html".into())
        .stack_size(CONVERTER_STACK)
        .spawn(move || {
            let _ = sender.send(convert(&html));
        })
        .map_err(HtmlError::Thread)?;
    receiver.await.map_err(|_| HtmlError::Stopped)?
}

fn convert(html: &str) -> Result<String, HtmlError> {
    if estimated_depth(html) > MAX_MARKDOWN_DEPTH {
        return Ok(too_deep(&stripped(html)));
    }
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    let tree = converter.html_to_tree(html).map_err(HtmlError::Parse)?;
    if depth(&tree) <= MAX_MARKDOWN_DEPTH {
        return Ok(converter.tree_to_markdown(&tree));
    }
    Ok(too_deep(&plain_text(&tree)))
}

fn too_deep(text: &str) -> String {
    format!(
        "[the page nests more than {MAX_MARKDOWN_DEPTH} elements deep, so it is shown as plain text]\n\n{text}"
    )
}

/// Elements that never hold others, or whose end tag may be left out:
/// not counted by [`estimated_depth`] (an unclosed `<p>` is not nesting).
const NOT_NESTING: [&str; 26] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "p", "li", "dt", "dd", "td", "th", "tr", "option", "thead", "tbody", "tfoot",
    "colgroup",
];
/// Elements whose content is raw text up to their end tag.
const RAW_TEXT: [&str; 4] = ["script", "style", "textarea", "title"];

/// One tag of the scan.
struct Tag<'a> {
    name: String,
    closing: bool,
    self_closing: bool,
    /// The text after the tag.
    rest: &'a str,
}

/// The next tag at or after the start of `html`, and the text before it.
fn next_tag(html: &str) -> Option<(&str, Tag<'_>)> {
    let open = html.find('<')?;
    let (before, from) = html.split_at(open);
    let after = &from[1..];
    if let Some(comment) = after.strip_prefix("!--") {
        let end = comment.find("-->").map_or(comment.len(), |i| i + 3);
        return next_tag(&comment[end..]).map(|(_, tag)| (before, tag));
    }
    let close = after.find('>').map_or(after.len(), |i| i + 1);
    let inside = &after[..close.saturating_sub(1)];
    let closing = inside.starts_with('/');
    let name: String = inside
        .trim_start_matches('/')
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    let tag = Tag {
        name,
        closing,
        self_closing: inside.ends_with('/'),
        rest: &after[close..],
    };
    Some((before, tag))
}

/// The text after the end tag of the raw-text element `name`.
fn after_raw_text<'a>(rest: &'a str, name: &str) -> &'a str {
    let lower = rest.to_ascii_lowercase();
    match lower.find(&format!("</{name}")) {
        Some(at) => rest[at..].find('>').map_or("", |end| &rest[at + end + 1..]),
        None => "",
    }
}

/// How deep the page's elements nest, as its start and end tags say
/// (elements that need no end tag are not counted).
fn estimated_depth(html: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut rest = html;
    while let Some((_, tag)) = next_tag(rest) {
        rest = tag.rest;
        if tag.name.is_empty() || NOT_NESTING.contains(&tag.name.as_str()) {
            continue;
        }
        if RAW_TEXT.contains(&tag.name.as_str()) && !tag.closing {
            rest = after_raw_text(rest, &tag.name);
        } else if tag.closing {
            depth = depth.saturating_sub(1);
        } else if !tag.self_closing {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// The page's text with its tags taken out, without parsing: the content
/// of skipped and raw-text elements dropped, a line break after blocks, the
/// common entities decoded.
fn stripped(html: &str) -> String {
    let mut text = String::new();
    let mut rest = html;
    while let Some((before, tag)) = next_tag(rest) {
        text.push_str(&decode_entities(before));
        rest = tag.rest;
        let name = tag.name.as_str();
        let dropped = SKIPPED_TAGS.contains(&name) || RAW_TEXT.contains(&name);
        if dropped && !tag.closing {
            rest = after_raw_text(rest, name);
        }
        if BLOCKS.contains(&name) && !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(&decode_entities(rest));
    text
}

fn decode_entities(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&")
}

/// The depth of the deepest node, counted without recursion.
fn depth(root: &Rc<Node>) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root.clone(), 0usize)];
    while let Some((node, level)) = stack.pop() {
        deepest = deepest.max(level);
        stack.extend(
            node.children
                .borrow()
                .iter()
                .map(|c| (c.clone(), level + 1)),
        );
    }
    deepest
}

/// What the walk of [`plain_text`] does next.
enum Step {
    Visit(Rc<Node>),
    BreakLine,
}

/// The text of the tree in document order, skipping [`SKIPPED_TAGS`], a
/// line break after each block element; without recursion.
fn plain_text(root: &Rc<Node>) -> String {
    let mut text = String::new();
    let mut stack = vec![Step::Visit(root.clone())];
    while let Some(step) = stack.pop() {
        let node = match step {
            Step::BreakLine => {
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                continue;
            }
            Step::Visit(node) => node,
        };
        match &node.data {
            NodeData::Text { contents } => text.push_str(&contents.borrow()),
            NodeData::Element { name, .. } => {
                let tag: &str = &name.local;
                if SKIPPED_TAGS.contains(&tag) {
                    continue;
                }
                if BLOCKS.contains(&tag) {
                    stack.push(Step::BreakLine);
                }
            }
            NodeData::Document
            | NodeData::Doctype { .. }
            | NodeData::Comment { .. }
            | NodeData::ProcessingInstruction { .. } => {}
        }
        let children = node.children.borrow();
        stack.extend(children.iter().rev().map(|c| Step::Visit(c.clone())));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn headings_links_and_lists_become_markdown_without_scripts() {
        let html = "<h2>Title</h2><script>x()</script><ul><li>one</li></ul><a href=\"/a\">a</a>";
        let text = readable(html.into()).await.unwrap();
        assert!(text.contains("## Title"), "{text}");
        assert!(text.contains("one") && text.contains("[a](/a)"), "{text}");
        assert!(!text.contains("x()"), "{text}");
    }

    #[test]
    fn the_depth_estimate_counts_nesting_not_unclosed_paragraphs() {
        assert_eq!(estimated_depth("<div><div><br><p>a<p>b</div></div>"), 2);
        assert_eq!(estimated_depth("<ul><li>a<li>b</ul><img src=x/>"), 1);
        let script = "<script>if (a < b) { x = '<div><div>' }</script><div></div>";
        assert_eq!(estimated_depth(script), 1);
        assert_eq!(estimated_depth("<!-- <div><div> --><span>a</span>"), 1);
        assert_eq!(estimated_depth(&"<div>".repeat(300)), 300);
    }

    #[test]
    fn a_tag_less_page_is_stripped_to_its_text() {
        let html = "<p>a &amp; b</p><script>x()</script><style>y</style><div>c</div>tail";
        assert_eq!(stripped(html), "a & b\nc\ntail");
    }

    #[test]
    fn the_tree_is_measured_and_read_without_recursion() {
        let html = format!(
            "<p>a</p><style>y</style>{}b{}",
            "<div>".repeat(300),
            "</div>".repeat(300)
        );
        let tree = htmd::HtmlToMarkdown::builder()
            .build()
            .html_to_tree(&html)
            .unwrap();
        // The document, html and body are three levels above the first div.
        assert_eq!(depth(&tree), 300 + 3);
        assert_eq!(plain_text(&tree), "a\nb\n");
    }

    #[tokio::test]
    async fn a_page_nested_too_deep_for_markdown_comes_back_as_plain_text() {
        let depth = 100_000;
        let html = format!(
            "<p>start</p><script>x()</script>{}deep{}<p>end</p>",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let text = readable(html).await.unwrap();
        assert!(text.starts_with("[the page nests more than 256"), "{text}");
        let body: Vec<&str> = text.lines().skip(2).collect();
        assert_eq!(body, ["start", "deep", "end"]);
    }
}
