//! `ripgrep`: regex search over workspace files, printed like `rg`.
//!
//! The same walker as `list_files` (so `.gitignore` applies and `.git` and
//! `.fido-*` are invisible), the ripgrep crates for matching and searching,
//! binary files skipped at their first NUL byte. Output is bounded by
//! `max_matches` and by `limits.read_max_bytes`, each with a note.

use std::borrow::Cow;
use std::io;
use std::path::PathBuf;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use tokio_util::sync::CancellationToken;

use super::list_files::walker;
use super::{Call, ToolFuture, ToolKind, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;
use crate::text::{sanitize, short};
use crate::workspace::{Workspace, is_missing};

const DEFAULT_MAX_MATCHES: usize = 200;
const MAX_MATCHES: usize = 1000;
const MAX_CONTEXT: usize = 10;
/// Longest line shown, in characters.
const MAX_LINE_CHARS: usize = 500;

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
    const KIND: ToolKind = ToolKind::ReadOnly;
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
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(0))
            .before_context(self.context)
            .after_context(self.context)
            .build();
        let mut results = Results {
            out: String::new(),
            matches: 0,
            max_matches: self.max_matches,
            max_bytes: self.max_bytes,
            stop: None,
            separate_files: self.context > 0,
        };
        let mut unreadable = 0usize;
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
            let mut sink = FileSink {
                results: &mut results,
                path: workspace.display(entry.path()),
                started: false,
            };
            if searcher
                .search_path(&self.matcher, entry.path(), &mut sink)
                .is_err()
            {
                unreadable += 1;
            }
            if results.stop.is_some() {
                break;
            }
        }
        ToolOutput::ok(self.render(results, unreadable))
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

/// Prints one file's matches into [`Results`].
struct FileSink<'a> {
    results: &'a mut Results,
    path: String,
    started: bool,
}

impl FileSink<'_> {
    fn line(&mut self, separator: char, number: Option<u64>, bytes: &[u8]) -> bool {
        if !self.started {
            self.started = true;
            if self.results.separate_files
                && !self.results.out.is_empty()
                && !self.results.push("--")
            {
                return false;
            }
        }
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = short(&sanitize(text, false), MAX_LINE_CHARS);
        let number = number.unwrap_or(0);
        let line = format!("{}{separator}{number}{separator}{text}", self.path);
        self.results.push(&line)
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.results.matches >= self.results.max_matches {
            self.results.stop = Some(Stop::Matches);
            return Ok(false);
        }
        self.results.matches += 1;
        Ok(self.line(':', mat.line_number(), mat.bytes()))
    }

    fn context(&mut self, _searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.line('-', ctx.line_number(), ctx.bytes()))
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
        assert!(out.content.ends_with('…'));
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
}
