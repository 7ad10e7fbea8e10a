//! `ripgrep`: regex search over workspace files, printed like `rg`.
//!
//! The same walker as `list_files` (so `.gitignore` applies and `.git` and
//! `.fido-*` are invisible), the ripgrep crates for matching and searching,
//! binary files skipped at their first NUL byte. Output is bounded by
//! `max_matches` and by `limits.read_max_bytes`, each with a note.
//!
//! Memory is bounded too: a line longer than [`PIECE_BYTES`] is searched in
//! pieces of that size, each starting with the last [`OVERLAP_BYTES`] of
//! the one before (as `read_file` never holds a whole giant line), the
//! searcher has a heap limit, and a long line is shown cut around its match
//! with a note. File names are escaped, so a name cannot forge a line.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use tokio_util::sync::CancellationToken;

use super::capability::{Capability, Reads};
use super::list_files::walker;
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;
use crate::protocol::tool_facts::{FileLine, MAX_FILE_LINES, ToolFacts};
use crate::text::{sanitize, short};
use crate::workspace::{Workspace, beneath, is_missing};

const DEFAULT_MAX_MATCHES: usize = 200;
const MAX_MATCHES: usize = 1000;
const MAX_CONTEXT: usize = 10;
/// Longest line shown, in characters.
const MAX_LINE_CHARS: usize = 500;
/// Characters shown before the match when a long line is cut around it.
const LEAD_CHARS: usize = 100;
/// Longest stretch of one line the searcher holds: a longer line is
/// searched in pieces of this many bytes, so a 500 MB one-line file costs
/// about this, not 500 MB.
const PIECE_BYTES: usize = 1 << 20;
/// Each piece after the first starts with this many bytes of the one
/// before, so a match up to this long across the cut is found.
const OVERLAP_BYTES: usize = 4096;
/// The searcher's heap limit: the line it matches and its before-context
/// lines, a piece at most each; past it the file is not searched further.
const HEAP_LIMIT: usize = (MAX_CONTEXT + 2) * PIECE_BYTES;

pub struct Ripgrep;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        pattern: String,
        #[serde(default)]
        path: Option<String>,
        #[schema(description = "e.g. \"*.rs\"; a leading ! excludes.")]
        #[serde(default)]
        glob: Option<String>,
        #[serde(default)]
        case_insensitive: bool,
        #[schema(description = "Lines around each match.")]
        #[serde(default)]
        context: Option<usize>,
        #[serde(default)]
        max_matches: Option<usize>,
    }
}

impl TypedTool for Ripgrep {
    const NAME: &'static str = "ripgrep";
    const CAPABILITY: Capability = Capability {
        reads: Some(Reads::Tree),
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        format!(
            "Search file contents with a Rust regex, skipping .gitignored and binary files. Prints `path:line:text` per match, at most {DEFAULT_MAX_MATCHES} by default. Escape metacharacters for literal text, e.g. `fn main\\(`."
        )
        .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let env = call.env;
            let search = match Search::new(&env.workspace, args, env.limits.read_max_bytes) {
                Ok(search) => search,
                Err(refusal) => return refusal,
            };
            let workspace = env.workspace.clone();
            let cancel = call.cancel.clone();
            tokio::task::spawn_blocking(move || search.run(&workspace, &cancel))
                .await
                .unwrap_or_else(|err| ToolOutput::error(format!("ripgrep failed: {err}")))
        })
    }
}

/// A checked search, ready to run on a blocking thread.
struct Search {
    matcher: grep_regex::RegexMatcher,
    start: PathBuf,
    shown: String,
    glob: Option<String>,
    context: usize,
    max_matches: usize,
    max_bytes: usize,
}

