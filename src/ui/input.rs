//! The prompt editor: multi-line text and a cursor (a char index), with
//! readline editing. Editing never panics on any sequence of keys.
//!
//! Lines are separated by `\n`; Up and Down move between them (the caller
//! walks the history only when the cursor is already on the first or last
//! line). Tabs become four spaces and control characters are dropped, so
//! every char has a display width.

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

    fn chars(&self) -> Vec<char> {
        self.text.chars().collect()
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

    /// Inserts text at the cursor, newlines kept (`\r\n` and `\r` become
    /// `\n`), tabs as four spaces, other control characters dropped.
    pub fn insert_str(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            self.insert(c);
        }
    }

    pub fn insert(&mut self, c: char) {
        match c {
            '\n' => self.insert_raw('\n'),
            '\t' => (0..4).for_each(|_| self.insert_raw(' ')),
            c if c.is_control() => {}
            c => self.insert_raw(c),
        }
    }

    fn insert_raw(&mut self, c: char) {
        let at = self.byte_at(self.cursor);
        self.text.insert(at, c);
        self.cursor += 1;
    }

    pub fn newline(&mut self) {
        self.insert_raw('\n');
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

    /// Start of the cursor's line (Home, Ctrl+A).
    pub fn home(&mut self) {
        self.cursor = self.line_start(self.cursor);
    }

    /// End of the cursor's line (End, Ctrl+E).
    pub fn end(&mut self) {
        self.cursor = self.line_end(self.cursor);
    }

    fn line_start(&self, at: usize) -> usize {
        let chars = self.chars();
        let mut start = at.min(chars.len());
        while start > 0 && chars[start - 1] != '\n' {
            start -= 1;
        }
        start
    }

    fn line_end(&self, at: usize) -> usize {
        let chars = self.chars();
        let mut end = at.min(chars.len());
        while end < chars.len() && chars[end] != '\n' {
            end += 1;
        }
        end
    }

    /// Moves to the line above, keeping the column where it can; `false`
    /// on the first line (then Up walks the history).
    pub fn up(&mut self) -> bool {
        let start = self.line_start(self.cursor);
        if start == 0 {
            return false;
        }
        let column = self.cursor - start;
        let above = self.line_start(start - 1);
        self.cursor = (above + column).min(start - 1);
        true
    }

    /// Moves to the line below; `false` on the last line.
    pub fn down(&mut self) -> bool {
        let end = self.line_end(self.cursor);
        if end >= self.char_count() {
            return false;
        }
        let column = self.cursor - self.line_start(self.cursor);
        let below = end + 1;
        self.cursor = (below + column).min(self.line_end(below));
        true
    }

    pub fn is_multiline(&self) -> bool {
        self.text.contains('\n')
    }

    /// Back to the start of the word (Alt+B, Ctrl+Left).
    pub fn word_left(&mut self) {
        let chars = self.chars();
        let mut at = self.cursor;
        while at > 0 && !chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        while at > 0 && chars[at - 1].is_alphanumeric() {
            at -= 1;
        }
        self.cursor = at;
    }

    /// On to the end of the word (Alt+F, Ctrl+Right).
    pub fn word_right(&mut self) {
        let chars = self.chars();
        let mut at = self.cursor;
        while at < chars.len() && !chars[at].is_alphanumeric() {
            at += 1;
        }
        while at < chars.len() && chars[at].is_alphanumeric() {
            at += 1;
        }
        self.cursor = at;
    }

    /// Deletes from the start of the line to the cursor (Ctrl+U); at the
    /// start of a line, joins it with the one above.
    pub fn delete_to_start(&mut self) {
        let start = self.line_start(self.cursor);
        if start == self.cursor {
            self.backspace();
            return;
        }
        self.remove_range(start, self.cursor);
    }

    /// Deletes from the cursor to the end of the line (Ctrl+K); at the end
    /// of a line, joins the next one.
    pub fn kill_to_end(&mut self) {
        let end = self.line_end(self.cursor);
        if end == self.cursor {
            self.delete();
            return;
        }
        self.remove_range(self.cursor, end);
    }

    /// Deletes the word before the cursor (Ctrl+W).
    pub fn delete_word(&mut self) {
        let chars = self.chars();
        let mut start = self.cursor;
        while start > 0 && chars[start - 1].is_whitespace() {
            start -= 1;
        }
        while start > 0 && !chars[start - 1].is_whitespace() {
            start -= 1;
        }
        self.remove_range(start, self.cursor);
    }

    fn remove_range(&mut self, from: usize, to: usize) {
        let (from_byte, to_byte) = (self.byte_at(from), self.byte_at(to));
        self.text.replace_range(from_byte..to_byte, "");
        self.cursor = from;
    }

    /// Empties the editor and returns what it held.
    pub fn take(&mut self) -> String {
        self.cursor = 0;
        std::mem::take(&mut self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(text: &str) -> InputBuffer {
        let mut input = InputBuffer::default();
        input.insert_str(text);
        input
    }

    #[test]
    fn editing_keeps_the_cursor_on_char_boundaries() {
        let mut input = buffer("héllo wörld");
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
        input.kill_to_end();
        input.word_left();
        input.word_right();
        assert!(!input.up() && !input.down());
        assert_eq!(input.cursor(), 0);
    }

    #[test]
    fn pasted_newlines_are_kept_and_controls_dropped() {
        let mut input = buffer("a\r\nb\tc\u{1b}[31md");
        assert_eq!(input.text(), "a\nb    c[31md");
        assert!(input.is_multiline());
        assert_eq!(input.take(), "a\nb    c[31md");
        assert_eq!(input.cursor(), 0);
    }

    #[test]
    fn up_and_down_move_between_lines_keeping_the_column() {
        let mut input = buffer("first line\nab\nthird line");
        assert!(input.up());
        assert_eq!(input.cursor(), 13, "end of `ab`: the column is clamped");
        assert!(input.up());
        assert_eq!(input.cursor(), 2);
        assert!(!input.up(), "the first line: Up goes to the history");
        assert!(input.down());
        assert!(input.down());
        assert_eq!(input.cursor(), 16);
        assert!(!input.down());
    }

    #[test]
    fn readline_kills_and_word_motions_work_per_line() {
        let mut input = buffer("one two\nthree four");
        input.word_left();
        assert_eq!(input.cursor(), 14);
        input.word_left();
        input.word_left();
        assert_eq!(input.cursor(), 4);
        input.kill_to_end();
        assert_eq!(input.text(), "one \nthree four");
        input.kill_to_end();
        assert_eq!(
            input.text(),
            "one three four",
            "Ctrl+K at the end joins lines"
        );
        input.word_right();
        assert_eq!(input.cursor(), 9);
        input.delete_to_start();
        assert_eq!(input.text(), " four");
    }
}
