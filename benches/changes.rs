//! `cargo bench --bench changes`: write delegation's two git-heavy steps,
//! each against the plain git commands that do the same work, in
//! interleaved runs on the same repository.
//!
//! 1. **Worktree creation**, a repository of 10,000 files and 100 MB
//!    (generated once per run in a temp dir: deterministic text files of
//!    varying sizes and ten 2 MiB logs, committed, then a few uncommitted
//!    edits, a staged file and untracked files, so the snapshot of the
//!    parent's state is exercised). Fido: `changes::start` (find the
//!    repository, snapshot the uncommitted and untracked files, check out
//!    the base); its folder is removed (`changes::abandon`) outside the
//!    timed part. Git: `git worktree add --detach <dir> HEAD`, then
//!    `git worktree remove --force` outside the timed part.
//! 2. **Change set and apply** of 100 edited files (one line each in a
//!    ~100-line file, in a repository of 1,000 such files). Fido:
//!    `changes::finish` (build and save the change set) then
//!    `changes::apply::apply` (three-way, journalled for undo). Git:
//!    `git diff` of the same edits in a `git worktree add` checkout,
//!    written to a patch file, then `git apply --3way` of it onto the main
//!    checkout. The worktrees and edits are made, and the main checkout
//!    reset, outside the timed part.
//!
//! `BENCH_CHANGES_ONLY=worktree` or `apply` runs that figure alone.
//! `BENCH_RUNS_WORKTREE` (default 10) and `BENCH_RUNS_APPLY` (default 20)
//! runs of each side, after one warm-up of each that is not counted.
//! The targets are side-by-side ratios (Fido's median at most 1.5× git's),
//! so they hold in the quick smoke too; `BENCH_ADVISORY` names targets
//! (`worktree`, `change set + apply`) reported but not failing. Exit
//! status: 0 when every other target holds and every run did its work,
//! else 1. Uses the `git` on `PATH`.

#[allow(dead_code)]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use fido::changes::{self, Start};
use fido::protocol::changes::MergeState;
use fido::store::undo::UndoLog;
use fido::workspace::{STATE_DIR, Workspace};
use support::Sorted;

const DEFAULT_RUNS_WORKTREE: usize = 10;
const DEFAULT_RUNS_APPLY: usize = 20;
/// Fido's median over git's, for both figures: Fido does more than the
/// git commands (a snapshot of the uncommitted files, a change set with
/// counts, a capped diff, an undo record, atomic writes), but no step
/// should cost it more than half again.
const TARGET_RATIO: f64 = 1.5;

