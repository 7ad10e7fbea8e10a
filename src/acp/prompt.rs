//! A `session/prompt`'s content blocks as the one prompt text Fido's turn
//! takes: text as it is, a resource link as a line naming it (the model
//! reads the file with its own tools), an embedded resource's text inline
//! in a fenced block under its URI. Images, audio and binary resources
//! are not advertised; one that comes anyway is named, not sent.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

/// The prompt text of `blocks`, in their order, one blank line apart.
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(block_text)
        .filter(|text| !text.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::ResourceLink(link) => {
            format!("[resource: {} <{}>]", link.name, link.uri)
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            EmbeddedResourceResource::TextResourceContents(contents) => {
                let fence = fence_for(&contents.text);
                format!(
                    "Contents of {}:\n{fence}\n{}\n{fence}",
                    contents.uri, contents.text
                )
            }
            EmbeddedResourceResource::BlobResourceContents(contents) => {
                format!("[binary resource <{}> not included]", contents.uri)
            }
            _ => "[a resource of an unknown kind, not included]".into(),
        },
        ContentBlock::Image(_) => "[an image, not included: Fido takes text only]".into(),
        ContentBlock::Audio(_) => "[audio, not included: Fido takes text only]".into(),
        _ => String::new(),
    }
}

/// A code fence longer than any run of backticks in `text`, so embedded
/// text cannot close it early.
fn fence_for(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::{EmbeddedResource, ResourceLink, TextResourceContents};

    #[test]
    fn links_and_embedded_text_become_prompt_text() {
        let blocks = vec![
            ContentBlock::from("Explain this"),
            ContentBlock::ResourceLink(ResourceLink::new("a.rs", "file:///w/a.rs")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {} // ```",
                    "file:///w/b.rs",
                )),
            )),
        ];
        let text = prompt_text(&blocks);
        assert!(text.starts_with("Explain this\n\n[resource: a.rs <file:///w/a.rs>]"));
        assert!(text.contains("Contents of file:///w/b.rs:\n````\nfn main() {} // ```\n````"));
    }
}
