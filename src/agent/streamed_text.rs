//! The model's streamed text, for a session with `tool_call_fallback`.
//!
//! There a call the model writes into its text (a fenced block, Qwen's
//! `<tool_call>` tags, or a bare object as the whole answer) is run as a
//! call and taken out of the message once the message is whole
//! (`agent::calls`). An editor cannot take back a chunk it was sent (to a
//! session, or to a subagent's child session), so from the first place
//! such a call could start the text is held, and the whole message then
//! says what of it is text. Without the fallback every fragment goes out
//! as it comes.

use crate::protocol::ToolSpec;

/// Where a call written into text can start.
const MARKERS: [&str; 2] = ["```", "<tool_call>"];

/// One message's text: what went to the editor, and what waits.
#[derive(Debug, Default)]
pub struct StreamedText {
    /// Hold from where a call could start (`tool_call_fallback`).
    hold_calls: bool,
    /// Sent as chunks so far.
    sent: String,
    /// Not sent yet: a call may start in it.
    held: String,
    /// A marker was seen: everything from it on waits for the whole
    /// message.
    holding: bool,
}

impl StreamedText {
    pub fn new(hold_calls: bool) -> StreamedText {
        StreamedText {
            hold_calls,
            ..StreamedText::default()
        }
    }

    /// What of a streamed fragment to send now (empty: nothing).
    pub fn fragment(&mut self, text: &str) -> String {
        if !self.hold_calls {
            self.sent.push_str(text);
            return text.to_string();
        }
        self.held.push_str(text);
        if self.holding {
            return String::new();
        }
        let sendable = self.sendable();
        let out: String = self.held.drain(..sendable).collect();
        self.sent.push_str(&out);
        out
    }

    /// What of the whole message to send now that it is known (`text`:
    /// the message without the calls taken out of it), and a fresh start
    /// for the next message.
    pub fn whole(&mut self, text: &str) -> String {
        let sent = std::mem::take(&mut self.sent);
        self.forget();
        match text.strip_prefix(sent.as_str()) {
            Some(rest) => rest.to_string(),
            // The message differs from what was streamed of it before
            // any marker: never send it twice.
            None => String::new(),
        }
    }

    /// What of a whole answer to send now, from the model's own message
    /// (`content`, and whether it made real calls): the text the turn
    /// keeps of it, as [`StreamedText::whole`] sends it. With the fallback
    /// an answer without real calls loses the calls written into it, as
    /// the turn takes them out (`agent::turn`).
    pub fn answer(&mut self, content: &str, real_calls: bool, tools: &[ToolSpec]) -> String {
        let written = self.hold_calls && !real_calls;
        match written
            .then(|| super::calls::calls_from_text(content, tools))
            .flatten()
        {
            Some((rest, _)) => self.whole(&rest),
            None => self.whole(content),
        }
    }

    /// A message that ended as calls alone (no text is left of it): what
    /// was held is dropped, and the next message starts afresh.
    pub fn forget(&mut self) {
        self.sent.clear();
        self.held.clear();
        self.holding = false;
    }

    /// How much of `held` can go: up to the first marker (from there on
    /// all is held), less a tail that may be the start of one; nothing
    /// while the message is blank or opens with `{` (a bare call as the
    /// whole answer).
    fn sendable(&mut self) -> usize {
        if self.sent.trim().is_empty() {
            let opening = self.held.trim_start();
            if opening.starts_with('{') {
                self.holding = true;
            }
            if opening.is_empty() || opening.starts_with('{') {
                return 0;
            }
        }
        if let Some(at) = MARKERS.iter().filter_map(|m| self.held.find(m)).min() {
            self.holding = true;
            return at;
        }
        self.held.len() - partial_marker(&self.held)
    }
}

/// How long the tail of `text` is that a marker starts with (the marker's
/// rest may come in the next fragment).
fn partial_marker(text: &str) -> usize {
    MARKERS
        .iter()
        .filter_map(|m| (1..m.len()).rev().find(|&n| text.ends_with(&m[..n])))
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams `fragments`, then the whole message `whole`: every chunk
    /// sent, in order.
    fn stream(hold: bool, fragments: &[&str], whole: &str) -> Vec<String> {
        let mut text = StreamedText::new(hold);
        let mut sent: Vec<String> = fragments.iter().map(|f| text.fragment(f)).collect();
        sent.push(text.whole(whole));
        sent.retain(|s| !s.is_empty());
        sent
    }

    #[test]
    fn without_the_fallback_every_fragment_goes_at_once_and_nothing_twice() {
        let sent = stream(
            false,
            &["Here ", "```json\n{}", "\n```"],
            "Here ```json\n{}\n```",
        );
        assert_eq!(sent, ["Here ", "```json\n{}", "\n```"]);
    }

    #[test]
    fn a_fenced_call_is_held_and_only_the_text_left_of_the_message_is_sent() {
        let fragments = [
            "I will read it.\n`",
            "``json\n{\"name\": \"read_file\"}",
            "\n```\nThen more.",
        ];
        // The agent took the call out: the whole message is the text around it.
        let sent = stream(true, &fragments, "I will read it.\n\nThen more.");
        assert_eq!(sent.concat(), "I will read it.\n\nThen more.");
        assert_eq!(sent[0], "I will read it.\n", "the text before streams");
    }

    #[test]
    fn a_bare_call_as_the_whole_answer_is_never_sent() {
        let mut text = StreamedText::new(true);
        assert_eq!(text.fragment("  {\"name\": "), "");
        assert_eq!(text.fragment("\"read_file\"}"), "");
        // The message was the call alone: no text is left of it.
        text.forget();
        assert_eq!(text.fragment("Done."), "Done.");
        assert_eq!(text.whole("Done."), "");
    }

    #[test]
    fn a_fence_that_was_no_call_comes_with_the_whole_message() {
        let fragments = ["Use `ls`:\n", "```sh\nls\n```"];
        let sent = stream(true, &fragments, "Use `ls`:\n```sh\nls\n```");
        assert_eq!(sent, ["Use `ls`:\n", "```sh\nls\n```"]);
    }

    /// The tools the model may call in these tests: `read_file` alone.
    fn tools() -> Vec<ToolSpec> {
        crate::tools::ToolCatalog::standard(crate::plan::PlanFlavour::UpdatePlan)
            .specs()
            .iter()
            .filter(|spec| spec.name == "read_file")
            .cloned()
            .collect()
    }

    #[test]
    fn a_whole_answer_gives_what_is_left_of_its_text_once_its_written_calls_are_out() {
        let content = "Reading.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nThen more.";
        let mut text = StreamedText::new(true);
        let sent = text.fragment(content);
        assert_eq!(sent, "Reading.\n");
        let rest = text.answer(content, false, &tools());
        assert_eq!(format!("{sent}{rest}"), "Reading.\n\nThen more.");
        // A message with real calls keeps its text as written: a block in
        // it was not run.
        let mut text = StreamedText::new(true);
        let sent = text.fragment(content);
        assert_eq!(
            format!("{sent}{}", text.answer(content, true, &tools())),
            content
        );
        // Without the fallback nothing is held or taken out.
        let mut text = StreamedText::new(false);
        assert_eq!(text.fragment(content), content);
        assert_eq!(text.answer(content, false, &tools()), "");
    }

    #[test]
    fn tool_call_tags_are_markers_too() {
        let sent = stream(true, &["Ok <tool", "_call>{}</tool_call>"], "Ok ");
        assert_eq!(sent, ["Ok "]);
    }
}
