//! `read_file`: a window of a text file's lines, numbered.
//!
//! The file is streamed line by line, never loaded whole: a line longer than
//! [`MAX_LINE_CHARS`] is cut (the rest is skipped, not buffered), and the
//! output stops at `limits.read_max_bytes` with a note saying where to
//! continue. Binary files (a NUL byte in the first 8 KiB, or not UTF-8) are
//! described, never dumped.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};

use tokio_util::sync::CancellationToken;

use super::capability::{Capability, Reads};
use super::editor::{EditorFiles, read_within};
use super::file_work::{open_failed, refuse_odd};
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;
use crate::protocol::tool_facts::{FileLine, ToolFacts};
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, Workspace, is_missing};

const DEFAULT_LIMIT: usize = 2000;
/// Longest line shown whole; longer ones are cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// How much of the start is checked for NUL bytes.
const SNIFF_BYTES: usize = 8 * 1024;

pub struct ReadFile;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        path: String,
        #[schema(minimum = 1)]
        #[serde(default)]
        offset: Option<usize>,
        #[schema(minimum = 1)]
        #[serde(default)]
        limit: Option<usize>,
    }
}

impl TypedTool for ReadFile {
    const NAME: &'static str = "read_file";
    const CAPABILITY: Capability = Capability {
        reads: Some(Reads::File),
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        format!(
            "Read a UTF-8 text file, up to {DEFAULT_LIMIT} lines from `offset` (1-based). Lines come as `<number><TAB><text>`; the number and tab are not in the file, so leave them out of patch's old_text."
        )
        .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let offset = args.offset.unwrap_or(1);
            let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
            if offset == 0 || limit == 0 {
                return ToolOutput::error(
                    "offset and limit must be at least 1 (lines are numbered from 1)",
                );
            }
            let workspace = call.env.workspace.clone();
            let window = Window {
                offset,
                limit,
                max_bytes: call.env.limits.read_max_bytes,
            };
            if let Some(editor) = call.env.editor.clone().filter(|editor| editor.reads()) {
                return read_in_editor(editor.as_ref(), workspace, args.path, window, &call).await;
            }
            let cancel = call.cancel.clone();
            let reading =
                tokio::task::spawn_blocking(move || read(&workspace, &args.path, window, &cancel));
            cancellable(reading, &call).await
        })
    }
}

/// Blocking work of the tool; a cancel answers at once, and the reader
/// stops at its next buffer (it checks the same token), so no thread
/// keeps going.
async fn cancellable(work: tokio::task::JoinHandle<ToolOutput>, call: &Call<'_>) -> ToolOutput {
    tokio::select! {
        done = work => done
            .unwrap_or_else(|err| ToolOutput::error(format!("read_file failed: {err}"))),
        () = call.cancel.cancelled() => ToolOutput::error("cancelled"),
    }
}

/// Reads the editor's text of `path` (its unsaved changes included) once
/// the file passed Fido's checks on the disk; the disk when the editor
/// cannot say.
async fn read_in_editor(
    editor: &dyn EditorFiles,
    workspace: Workspace,
    path: String,
    window: Window,
    call: &Call<'_>,
) -> ToolOutput {
    let checking = tokio::task::spawn_blocking(move || {
        let checked = open_checked(&workspace, &path);
        (checked, workspace.root)
    });
    let (checked, root) = match checking.await {
        Ok(done) => done,
        Err(err) => return ToolOutput::error(format!("read_file failed: {err}")),
    };
    let checked = match checked {
        Ok(checked) => checked,
        Err(refusal) => return refusal,
    };
    let abs = root.join(&checked.rel);
    let text = tokio::select! {
        text = read_within(editor, &abs) => text,
        () = call.cancel.cancelled() => return ToolOutput::error("cancelled"),
    };
    let cancel = call.cancel.clone();
    let reading = match text {
        Ok(text) => tokio::task::spawn_blocking(move || {
            let size = text.len() as u64;
            let outcome = read_lines(io::Cursor::new(text.into_bytes()), window, &cancel);
            shown_outcome(outcome, &checked.shown, size, window, &cancel)
        }),
        Err(why) => {
            tracing::info!(path = %checked.shown, %why, "the editor did not give the file; read from the disk");
            tokio::task::spawn_blocking(move || read_checked(checked, window, &cancel))
        }
    };
    cancellable(reading, call).await
}

#[derive(Debug, Clone, Copy)]
struct Window {
    offset: usize,
    limit: usize,
    max_bytes: usize,
}

