//! The assistant text still streaming in, rendered so that a frame costs
//! only the changing tail: finished blocks (up to a blank line outside a
//! code fence) are rendered once and kept; only the rest is rendered again
//! after each change.
//!
//! A tail that grows past [`FORCE_SPLIT_BYTES`] without a blank line (a
//! long code block, a long list) is cut at its last newline instead, so a
//! huge answer never re-renders more than that per frame. A cut inside a
//! code fence reopens the fence for what follows. Such cuts may join lines
//! differently than one whole render would, so the finished message is
//! then rendered once more instead of keeping these lines.

use ratatui::text::Line;

use crate::ui::markdown;
use crate::ui::rows::Rows;

/// Longest unfinished tail re-rendered per frame.
pub const FORCE_SPLIT_BYTES: usize = 16 * 1024;

#[derive(Debug, Clone, Default)]
pub struct LiveLines {
    /// Bytes of the text rendered into `done`.
    done_bytes: usize,
    done: Rows,
    /// The fence line open at `done_bytes` (a cut inside a code block).
    open_fence: Option<String>,
    /// The last cut was at a blank line: a blank line goes before the tail.
    gap_after_done: bool,
    /// Some cut was forced (not at a blank line).
    forced: bool,
    /// The blank line between the entries and the streaming text.
    gap: Rows,
    /// The unfinished tail, rendered; `None` after the text changed.
    tail: Option<Rows>,
}

impl LiveLines {
    pub fn changed(&mut self) {
        self.tail = None;
    }

    pub fn reset(&mut self) {
        *self = LiveLines::default();
    }

    /// Brings the lines up to date with `text` at `width`; `first`: no
    /// transcript entry comes before it.
    pub fn refresh(&mut self, text: &str, width: usize, first: bool) {
        if text.len() < self.done_bytes || text.is_empty() {
            self.reset();
        }
        self.gap = Rows::new();
        if !text.is_empty() && !first {
            self.gap.push(&Line::default());
        }
        if text.is_empty() || self.tail.is_some() {
            return;
        }
        self.cut(text, width);
        let tail = &text[self.done_bytes..];
        let mut lines = Rows::new();
        if !tail.trim().is_empty() {
            if self.gap_after_done && !self.done.is_empty() {
                lines.push(&Line::default());
            }
            lines.append(&self.render(tail, width));
        }
        self.tail = Some(lines);
    }

    /// Moves finished blocks (or a forced cut) from the tail into `done`.
    fn cut(&mut self, text: &str, width: usize) {
        let rest = &text[self.done_bytes..];
        let in_fence = self.open_fence.is_some();
        let (split, at_blank) = match finished_blocks(rest, in_fence) {
            Some(split) => (split, true),
            None if rest.len() > FORCE_SPLIT_BYTES => match rest.rfind('\n') {
                Some(split) if split > 0 => (split, false),
                _ => return,
            },
            None => return,
        };
        let block = &rest[..split];
        if !block.trim().is_empty() {
            if self.gap_after_done && !self.done.is_empty() {
                self.done.push(&Line::default());
            }
            let lines = self.render(block, width);
            self.done.append(&lines);
        }
        self.open_fence = fence_after(block, self.open_fence.take());
        self.done_bytes += split + usize::from(!at_blank);
        self.gap_after_done = at_blank;
        self.forced |= !at_blank;
    }

    fn render(&self, text: &str, width: usize) -> Rows {
        match &self.open_fence {
            Some(fence) => markdown::render_rows(&format!("{fence}\n{text}"), width),
            None => markdown::render_rows(text, width),
        }
    }

    pub fn len(&self) -> usize {
        self.gap.len() + self.done.len() + self.tail.as_ref().map_or(0, Rows::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The parts in order, for drawing a window of them.
    pub fn parts(&self) -> [&Rows; 3] {
        const NONE: &Rows = &Rows::EMPTY;
        [&self.gap, &self.done, self.tail.as_ref().unwrap_or(NONE)]
    }

    /// All the lines, when they are up to date and were cut only at blank
    /// lines (then they are what rendering the whole text gives).
    pub fn take_whole(&mut self) -> Option<Rows> {
        let tail = self.tail.take().filter(|_| !self.forced)?;
        let mut lines = std::mem::take(&mut self.gap);
        lines.append(&self.done);
        lines.append(&tail);
        lines.shrink_to_fit();
        self.reset();
        Some(lines)
    }
}

fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

/// The end of the last finished block in `text`: its last blank line,
/// unless a code fence is open there.
fn finished_blocks(text: &str, in_fence: bool) -> Option<usize> {
    let split = text.rfind("\n\n")?;
    let fences = text[..split].lines().filter(|line| is_fence(line)).count();
    (split > 0 && (fences + usize::from(in_fence)) % 2 == 0).then_some(split)
}

/// The fence still open after `block`, given the one open before it.
fn fence_after(block: &str, open: Option<String>) -> Option<String> {
    let mut open = open;
    for line in block.lines().filter(|line| is_fence(line)) {
        open = match open {
            Some(_) => None,
            None => Some(line.trim_start().to_string()),
        };
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(live: &LiveLines) -> Vec<String> {
        live.parts()
            .iter()
            .flat_map(|part| part.to_lines())
            .map(|line| line.to_string())
            .collect()
    }

    #[test]
    fn blocks_are_cut_at_blank_lines_outside_code_fences() {
        assert_eq!(finished_blocks("a\n\nb", false), Some(1));
        assert_eq!(finished_blocks("```\ncode\n\nmore", false), None);
        assert_eq!(finished_blocks("```\ncode\n```\n\nafter", false), Some(12));
        assert_eq!(finished_blocks("code\n```\n\nafter", true), Some(8));
    }

    #[test]
    fn a_long_code_block_is_cut_and_reopened_and_renders_like_the_whole() {
        let code: String = (0..3000).map(|n| format!("let x{n} = {n};\n")).collect();
        let text = format!("```rust\n{code}```\n\nafter");
        let mut live = LiveLines::default();
        let mut streamed = String::new();
        for piece in text.as_bytes().chunks(500) {
            streamed.push_str(std::str::from_utf8(piece).unwrap());
            live.changed();
            live.refresh(&streamed, 80, true);
        }
        assert!(live.forced, "the block is longer than a forced cut");
        let shown = text_of(&live);
        let whole: Vec<String> = markdown::render(&text, 80)
            .iter()
            .map(|l| l.to_string())
            .collect();
        assert_eq!(shown, whole);
        assert!(
            live.take_whole().is_none(),
            "forced cuts are rendered again"
        );
    }
}