impl Search {
    fn new(workspace: &Workspace, args: Args, max_bytes: usize) -> Result<Search, ToolOutput> {
        if args.pattern.is_empty() {
            return Err(ToolOutput::error(
                "`pattern` is empty; give a regular expression to search for",
            ));
        }
        let context = args.context.unwrap_or(0);
        if context > MAX_CONTEXT {
            return Err(ToolOutput::error(format!(
                "context is at most {MAX_CONTEXT} lines"
            )));
        }
        let max_matches = args.max_matches.unwrap_or(DEFAULT_MAX_MATCHES);
        if max_matches == 0 {
            return Err(ToolOutput::error("max_matches must be at least 1"));
        }
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(args.case_insensitive)
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|err| {
                ToolOutput::error(format!(
                    "invalid regex `{}`: {err}. Escape metacharacters such as ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally.",
                    short(&args.pattern, 200)
                ))
            })?;
        let path = args.path.unwrap_or_else(|| ".".to_string());
        let resolved = workspace
            .resolve(&path)
            .map_err(|err| ToolOutput::error(err.to_string()))?;
        match std::fs::metadata(&resolved.abs) {
            Ok(_) => {}
            Err(err) if is_missing(&err) => {
                return Err(ToolOutput::error(format!(
                    "`{}` does not exist; search \".\" or a directory list_files shows",
                    resolved.shown
                )));
            }
            Err(err) => {
                return Err(ToolOutput::error(format!(
                    "cannot search `{}`: {err}",
                    resolved.shown
                )));
            }
        }
        Ok(Search {
            matcher,
            start: resolved.abs,
            shown: resolved.shown,
            glob: args.glob.filter(|g| !g.trim().is_empty()),
            context,
            max_matches: max_matches.min(MAX_MATCHES),
            max_bytes,
        })
    }

    /// The files to search, in name order, filtered by the glob.
    fn walk(&self, workspace: &Workspace) -> Result<WalkBuilder, ToolOutput> {
        let mut walk = walker(&self.start);
        walk.sort_by_file_name(|a, b| a.cmp(b));
        if let Some(glob) = &self.glob {
            let overrides = OverrideBuilder::new(&workspace.root)
                .add(glob)
                .and_then(|builder| builder.build())
                .map_err(|err| ToolOutput::error(format!("invalid glob `{glob}`: {err}")))?;
            walk.overrides(overrides);
        }
        Ok(walk)
    }

    fn run(&self, workspace: &Workspace, cancel: &CancellationToken) -> ToolOutput {
        let walk = match self.walk(workspace) {
            Ok(walk) => walk,
            Err(refusal) => return refusal,
        };
        // No BOM sniffing: the offsets the sink gets are the file's own
        // (plus the pieces' breaks), which the line numbers are mended
        // from. A UTF-16 file has NUL bytes and is skipped as binary, as
        // `read_file` refuses it.
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .bom_sniffing(false)
            .heap_limit(Some(HEAP_LIMIT))
            .binary_detection(BinaryDetection::quit(0))
            .before_context(self.context)
            .after_context(self.context)
            .build();
        let mut results = Results {
            out: String::new(),
            lines: Vec::new(),
            matches: 0,
            max_matches: self.max_matches,
            max_bytes: self.max_bytes,
            stop: None,
            separate_files: self.context > 0,
        };
        let mut unreadable = 0usize;
        // Each file is opened beneath the workspace's handle: a folder
        // swapped for a link after the walk saw it is never followed.
        let root = beneath::open_root(&workspace.root).ok();
        for entry in walk.build() {
            if cancel.is_cancelled() {
                return ToolOutput::error("cancelled");
            }
            let Ok(entry) = entry else {
                unreadable += 1;
                continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let breaks = Rc::new(RefCell::new(Vec::new()));
            let reader = match open_regular(root.as_ref(), &workspace.root, entry.path()) {
                Ok(file) => Pieces::new(file, breaks.clone(), cancel.clone()),
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            let mut sink = FileSink {
                results: &mut results,
                matcher: &self.matcher,
                path: crate::text::escape_line(&workspace.display(entry.path())).into_owned(),
                breaks,
                started: false,
            };
            if searcher
                .search_reader(&self.matcher, reader, &mut sink)
                .is_err()
            {
                unreadable += 1;
            }
            if results.stop.is_some() {
                break;
            }
        }
        let lines = std::mem::take(&mut results.lines);
        let output = ToolOutput::ok(self.render(results, unreadable));
        if lines.is_empty() {
            return output;
        }
        output.with_facts(ToolFacts {
            lines,
            ..ToolFacts::default()
        })
    }

    /// The matches, then why the search stopped and what it could not read.
    fn render(&self, results: Results, unreadable: usize) -> String {
        let mut out = results.out;
        if out.is_empty() {
            out = match &self.glob {
                Some(glob) => format!("No matches in {} (files matching `{glob}`).", self.shown),
                None => "No matches.".to_string(),
            };
        }
        match results.stop {
            Some(Stop::Matches) => out.push_str(&format!(
                "\n[… stopped at {} matches; narrow the pattern, path or glob, or raise max_matches (max {MAX_MATCHES})]",
                self.max_matches
            )),
            Some(Stop::Bytes) => out.push_str(&format!(
                "\n[… output capped at {} bytes after {} matches; narrow the pattern, path or glob]",
                self.max_bytes, results.matches
            )),
            None => {}
        }
        if unreadable > 0 {
            out.push_str(&format!(
                "\n({unreadable} files or directories could not be read.)"
            ));
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Matches,
    Bytes,
}

/// Output across all files.
struct Results {
    out: String,
    /// The first matched lines, for the facts.
    lines: Vec<FileLine>,
    matches: usize,
    max_matches: usize,
    max_bytes: usize,
    stop: Option<Stop>,
    /// Put `--` between files, as rg does when showing context.
    separate_files: bool,
}

impl Results {
    /// Appends a line, or records that the byte cap stops the search.
    fn push(&mut self, line: &str) -> bool {
        if self.out.len() + line.len() + 1 > self.max_bytes {
            self.stop = Some(Stop::Bytes);
            return false;
        }
        if !self.out.is_empty() {
            self.out.push('\n');
        }
        self.out.push_str(line);
        true
    }
}

/// Opens a regular file without waiting on it: a FIFO or device swapped in
/// after the walk saw a file is refused, not read. Beneath `root` (the
/// workspace's handle) where the kernel can; else by path, with only the
/// last component kept from being a link.
fn open_regular(root: Option<&OwnedFd>, workspace: &Path, path: &Path) -> io::Result<File> {
    if let (Some(root), Ok(rel)) = (root, path.strip_prefix(workspace))
        && let Some(file) = beneath::open_file_plain(root.as_fd(), rel)?
    {
        return Ok(file);
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
        .open(path)?;
    beneath::regular_only(file)
}

/// A file as the searcher reads it: a newline is added after every
/// [`PIECE_BYTES`] bytes without one, at offsets (in what it gives out)
/// recorded in `breaks`, so no line the searcher holds is longer. After
/// each added newline the last [`OVERLAP_BYTES`] bytes before it come
/// again, so a match across the cut is whole in the next piece. Ends the
/// search with an error once the call is cancelled.
struct Pieces<R> {
    inner: R,
    /// Bytes since the last newline.
    run: usize,
    /// Bytes given out so far, added newlines and repeats included.
    given: u64,
    breaks: Rc<RefCell<Vec<u64>>>,
    /// The last bytes of the run, at most [`OVERLAP_BYTES`].
    recent: Vec<u8>,
    /// What is to be given again before reading on, from `repeat_at`.
    repeat: Vec<u8>,
    repeat_at: usize,
    cancel: CancellationToken,
}

impl<R: Read> Pieces<R> {
    fn new(inner: R, breaks: Rc<RefCell<Vec<u64>>>, cancel: CancellationToken) -> Self {
        Pieces {
            inner,
            run: 0,
            given: 0,
            breaks,
            recent: Vec::new(),
            repeat: Vec::new(),
            repeat_at: 0,
            cancel,
        }
    }

    /// Remembers what was just given out of the run.
    fn keep_recent(&mut self, given: &[u8]) {
        let start = given.len().saturating_sub(OVERLAP_BYTES);
        self.recent.extend_from_slice(&given[start..]);
        let excess = self.recent.len().saturating_sub(OVERLAP_BYTES);
        self.recent.drain(..excess);
    }
}

impl<R: Read> Read for Pieces<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other("cancelled"));
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if self.run == PIECE_BYTES {
            buf[0] = b'\n';
            self.breaks.borrow_mut().push(self.given);
            self.given += 1;
            self.run = 0;
            self.repeat = std::mem::take(&mut self.recent);
            self.repeat_at = 0;
            return Ok(1);
        }
        let room = buf.len().min(PIECE_BYTES - self.run);
        let read = if self.repeat_at < self.repeat.len() {
            let again = &self.repeat[self.repeat_at..];
            let n = room.min(again.len());
            buf[..n].copy_from_slice(&again[..n]);
            self.repeat_at += n;
            n
        } else {
            self.inner.read(&mut buf[..room])?
        };
        self.run = match buf[..read].iter().rposition(|&b| b == b'\n') {
            Some(at) => {
                self.recent.clear();
                read - at - 1
            }
            None => self.run + read,
        };
        let run_part = &buf[read - self.run.min(read)..read];
        self.keep_recent(run_part);
        self.given += read as u64;
        Ok(read)
    }
}

/// Prints one file's matches into [`Results`].
struct FileSink<'a> {
    results: &'a mut Results,
    matcher: &'a grep_regex::RegexMatcher,
    path: String,
    /// Where [`Pieces`] added newlines to this file.
    breaks: Rc<RefCell<Vec<u64>>>,
    started: bool,
}

