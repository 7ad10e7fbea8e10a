//! Reading the one git process a change set is built from: `git
//! diff-index --cached -z -M --raw --numstat -p`, whose output is the raw
//! records (`:old new oldid newid status\0path\0[path2\0]`), the numstat
//! records (`added\tremoved\tpath\0`, or for a rename
//! `added\tremoved\t\0from\0to\0`; `-` counts mean binary), an empty
//! field, then the patch of every file in the order of the raw records.
//!
//! The records are read field by field, each consuming its own path
//! fields, so no path (whatever characters it holds) is read as a record.

use std::collections::HashMap;

/// One raw record, its paths repository-relative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLine {
    pub old_mode: String,
    pub new_mode: String,
    pub old_id: String,
    pub new_id: String,
    pub status: char,
    pub path: String,
    pub from: Option<String>,
}

/// A file's line counts: added, removed, and whether git saw it as binary.
pub type Counts = (u64, u64, bool);

/// What one diff-index output says.
#[derive(Debug, Default)]
pub struct Listing<'a> {
    pub raw: Vec<RawLine>,
    /// By path (the new path of a rename).
    pub counts: HashMap<String, Counts>,
    /// The patch of each raw record, in order; `None` when the patch does
    /// not cut into one section per record (a type change is two), and the
    /// caller asks git for the patch it needs instead.
    pub sections: Option<Vec<&'a [u8]>>,
}

/// The NUL-terminated fields of an output, and what follows them.
struct Fields<'a> {
    out: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn next_text(&mut self) -> Option<String> {
        self.next()
            .map(|field| String::from_utf8_lossy(field).into_owned())
    }

    /// Everything after the fields read so far.
    fn rest(&self) -> &'a [u8] {
        self.out.get(self.at..).unwrap_or_default()
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest();
        let end = rest.iter().position(|b| *b == 0)?;
        self.at += end + 1;
        Some(&rest[..end])
    }
}

/// Reads a whole diff-index output.
pub fn read(out: &[u8]) -> Listing<'_> {
    let mut fields = Fields { out, at: 0 };
    let mut listing = Listing::default();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            break; // The patch follows.
        }
        if let Some(head) = field.strip_prefix(b":") {
            if let Some(line) = raw_line(head, &mut fields) {
                listing.raw.push(line);
            }
        } else if let Some((path, counts)) = numstat(field, &mut fields) {
            listing.counts.insert(path, counts);
        }
    }
    listing.sections = sections(fields.rest(), listing.raw.len());
    listing
}

/// A raw record from its head (after the `:`) and its path fields.
fn raw_line(head: &[u8], fields: &mut Fields) -> Option<RawLine> {
    let head = String::from_utf8_lossy(head);
    let parts: Vec<&str> = head.split(' ').collect();
    let [old_mode, new_mode, old_id, new_id, status] = parts[..] else {
        return None;
    };
    let status = status.chars().next().unwrap_or('M');
    let first = fields.next_text()?;
    let (path, from) = match status {
        'R' | 'C' => (fields.next_text()?, Some(first)),
        _ => (first, None),
    };
    Some(RawLine {
        old_mode: old_mode.into(),
        new_mode: new_mode.into(),
        old_id: old_id.into(),
        new_id: new_id.into(),
        status,
        path,
        from,
    })
}

/// A numstat record: its path (a rename's new one) and counts.
fn numstat(field: &[u8], fields: &mut Fields) -> Option<(String, Counts)> {
    let field = String::from_utf8_lossy(field);
    let mut parts = field.splitn(3, '\t');
    let (added, removed, path) = (parts.next()?, parts.next()?, parts.next()?);
    let path = if path.is_empty() {
        let _from = fields.next()?;
        fields.next_text()?
    } else {
        path.to_string()
    };
    let binary = added == "-";
    let count = |text: &str| text.parse().unwrap_or(0);
    Some((path, (count(added), count(removed), binary)))
}

