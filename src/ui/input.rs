//! The input line: one line of text and a cursor (a char index). Editing
//! never panics on any sequence of keys.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputBuffer {
    text: String,
    /// Cursor position in chars, `0..=char count`.
    cursor: usize,
}

impl InputBuffer {
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    fn char_count(&self) -> usize {
        self.text.chars().count()
    }

    fn byte_at(&self, char_index: usize) -> usize {
        self.text
            .char_indices()
            .nth(char_index)
            .map_or(self.text.len(), |(byte, _)| byte)
    }

    /// Inserts text at the cursor; newlines and tabs become spaces (one
    /// line only), control characters are dropped.
    pub fn insert_str(&mut self, text: &str) {
        for c in text.chars() {
            self.insert(c);
        }
    }

    pub fn insert(&mut self, c: char) {
        let c = match c {
            '\n' | '\r' | '\t' => ' ',
            c if c.is_control() => return,
            c => c,
        };
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    pub fn backspace(&mut self) {
        if self.cursor == 0 {
            return;
        }
        self.cursor -= 1;
        let at = self.byte_at(self.cursor);
        self.text.remove(at);
    }

    pub fn delete(&mut self) {
        if self.cursor < self.char_count() {
            let at = self.byte_at(self.cursor);
            self.text.remove(at);
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.char_count());
    }

    pub fn home(&mut self) {
        self.cursor = 0;
    }

    pub fn end(&mut self) {
        self.cursor = self.char_count();
    }

    /// Deletes from the start of the line to the cursor (Ctrl+U).
    pub fn delete_to_start(&mut self) {
        let at = self.byte_at(self.cursor);
        self.text.replace_range(..at, "");
        self.cursor = 0;
    }

    /// Deletes the word before the cursor (Ctrl+W).
    pub fn delete_word(&mut self) {
        let chars: Vec<char> = self.text.chars().collect();
        let mut start = self.cursor;
        while start > 0 && chars[start - 1] == ' ' {
            start -= 1;
        }
        while start > 0 && chars[start - 1] != ' ' {
            start -= 1;
        }
        let (from, to) = (self.byte_at(start), self.byte_at(self.cursor));
        self.text.replace_range(from..to, "");
        self.cursor = start;
    }

    /// Empties the line and returns what it held.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_keeps_the_cursor_on_char_boundaries() {
        let mut input = InputBuffer::default();
        input.insert_str("héllo wörld");
        assert_eq!(input.cursor(), 11);
        input.left();
        input.left();
        input.backspace();
        assert_eq!(input.text(), "héllo wöld");
        input.home();
        input.delete();
        input.insert('H');
        assert_eq!(input.text(), "Héllo wöld");
        input.end();
        input.delete_word();
        assert_eq!(input.text(), "Héllo ");
        input.delete_to_start();
        assert!(input.is_empty());
        // Keys past the ends are harmless.
        input.backspace();
        input.delete();
        input.left();
        input.right();
        assert_eq!(input.cursor(), 0);
    }

    #[test]
    fn pasted_newlines_become_spaces_and_controls_are_dropped() {
        let mut input = InputBuffer::default();
        input.insert_str("a\nb\tc\u{1b}[31md");
        assert_eq!(input.text(), "a b c[31md");
        assert_eq!(input.take(), "a b c[31md");
        assert_eq!(input.cursor(), 0);
    }
}