/// A line as the searcher reported it.
struct Found<'b> {
    separator: char,
    number: Option<u64>,
    /// Its offset in what [`Pieces`] gave out.
    offset: u64,
    bytes: &'b [u8],
}

impl FileSink<'_> {
    fn line(&mut self, found: Found<'_>, focus: usize) -> bool {
        if !self.started {
            self.started = true;
            if self.results.separate_files
                && !self.results.out.is_empty()
                && !self.results.push("--")
            {
                return false;
            }
        }
        let (number, piece) = self.mended(&found);
        let bytes = trim_line_end(found.bytes);
        let text = excerpt(bytes, focus, piece);
        let separator = found.separator;
        let line = format!("{}{separator}{number}{separator}{text}", self.path);
        let pushed = self.results.push(&line);
        if pushed && separator == ':' && self.results.lines.len() < MAX_FILE_LINES {
            let path = self.path.clone();
            self.results.lines.push(FileLine { path, line: number });
        }
        pushed
    }

    /// Where the first match of `mat` starts that no piece before
    /// showed: in a piece that starts with the repeat of the one before
    /// ([`Pieces`]), one that ends past the repeat; else the first.
    fn first_new_match(&self, mat: &SinkMatch<'_>) -> Option<usize> {
        let bytes = mat.bytes();
        let offset = mat.absolute_byte_offset();
        let after_break = offset > 0 && self.breaks.borrow().binary_search(&(offset - 1)).is_ok();
        let repeated = if after_break { OVERLAP_BYTES } else { 0 };
        let mut at = 0;
        while let Ok(Some(found)) = self.matcher.find_at(bytes, at) {
            if found.end() > repeated || repeated == 0 {
                return Some(found.start());
            }
            at = found.end().max(found.start() + 1);
            if at > bytes.len() {
                break;
            }
        }
        // The searcher said it matched: with no repeat, show it from the
        // start as before.
        (repeated == 0).then_some(0)
    }

    /// The line's number in the file (the searcher counted the added
    /// newlines too), and whether it is a piece of a longer line.
    fn mended(&self, found: &Found<'_>) -> (u64, bool) {
        let breaks = self.breaks.borrow();
        let before = breaks.partition_point(|&at| at < found.offset) as u64;
        let end = found.offset + found.bytes.len() as u64;
        let piece = before > 0 && breaks[before as usize - 1] + 1 == found.offset
            || found.bytes.ends_with(b"\n") && breaks.binary_search(&(end - 1)).is_ok();
        let number = found.number.unwrap_or(0).saturating_sub(before);
        (number, piece)
    }
}