/// Reads the window of the file at `path`, opened through the handle of
/// its folder (see `workspace::beneath`): non-blocking, checked with
/// `fstat` before a byte is read.
fn read(
    workspace: &Workspace,
    path: &str,
    window: Window,
    cancel: &CancellationToken,
) -> ToolOutput {
    match open_checked(workspace, path) {
        Ok(checked) => read_checked(checked, window, cancel),
        Err(refusal) => refusal,
    }
}

/// A file that passed the checks, open.
struct Checked {
    file: File,
    size: u64,
    /// As the messages name it.
    shown: String,
    /// Workspace-relative, its folders' symlinks followed.
    rel: std::path::PathBuf,
}

fn read_checked(checked: Checked, window: Window, cancel: &CancellationToken) -> ToolOutput {
    let outcome = read_lines(checked.file, window, cancel);
    shown_outcome(outcome, &checked.shown, checked.size, window, cancel)
}

/// The regular file at `path`, inside the workspace, open; or why not.
fn open_checked(workspace: &Workspace, path: &str) -> Result<Checked, ToolOutput> {
    let place = match workspace.locate(path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return Err(ToolOutput::error(err.to_string())),
    };
    let shown = &place.shown;
    let directory = || {
        ToolOutput::error(format!(
            "`{shown}` is a directory; use list_files to see what is in it"
        ))
    };
    let missing = || {
        ToolOutput::error(format!(
            "`{shown}` does not exist; use list_files or ripgrep to find the right path"
        ))
    };
    if place.is_root() {
        return Err(directory());
    }
    let Some(entry) = place.entry() else {
        return Err(missing());
    };
    let opened = match beneath::open_read_at(entry.dir, entry.name) {
        Ok(opened) => opened,
        Err(err) if is_missing(&err) => return Err(missing()),
        Err(err) => return Err(open_failed(shown, &err)),
    };
    if opened.kind == Kind::Dir {
        return Err(directory());
    }
    if let Some(refusal) = refuse_odd(shown, opened.kind) {
        return Err(refusal);
    }
    Ok(Checked {
        file: opened.file,
        size: opened.size,
        rel: place.rel_path(),
        shown: place.shown.clone(),
    })
}

/// What the model reads of the window `read_lines` came to.
fn shown_outcome(
    outcome: io::Result<Outcome>,
    shown: &str,
    size: u64,
    window: Window,
    cancel: &CancellationToken,
) -> ToolOutput {
    match outcome {
        Ok(Outcome::Lines(text)) => ToolOutput::ok(text).with_facts(ToolFacts {
            lines: vec![FileLine {
                path: shown.to_string(),
                line: window.offset as u64,
            }],
            ..ToolFacts::default()
        }),
        Ok(Outcome::Empty) => ToolOutput::ok(format!("{shown} is empty (0 bytes).")),
        Ok(Outcome::Binary) => ToolOutput::ok(format!(
            "{shown} is a binary file ({size} bytes); its content is not shown."
        )),
        Ok(Outcome::NotUtf8 { line }) => ToolOutput::ok(format!(
            "{shown} is not UTF-8 text ({size} bytes; line {line} is not valid UTF-8); its content is not shown."
        )),
        Ok(Outcome::PastEnd { lines }) => ToolOutput::error(format!(
            "offset {} is past the end of `{shown}`, which has {}",
            window.offset,
            crate::text::counted(lines as u64, "line")
        )),
        Err(_) if cancel.is_cancelled() => ToolOutput::error("cancelled"),
        Err(err) => ToolOutput::error(format!("cannot read `{shown}`: {err}")),
    }
}

enum Outcome {
    Lines(String),
    Empty,
    Binary,
    NotUtf8 { line: usize },
    PastEnd { lines: usize },
}

/// The window's lines; an error (`Interrupted`) once `cancel` is set.
fn read_lines(
    mut file: impl Read,
    window: Window,
    cancel: &CancellationToken,
) -> io::Result<Outcome> {
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    if let Some(outcome) = sniff(&head) {
        return Ok(outcome);
    }
    let mut reader = BufReader::new(io::Cursor::new(head).chain(file));
    let cap = MAX_LINE_CHARS * 4;
    let mut line = Vec::new();
    let mut number = 0usize;
    // Skip to the window.
    while number + 1 < window.offset {
        match read_line_capped(&mut reader, &mut line, 0, cancel)? {
            Some(_) => number += 1,
            None => return Ok(Outcome::PastEnd { lines: number }),
        }
    }
    let mut out = String::new();
    let mut shown = 0usize;
    loop {
        if shown == window.limit {
            if !reader.fill_buf()?.is_empty() {
                out.push_str(&format!(
                    "\n[… more lines follow; continue with offset={}]",
                    number + 1
                ));
            }
            break;
        }
        let Some(skipped) = read_line_capped(&mut reader, &mut line, cap, cancel)? else {
            if shown == 0 {
                return Ok(Outcome::PastEnd { lines: number });
            }
            break;
        };
        number += 1;
        let Some(rendered) = render_line(number, &line, skipped) else {
            return Ok(Outcome::NotUtf8 { line: number });
        };
        if shown > 0 && out.len() + rendered.len() + 1 > window.max_bytes {
            out.push_str(&format!(
                "\n[… output capped at {} bytes; continue with offset={number}]",
                window.max_bytes
            ));
            break;
        }
        if shown > 0 {
            out.push('\n');
        }
        out.push_str(&rendered);
        shown += 1;
    }
    Ok(Outcome::Lines(out))
}

