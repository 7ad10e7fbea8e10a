//! The one way Fido runs git (README: "Write-capable delegation"). Every
//! git process Fido starts, for write delegation's worktrees and change
//! sets, `/diff`, the sandbox check, goes through [`Git`], and none is
//! given code or secrets the repository or the user's environment could
//! choose:
//!
//! - the environment starts empty: `PATH`, `LC_ALL=C` and the `GIT_*`
//!   variables set here, nothing else (no credentials, no `GIT_DIR` of
//!   Fido's own environment, no `GIT_SSH_COMMAND`, no proxy);
//! - no system or global configuration (`GIT_CONFIG_NOSYSTEM`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`); the user's global ignore file, which
//!   decides what a write subagent's base holds, is resolved once and
//!   passed explicitly ([`Git::user`]);
//! - hooks, fsmonitor and the untracked cache off, submodules never
//!   recursed into, every transport refused (`protocol.allow=never`), no
//!   credential helper, no prompt, no commit signing;
//! - its own process group, SIGKILL when Fido dies, the group killed when
//!   git exits, always reaped ([`process`]).
//!
//! Commands on a private repository ([`Git::worktree`], [`Git::private`])
//! also read attributes from the empty tree only: a filter or textconv
//! driver is then defined by the private repository's configuration alone,
//! which the parent wrote. Callers that show a diff pass `--no-textconv`
//! and `--no-ext-diff`.

pub mod process;
pub mod version;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::Leavers;

/// The tree with no entries; its id is the same in every SHA-1 repository.
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// Configuration given to every git process, after the repository's own
/// (a `-c` wins over any file).
const HARDENING: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "protocol.allow=never",
    "credential.helper=",
    "core.askPass=",
    "core.sshCommand=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.pager=cat",
];

/// A git command failed (or could not start).
#[derive(Debug, thiserror::Error)]
#[error("git {command} failed: {message}")]
pub struct GitError {
    pub command: String,
    pub message: String,
    /// The exit code, when git ran and exited.
    pub code: Option<i32>,
}

/// What a git process printed and how it ended.
#[derive(Debug)]
pub struct GitOutput {
    /// Its exit code; `None` when a signal ended it.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// A confinement a git process enters between fork and exec, prepared
/// before the fork (plain syscalls, no allocation): the sandbox that
/// boxes the git reading a write subagent's tree (`sandbox::git_wall`).
#[derive(Clone)]
pub struct PreExec(pub std::sync::Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>);

impl std::fmt::Debug for PreExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreExec")
    }
}

/// How to run git for one repository and work tree.
#[derive(Debug, Clone)]
pub struct Git {
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    config: Vec<OsString>,
    /// Attributes from the empty tree only (private repositories).
    private_attributes: bool,
    timeout: Option<Duration>,
    confine: Option<PreExec>,
}

impl Git {
    /// Git in `cwd` with the hardening alone: the repository git finds
    /// there, and its configuration.
    pub fn new(cwd: &Path) -> Git {
        Git {
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            config: Vec::new(),
            private_attributes: false,
            timeout: None,
            confine: None,
        }
    }

    /// The same git, entering `confine` between fork and exec.
    pub fn confined(mut self, confine: Option<PreExec>) -> Git {
        self.confine = confine;
        self
    }

    /// Git in the user's checkout at `cwd`: its repository's configuration
    /// and attributes count, and the user's global ignore file (its ignore
    /// rules decide what a base holds), but no other global or system
    /// configuration.
    pub fn user(cwd: &Path) -> Git {
        let mut git = Git::new(cwd);
        if let Some(file) = global_excludes() {
            let mut value = OsString::from("core.excludesFile=");
            value.push(file);
            git.config.push(value);
        }
        git
    }

    /// Git on a private repository `git_dir` whose work tree is
    /// `work_tree`: no attributes from the work tree.
    pub fn worktree(git_dir: &Path, work_tree: &Path) -> Git {
        let mut git = Git::new(work_tree);
        git.private_attributes = true;
        git.set("GIT_DIR", git_dir);
        git.set("GIT_WORK_TREE", work_tree);
        git
    }

