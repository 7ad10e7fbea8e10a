//! Building a change set from a worktree: `git add -A` on a copy of the
//! private index (only files whose stat changed are hashed), then, side by
//! side, `write-tree` (the result tree the record keeps) and two
//! `diff-index --cached` between the base and that index (the listing and
//! the patch), which need no tree written.

use std::fs;

use super::ChangesError;
use super::claim::Claim;
use super::git::Git;
use super::store::{Entry, Record};
use super::worktree::{Worktree, state_exclude};
use crate::protocol::changes::{ChangeSet, FileChange, FileKind, FileStatus, MergeState};

const SYMLINK_MODE: &str = "120000";
const SUBMODULE_MODE: &str = "160000";

/// One line of `diff-tree --raw -z`, its paths repository-relative.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawLine {
    old_mode: String,
    new_mode: String,
    old_id: String,
    new_id: String,
    status: char,
    path: String,
    from: Option<String>,
}

/// What a finished worktree changed against its base, as a pending
/// change set (not yet written anywhere).
pub fn build(
    worktree: &Worktree,
    claim: &Claim,
    task: &str,
    diff_cap: usize,
) -> Result<Record, ChangesError> {
    let git = worktree.git();
    let indexed = result_index(worktree, &git)?;
    let base_tree = &worktree.base.tree;
    let prefix = worktree.repo.prefix.as_str();
    let pathspecs = claim_pathspecs(claim, prefix);
    // Writing the tree, listing the changes and writing the patch are three
    // git processes that only read the result index: run side by side, the
    // change set waits for the slowest.
    let (result_tree, listed, patch) = std::thread::scope(|scope| {
        let tree = scope.spawn(|| indexed.line(["write-tree"]).map_err(ChangesError::from));
        let patch = scope.spawn(|| write_patch(worktree, &indexed, &pathspecs));
        let listed = list_changes(&indexed, base_tree);
        (joined(tree), listed, joined(patch))
    });
    let result_tree = result_tree?;
    let (listed, patch) = (listed?, patch?);
    let raw = parse_raw(&listed);
    let counts = parse_numstat(&listed);
    let mut set = ChangeSet {
        id: worktree.id.clone(),
        base: worktree.base.commit.clone(),
        files: Vec::new(),
        outside_claim: Vec::new(),
        patch: format!("{}/{}/patch", super::store::CHANGES_DIR, worktree.id),
        diff: String::new(),
        diff_truncated: false,
        merge: MergeState::Pending,
        conflicts: Vec::new(),
    };
    let entries = classify(&mut set, raw, &counts, prefix, claim);
    let (diff, truncated) = if set.files.iter().all(|f| f.kind == FileKind::Text) {
        // Text only: the full patch is the diff to show, cut.
        cap_text(String::from_utf8_lossy(&patch).into_owned(), diff_cap)
    } else {
        capped_diff(
            &git,
            base_tree,
            &result_tree,
            &pathspecs,
            &set.files,
            diff_cap,
        )?
    };
    set.diff = diff;
    set.diff_truncated = truncated;
    Ok(Record {
        set,
        task: task.to_string(),
        claim: claim.paths().to_vec(),
        prefix: prefix.to_string(),
        base_tree: base_tree.clone(),
        result_tree,
        entries,
        plan_item: None,
        created_ms: super::store::now_ms(),
    })
}

/// What a thread of [`build`] returned; a panic becomes an error.
fn joined<T>(
    handle: std::thread::ScopedJoinHandle<'_, Result<T, ChangesError>>,
) -> Result<T, ChangesError> {
    handle.join().unwrap_or_else(|_| {
        Err(ChangesError::Io(std::io::Error::other(
            "a thread building the change set panicked",
        )))
    })
}

/// Every changed file between the base and the result index: one
/// diff-index for its raw records and its numstat ones; each parser skips
/// the other's.
fn list_changes(indexed: &Git, base_tree: &str) -> Result<Vec<u8>, ChangesError> {
    Ok(indexed.run([
        "diff-index",
        "--cached",
        "-r",
        "-z",
        "-M",
        "--raw",
        "--numstat",
        base_tree,
    ])?)
}

/// Sorts the changed files into the claimed ones (with what an apply needs
/// of each) and those outside the claim.
fn classify(
    set: &mut ChangeSet,
    raw: Vec<RawLine>,
    counts: &[(String, u64, u64, bool)],
    prefix: &str,
    claim: &Claim,
) -> Vec<Entry> {
    let claimed = |path: &str| in_workspace(path, prefix).is_some_and(|p| claim.covers(p));
    let mut entries = Vec::new();
    for line in raw {
        let (added, removed, binary) = counts
            .iter()
            .find(|(path, ..)| *path == line.path)
            .map(|(_, a, r, b)| (*a, *r, *b))
            .unwrap_or((0, 0, false));
        let change = file_change(&line, prefix, added, removed, binary);
        if claimed(&line.path) && line.from.as_deref().is_none_or(claimed) {
            entries.push(entry(&line, prefix));
            set.files.push(change);
        } else {
            set.outside_claim.push(change);
        }
    }
    entries
}

