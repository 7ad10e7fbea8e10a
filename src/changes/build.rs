//! Building a change set from a worktree: `git add -A` on a copy of the
//! private index (only files whose stat changed are hashed), then one
//! `diff-index --cached` between the base and that index, which lists the
//! changed files with their counts and gives the patch of each
//! ([`listing`]). No tree is written: nothing reads one.

use super::ChangesError;
use super::claim::Claim;
use std::ffi::OsString;

use super::git::Git;
use super::listing::{self, Counts, RawLine};
use super::nested::{self, Found, Refused};
use super::records::{Entry, Record};
use super::worktree::{Worktree, state_exclude};
use crate::protocol::changes::{ChangeSet, FileChange, FileKind, FileStatus, MergeState};

const SYMLINK_MODE: &str = "120000";
const SUBMODULE_MODE: &str = "160000";

/// What a finished worktree changed against its base, as a pending
/// change set (not yet written anywhere).
pub fn build(
    worktree: &Worktree,
    claim: &Claim,
    task: &str,
    diff_cap: usize,
) -> Result<Record, ChangesError> {
    let git = worktree.git();
    let (indexed, found) = result_index(worktree, &git)?;
    let base_tree = &worktree.base.tree;
    let prefix = worktree.repo.prefix.as_str();
    let pathspecs = claim_pathspecs(claim, prefix);
    let listed = indexed.run(listing_args(base_tree))?;
    let listing = listing::read(&listed);
    let claimed: Vec<bool> = listing
        .raw
        .iter()
        .map(|line| is_claimed(line, prefix, claim))
        .collect();
    let patch = match &listing.sections {
        Some(sections) => claimed_sections(sections, &claimed),
        None => claimed_patch(worktree, &indexed, &pathspecs)?,
    };
    crate::store::atomic::write_atomic(&worktree.layout.patch(), &patch, Some(0o600))?;
    let mut set = ChangeSet {
        id: worktree.id.clone(),
        base: worktree.base.commit.clone(),
        files: Vec::new(),
        outside_claim: Vec::new(),
        patch: format!("{}/{}/patch", super::records::CHANGES_DIR, worktree.id),
        diff: String::new(),
        diff_truncated: false,
        merge: MergeState::Pending,
        conflicts: Vec::new(),
        control_files: Vec::new(),
    };
    let entries = classify(&mut set, listing.raw, &listing.counts, &claimed, prefix);
    set.control_files = super::control::control_files(&set.files);
    let (diff, truncated) = if set.files.iter().all(|f| f.kind == FileKind::Text) {
        // Text only: the full patch is the diff to show, cut.
        cap_text(String::from_utf8_lossy(&patch).into_owned(), diff_cap)
    } else {
        capped_diff(&indexed, base_tree, &pathspecs, &set.files, diff_cap)?
    };
    let refused: Vec<Refused> = found
        .iter()
        .map(|f| f.refusal(workspace_path(&f.entry.to_string_lossy(), prefix)))
        .collect();
    set.diff = refusal_note(&refused) + &diff;
    set.diff_truncated = truncated;
    Ok(Record {
        set,
        task: task.to_string(),
        claim: claim.paths().to_vec(),
        prefix: prefix.to_string(),
        base_tree: base_tree.clone(),
        entries,
        plan_item: None,
        created_ms: super::records::now_ms(),
        refused,
    })
}

/// One diff-index of the result index against the base: every changed
/// file's raw record and counts, then the patch of each, full (binary ones
/// included) as `git apply` takes it.
fn listing_args(base_tree: &str) -> [&str; 13] {
    [
        "diff-index",
        "--cached",
        "-r",
        "-z",
        "-M",
        "--raw",
        "--numstat",
        "-p",
        "--full-index",
        "--binary",
        "--no-ext-diff",
        "--no-textconv",
        base_tree,
    ]
}

/// Whether the change of `line` may come back: its path, and a rename's
/// old path, lie in the workspace and the claim.
fn is_claimed(line: &RawLine, prefix: &str, claim: &Claim) -> bool {
    let claimed = |path: &str| in_workspace(path, prefix).is_some_and(|p| claim.covers(p));
    claimed(&line.path) && line.from.as_deref().is_none_or(claimed)
}

/// The patch of the claimed files, section by section.
fn claimed_sections(sections: &[&[u8]], claimed: &[bool]) -> Vec<u8> {
    sections
        .iter()
        .zip(claimed)
        .filter(|(_, claimed)| **claimed)
        .flat_map(|(section, _)| section.iter().copied())
        .collect()
}

