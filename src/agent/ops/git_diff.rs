//! `/diff` (`Op::Diff`): the workspace's `git diff`, run by the engine's
//! front desk as a child process in a task of its own, never in the agent
//! actor's handler, so a front end in another process gets the same
//! answer. The child is owned: it is awaited (reaped) on every path, and
//! killed when it outlives [`TIMEOUT`] or its future is dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// Longest a `git diff` may take.
pub const TIMEOUT: Duration = Duration::from_secs(15);
/// Most diff text shown; the rest is cut with a note.
pub const MAX_BYTES: usize = 2 * 1024 * 1024;

/// The diff text, or one sentence saying why there is none.
pub async fn workspace_diff(workspace: PathBuf) -> Result<String, String> {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("-C")
        .arg(&workspace)
        .args(["--no-pager", "diff", "--no-color", "--no-ext-diff"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|err| format!("cannot run git diff: {err}"))?;
    let output = match tokio::time::timeout(TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => return Err(format!("git diff failed: {err}")),
        Err(_) => {
            return Err(format!(
                "git diff took longer than {}s and was stopped",
                TIMEOUT.as_secs()
            ));
        }
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr.lines().next().unwrap_or("no reason given");
        return Err(format!(
            "git diff failed: {}",
            crate::text::summary(reason, 200)
        ));
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
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    #[tokio::test]
    async fn the_diff_of_a_changed_file_and_a_sentence_outside_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        let outside = workspace_diff(dir.path().to_path_buf()).await;
        assert!(outside.unwrap_err().starts_with("git diff failed"));
        git(dir.path(), &["init", "-q"]);
        std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
        git(dir.path(), &["add", "a.txt"]);
        std::fs::write(dir.path().join("a.txt"), "two\n").unwrap();
        let diff = workspace_diff(dir.path().to_path_buf()).await.unwrap();
        assert!(diff.contains("-one\n+two"), "{diff}");
    }
}