/// Git on a copy of the private index that holds the worktree as it is
/// now (the user's index and the private one stay as they were).
fn result_index(worktree: &Worktree, git: &Git) -> Result<Git, ChangesError> {
    let git_dir = worktree.layout.git_dir();
    let index = git_dir.join("result-index");
    match fs::copy(git_dir.join("index"), &index) {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err.into()),
    }
    let git = git.clone().with("GIT_INDEX_FILE", &index);
    git.run([
        "add",
        "-A",
        "--",
        ".",
        &state_exclude(&worktree.repo.prefix),
    ])?;
    Ok(git)
}

/// `path` relative to the workspace, when it lies inside it.
fn in_workspace<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    path.strip_prefix(prefix)
}

fn workspace_path(path: &str, prefix: &str) -> String {
    in_workspace(path, prefix).unwrap_or(path).to_string()
}

fn file_change(line: &RawLine, prefix: &str, added: u64, removed: u64, binary: bool) -> FileChange {
    let status = match line.status {
        'A' => FileStatus::Added,
        'D' => FileStatus::Deleted,
        'R' => FileStatus::Renamed,
        'M' if line.old_id == line.new_id => FileStatus::Mode,
        _ => FileStatus::Modified,
    };
    let kind = if line.old_mode == SYMLINK_MODE || line.new_mode == SYMLINK_MODE {
        FileKind::Symlink
    } else if binary || line.new_mode == SUBMODULE_MODE || line.old_mode == SUBMODULE_MODE {
        FileKind::Binary
    } else {
        FileKind::Text
    };
    FileChange {
        path: workspace_path(&line.path, prefix),
        status,
        from: line.from.as_deref().map(|f| workspace_path(f, prefix)),
        kind,
        added,
        removed,
    }
}

/// What an apply needs of one file: its old and new blob and mode.
fn entry(line: &RawLine, prefix: &str) -> Entry {
    let present =
        |mode: &str, id: &str| (mode != "000000").then(|| (mode.to_string(), id.to_string()));
    Entry {
        path: workspace_path(&line.path, prefix),
        from: line.from.as_deref().map(|f| workspace_path(f, prefix)),
        old: present(&line.old_mode, &line.old_id),
        new: present(&line.new_mode, &line.new_id),
    }
}

/// `diff-tree --raw -z`: `:old new oldid newid status\0path\0[path2\0]`.
fn parse_raw(out: &[u8]) -> Vec<RawLine> {
    let mut fields = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut lines = Vec::new();
    while let Some(head) = fields.next() {
        let Some(head) = head.strip_prefix(':') else {
            continue;
        };
        let parts: Vec<&str> = head.split(' ').collect();
        let [old_mode, new_mode, old_id, new_id, status] = parts[..] else {
            continue;
        };
        let status = status.chars().next().unwrap_or('M');
        let Some(first) = fields.next() else { break };
        let (path, from) = if matches!(status, 'R' | 'C') {
            match fields.next() {
                Some(second) => (second, Some(first)),
                None => break,
            }
        } else {
            (first, None)
        };
        lines.push(RawLine {
            old_mode: old_mode.into(),
            new_mode: new_mode.into(),
            old_id: old_id.into(),
            new_id: new_id.into(),
            status,
            path,
            from,
        });
    }
    lines
}

/// `diff-tree --numstat -z`: `added\tremoved\tpath\0`, or for a rename
/// `added\tremoved\t\0from\0to\0`; `-` counts mean binary.
fn parse_numstat(out: &[u8]) -> Vec<(String, u64, u64, bool)> {
    let mut fields = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut counts = Vec::new();
    while let Some(field) = fields.next() {
        let mut parts = field.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            let _from = fields.next();
            fields.next().unwrap_or_default()
        } else {
            path.to_string()
        };
        let binary = added == "-";
        counts.push((
            path,
            added.parse().unwrap_or(0),
            removed.parse().unwrap_or(0),
            binary,
        ));
    }
    counts
}

/// Literal pathspecs of the claim, from the top of the repository.
fn claim_pathspecs(claim: &Claim, prefix: &str) -> Vec<String> {
    claim
        .paths()
        .iter()
        .map(|path| {
            let full = format!("{prefix}{path}");
            let full = full.trim_end_matches('/');
            if full.is_empty() {
                ":(top)".to_string()
            } else {
                format!(":(top,literal){full}")
            }
        })
        .collect()
}