/// The big repository: 10,000 files, 100 MiB.
const BIG_FILES: usize = 10_000;
const BIG_LARGE_FILES: usize = 10;
const BIG_LARGE_BYTES: usize = 2 << 20;
const BIG_TOTAL_BYTES: usize = 100 << 20;
/// The change-set repository: 1,000 files of ~100 lines, 100 edited.
const SMALL_FILES: usize = 1_000;
const SMALL_LINES: usize = 100;
const EDITED_FILES: usize = 100;

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("changes bench: a target was missed (FAIL above)");
            ExitCode::FAILURE
        }
        Err(message) => {
            eprintln!("changes bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn bench() -> Result<bool, String> {
    let worktree_runs = support::env_count("BENCH_RUNS_WORKTREE", DEFAULT_RUNS_WORKTREE)?;
    let apply_runs = support::env_count("BENCH_RUNS_APPLY", DEFAULT_RUNS_APPLY)?;
    let only = std::env::var("BENCH_CHANGES_ONLY").ok();
    let runs = |figure: &str| only.as_deref().is_none_or(|name| name == figure);
    let worktree_ok = !runs("worktree") || worktree_figure(worktree_runs)?;
    let apply_ok = !runs("apply") || apply_figure(apply_runs)?;
    Ok(worktree_ok && apply_ok)
}

/// Runs git (the one on `PATH`) in `dir` with a fixed identity and none of
/// this process's `GIT_*` variables; its stdout, or why it failed.
fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, String> {
    let output = git_command(dir, args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git {args:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(output.stdout)
}

fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.as_encoded_bytes().starts_with(b"GIT_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@localhost")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@localhost");
    command
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e3
}

/// One line of generated source text, different for every `n`.
fn source_line(rng: &mut fastrand::Rng, n: usize) -> String {
    const WORDS: [&str; 12] = [
        "parser", "token", "buffer", "index", "offset", "window", "cursor", "frame", "record",
        "entry", "value", "state",
    ];
    let a = WORDS[rng.usize(..WORDS.len())];
    let b = WORDS[rng.usize(..WORDS.len())];
    format!(
        "    let {a}_{n} = {b}.step({}, {}); // {a} after {b}\n",
        rng.u32(..100_000),
        rng.u16(..)
    )
}

/// Text of about `bytes` bytes, whole lines.
fn text_of(rng: &mut fastrand::Rng, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 128);
    let mut n = 0;
    while text.len() < bytes {
        text.push_str(&source_line(rng, n));
        n += 1;
    }
    text
}

/// Makes `root` a repository whose one commit holds `files` (relative
/// path, contents), with an index whose entries are not racily clean (as
/// in a repository the person has worked in for more than a second).
fn commit_files(root: &Path, files: &[(PathBuf, String)]) -> Result<(), String> {
    git(root, &["init", "-q", "-b", "main"])?;
    for (path, text) in files {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    git(root, &["add", "-A"])?;
    git(root, &["commit", "-q", "-m", "generated"])?;
    // Git trusts an entry's stat data only when the file is older than
    // the index; an index rebuilt a second later makes every entry clean.
    std::thread::sleep(Duration::from_millis(1100));
    fs::remove_file(root.join(".git/index")).map_err(|e| format!("the index: {e}"))?;
    git(root, &["reset", "-q"])?;
    Ok(())
}

/// The big repository in `root`: 10,000 files, 100 MiB, committed; then
/// five edited files, a staged new file and five untracked ones. Returns
/// the bytes committed.
fn big_repository(root: &Path) -> Result<usize, String> {
    let mut rng = fastrand::Rng::with_seed(0x5eed_0001);
    let small_files = BIG_FILES - BIG_LARGE_FILES;
    let mean = (BIG_TOTAL_BYTES - BIG_LARGE_FILES * BIG_LARGE_BYTES) / small_files;
    let mut files = Vec::with_capacity(BIG_FILES);
    for i in 0..small_files {
        let path = PathBuf::from(format!("src/mod_{:02}/file_{:03}.rs", i / 100, i % 100));
        let size = rng.usize(1024..=2 * mean - 1024);
        files.push((path, text_of(&mut rng, size)));
    }
    for i in 0..BIG_LARGE_FILES {
        let path = PathBuf::from(format!("assets/large_{i}.log"));
        files.push((path, text_of(&mut rng, BIG_LARGE_BYTES)));
    }
    let total = files.iter().map(|(_, text)| text.len()).sum();
    commit_files(root, &files)?;
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    for i in 0..5 {
        let path = format!("src/mod_{:02}/file_{:03}.rs", i * 7, i);
        let old = fs::read_to_string(root.join(&path)).map_err(|e| format!("{path}: {e}"))?;
        write(&path, &format!("{old}// edited, not committed\n"))?;
        write(&format!("src/untracked_{i}.rs"), "fn untracked() {}\n")?;
    }
    write("src/staged.rs", "fn staged() {}\n")?;
    git(root, &["add", "src/staged.rs"])?;
    Ok(total)
}

/// Figure 1: `changes::start` against `git worktree add`, interleaved.
fn worktree_figure(runs: usize) -> Result<bool, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let root = dir.path().join("repo");
    let scratch = dir.path().join("scratch");
    for folder in [&root, &scratch] {
        fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    }
    let made = Instant::now();
    let bytes = big_repository(&root)?;
    println!(
        "worktree: repository of {BIG_FILES} files, {:.1} MiB, made in {:.1} s",
        bytes as f64 / f64::from(1 << 20),
        made.elapsed().as_secs_f64()
    );
    let mut fido = Vec::with_capacity(runs);
    let mut plain = Vec::with_capacity(runs);
    for round in 0..=runs {
        // Each side goes first in every other round: the previous side's
        // dirty pages are written back while the next one runs.
        let (f, g) = if round % 2 == 0 {
            let f = fido_worktree(&root, round)?;
            (f, git_worktree(&root, &scratch, round)?)
        } else {
            let g = git_worktree(&root, &scratch, round)?;
            (fido_worktree(&root, round)?, g)
        };
        if round > 0 {
            fido.push(f);
            plain.push(g);
        }
    }
    Ok(compare(
        &Sorted::new(fido),
        &Sorted::new(plain),
        "worktree",
        &format!(
            "write subagent's worktree, repository of {BIG_FILES} files and {} MiB with uncommitted and untracked files: `changes::start`",
            BIG_TOTAL_BYTES >> 20
        ),
        "`git worktree add --detach` of HEAD",
    ))
}

/// One timed `changes::start` in ms; its folder is removed afterwards.
fn fido_worktree(root: &Path, round: usize) -> Result<f64, String> {
    let start = Start {
        task: "bench".into(),
        claim: vec!["src".into()],
        plan_item: None,
    };
    let id = format!("bench-{round}");
    let began = Instant::now();
    let worktree = changes::start(root, &id, &start).map_err(|e| format!("start: {e}"))?;
    let elapsed = ms(began.elapsed());
    let tree = worktree.layout.tree();
    let complete = tree.join("assets/large_9.log").is_file()
        && tree.join("src/untracked_4.rs").is_file()
        && tree.join("src/staged.rs").is_file();
    changes::abandon(&worktree);
    if !complete {
        return Err(format!(
            "worktree {id} lacks a committed, staged or untracked file"
        ));
    }
    Ok(elapsed)
}

/// One timed `git worktree add --detach` in ms; removed afterwards.
fn git_worktree(root: &Path, scratch: &Path, round: usize) -> Result<f64, String> {
    let dir = scratch.join(format!("git-{round}"));
    let dir_arg = dir.to_string_lossy();
    let began = Instant::now();
    git(root, &["worktree", "add", "--detach", &dir_arg, "HEAD"])?;
    let elapsed = ms(began.elapsed());
    let complete = dir.join("assets/large_9.log").is_file();
    git(root, &["worktree", "remove", "--force", &dir_arg])?;
    if !complete {
        return Err(format!("{} lacks a committed file", dir.display()));
    }
    Ok(elapsed)
}

/// Whether `BENCH_ADVISORY` (comma-separated names, as in the delegate
/// bench) names the target `name`: reported, but never failing the run.
fn advisory(name: &str) -> bool {
    std::env::var("BENCH_ADVISORY").is_ok_and(|list| list.split(',').any(|t| t.trim() == name))
}

/// Prints both sides, the table row and the verdict of the ratio target.
fn compare(fido: &Sorted, plain: &Sorted, name: &str, what: &str, baseline: &str) -> bool {
    let ratio = fido.median() / plain.median();
    println!("{what}");
    for (side, s) in [("  fido (ms)", fido), ("  git (ms)", plain)] {
        println!(
            "{side:<14} min {:>9.1}  median {:>9.1}  max {:>9.1}  n = {}",
            s.min(),
            s.median(),
            s.max(),
            s.len()
        );
    }
    support::table_row(
        "changes",
        what,
        &support::spread(fido, 1, "ms"),
        &format!("≤ {TARGET_RATIO}× git's median"),
        &format!("{:.1} ms: {baseline} ({ratio:.2}×)", plain.median()),
    );
    let figure = format!(
        "{ratio:.2}× ({:.1} / {:.1} ms)",
        fido.median(),
        plain.median()
    );
    let target = format!("{name}: Fido's median / git's ≤ {TARGET_RATIO}");
    if ratio > TARGET_RATIO && advisory(name) {
        println!("target: {target}: {figure} FAIL (advisory)");
        return true;
    }
    support::steady_target(&target, ratio <= TARGET_RATIO, &figure)
}

/// The change-set repository and its edits: (path, edited text) of every
/// tenth file, one line changed in the middle.
fn small_repository(root: &Path) -> Result<Vec<(PathBuf, String)>, String> {
    let mut rng = fastrand::Rng::with_seed(0x5eed_0002);
    let files: Vec<(PathBuf, String)> = (0..SMALL_FILES)
        .map(|i| {
            let path = PathBuf::from(format!("src/mod_{:02}/file_{:03}.rs", i / 100, i % 100));
            let text = (0..SMALL_LINES).map(|n| source_line(&mut rng, n)).collect();
            (path, text)
        })
        .collect();
    commit_files(root, &files)?;
    let step = SMALL_FILES / EDITED_FILES;
    Ok(files
        .into_iter()
        .step_by(step)
        .enumerate()
        .map(|(k, (path, text))| {
            let edited: String = text
                .lines()
                .enumerate()
                .map(|(n, line)| match n == SMALL_LINES / 2 {
                    true => format!("    let edited_{k} = {k}; // the subagent's edit\n"),
                    false => format!("{line}\n"),
                })
                .collect();
            (path, edited)
        })
        .collect())
}

fn write_edits(tree: &Path, edits: &[(PathBuf, String)]) -> Result<(), String> {
    for (path, text) in edits {
        let path = tree.join(path);
        fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Whether the main checkout holds every edit; then resets it (and
/// Fido's state) to the commit, so that each run starts alike.
fn check_and_reset(root: &Path, edits: &[(PathBuf, String)]) -> Result<bool, String> {
    let applied = edits
        .iter()
        .all(|(path, text)| fs::read_to_string(root.join(path)).is_ok_and(|now| now == *text));
    git(root, &["reset", "-q", "--hard", "HEAD"])?;
    match fs::remove_dir_all(root.join(STATE_DIR)) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(format!("cannot remove {STATE_DIR}: {err}")),
    }
    Ok(applied)
}

/// Figure 2: `changes::finish` + `apply` against `git diff` + `git apply
/// --3way`, interleaved.
fn apply_figure(runs: usize) -> Result<bool, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let root = dir.path().join("repo");
    let scratch = dir.path().join("scratch");
    for folder in [&root, &scratch] {
        fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    }
    let edits = small_repository(&root)?;
    let mut fido = Vec::with_capacity(runs);
    let mut plain = Vec::with_capacity(runs);
    for round in 0..=runs {
        let (f, g) = if round % 2 == 0 {
            let f = fido_apply(&root, &edits, round)?;
            (f, git_apply(&root, &scratch, &edits, round)?)
        } else {
            let g = git_apply(&root, &scratch, &edits, round)?;
            (fido_apply(&root, &edits, round)?, g)
        };
        if round > 0 {
            fido.push(f);
            plain.push(g);
        }
    }
    print_stages(&fido, &plain);
    let total = |stages: &[[f64; 3]]| Sorted::new(stages.iter().map(|s| s[0] + s[1]).collect());
    Ok(compare(
        &total(&fido),
        &total(&plain),
        "change set + apply",
        &format!(
            "change set of {EDITED_FILES} edited files (one line in ~{SMALL_LINES}), repository of {SMALL_FILES} files: `changes::finish` + `apply::apply`"
        ),
        "`git diff` to a patch file + `git apply --3way`",
    ))
}

/// The medians of each stage, timed or not, of both sides.
fn print_stages(fido: &[[f64; 3]], plain: &[[f64; 3]]) {
    let median =
        |stages: &[[f64; 3]], n: usize| Sorted::new(stages.iter().map(|s| s[n]).collect()).median();
    println!(
        "stages (medians): changes::finish {:.1} ms + apply::apply {:.1} ms; git diff {:.1} ms + git apply --3way {:.1} ms (untimed: git worktree remove {:.1} ms)",
        median(fido, 0),
        median(fido, 1),
        median(plain, 0),
        median(plain, 1),
        median(plain, 2)
    );
}

/// One `finish` and `apply`, timed apart, in ms (the third stage, for
/// the git side's worktree removal, is 0), the worktree and its edits made
/// before.
fn fido_apply(root: &Path, edits: &[(PathBuf, String)], round: usize) -> Result<[f64; 3], String> {
    let start = Start {
        task: "bench".into(),
        claim: vec!["src".into()],
        plan_item: None,
    };
    let id = format!("apply-{round}");
    let worktree = changes::start(root, &id, &start).map_err(|e| format!("start: {e}"))?;
    write_edits(&worktree.layout.tree(), edits)?;
    let workspace = Workspace::new(root).map_err(|e| format!("workspace: {e}"))?;
    let undo = UndoLog::new(root);
    let began = Instant::now();
    let record = changes::finish(root, &worktree, &start, changes::DEFAULT_DIFF_CAP)
        .map_err(|e| format!("finish: {e}"))?;
    let finished = began.elapsed();
    let applied =
        changes::apply::apply(&workspace, &undo, &id).map_err(|e| format!("apply: {e}"))?;
    let elapsed = [ms(finished), ms(began.elapsed() - finished), 0.0];
    if record.set.files.len() != edits.len() || applied.set.merge != MergeState::Applied {
        return Err(format!(
            "change set {id}: {} files, {:?}",
            record.set.files.len(),
            applied.set.merge
        ));
    }
    if !check_and_reset(root, edits)? {
        return Err(format!("change set {id} left the main checkout unedited"));
    }
    Ok(elapsed)
}

/// One `git diff` to a patch file and one `git apply --3way`, timed
/// apart, and the untimed `git worktree remove`, in ms; the worktree and
/// its edits made before.
fn git_apply(
    root: &Path,
    scratch: &Path,
    edits: &[(PathBuf, String)],
    round: usize,
) -> Result<[f64; 3], String> {
    let dir = scratch.join(format!("apply-git-{round}"));
    let dir_arg = dir.to_string_lossy();
    git(root, &["worktree", "add", "--detach", &dir_arg, "HEAD"])?;
    write_edits(&dir, edits)?;
    let patch = scratch.join(format!("patch-{round}"));
    let began = Instant::now();
    let file = fs::File::create(&patch).map_err(|e| format!("{}: {e}", patch.display()))?;
    let diffed = git_command(&dir, &["diff"])
        .stdin(Stdio::null())
        .stdout(file)
        .status()
        .map_err(|e| format!("cannot run git diff: {e}"))?;
    if !diffed.success() {
        return Err(format!("git diff in {}: {diffed}", dir.display()));
    }
    let diffed = began.elapsed();
    git(root, &["apply", "--3way", &patch.to_string_lossy()])?;
    let applied_ms = ms(began.elapsed() - diffed);
    let applied = check_and_reset(root, edits)?;
    let removing = Instant::now();
    git(root, &["worktree", "remove", "--force", &dir_arg])?;
    if !applied {
        return Err("git apply --3way left the main checkout unedited".into());
    }
    Ok([ms(diffed), applied_ms, ms(removing.elapsed())])
}
