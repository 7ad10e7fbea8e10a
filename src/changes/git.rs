//! The parent's git: every git write of write delegation happens here,
//! never in the subagent, and never with code the repository could choose.
//!
//! Each command starts from a clean slate: every `GIT_*` variable of
//! Fido's own environment is removed (a `GIT_DIR` there must not redirect
//! us), hooks and fsmonitor are off, no prompt is ever shown, and the
//! command runs in a process group of its own that is always reaped.
//! Commands on a worktree ([`Git::worktree`]) also ignore the system and
//! global configuration and the worktree's own `.gitattributes`: a filter
//! or textconv driver is defined by configuration only, and the only
//! configuration left is the private repository's, which the parent wrote
//! and the subagent cannot change.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tree with no entries; its id is the same in every SHA-1 repository.
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A git command failed (or could not start).
#[derive(Debug, thiserror::Error)]
#[error("git {command} failed: {message}")]
pub struct GitError {
    pub command: String,
    pub message: String,
    /// The exit code, when git ran and exited.
    pub code: Option<i32>,
}

/// How to run git for one repository and work tree.
#[derive(Debug, Clone)]
pub struct Git {
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    /// Only the private repository's configuration counts.
    isolated: bool,
}

impl Git {
    /// Git in the user's checkout at `cwd`, with the user's configuration
    /// (its ignore rules decide what the base holds) but no hooks and no
    /// fsmonitor.
    pub fn user(cwd: &Path) -> Git {
        Git {
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            isolated: false,
        }
    }

    /// Git on a private repository `git_dir` whose work tree is
    /// `work_tree`: no system or global configuration, no attributes from
    /// the work tree.
    pub fn worktree(git_dir: &Path, work_tree: &Path) -> Git {
        let mut git = Git {
            cwd: work_tree.to_path_buf(),
            env: Vec::new(),
            isolated: true,
        };
        git.set("GIT_DIR", git_dir);
        git.set("GIT_WORK_TREE", work_tree);
        git
    }

    /// Git on the private repository `git_dir` alone (reading objects,
    /// merging files), with the same isolation as [`Git::worktree`].
    pub fn private(git_dir: &Path) -> Git {
        let mut git = Git {
            cwd: git_dir.to_path_buf(),
            env: Vec::new(),
            isolated: true,
        };
        git.set("GIT_DIR", git_dir);
        git
    }

    /// The folder git runs in.
    pub fn dir(&self) -> &Path {
        &self.cwd
    }

    /// The same git with one more environment variable.
    pub fn with(mut self, key: &str, value: impl AsRef<OsStr>) -> Git {
        self.set(key, value);
        self
    }

    fn set(&mut self, key: &str, value: impl AsRef<OsStr>) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.as_ref().to_owned()));
    }

    fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("git");
        for (key, _) in std::env::vars_os() {
            if key.as_encoded_bytes().starts_with(b"GIT_") {
                command.env_remove(key);
            }
        }
        command
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
            ])
            .args(["-c", "core.untrackedCache=false"])
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_AUTHOR_NAME", "Fido")
            .env("GIT_AUTHOR_EMAIL", "fido@localhost")
            .env("GIT_COMMITTER_NAME", "Fido")
            .env("GIT_COMMITTER_EMAIL", "fido@localhost")
            .env("GIT_AUTHOR_DATE", "@0 +0000")
            .env("GIT_COMMITTER_DATE", "@0 +0000")
            .env("LC_ALL", "C");
        if self.isolated {
            command
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                // Git 2.42 and later read attributes from this tree alone.
                .env("GIT_ATTR_SOURCE", EMPTY_TREE);
        }
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .process_group(0);
        command
    }

    /// Runs git with `args`; its stdout on success.
    pub fn run<I, S>(&self, args: I) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        self.run_with_input(args, None)
    }

    /// Runs git with `args` and `input` on its stdin.
    pub fn run_with_input<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let label = label(args.clone());
        let mut command = self.command(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if input.is_some() {
            command.stdin(Stdio::piped());
        }
        let failed = |message: String, code| GitError {
            command: label.clone(),
            message,
            code,
        };
        let mut child = command
            .spawn()
            .map_err(|e| failed(format!("cannot start git: {e}"), None))?;
        // A writer thread: git may fill its stdout before it reads all of
        // its stdin.
        let writer = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => {
                let bytes = bytes.to_vec();
                Some(std::thread::spawn(move || stdin.write_all(&bytes)))
            }
            _ => None,
        };
        let output = child
            .wait_with_output()
            .map_err(|e| failed(format!("cannot wait for git: {e}"), None))?;
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(failed(
                crate::text::summary(stderr.trim(), 400),
                output.status.code(),
            ));
        }
        Ok(output.stdout)
    }

    /// Runs git and returns its stdout as one trimmed line.
    pub fn line<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let out = self.run(args)?;
        Ok(String::from_utf8_lossy(&out).trim().to_string())
    }

    /// Runs git; `Ok(code)` whether it succeeded or not (for commands whose
    /// exit code is an answer, like `merge-file`), with its stdout.
    pub fn status<I, S>(&self, args: I) -> Result<(i32, Vec<u8>), GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let label = label(args.clone());
        let output = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| GitError {
                command: label.clone(),
                message: format!("cannot start git: {e}"),
                code: None,
            })?;
        match output.status.code() {
            Some(code) => Ok((code, output.stdout)),
            None => Err(GitError {
                command: label,
                message: "git was killed by a signal".into(),
                code: None,
            }),
        }
    }

    /// The contents of the blobs `ids`, in order, read by one
    /// `git cat-file --batch`.
    pub fn blobs(&self, ids: &[String]) -> Result<Vec<Vec<u8>>, GitError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let input = ids.join("\n") + "\n";
        let out = self.run_with_input(["cat-file", "--batch"], Some(input.as_bytes()))?;
        parse_batch(&out, ids.len()).ok_or_else(|| GitError {
            command: "cat-file --batch".into(),
            message: "unreadable output (a missing object?)".into(),
            code: None,
        })
    }
}

/// `git cat-file --batch` output: per object `<id> <type> <size>\n`, the
/// bytes, `\n`.
fn parse_batch(mut out: &[u8], count: usize) -> Option<Vec<Vec<u8>>> {
    let mut blobs = Vec::with_capacity(count);
    for _ in 0..count {
        let end = out.iter().position(|b| *b == b'\n')?;
        let header = std::str::from_utf8(&out[..end]).ok()?;
        let size: usize = header.rsplit(' ').next()?.parse().ok()?;
        let start = end + 1;
        blobs.push(out.get(start..start + size)?.to_vec());
        out = out.get(start + size + 1..)?;
    }
    Some(blobs)
}

/// The first two arguments, for messages.
fn label<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    args.into_iter()
        .take(2)
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_output_is_split_per_object() {
        let out = b"aa blob 3\nabc\nbb blob 0\n\ncc blob 2\n\n\n\n";
        let blobs = parse_batch(out, 3).unwrap();
        assert_eq!(blobs, vec![b"abc".to_vec(), Vec::new(), b"\n\n".to_vec()]);
        assert!(parse_batch(b"aa missing\n", 1).is_none());
    }
}