    /// Git on the private repository `git_dir` alone (reading objects,
    /// merging files), with the same isolation as [`Git::worktree`].
    pub fn private(git_dir: &Path) -> Git {
        let mut git = Git::new(git_dir);
        git.private_attributes = true;
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

    /// The same git, killed (its whole group) after `limit`.
    pub fn with_timeout(mut self, limit: Duration) -> Git {
        self.timeout = Some(limit);
        self
    }

    /// The same git without the environment variable `key` set here.
    pub fn without(mut self, key: &str) -> Git {
        self.env.retain(|(k, _)| k != key);
        self
    }

    fn set(&mut self, key: &str, value: impl AsRef<OsStr>) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.as_ref().to_owned()));
    }

    /// The git command, and the containment of what it may leave.
    fn command<I, S>(&self, args: I) -> (Command, Leavers)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new("git");
        command.env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        for setting in HARDENING {
            command.args(["-c", setting]);
        }
        for setting in &self.config {
            command.arg("-c").arg(setting);
        }
        command
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_AUTHOR_NAME", "Fido")
            .env("GIT_AUTHOR_EMAIL", "fido@localhost")
            .env("GIT_COMMITTER_NAME", "Fido")
            .env("GIT_COMMITTER_EMAIL", "fido@localhost")
            .env("GIT_AUTHOR_DATE", "@0 +0000")
            .env("GIT_COMMITTER_DATE", "@0 +0000");
        if self.private_attributes {
            // Git 2.42 and later read attributes from this tree alone
            // ([`version`] refuses write delegation below it).
            command.env("GIT_ATTR_SOURCE", EMPTY_TREE);
        }
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd);
        let leavers = Leavers::prepare();
        crate::process::own_group(&mut command, &leavers);
        if let Some(confine) = self.confine.clone() {
            // SAFETY: the hook makes only async-signal-safe syscalls on
            // memory prepared before the fork (its contract, see PreExec).
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut command, move || (confine.0)());
            }
        }
        (command, leavers)
    }

    /// Runs git with `args` and `input` on its stdin: how it ended and
    /// what it printed, whether it succeeded or not.
    pub fn output<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<GitOutput, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let label = label(args.clone());
        let failed = |message: String| GitError {
            command: label.clone(),
            message,
            code: None,
        };
        let (mut command, leavers) = self.command(args);
        let finished = process::run(&mut command, &leavers, input, self.timeout)
            .map_err(|e| failed(format!("cannot run git: {e}")))?;
        if finished.timed_out {
            let limit = self.timeout.unwrap_or_default().as_secs();
            return Err(failed(format!("took longer than {limit}s and was stopped")));
        }
        Ok(GitOutput {
            code: finished.status.code(),
            stdout: finished.stdout,
            stderr: finished.stderr,
        })
    }

    /// Runs git with `args`; its stdout on success.
    pub fn run<I, S>(&self, args: I) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        self.run_with_input(args, None)
    }

    /// Runs git with `args` and `input` on its stdin; its stdout on
    /// success.
    pub fn run_with_input<I, S>(&self, args: I, input: Option<&[u8]>) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let output = self.output(args.clone(), input)?;
        if output.code != Some(0) {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let message = match output.code {
                Some(_) => crate::text::summary(stderr.trim(), 400),
                None => "git was killed by a signal".to_string(),
            };
            return Err(GitError {
                command: label(args),
                message,
                code: output.code,
            });
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
        let output = self.output(args.clone(), None)?;
        match output.code {
            Some(code) => Ok((code, output.stdout)),
            None => Err(GitError {
                command: label(args),
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

/// The user's global ignore file (`core.excludesFile` of the global
/// configuration, else git's default `$XDG_CONFIG_HOME/git/ignore` or
/// `~/.config/git/ignore`), when it exists; asked once. Reading the global
/// configuration runs nothing.
fn global_excludes() -> Option<&'static PathBuf> {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    FILE.get_or_init(|| {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        let xdg = std::env::var_os("XDG_CONFIG_HOME").filter(|h| !h.is_empty());
        let configured = configured_excludes(home.as_deref(), xdg.as_deref());
        let default = || match (&xdg, &home) {
            (Some(xdg), _) => Some(Path::new(xdg).join("git/ignore")),
            (None, Some(home)) => Some(Path::new(home).join(".config/git/ignore")),
            (None, None) => None,
        };
        configured.or_else(default).filter(|file| file.is_file())
    })
    .as_ref()
}

/// `git config --global --path --get core.excludesFile`, in an
/// environment with nothing else.
fn configured_excludes(home: Option<&OsStr>, xdg: Option<&OsStr>) -> Option<PathBuf> {
    let mut command = Command::new("git");
    command.env_clear();
    command.envs(std::env::var_os("PATH").map(|p| ("PATH", p)));
    command.envs(home.map(|h| ("HOME", h)));
    command.envs(xdg.map(|x| ("XDG_CONFIG_HOME", x)));
    command
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .args(["config", "--global", "--path", "--get", "core.excludesFile"])
        .current_dir("/");
    let leavers = Leavers::prepare();
    crate::process::own_group(&mut command, &leavers);
    let finished =
        process::run(&mut command, &leavers, None, Some(Duration::from_secs(10))).ok()?;
    let text = String::from_utf8(finished.stdout).ok()?;
    let path = text.trim_end_matches('\n');
    (finished.status.success() && !path.is_empty()).then(|| PathBuf::from(path))
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

    /// A child of git (a shell alias here; a hook or an fsmonitor where a
    /// repository could turn them on) that leaves git's process group, in
    /// a session of its own or daemonised, is gone once git is reaped.
    #[test]
    fn what_a_git_child_started_outside_its_group_ends_with_git() {
        if !crate::process::leavers::has_cgroups() {
            // A test binary adopts no orphans (`leavers::adopt_orphans`);
            // the fido binary's fallback is tested in process_cleanup.
            eprintln!("no writable cgroup v2 here: nothing contains git's leavers");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let marker = "1002.625";
        let alias = format!(
            "alias.leave=!setsid sleep {marker} </dev/null >/dev/null 2>&1 & echo $!; \
             (sleep {marker} </dev/null >/dev/null 2>&1 & echo $!)"
        );
        let out = Git::new(dir.path()).run(["-c", &alias, "leave"]).unwrap();
        let pids: Vec<i32> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect();
        assert_eq!(pids.len(), 2);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        // A SIGKILLed process is gone from `/proc` once its parent reaped
        // it; a zombie is dead already.
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        while pids.iter().any(|pid| alive(*pid)) {
            assert!(
                std::time::Instant::now() < deadline,
                "left behind: {pids:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn batch_output_is_split_per_object() {
        let out = b"aa blob 3\nabc\nbb blob 0\n\ncc blob 2\n\n\n\n";
        let blobs = parse_batch(out, 3).unwrap();
        assert_eq!(blobs, vec![b"abc".to_vec(), Vec::new(), b"\n\n".to_vec()]);
        assert!(parse_batch(b"aa missing\n", 1).is_none());
    }

    /// What git and the programs it starts see: `PATH`, the locale and
    /// git's own variables, nothing of Fido's environment (no `HOME`, so
    /// no global configuration either, and no credential).
    #[test]
    fn git_gets_no_environment_of_fidos() {
        let dir = tempfile::tempdir().unwrap();
        assert!(std::env::var_os("HOME").is_some(), "the test needs a HOME");
        let out = Git::new(dir.path())
            .run(["-c", "alias.show-env=!env", "show-env"])
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let names: Vec<&str> = text.lines().filter_map(|l| l.split('=').next()).collect();
        let allowed = |name: &&str| {
            ["PATH", "LC_ALL", "PWD", "OLDPWD", "SHLVL", "_"].contains(name)
                || name.starts_with("GIT_")
        };
        let extra: Vec<&&str> = names.iter().filter(|n| !allowed(n)).collect();
        assert!(extra.is_empty(), "{extra:?} in\n{text}");
        assert!(text.contains("GIT_CONFIG_GLOBAL=/dev/null"), "{text}");
        assert!(text.contains("GIT_CONFIG_NOSYSTEM=1"), "{text}");
    }

    /// Whether `pid` is gone or a zombie (killed, not yet reaped by init).
    fn ended(pid: &str) -> bool {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        stat.map_or(true, |s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        })
    }

    fn wait_ended(pid: &str) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if ended(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// A process git started in the background, holding git's stdout,
    /// dies with git's group when git exits: the call returns at once and
    /// nothing is left behind.
    #[test]
    fn what_git_starts_ends_with_it() {
        let dir = tempfile::tempdir().unwrap();
        // Had git's call waited for the sleeper's stdout, it would have
        // run past its time limit and failed.
        let out = Git::new(dir.path())
            .with_timeout(Duration::from_secs(60))
            .line(["-c", "alias.bg=!sleep 1000 & echo $!", "bg"])
            .unwrap();
        assert!(wait_ended(&out), "sleep {out} outlived git");
    }

    /// A git that outlives its time limit is killed with its group, and
    /// says so.
    #[test]
    fn a_git_past_its_time_is_stopped_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let alias = format!(
            "alias.slow=!sleep 30 & echo $! > '{}'; wait",
            pid_file.display()
        );
        let err = Git::new(dir.path())
            .with_timeout(Duration::from_millis(500))
            .run(["-c", alias.as_str(), "slow"])
            .unwrap_err();
        assert!(err.message.contains("took longer than"), "{err}");
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        assert!(wait_ended(pid.trim()), "sleep {pid} outlived git");
    }
}
