//! `/diff` (`Op::Diff`): the workspace's `git diff`, run by the engine's
//! front desk in a task of its own, never in the agent actor's handler, so
//! a front end in another process gets the same answer. Git runs through
//! Fido's hardened runner ([`crate::git::Git`]: no secrets in its
//! environment, no global configuration, hooks and fsmonitor off) on the
//! blocking pool, with textconv, external diff drivers and submodules
//! off: nothing the repository configures runs to show it. Its process
//! group is killed when it outlives [`TIMEOUT`] and it is always reaped.

use std::path::PathBuf;
use std::time::Duration;

/// Longest a `git diff` may take.
pub const TIMEOUT: Duration = Duration::from_secs(15);
/// Most diff text shown; the rest is cut with a note.
pub const MAX_BYTES: usize = 2 * 1024 * 1024;

/// What `/diff` runs.
const DIFF: [&str; 5] = [
    "diff",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--ignore-submodules=all",
];

/// Why `/diff` has no text: git could not run, or said why in the first
/// line of its stderr (cut short).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git diff failed: {0}")]
pub struct GitDiffFailed(String);

/// The diff text, or why there is none.
pub async fn workspace_diff(workspace: PathBuf) -> Result<String, GitDiffFailed> {
    let git = crate::git::Git::new(&workspace).with_timeout(TIMEOUT);
    let output = tokio::task::spawn_blocking(move || git.output(DIFF, None))
        .await
        .map_err(|err| GitDiffFailed(err.to_string()))?
        .map_err(|err| GitDiffFailed(err.message))?;
    if output.code != Some(0) {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr.lines().next().unwrap_or("no reason given");
        return Err(GitDiffFailed(crate::text::summary(reason, 200)));
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    if text.len() > MAX_BYTES {
        let mut cut = MAX_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[diff cut: more than 2 MiB]");
    }
    Ok(crate::text::sanitize(&text, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &std::path::Path, args: &[&str]) {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[tokio::test]
    async fn the_diff_of_a_changed_file_and_a_sentence_outside_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        let outside = workspace_diff(dir.path().to_path_buf()).await;
        assert!(
            outside
                .unwrap_err()
                .to_string()
                .starts_with("git diff failed")
        );
        git(dir.path(), &["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        git(dir.path(), &["add", "a.txt"]);
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        let diff = workspace_diff(dir.path().to_path_buf()).await.unwrap();
        assert!(diff.contains("-one\n+two"), "{diff}");
    }

    /// A repository whose configuration names programs for `git diff` to
    /// run (an fsmonitor hook, an external diff, a textconv driver) and a
    /// nested repository, recorded as a gitlink, with a clean filter of its
    /// own and a file whose stat data changed: `/diff` shows the diff and
    /// runs none of them.
    #[tokio::test]
    async fn nothing_the_repository_configures_runs_to_show_the_diff() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let marker = |name: &str| dir.path().join(name);
        let touch = |name: &str| format!("touch '{}'", marker(name).display());
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "one\n").unwrap();
        std::fs::write(root.join(".gitattributes"), "* diff=x\n").unwrap();
        let lib = root.join("vendor/lib");
        std::fs::create_dir_all(&lib).unwrap();
        git(&lib, &["init", "-q"]);
        std::fs::write(lib.join("f.txt"), "lib\n").unwrap();
        git(&lib, &["add", "f.txt"]);
        let identity = ["-c", "user.name=t", "-c", "user.email=t@t"];
        git(
            &lib,
            &[&identity[..], &["commit", "-q", "-m", "lib"]].concat(),
        );
        git(&root, &["add", "a.txt", ".gitattributes", "vendor/lib"]);
        let planted = format!(
            "[core]\n\tfsmonitor = \"{}\"\n[diff]\n\texternal = \"{}\"\n[diff \"x\"]\n\ttextconv = \"{}; cat\"\n",
            touch("fsmonitor"),
            touch("external"),
            touch("textconv"),
        );
        append(&root.join(".git/config"), &planted);
        let filter = format!("[filter \"x\"]\n\tclean = \"{}; cat\"\n", touch("filter"));
        append(&lib.join(".git/config"), &filter);
        std::fs::write(lib.join(".git/info/attributes"), "* filter=x\n").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let file = std::fs::File::options()
            .write(true)
            .open(lib.join("f.txt"))
            .unwrap();
        file.set_modified(old).unwrap();
        std::fs::write(root.join("a.txt"), "two\n").unwrap();
        let diff = workspace_diff(root.clone()).await.unwrap();
        assert!(diff.contains("-one\n+two"), "{diff}");
        for name in ["fsmonitor", "external", "textconv", "filter"] {
            assert!(!marker(name).exists(), "the planted {name} ran");
        }
    }

    fn append(path: &std::path::Path, text: &str) {
        use std::io::Write;
        let mut file = std::fs::File::options().append(true).open(path).unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }
}