fn trim_line_end(bytes: &[u8]) -> &[u8] {
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    &bytes[..end]
}

/// The text shown of a line: whole up to [`MAX_LINE_CHARS`] characters;
/// a longer one from a little before `focus` (the match's byte offset),
/// with notes of what was cut.
fn excerpt(line: &[u8], focus: usize, piece: bool) -> String {
    let head = &line[..line.len().min(4 * MAX_LINE_CHARS + 4)];
    if !piece && head.len() == line.len() {
        let text = String::from_utf8_lossy(line);
        if text.chars().count() <= MAX_LINE_CHARS {
            return sanitize(&text, false);
        }
    }
    // Start on a character boundary, `LEAD_CHARS` bytes or so before.
    let mut from = focus.min(line.len()).saturating_sub(LEAD_CHARS);
    while from > 0 && from < line.len() && line[from] & 0xc0 == 0x80 {
        from += 1;
    }
    let window = &line[from..line.len().min(from + 4 * MAX_LINE_CHARS)];
    let text: String = String::from_utf8_lossy(window)
        .chars()
        .take(MAX_LINE_CHARS)
        .collect();
    let lead = match from {
        0 => String::new(),
        from => format!("[… {from} bytes] "),
    };
    let cut = if piece {
        format!(" [… line cut: longer than {PIECE_BYTES} bytes, searched in pieces]")
    } else {
        format!(" [… line cut: {} bytes]", line.len())
    };
    format!("{lead}{}{cut}", sanitize(&text, false))
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.results.matches >= self.results.max_matches {
            self.results.stop = Some(Stop::Matches);
            return Ok(false);
        }
        let Some(focus) = self.first_new_match(mat) else {
            // Only matches the piece before already showed.
            return Ok(true);
        };
        self.results.matches += 1;
        let found = Found {
            separator: ':',
            number: mat.line_number(),
            offset: mat.absolute_byte_offset(),
            bytes: mat.bytes(),
        };
        Ok(self.line(found, focus))
    }

    fn context(&mut self, _searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        let found = Found {
            separator: '-',
            number: ctx.line_number(),
            offset: ctx.absolute_byte_offset(),
            bytes: ctx.bytes(),
        };
        Ok(self.line(found, 0))
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, io::Error> {
        Ok(self.results.push("--"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(
            root.join("src/a.rs"),
            "fn main() {\n    let needle = 1;\n}\n",
        )
        .unwrap();
        fs::write(
            root.join("src/b.txt"),
            "1\n2 needle\n3\n4\n5\n6\n7\n8 Needle\n9\n",
        )
        .unwrap();
        fs::write(root.join("target/c.rs"), "needle\n").unwrap();
        fs::write(root.join(".git/config"), "needle\n").unwrap();
        fs::write(root.join(".fido-plan.json"), "needle\n").unwrap();
        fs::write(root.join("bin.dat"), b"needle\x00\xff\xfe").unwrap();
        dir
    }

    #[tokio::test]
    async fn finds_matches_like_rg() {
        let dir = tree();
        let env = env(dir.path());
        let out = call(&Ripgrep, &env, json!({"pattern": "needle"})).await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(
            out.content,
            "src/a.rs:2:    let needle = 1;\nsrc/b.txt:2:2 needle"
        );
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "case_insensitive": true, "glob": "*.txt"}),
        )
        .await;
        assert_eq!(out.content, "src/b.txt:2:2 needle\nsrc/b.txt:8:8 Needle");
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "glob": "!*.txt"}),
        )
        .await;
        assert_eq!(out.content, "src/a.rs:2:    let needle = 1;");
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "glob": "src/**/*.rs", "path": "src"}),
        )
        .await;
        assert_eq!(out.content, "src/a.rs:2:    let needle = 1;");
    }

    #[tokio::test]
    async fn context_groups_and_files_are_separated() {
        let dir = tree();
        let env = env(dir.path());
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "(?i)needle", "path": "src", "context": 1}),
        )
        .await;
        assert_eq!(
            out.content,
            "src/a.rs-1-fn main() {\nsrc/a.rs:2:    let needle = 1;\nsrc/a.rs-3-}\n--\nsrc/b.txt-1-1\nsrc/b.txt:2:2 needle\nsrc/b.txt-3-3\n--\nsrc/b.txt-7-7\nsrc/b.txt:8:8 Needle\nsrc/b.txt-9-9"
        );
    }

    /// The facts name the matched lines, not the context around them,
    /// for a front end that follows along; no match, no lines.
    #[tokio::test]
    async fn the_facts_name_the_matched_lines() {
        let dir = tree();
        let env = env(dir.path());
        let args = json!({"pattern": "(?i)needle", "path": "src", "context": 1});
        let out = call(&Ripgrep, &env, args).await;
        let shown = crate::tools::testing::lines_shown(&out);
        let at = |path: &str, line| (path.to_string(), line);
        assert_eq!(
            shown,
            [at("src/a.rs", 2), at("src/b.txt", 2), at("src/b.txt", 8)]
        );
        let none = call(&Ripgrep, &env, json!({"pattern": "absent-word"})).await;
        assert_eq!(none.facts, None);
    }

    #[tokio::test]
    async fn caps_and_no_matches() {
        let dir = tree();
        let mut env = env(dir.path());
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "\\d", "path": "src/b.txt", "max_matches": 3}),
        )
        .await;
        assert_eq!(
            out.content.lines().take(3).collect::<Vec<_>>(),
            ["src/b.txt:1:1", "src/b.txt:2:2 needle", "src/b.txt:3:3"]
        );
        assert!(
            out.content.contains("stopped at 3 matches"),
            "{}",
            out.content
        );
        env.limits.read_max_bytes = 40;
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "\\d", "path": "src/b.txt"}),
        )
        .await;
        assert!(
            out.content.contains("output capped at 40 bytes"),
            "{}",
            out.content
        );
        let out = call(&Ripgrep, &env, json!({"pattern": "nothing-like-this"})).await;
        assert!(out.ok);
        assert_eq!(out.content, "No matches.");
        let long = "x".repeat(2000);
        fs::write(dir.path().join("long.txt"), format!("{long}\n")).unwrap();
        env.limits.read_max_bytes = 64 * 1024;
        let out = call(&Ripgrep, &env, json!({"pattern": "x+", "path": "long.txt"})).await;
        assert!(out.content.chars().count() < 600);
        assert!(
            out.content.ends_with(" [… line cut: 2000 bytes]"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn errors() {
        let dir = tree();
        let env = env(dir.path());
        for (args, expected) in [
            (json!({"pattern": "fn main("}), "invalid regex `fn main(`"),
            (json!({"pattern": ""}), "empty"),
            (json!({"pattern": "x", "path": "nope"}), "does not exist"),
            (
                json!({"pattern": "x", "path": ".fido-plan.json"}),
                "Fido's own state",
            ),
            (json!({"pattern": "x", "context": 11}), "at most 10"),
            (json!({"pattern": "x", "glob": "a[b"}), "invalid glob"),
            (json!({"regex": "x"}), "invalid arguments"),
        ] {
            let out = call(&Ripgrep, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
    }

    #[tokio::test]
    async fn a_name_cannot_forge_a_match() {
        let dir = tree();
        // A folder `a<newline>src` holding `x.rs:1:forged`.
        fs::create_dir(dir.path().join("a\nsrc")).unwrap();
        fs::write(dir.path().join("a\nsrc/x.rs:1:forged"), "needle\n").unwrap();
        let env = env(dir.path());
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "path": "a\nsrc"}),
        )
        .await;
        assert_eq!(out.content, "a\\nsrc/x.rs:1:forged:1:needle");
        assert!(!out.content.lines().any(|line| line.starts_with("src/x.rs")));
    }

    #[tokio::test]
    async fn a_long_line_is_shown_around_its_match_with_a_note() {
        let dir = tree();
        let line = format!("{}needle{}", "y".repeat(5000), "z".repeat(5000));
        fs::write(dir.path().join("long.txt"), format!("{line}\n")).unwrap();
        let env = env(dir.path());
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "path": "long.txt"}),
        )
        .await;
        let shown = out
            .content
            .strip_prefix("long.txt:1:[… 4900 bytes] ")
            .unwrap();
        assert!(
            shown.starts_with(&format!("{}needle", "y".repeat(100))),
            "{shown}"
        );
        assert!(shown.ends_with(" [… line cut: 10006 bytes]"), "{shown}");
    }

    #[tokio::test]
    async fn a_giant_line_is_searched_in_pieces_with_true_line_numbers() {
        let dir = tree();
        let mut giant = "x".repeat(3 * PIECE_BYTES);
        giant.replace_range(2 * PIECE_BYTES + 10..2 * PIECE_BYTES + 16, "needle");
        fs::write(dir.path().join("giant.txt"), format!("{giant}\nneedle\n")).unwrap();
        let env = env(dir.path());
        let out = call(
            &Ripgrep,
            &env,
            json!({"pattern": "needle", "path": "giant.txt"}),
        )
        .await;
        let lines: Vec<&str> = out.content.lines().collect();
        assert_eq!(lines.len(), 2, "{}", out.content);
        assert!(lines[0].starts_with("giant.txt:1:"), "{}", lines[0]);
        assert!(lines[0].contains("needle") && lines[0].contains("searched in pieces"));
        assert!(lines[0].chars().count() < 700);
        assert_eq!(lines[1], "giant.txt:2:needle");
    }

    /// A match across the cut between two pieces is found, once; one just
    /// before the cut (so also in the repeat that starts the next piece)
    /// is shown once too.
    #[tokio::test]
    async fn a_match_across_two_pieces_is_found_once() {
        let dir = tree();
        let mut giant = "x".repeat(3 * PIECE_BYTES);
        giant.replace_range(PIECE_BYTES - 3..PIECE_BYTES + 3, "needle");
        fs::write(dir.path().join("across.txt"), &giant).unwrap();
        let mut near = "x".repeat(3 * PIECE_BYTES);
        near.replace_range(PIECE_BYTES - 100..PIECE_BYTES - 94, "needle");
        fs::write(dir.path().join("near.txt"), &near).unwrap();
        let env = env(dir.path());
        for name in ["across.txt", "near.txt"] {
            let out = call(&Ripgrep, &env, json!({"pattern": "needle", "path": name})).await;
            assert!(out.ok, "{}", out.content);
            let lines: Vec<&str> = out.content.lines().collect();
            assert_eq!(lines.len(), 1, "{name}: {}", out.content);
            assert!(lines[0].starts_with(&format!("{name}:1:")), "{}", lines[0]);
            assert!(lines[0].contains("needle"), "{}", lines[0]);
        }
    }

    /// The repeat never holds a newline: a cut after a short line starts
    /// the next piece with the giant line's own bytes only.
    #[test]
    fn pieces_repeat_the_tail_of_the_cut_line_only() {
        let text = format!("ab\n{}", "y".repeat(PIECE_BYTES + 10));
        let breaks = Rc::new(RefCell::new(Vec::new()));
        let mut pieces = Pieces::new(text.as_bytes(), breaks.clone(), CancellationToken::new());
        let mut out = Vec::new();
        pieces.read_to_end(&mut out).unwrap();
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        assert_eq!(lines[0], b"ab");
        assert_eq!(lines[1].len(), PIECE_BYTES);
        assert_eq!(lines[2].len(), OVERLAP_BYTES + 10);
        assert!(lines[2].iter().all(|b| *b == b'y'));
        assert_eq!(breaks.borrow().len(), 1);
    }
}