/// The patch cut before each `diff --git ` line, if that makes `files`
/// sections. No patch line but a header starts so: a text line starts
/// with ` `, `+`, `-`, `@` or `\`, and a binary one is base85, which has no
/// space.
fn sections(patch: &[u8], files: usize) -> Option<Vec<&[u8]>> {
    const HEADER: &[u8] = b"diff --git ";
    if patch.is_empty() {
        return (files == 0).then(Vec::new);
    }
    if !patch.starts_with(HEADER) {
        return None;
    }
    let mut starts = vec![0];
    starts.extend(
        patch
            .windows(HEADER.len() + 1)
            .enumerate()
            .filter(|(_, window)| window[0] == b'\n' && &window[1..] == HEADER)
            .map(|(at, _)| at + 1),
    );
    if starts.len() != files {
        return None;
    }
    starts.push(patch.len());
    Some(starts.windows(2).map(|w| &patch[w[0]..w[1]]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_lines_with_renames_are_read() {
        let out = b":100644 100644 aaa bbb M\0src/a.rs\0:100644 100755 ccc ccc M\0run.sh\0:100644 100644 ddd eee R087\0old.rs\0new.rs\0:000000 120000 000 fff A\0link\0";
        let lines = read(out).raw;
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2].path, "new.rs");
        assert_eq!(lines[2].from.as_deref(), Some("old.rs"));
        assert_eq!((lines[1].old_id.as_str(), lines[1].status), ("ccc", 'M'));
        assert_eq!(lines[3].new_mode, "120000");
    }

    #[test]
    fn numstat_reads_counts_binaries_and_renames() {
        let out = b"3\t1\tsrc/a.rs\0-\t-\timg.png\x005\t0\t\0old.rs\0new.rs\0";
        let counts = read(out).counts;
        assert_eq!(counts.len(), 3);
        assert_eq!(counts["src/a.rs"], (3, 1, false));
        assert_eq!(counts["img.png"], (0, 0, true));
        assert_eq!(counts["new.rs"], (5, 0, false));
    }

    /// Records, the empty field, then one patch section per record; a
    /// path that looks like a record or a header is still a path.
    #[test]
    fn records_and_the_patch_are_read_from_one_output() {
        let mut out = b":100644 100644 aaa bbb M\0src/a.rs\0:100644 100644 ddd eee R087\0old.rs\x001\t2\t:x\0".to_vec();
        out.extend(b"3\t1\tsrc/a.rs\x005\t0\t\0old.rs\x001\t2\t:x\0\0");
        let first = b"diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1 +1 @@\n-diff --git a b\n+x\n";
        let second = b"diff --git a/old.rs b/1\t2\t:x\nsimilarity index 87%\n";
        out.extend(first);
        out.extend(second);
        let listing = read(&out);
        let paths: Vec<(&str, Option<&str>)> = listing
            .raw
            .iter()
            .map(|l| (l.path.as_str(), l.from.as_deref()))
            .collect();
        assert_eq!(paths, [("src/a.rs", None), ("1\t2\t:x", Some("old.rs"))]);
        assert_eq!(listing.counts["1\t2\t:x"], (5, 0, false));
        assert_eq!(listing.counts.len(), 2);
        let sections = listing.sections.unwrap();
        assert_eq!(sections, [&first[..], &second[..]]);
    }

    #[test]
    fn a_patch_that_does_not_line_up_with_the_records_is_no_sections() {
        assert_eq!(sections(b"", 0), Some(Vec::new()));
        assert_eq!(sections(b"", 1), None);
        let typechange = b"diff --git a/l b/l\ndeleted file mode 100644\ndiff --git a/l b/l\nnew file mode 120000\n";
        assert_eq!(sections(typechange, 1), None);
        assert_eq!(sections(typechange, 2).map(|s| s.len()), Some(2));
        assert_eq!(sections(b"garbage\n", 1), None);
    }
}