/// Sorts the changed files into the claimed ones (with what an apply needs
/// of each) and those outside the claim.
fn classify(
    set: &mut ChangeSet,
    raw: Vec<RawLine>,
    counts: &std::collections::HashMap<String, Counts>,
    claimed: &[bool],
    prefix: &str,
) -> Vec<Entry> {
    let mut entries = Vec::new();
    for (line, claimed) in raw.into_iter().zip(claimed) {
        let (added, removed, binary) = counts.get(&line.path).copied().unwrap_or_default();
        let change = file_change(&line, prefix, added, removed, binary);
        if *claimed {
            entries.push(entry(&line, prefix));
            set.files.push(change);
        } else {
            set.outside_claim.push(change);
        }
    }
    entries
}

/// Git on a copy of the private index that holds the worktree as it is
/// now (the user's index and the private one stay as they were), and the
/// `.git` entries refused. No nested repository is entered ([`nested`]):
/// gitlinks are hidden before `add`, and folders with a `.git` of the
/// subagent's are left out.
fn result_index(worktree: &Worktree, git: &Git) -> Result<(Git, Vec<Found>), ChangesError> {
    let git_dir = worktree.layout.git_dir();
    let index = git_dir.join("result-index");
    super::worktree::copy_index(&git_dir.join("index"), &index)?;
    let git = git.clone().with("GIT_INDEX_FILE", &index);
    // The copy keeps the private index's skip-worktree bits: the base's
    // gitlinks were hidden when it was taken (`worktree::snapshot`), and
    // a gitlink the child made is a `.git` of its own, left out below.
    let found = nested::find(&worktree.layout.tree())?;
    let mut args: Vec<OsString> = ["add", "-A", "--", "."].map(OsString::from).to_vec();
    args.push(state_exclude(&worktree.repo.prefix).into());
    args.extend(found.iter().map(Found::exclude));
    git.run(&args)?;
    Ok((git, found))
}

/// One line per refused path, for the top of the diff shown.
fn refusal_note(refused: &[Refused]) -> String {
    refused
        .iter()
        .map(|r| format!("refused {}: {}\n", r.path, r.reason))
        .collect()
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

/// `diff-index -p` of the result index against the base, for `pathspecs`.
fn diff_args<'a>(base: &'a str, pathspecs: &'a [String]) -> Vec<&'a str> {
    let mut args = vec!["diff-index", "--cached", "-r", "-p", "-M"];
    args.extend(["--no-ext-diff", "--no-textconv", base, "--"]);
    args.extend(pathspecs.iter().map(String::as_str));
    args
}

/// The full patch of the claimed files (binary ones included), from git
/// itself: for the rare listing whose patch did not cut into one section
/// per file.
fn claimed_patch(
    worktree: &Worktree,
    indexed: &Git,
    pathspecs: &[String],
) -> Result<Vec<u8>, ChangesError> {
    let mut args = diff_args(&worktree.base.tree, pathspecs);
    args.insert(1, "--binary");
    args.insert(1, "--full-index");
    Ok(indexed.run(&args)?)
}

/// The diff shown to the model and the person: text files only (binary
/// files say so in one line; symlinks are named, never shown), cut at
/// `cap` bytes on a line boundary.
fn capped_diff(
    indexed: &Git,
    base: &str,
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
    let out = indexed.run(diff_args(base, &pathspecs))?;
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
    fn raw_records_become_statuses_kinds_and_entries() {
        let out = b":100644 100755 ccc ccc M\0run.sh\0:000000 120000 000 fff A\0sub/link\0";
        let lines = listing::read(out).raw;
        assert_eq!(
            file_change(&lines[0], "", 0, 0, false).status,
            FileStatus::Mode
        );
        let link = file_change(&lines[1], "sub/", 0, 0, false);
        assert_eq!((link.kind, link.path.as_str()), (FileKind::Symlink, "link"));
        let e = entry(&lines[1], "sub/");
        assert!(e.old.is_none());
        assert_eq!(e.new, Some(("120000".into(), "fff".into())));
    }

    #[test]
    fn a_capped_diff_ends_on_a_line() {
        let (text, cut) = cap_text("one\ntwo\nthree\n".into(), 9);
        assert_eq!((text.as_str(), cut), ("one\ntwo\n", true));
        let (text, cut) = cap_text("short\n".into(), 100);
        assert_eq!((text.as_str(), cut), ("short\n", false));
    }
}
