//! `list_files`: the workspace tree, the way `git ls-files` and `rg --files`
//! see it.
//!
//! Entries ignored by `.gitignore`/`.ignore` (also outside a git repository)
//! are left out; dotfiles are shown, but `.git` and Fido's own `.fido-*`
//! entries never are. Output is one workspace-relative path per line, in
//! tree order (siblings sorted by name), directories ending in `/`.

use std::borrow::Cow;
use std::fs;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use ignore::WalkBuilder;
use tokio_util::sync::CancellationToken;

use super::capability::{Capability, Reads};
use super::{Call, ToolFuture, ToolOutput, TypedTool};
use crate::protocol::schema::tool_args;
use crate::workspace::beneath::{self, Kind};
use crate::workspace::{FinalLink, Place, Workspace, is_missing, is_state_name};

const DEFAULT_DEPTH: usize = 3;
const MAX_DEPTH: usize = 25;
const DEFAULT_LIMIT: usize = 500;
const MAX_LIMIT: usize = 2000;
/// Past the limit, entries are only counted, up to this many.
const MAX_COUNTED: usize = 100_000;

pub struct ListFiles;

tool_args! {
    #[derive(Debug)]
    pub struct Args {
        #[serde(default)]
        path: Option<String>,
        #[serde(default)]
        depth: Option<usize>,
        #[serde(default)]
        limit: Option<usize>,
    }
}

/// The walker both `list_files` and `ripgrep` use: `.gitignore`, `.ignore`
/// and git excludes apply (a git repository is not required), hidden files
/// are included, `.git` and `.fido-*` entries are skipped, links are not
/// followed.
pub(crate) fn walker(start: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .filter_entry(|entry| {
            let name = entry.file_name();
            name != ".git" && !is_state_name(name)
        });
    builder
}

impl TypedTool for ListFiles {
    const NAME: &'static str = "list_files";
    const CAPABILITY: Capability = Capability {
        reads: Some(Reads::Tree),
        ..Capability::NONE
    };
    type Args = Args;