/// What the first bytes of a file say when it is not text to show: empty,
/// binary (a NUL byte) or not UTF-8 (with the line of the first bad byte).
fn sniff(head: &[u8]) -> Option<Outcome> {
    if head.is_empty() {
        return Some(Outcome::Empty);
    }
    if head.contains(&0) {
        return Some(Outcome::Binary);
    }
    match std::str::from_utf8(head) {
        Err(err) if err.error_len().is_some() => {
            let line = head[..err.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            Some(Outcome::NotUtf8 { line })
        }
        Ok(_) | Err(_) => None,
    }
}

/// Line `number` as shown: `<number><TAB><text>`, cut at [`MAX_LINE_CHARS`]
/// with a marker (`skipped` bytes were not read); `None` when not UTF-8.
fn render_line(number: usize, line: &[u8], skipped: usize) -> Option<String> {
    let total = line.len() + skipped;
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        // A cut line may end inside a character: drop the partial one.
        Err(err) if skipped > 0 && err.error_len().is_none() => {
            std::str::from_utf8(&line[..err.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return None,
    };
    let text = text.strip_suffix('\r').unwrap_or(text);
    let mut rendered = format!("{number:>6}\t");
    match text.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => {
            rendered.push_str(&text[..end]);
            rendered.push_str(&format!(" [… line cut, {} more bytes]", total - end));
        }
        None if skipped > 0 => {
            rendered.push_str(text);
            let cut = total - text.len();
            rendered.push_str(&format!(" [… line cut, {cut} more bytes]"));
        }
        None => rendered.push_str(text),
    }
    Some(rendered)
}

/// Reads one line (without its `\n`) into `line`, keeping at most `cap`
/// bytes and skipping the rest of the line. Returns the number of bytes
/// skipped, or `None` at end of file. `cancel` is checked at every buffer,
/// so a line of gigabytes stops as promptly as a short one.
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    cap: usize,
    cancel: &CancellationToken,
) -> io::Result<Option<usize>> {
    line.clear();
    let mut skipped = 0usize;
    let mut any = false;
    loop {
        if cancel.is_cancelled() {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
        }
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        if buf.is_empty() {
            return Ok(any.then_some(skipped));
        }
        any = true;
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (&buf[..at], Some(at + 1)),
            None => (buf, None),
        };
        let room = cap.saturating_sub(line.len());
        let keep = chunk.len().min(room);
        line.extend_from_slice(&chunk[..keep]);
        skipped += chunk.len() - keep;
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            return Ok(Some(skipped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolEnv;
    use crate::tools::testing::{call, env};
    use serde_json::json;
    use std::fs;

    fn setup() -> (tempfile::TempDir, ToolEnv) {
        let dir = tempfile::tempdir().unwrap();
        let env = env(dir.path());
        (dir, env)
    }

    /// An editor that takes every request and never answers.
    struct SilentEditor;

    impl EditorFiles for SilentEditor {
        fn read_text<'a>(&'a self, _: &'a std::path::Path) -> super::super::editor::EditorRead<'a> {
            Box::pin(std::future::pending())
        }
    }

    /// An editor that never answers does not hold the turn: past
    /// `EDITOR_WAIT` the disk answers.
    #[tokio::test(start_paused = true)]
    async fn an_editor_that_never_answers_gives_way_to_the_disk() {
        let (dir, mut env) = setup();
        fs::write(dir.path().join("a.txt"), "on disk\n").unwrap();
        env.editor = Some(std::sync::Arc::new(SilentEditor));
        let started = tokio::time::Instant::now();
        let out = call(&ReadFile, &env, json!({"path": "a.txt"})).await;
        assert_eq!(out.content, "     1\ton disk", "{}", out.content);
        assert!(started.elapsed() >= crate::tools::editor::EDITOR_WAIT);
    }

    /// The facts say where the window that was shown starts.
    #[tokio::test]
    async fn the_facts_name_the_first_line_shown() {
        let (dir, env) = setup();
        fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let out = call(&ReadFile, &env, json!({"path": "a.txt", "offset": 2})).await;
        let shown = crate::tools::testing::lines_shown(&out);
        assert_eq!(shown, [("a.txt".to_string(), 2)]);
    }

    #[tokio::test]
    async fn numbers_lines_and_windows() {
        let (dir, env) = setup();
        fs::write(dir.path().join("a.txt"), "one\ntwo\r\nthree\nfour").unwrap();
        let out = call(&ReadFile, &env, json!({"path": "a.txt"})).await;
        assert!(out.ok);
        assert_eq!(
            out.content,
            "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour"
        );
        let out = call(
            &ReadFile,
            &env,
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
        )
        .await;
        assert_eq!(
            out.content,
            "     2\ttwo\n     3\tthree\n[… more lines follow; continue with offset=4]"
        );
        let out = call(&ReadFile, &env, json!({"path": "a.txt", "offset": 9})).await;
        assert!(!out.ok);
        assert!(out.content.contains("has 4 lines"), "{}", out.content);
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_bytes_capped() {
        let (dir, mut env) = setup();
        let long = "é".repeat(MAX_LINE_CHARS + 500);
        fs::write(dir.path().join("long.txt"), format!("{long}\nshort\n")).unwrap();
        let out = call(&ReadFile, &env, json!({"path": "long.txt"})).await;
        let first = out.content.lines().next().unwrap();
        assert!(
            first.ends_with("[… line cut, 1000 more bytes]"),
            "{}",
            &first[first.len() - 60..]
        );
        assert_eq!(first.chars().filter(|&c| c == 'é').count(), MAX_LINE_CHARS);
        assert!(out.content.ends_with("     2\tshort"));

        env.limits.read_max_bytes = 100;
        let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        fs::write(dir.path().join("many.txt"), text).unwrap();
        let out = call(&ReadFile, &env, json!({"path": "many.txt"})).await;
        assert!(out.content.len() < 200);
        assert!(
            out.content.contains("continue with offset="),
            "{}",
            out.content
        );
        let next: usize = out
            .content
            .rsplit("offset=")
            .next()
            .unwrap()
            .trim_end_matches(']')
            .parse()
            .unwrap();
        let again = call(&ReadFile, &env, json!({"path": "many.txt", "offset": next})).await;
        assert!(
            again
                .content
                .starts_with(&format!("{next:>6}\tline {next}"))
        );
    }

    #[tokio::test]
    async fn huge_single_line_is_not_loaded() {
        let (dir, env) = setup();
        let file = File::create(dir.path().join("big.min.js")).unwrap();
        file.set_len(0).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        let mut writer = io::BufWriter::new(file);
        for _ in 0..20 {
            io::Write::write_all(&mut writer, &chunk).unwrap();
        }
        drop(writer);
        let out = call(&ReadFile, &env, json!({"path": "big.min.js"})).await;
        assert!(out.ok);
        assert!(out.content.len() < 3000);
        assert!(out.content.contains("line cut"));
    }

    #[tokio::test]
    async fn binary_and_errors() {
        let (dir, env) = setup();
        fs::write(dir.path().join("bin"), b"abc\x00def").unwrap();
        fs::write(dir.path().join("latin1"), b"caf\xe9\n").unwrap();
        fs::write(dir.path().join("empty"), b"").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join(".fido-plan.json"), "{}").unwrap();
        let out = call(&ReadFile, &env, json!({"path": "bin"})).await;
        assert_eq!(
            out.content,
            "bin is a binary file (7 bytes); its content is not shown."
        );
        let out = call(&ReadFile, &env, json!({"path": "latin1"})).await;
        assert!(out.content.contains("not UTF-8"), "{}", out.content);
        assert!(!out.content.contains("caf"));
        let out = call(&ReadFile, &env, json!({"path": "empty"})).await;
        assert_eq!(out.content, "empty is empty (0 bytes).");
        for (args, expected) in [
            (json!({"path": "d"}), "use list_files"),
            (json!({"path": "nope.txt"}), "does not exist"),
            (json!({"path": ".fido-plan.json"}), "Fido's own state"),
            (json!({"path": "/etc/passwd"}), "outside the workspace"),
            (json!({"path": "bin", "offset": 0}), "at least 1"),
            (json!({"file": "x"}), "invalid arguments"),
        ] {
            let out = call(&ReadFile, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
    }
}