fn diff_args<'a>(base: &'a str, result: &'a str, pathspecs: &'a [String]) -> Vec<&'a str> {
    let mut args = vec![
        "diff-tree",
        "-r",
        "-p",
        "-M",
        "--no-ext-diff",
        "--no-textconv",
    ];
    args.extend([base, result, "--"]);
    args.extend(pathspecs.iter().map(String::as_str));
    args
}

/// The full patch of the claimed files (binary ones included), for `git
/// apply` and for the record; its bytes.
fn write_patch(
    worktree: &Worktree,
    indexed: &Git,
    pathspecs: &[String],
) -> Result<Vec<u8>, ChangesError> {
    let mut args = vec!["diff-index", "--cached", "--full-index", "--binary"];
    args.extend(["-r", "-p", "-M", "--no-ext-diff", "--no-textconv"]);
    args.extend([worktree.base.tree.as_str(), "--"]);
    args.extend(pathspecs.iter().map(String::as_str));
    let patch = indexed.run(&args)?;
    crate::store::atomic::write_atomic(&worktree.layout.patch(), &patch, Some(0o600))?;
    Ok(patch)
}

/// The diff shown to the model and the person: text files only (binary
/// files say so in one line; symlinks are named, never shown), cut at
/// `cap` bytes on a line boundary.
fn capped_diff(
    git: &Git,
    base: &str,
    result: &str,
    pathspecs: &[String],
    files: &[FileChange],
    cap: usize,
) -> Result<(String, bool), ChangesError> {
    let mut pathspecs = pathspecs.to_vec();
    let mut named = String::new();
    for file in files.iter().filter(|f| f.kind == FileKind::Symlink) {
        named.push_str(&format!(
            "symlink {} ({}): not shown\n",
            file.path,
            file.status.as_str()
        ));
        pathspecs.push(format!(":(top,exclude,literal){}", file.path));
    }
    if files.is_empty() {
        return Ok((String::new(), false));
    }
    let out = git.run(diff_args(base, result, &pathspecs))?;
    let text = named + &String::from_utf8_lossy(&out);
    Ok(cap_text(text, cap))
}

/// `text` cut at the last line end within `cap` bytes.
pub fn cap_text(text: String, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text, false);
    }
    let mut cut = cap;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let end = text[..cut].rfind('\n').map_or(cut, |i| i + 1);
    (text[..end].to_string(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_lines_with_renames_are_read() {
        let out = b":100644 100644 aaa bbb M\0src/a.rs\0:100644 100755 ccc ccc M\0run.sh\0:100644 100644 ddd eee R087\0old.rs\0new.rs\0:000000 120000 000 fff A\0link\0";
        let lines = parse_raw(out);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[2].path, "new.rs");
        assert_eq!(lines[2].from.as_deref(), Some("old.rs"));
        assert_eq!(
            file_change(&lines[1], "", 0, 0, false).status,
            FileStatus::Mode
        );
        assert_eq!(
            file_change(&lines[3], "", 0, 0, false).kind,
            FileKind::Symlink
        );
        let e = entry(&lines[3], "");
        assert!(e.old.is_none());
        assert_eq!(e.new, Some(("120000".into(), "fff".into())));
    }

    #[test]
    fn numstat_reads_counts_binaries_and_renames() {
        let out = b"3\t1\tsrc/a.rs\0-\t-\timg.png\x005\t0\t\0old.rs\0new.rs\0";
        assert_eq!(
            parse_numstat(out),
            vec![
                ("src/a.rs".into(), 3, 1, false),
                ("img.png".into(), 0, 0, true),
                ("new.rs".into(), 5, 0, false)
            ]
        );
    }

    /// `--raw --numstat` in one output: each parser reads its own records.
    #[test]
    fn raw_and_numstat_are_read_from_one_output() {
        let out = b":100644 100644 aaa bbb M\0src/a.rs\0:100644 100644 ddd eee R087\0old.rs\0new.rs\x003\t1\tsrc/a.rs\x005\t0\t\0old.rs\0new.rs\0";
        let raw = parse_raw(out);
        assert_eq!(raw.len(), 2);
        assert_eq!(
            (raw[1].path.as_str(), raw[1].from.as_deref()),
            ("new.rs", Some("old.rs"))
        );
        assert_eq!(
            parse_numstat(out),
            vec![
                ("src/a.rs".into(), 3, 1, false),
                ("new.rs".into(), 5, 0, false)
            ]
        );
    }

    #[test]
    fn a_capped_diff_ends_on_a_line() {
        let (text, cut) = cap_text("one\ntwo\nthree\n".into(), 9);
        assert_eq!((text.as_str(), cut), ("one\ntwo\n", true));
        let (text, cut) = cap_text("short\n".into(), 100);
        assert_eq!((text.as_str(), cut), ("short\n", false));
    }
}