    fn description(&self) -> Cow<'static, str> {
        format!(
            "List a directory as a tree, one path per line (directories end in `/`), skipping .gitignored entries. Default depth {DEFAULT_DEPTH}, at most {DEFAULT_LIMIT} entries."
        )
        .into()
    }

    fn run<'a>(&'a self, args: Args, call: Call<'a>) -> ToolFuture<'a> {
        Box::pin(async move {
            let depth = args.depth.unwrap_or(DEFAULT_DEPTH);
            let limit = args.limit.unwrap_or(DEFAULT_LIMIT);
            if depth == 0 || limit == 0 {
                return ToolOutput::error("depth and limit must be at least 1");
            }
            let path = args.path.unwrap_or_else(|| ".".to_string());
            let workspace = call.env.workspace.clone();
            let cancel = call.cancel.clone();
            let listing = tokio::task::spawn_blocking(move || {
                let shape = Shape {
                    depth: depth.min(MAX_DEPTH),
                    limit: limit.min(MAX_LIMIT),
                };
                list(&workspace, &path, shape, &cancel)
            });
            listing
                .await
                .unwrap_or_else(|err| ToolOutput::error(format!("list_files failed: {err}")))
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    depth: usize,
    limit: usize,
}

/// Lists the folder at `path`. Its handle is taken beneath the workspace
/// (see `workspace::beneath`) and the walk starts from that handle's
/// `/proc/self/fd` path, so swapping a folder on the way for a symlink
/// cannot make the listing's root a folder outside.
fn list(workspace: &Workspace, path: &str, shape: Shape, cancel: &CancellationToken) -> ToolOutput {
    let place = match workspace.locate(path, FinalLink::Follow) {
        Ok(place) => place,
        Err(err) => return ToolOutput::error(err.to_string()),
    };
    let shown = place.shown.as_str();
    let dir = match open_listed(&place) {
        Ok(dir) => dir,
        Err(answer) => return answer,
    };
    let real = workspace.root.join(place.rel());
    let start = beneath::fd_path(dir.as_fd()).unwrap_or_else(|| real.clone());
    let mut held = Held::new(dir.as_fd());
    let Some(listing) = Listing::walk(workspace, (&start, &real), (shape, &mut held), cancel)
    else {
        return ToolOutput::error("cancelled");
    };
    if listing.lines.is_empty() {
        return nothing_to_show(&start, shown);
    }
    ToolOutput::ok(listing.render(shape.depth))
}

/// The handle of the folder to list, or the answer when it is none.
fn open_listed(place: &Place) -> Result<OwnedFd, ToolOutput> {
    let shown = &place.shown;
    let cannot = |err: io::Error| ToolOutput::error(format!("cannot list `{shown}`: {err}"));
    let missing = || {
        ToolOutput::error(format!(
            "`{shown}` does not exist; list its parent directory to see what is there"
        ))
    };
    if let Some(root) = place.root_dir() {
        return root.try_clone_to_owned().map_err(cannot);
    }
    let Some(entry) = place.entry() else {
        return Err(missing());
    };
    match beneath::stat_at(entry.dir, entry.name) {
        Ok(stat) if stat.kind == Kind::Dir => {
            beneath::open_subdir(entry.dir, entry.name).map_err(cannot)
        }
        Ok(stat) => Err(ToolOutput::ok(format!(
            "{shown} is a file ({} bytes); use read_file to read it.",
            stat.size
        ))),
        Err(err) if is_missing(&err) => Err(missing()),
        Err(err) => Err(cannot(err)),
    }
}

/// Why a directory shows no entries: empty, or everything in it is hidden.
fn nothing_to_show(abs: &Path, shown: &str) -> ToolOutput {
    let present = fs::read_dir(abs).map(|d| d.count()).unwrap_or(0);
    let dir = if shown == "." {
        ". (the workspace root)"
    } else {
        shown
    };
    ToolOutput::ok(if present == 0 {
        format!("{dir} is empty.")
    } else {
        format!(
            "Nothing to show in {dir}: its {present} entr{} are ignored (.gitignore/.ignore), `.git` or Fido's state.",
            if present == 1 { "y" } else { "ies" }
        )
    })
}

/// What the listed folder holds, asked through its handle. The walker
/// reads the first level through that handle, but deeper folders by
/// path: one swapped for a link while it read them could name what is
/// outside. So an entry below the first level is shown only if the
/// folder it was listed from still resolves beneath the handle with no
/// link on the way, and holds a name like it. (Where the kernel cannot
/// resolve beneath, before Linux 5.6, nothing is filtered.)
struct Held<'a> {
    dir: std::os::fd::BorrowedFd<'a>,
    /// The last folder asked about, and its handle if it resolved.
    folder: Option<(std::path::PathBuf, Option<OwnedFd>)>,
}

impl<'a> Held<'a> {
    fn new(dir: std::os::fd::BorrowedFd<'a>) -> Held<'a> {
        Held { dir, folder: None }
    }

    /// Whether `below` (a path under the listed folder) is there now.
    fn holds(&mut self, below: &Path) -> bool {
        let (Some(folder), Some(name)) = (below.parent(), below.file_name()) else {
            return true;
        };
        if folder.as_os_str().is_empty() || !beneath::resolves_beneath() {
            return true;
        }
        if self
            .folder
            .as_ref()
            .is_none_or(|(asked, _)| asked != folder)
        {
            let handle = beneath::open_dir_plain(self.dir, folder);
            self.folder = Some((folder.to_path_buf(), handle));
        }
        match &self.folder {
            Some((_, Some(handle))) => beneath::stat_at(handle.as_fd(), name).is_ok(),
            _ => false,
        }
    }
}

/// What a walk found: the lines shown, and what it left out.
#[derive(Debug, Default)]
struct Listing {
    lines: Vec<String>,
    /// Entries past the limit (counted up to `MAX_COUNTED`).
    more: usize,
    unreadable: usize,
    /// A directory at the depth limit was shown but not entered.
    unexpanded: bool,
}

impl Listing {
    /// Walks `start` in tree order, naming entries as under `real` (the
    /// folder's workspace path); `None` when cancelled.
    fn walk(
        workspace: &Workspace,
        (start, real): (&Path, &Path),
        (Shape { depth, limit }, held): (Shape, &mut Held<'_>),
        cancel: &CancellationToken,
    ) -> Option<Listing> {
        let mut listing = Listing::default();
        let walk = walker(start)
            .max_depth(Some(depth))
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        for entry in walk {
            if cancel.is_cancelled() {
                return None;
            }
            let Ok(entry) = entry else {
                listing.unreadable += 1;
                continue;
            };
            let below = entry.path().strip_prefix(start).unwrap_or(entry.path());
            if entry.depth() == 0 || !held.holds(below) {
                continue;
            }
            if listing.lines.len() >= limit {
                listing.more += 1;
                if listing.more >= MAX_COUNTED {
                    break;
                }
                continue;
            }
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            listing.unexpanded |= is_dir && entry.depth() == depth;
            // A name with a newline would make lines of its own: escaped.
            let mut line =
                crate::text::escape_line(&workspace.display(&real.join(below))).into_owned();
            if is_dir {
                line.push('/');
            }
            listing.lines.push(line);
        }
        Some(listing)
    }

    /// The lines, then what was left out and how to see it.
    fn render(&self, depth: usize) -> String {
        let mut out = self.lines.join("\n");
        if self.more > 0 {
            let count = if self.more >= MAX_COUNTED {
                format!("more than {MAX_COUNTED}")
            } else {
                self.more.to_string()
            };
            out.push_str(&format!(
                "\n… {count} more entries not shown; narrow the path or raise limit (max {MAX_LIMIT})."
            ));
        } else if self.unexpanded {
            out.push_str(&format!(
                "\n(Directories at depth {depth} are not expanded; list one of them, or raise depth.)"
            ));
        }
        if self.unreadable > 0 {
            out.push_str(&format!(
                "\n({} entries could not be read.)",
                self.unreadable
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{call, env};
    use serde_json::json;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            "src/deep/er",
            ".git/objects",
            ".fido-state/undo",
            "target",
            "empty",
            "logs",
        ] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        for f in [
            "src/lib.rs",
            "src/deep/er/x.rs",
            ".gitignore",
            ".env",
            ".fido-plan.json",
            "target/out.bin",
            "debug.log",
            "logs/a.log",
            "README.md",
        ] {
            fs::write(root.join(f), "x").unwrap();
        }
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        dir
    }

    #[tokio::test]
    async fn lists_in_tree_order_without_ignored_git_and_state() {
        let dir = tree();
        let env = env(dir.path());
        let out = call(&ListFiles, &env, json!({})).await;
        assert!(out.ok, "{}", out.content);
        assert_eq!(
            out.content,
            ".env\n.gitignore\nREADME.md\nempty/\nlogs/\nsrc/\nsrc/deep/\nsrc/deep/er/\nsrc/lib.rs\n(Directories at depth 3 are not expanded; list one of them, or raise depth.)"
        );
        let out = call(&ListFiles, &env, json!({"path": "src", "depth": 1})).await;
        assert_eq!(
            out.content,
            "src/deep/\nsrc/lib.rs\n(Directories at depth 1 are not expanded; list one of them, or raise depth.)"
        );
        let out = call(&ListFiles, &env, json!({"path": "src/deep", "depth": 5})).await;
        assert_eq!(out.content, "src/deep/er/\nsrc/deep/er/x.rs");
    }

    #[tokio::test]
    async fn limit_cuts_with_a_note() {
        let dir = tree();
        let env = env(dir.path());
        let out = call(&ListFiles, &env, json!({"limit": 2})).await;
        assert_eq!(
            out.content,
            ".env\n.gitignore\n… 7 more entries not shown; narrow the path or raise limit (max 2000)."
        );
    }

    #[tokio::test]
    async fn empty_ignored_and_errors() {
        let dir = tree();
        let env = env(dir.path());
        let out = call(&ListFiles, &env, json!({"path": "empty"})).await;
        assert_eq!(out.content, "empty is empty.");
        let out = call(&ListFiles, &env, json!({"path": "logs"})).await;
        assert!(
            out.content.starts_with("Nothing to show in logs"),
            "{}",
            out.content
        );
        let out = call(&ListFiles, &env, json!({"path": "README.md"})).await;
        assert!(out.content.contains("use read_file"));
        for (args, expected) in [
            (json!({"path": "nope"}), "does not exist"),
            (json!({"path": "/"}), "outside the workspace"),
            (json!({"path": ".fido-state"}), "Fido's own state"),
            (json!({"depth": 0}), "at least 1"),
            (json!({"recursive": true}), "invalid arguments"),
        ] {
            let out = call(&ListFiles, &env, args.clone()).await;
            assert!(!out.ok, "{args}");
            assert!(out.content.contains(expected), "{args}: {}", out.content);
        }
    }
}
