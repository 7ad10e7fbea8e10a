//! Protected paths under `workspace-write`: a real `bash_exec` command in
//! a real git repository tries every way we know to write `.git`,
//! `.fido-state/`, `.fido/` and `fido.toml`, and each file is compared
//! byte for byte afterwards. The same attacks run with the namespace and
//! with Landlock's per-entry fallback.

use super::*;
use crate::sandbox::protect::Mechanism;
use crate::tools::ToolEnv;
use crate::tools::testing::{call, env};
use serde_json::json;
use std::path::Path;

/// A git repository with a commit, a trusted-looking `fido.toml`, a
/// `.fido/` folder and Fido's state folder, in a session whose commands
/// run in `workspace-write` with `mechanism`.
fn repository(mechanism: Mechanism) -> (tempfile::TempDir, ToolEnv) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&root)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(root.join("README.md"), "hello\n").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "\n").unwrap();
    git(&["add", "README.md", "src"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(root.join("fido.toml"), "model = \"m\"\n").unwrap();
    std::fs::create_dir(root.join(".fido")).unwrap();
    std::fs::write(root.join(".fido/keep"), "kept\n").unwrap();
    let mut env = env(&root);
    env.approvals = crate::tools::approval::Approvals::new(
        crate::protocol::SafetySettings {
            sandbox_mode: crate::protocol::SandboxMode::WorkspaceWrite,
            approval_policy: crate::protocol::ApprovalPolicy::OnRequest,
            network: crate::protocol::NetworkAccess::Off,
        },
        None,
    );
    env.sandbox = session_sandbox(&root, mechanism);
    (dir, env)
}

/// The commands' sandbox of a session in `root` (`workspace-write`),
/// made as a session starts: it looks for nested repositories then.
fn session_sandbox(root: &Path, mechanism: Mechanism) -> crate::sandbox::SandboxSlot {
    let policy = crate::sandbox::CommandPolicy {
        mode: crate::protocol::SandboxMode::WorkspaceWrite,
        network: crate::protocol::NetworkAccess::Off,
        workspace: root.to_path_buf(),
        writable_roots: Vec::new(),
        deny: Vec::new(),
        limits: Default::default(),
    };
    let sandbox = CommandSandbox::prepare(&policy).unwrap();
    crate::sandbox::SandboxSlot::new(sandbox.with_protection(mechanism))
}

/// Every file beneath the protected paths, with its bytes (and each
/// folder, with an empty content), sorted.
fn protected_contents(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for name in crate::sandbox::protect::PROTECTED_NAMES {
        collect(root, &root.join(name), &mut out);
    }
    out.sort();
    out
}

fn collect(root: &Path, path: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    let shown = path.strip_prefix(root).unwrap().display().to_string();
    if meta.is_dir() {
        out.push((format!("{shown}/"), Vec::new()));
        for entry in std::fs::read_dir(path).unwrap().flatten() {
            collect(root, &entry.path(), out);
        }
    } else {
        out.push((shown, std::fs::read(path).unwrap_or_default()));
    }
}

/// Ways a command has tried to change what git or Fido later read or run.
const ATTACKS: &[&str] = &[
    "echo '[core]\n\tfsmonitor = touch /tmp/pwned' >> .git/config",
    "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
    "mkdir -p .git/info; echo '* filter=x' > .git/info/attributes",
    "git config core.fsmonitor 'touch /tmp/pwned'",
    "git config --local core.hooksPath /tmp",
    "mv .git .git-old && mkdir .git && echo '[core]' > .git/config",
    "rm -rf .git",
    "rm -f .git/HEAD; echo x > .git/HEAD",
    "ln -s .git/config cfg && echo evil >> cfg",
    "ln .git/config hardlink && echo evil >> hardlink",
    "cd .git && echo evil >> config",
    "echo '[[hooks.SessionStart]]' >> fido.toml",
    "printf 'sandbox_mode = \"danger-full-access\"\\n' > fido.toml",
    "rm -f fido.toml; echo 'network = true' > fido.toml",
    "mv fido.toml moved.toml",
    "mkdir -p .fido/agents && echo evil > .fido/agents/x.md",
    "rm -rf .fido",
    "echo evil > .fido-state/record.json",
    "mkdir -p .fido-state/changes/x",
    "mv .fido-state gone",
    "umount -l .git; echo evil >> .git/config",
    "unshare -rm sh -c 'umount -l .git; echo evil >> .git/config'",
    "python3 -c \"import os; os.rename('.git', 'g')\"",
];

async fn attacks_change_nothing(mechanism: Mechanism) {
    let (dir, env) = repository(mechanism.clone());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let before = protected_contents(&root);
    assert!(before.len() > 10, "{before:?}");
    let mtime = std::fs::metadata(root.join(".git/config"))
        .unwrap()
        .modified()
        .unwrap();
    // Landlock has no right for time stamps: only a read-only mount
    // keeps them.
    let touch = "touch -d 2000-01-01 .git/config";
    let attacks = ATTACKS
        .iter()
        .copied()
        .chain(mechanism.uses_namespace().then_some(touch));
    for attack in attacks {
        let command = format!("echo started; {attack}");
        let out = call(&BashExec, &env, json!({ "command": command })).await;
        assert!(
            out.content.starts_with("started\n"),
            "{mechanism}: `{attack}` did not run:\n{}",
            out.content
        );
        assert_eq!(
            protected_contents(&root),
            before,
            "{mechanism}: `{attack}` changed a protected path:\n{}",
            out.content
        );
    }
    let after = std::fs::metadata(root.join(".git/config"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(mtime, after, "{mechanism}: a time stamp changed");
}

/// What a command may still do: write in the workspace, read git's state.
async fn the_workspace_stays_writable(mechanism: Mechanism) {
    let (dir, env) = repository(mechanism.clone());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo changed > README.md && mkdir -p src/a && echo new > src/a/b && git status --porcelain && git log --oneline | wc -l && cat .git/HEAD"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(root.join("README.md")).unwrap(),
        "changed\n"
    );
    assert!(out.content.contains(" M README.md"), "{}", out.content);
    assert!(out.content.contains("ref: refs/heads/"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(root.join("src/a/b")).unwrap(),
        "new\n"
    );
}

fn namespace() -> Option<Mechanism> {
    let mechanism = crate::sandbox::protect::mechanism();
    if mechanism.uses_namespace() {
        return Some(mechanism);
    }
    assert_ne!(
        std::env::var("CI").as_deref(),
        Ok("true"),
        "no mount namespace under CI=true: {mechanism}"
    );
    eprintln!("skipped: {mechanism}");
    None
}

fn per_entry() -> Mechanism {
    Mechanism::LandlockPerEntry {
        reason: "forced by the test".into(),
    }
}

#[tokio::test]
async fn commands_cannot_change_protected_paths_in_a_mount_namespace() {
    if let Some(mechanism) = namespace() {
        attacks_change_nothing(mechanism).await;
    }
}

#[tokio::test]
async fn commands_cannot_change_protected_paths_with_the_landlock_fallback() {
    attacks_change_nothing(per_entry()).await;
}

#[tokio::test]
async fn commands_still_write_the_workspace_in_a_mount_namespace() {
    if let Some(mechanism) = namespace() {
        the_workspace_stays_writable(mechanism).await;
    }
}

#[tokio::test]
async fn commands_still_write_the_workspace_with_the_landlock_fallback() {
    the_workspace_stays_writable(per_entry()).await;
}

#[tokio::test]
async fn a_new_top_level_file_needs_no_escalation_in_a_mount_namespace() {
    let Some(mechanism) = namespace() else {
        return;
    };
    let (dir, env) = repository(mechanism);
    let out = call(&BashExec, &env, json!({"command": "echo n > notes.md"})).await;
    assert!(out.ok, "{}", out.content);
    assert!(dir.path().join("notes.md").exists());
}

#[tokio::test]
async fn a_refused_commit_names_the_protected_paths_and_the_way_out() {
    let Some(mechanism) = namespace() else {
        return;
    };
    let (_dir, env) = repository(mechanism);
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo x >> README.md && git -c user.name=t -c user.email=t@t commit -qam change"}),
    )
    .await;
    assert!(!out.ok, "{}", out.content);
    assert!(out.content.contains("protected .git"), "{}", out.content);
    assert!(out.content.contains("escalate: true"), "{}", out.content);
}

/// A workspace with no repository yet: `git init` and a planted hook in
/// one command. The `.git` it made is moved where commands cannot write
/// and git does not look, hook and all, and the model is told why.
#[tokio::test]
async fn a_repository_a_command_makes_is_set_aside_with_what_it_planted() {
    let Some(mechanism) = namespace() else {
        return;
    };
    let (dir, env) = repository(mechanism);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    let plant = "git init -q && printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git config core.fsmonitor 'touch pwned' && echo made";
    let out = call(&BashExec, &env, json!({"command": plant})).await;
    assert!(out.ok, "{}", out.content);
    assert!(out.content.contains("made"), "{}", out.content);
    assert!(
        out.content
            .contains("moved .git to .fido-state/set-aside/git-"),
        "{}",
        out.content
    );
    assert!(out.content.contains("escalate: true"), "{}", out.content);
    assert!(std::fs::symlink_metadata(root.join(".git")).is_err());
    let aside: Vec<_> = std::fs::read_dir(root.join(".fido-state/set-aside"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(aside.len(), 1);
    assert!(aside[0].path().join("hooks/pre-commit").exists());
    // Later commands cannot bring it back: the set-aside folder is under
    // the protected `.fido-state`.
    let back = format!("mv {} .git", aside[0].path().display());
    let out = call(&BashExec, &env, json!({"command": back})).await;
    assert!(!out.ok, "{}", out.content);
    assert!(std::fs::symlink_metadata(root.join(".git")).is_err());
    assert!(!root.join("pwned").exists());
}

/// Under Landlock's per-entry fallback the kernel refuses the new `.git`
/// itself, and nothing needs setting aside.
#[tokio::test]
async fn with_the_landlock_fallback_a_command_cannot_make_a_repository() {
    let (dir, env) = repository(per_entry());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    let out = call(&BashExec, &env, json!({"command": "git init -q"})).await;
    assert!(!out.ok, "{}", out.content);
    assert!(std::fs::symlink_metadata(root.join(".git")).is_err());
    assert!(!root.join(".fido-state/set-aside").exists());
}

/// A `.git` file naming a git directory inside the workspace (as a
/// submodule's or a worktree's does): that directory is protected too.
#[tokio::test]
async fn the_git_directory_a_git_file_names_is_protected() {
    let Some(mechanism) = namespace() else {
        return;
    };
    let (dir, env) = repository(mechanism);
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::rename(root.join(".git"), root.join("real-git")).unwrap();
    std::fs::write(root.join(".git"), "gitdir: real-git\n").unwrap();
    let config = std::fs::read(root.join("real-git/config")).unwrap();
    let out = call(
        &BashExec,
        &env,
        json!({"command": "git config core.fsmonitor evil; echo evil >> real-git/config; echo 'gitdir: /tmp' > .git"}),
    )
    .await;
    assert_eq!(
        std::fs::read(root.join("real-git/config")).unwrap(),
        config,
        "{}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git")).unwrap(),
        "gitdir: real-git\n"
    );
}

/// A command leads a session of its own, with no controlling terminal,
/// and cannot make a device node (a copy of `/dev/tty` would reach the
/// user's terminal); FIFOs still work.
#[tokio::test]
async fn a_command_has_no_terminal_and_makes_no_device_node() {
    let (dir, env) = repository(crate::sandbox::protect::mechanism());
    let out = call(
        &BashExec,
        &env,
        json!({"command": "read -r pid _ _ _ _ sid tty _ < /proc/self/stat; echo \"$pid $sid $tty\"; (: < /dev/tty) 2>/dev/null && echo has-tty; mknod tty c 5 0; mknod disk b 8 0; python3 -c 'import os,stat; os.mknod(\"t2\", stat.S_IFCHR | 0o600, os.makedev(5, 0))'; mkfifo fifo && echo fifo-made"}),
    )
    .await;
    let first = out.content.lines().next().unwrap_or_default();
    let fields: Vec<&str> = first.split(' ').collect();
    assert_eq!(fields.len(), 3, "{}", out.content);
    // Its session is the one its group leader made (the keeper of its PID
    // namespace, where it has one), never this process's.
    let own_session = nix::unistd::getsid(None).unwrap().to_string();
    assert_ne!(fields[1], own_session, "{}", out.content);
    assert_eq!(fields[2], "0", "a controlling terminal: {}", out.content);
    assert!(!out.content.contains("has-tty"), "{}", out.content);
    assert!(out.content.contains("fifo-made"), "{}", out.content);
    for name in ["tty", "disk", "t2"] {
        assert!(
            !dir.path().join(name).exists(),
            "{name} was made: {}",
            out.content
        );
    }
}

/// Outside any sandbox too (`danger-full-access`), a command leads its
/// own session.
#[tokio::test]
async fn an_unsandboxed_command_leads_its_own_session() {
    let dir = tempfile::tempdir().unwrap();
    let env = env(dir.path());
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo \"$$ $(cut -d' ' -f6 /proc/$$/stat)\""}),
    )
    .await;
    let fields: Vec<&str> = out
        .content
        .lines()
        .next()
        .unwrap_or_default()
        .split(' ')
        .collect();
    assert_eq!(fields.len(), 2, "{}", out.content);
    assert_eq!(fields[0], fields[1], "{}", out.content);
}

/// Runs git as the user would, outside any sandbox, in `dir`.
fn user_git(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "protocol.file.allow=always"])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The repository of [`repository`] with two gitlinks: `vendor/lib`, a
/// clone committed as a gitlink (its `.git` a folder), and `mods/sub`, a
/// submodule (its `.git` a file naming `.git/modules/sub`); and an
/// ignored clone the user keeps, `third_party/dep`.
fn repository_with_gitlinks(mechanism: Mechanism) -> (tempfile::TempDir, ToolEnv, PathBuf) {
    let (dir, mut env) = repository(mechanism.clone());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let lib = root.join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    assert!(user_git(&lib, &["init", "-q"]).status.success());
    std::fs::write(lib.join("f"), "a\n").unwrap();
    assert!(user_git(&lib, &["add", "f"]).status.success());
    assert!(user_git(&lib, &["commit", "-qm", "f"]).status.success());
    let add = user_git(&root, &["add", "vendor/lib"]);
    assert!(add.status.success());
    let sub = user_git(
        &root,
        &["submodule", "add", "-q", "./vendor/lib", "mods/sub"],
    );
    assert!(
        sub.status.success(),
        "{}",
        String::from_utf8_lossy(&sub.stderr)
    );
    assert!(
        user_git(&root, &["commit", "-qm", "gitlinks"])
            .status
            .success()
    );
    assert!(root.join("mods/sub/.git").is_file());
    let dep = root.join("third_party/dep");
    std::fs::create_dir_all(&dep).unwrap();
    assert!(user_git(&dep, &["init", "-q"]).status.success());
    std::fs::write(root.join(".gitignore"), "third_party/\n").unwrap();
    // The session starts now, with the clone there.
    env.sandbox = session_sandbox(&root, mechanism);
    (dir, env, root)
}

/// Ways a command has tried to plant a program in a nested repository,
/// which the user's `git status` in the workspace, or in the clone they
/// keep, would run.
const GITLINK_ATTACKS: &[&str] = &[
    "git -C vendor/lib config core.fsmonitor \"touch $PWD/PWNED\"",
    "printf '[core]\\n\\tfsmonitor = touch %s/PWNED\\n' \"$PWD\" >> vendor/lib/.git/config",
    "rm -rf vendor/lib/.git",
    "mv vendor/lib/.git vendor/lib/g",
    "mv vendor/lib vendor/old && mkdir -p vendor/lib && git init -q vendor/lib && git -C vendor/lib config core.fsmonitor \"touch $PWD/PWNED\"",
    "mkdir -p /tmp/fido-evil-$$ && git init -q --bare /tmp/fido-evil-$$ && git --git-dir=/tmp/fido-evil-$$ config core.fsmonitor \"touch $PWD/PWNED\" && echo \"gitdir: /tmp/fido-evil-$$\" > mods/sub/.git",
    "git -C mods/sub config core.fsmonitor \"touch $PWD/PWNED\"",
    "git -C third_party/dep config core.fsmonitor \"touch $PWD/PWNED\"",
    "echo '[core]' > third_party/dep/.git/config",
    "mv third_party/dep third_party/old && git init -q third_party/dep && git -C third_party/dep config core.fsmonitor \"touch $PWD/PWNED\"",
];

async fn gitlink_attacks_change_nothing(mechanism: Mechanism) {
    let (_dir, env, root) = repository_with_gitlinks(mechanism.clone());
    let config = std::fs::read(root.join("vendor/lib/.git/config")).unwrap();
    let sub_file = std::fs::read(root.join("mods/sub/.git")).unwrap();
    for attack in GITLINK_ATTACKS {
        let command = format!("echo started; {attack}");
        let out = call(&BashExec, &env, json!({ "command": command })).await;
        assert!(out.content.starts_with("started\n"), "{}", out.content);
        // The user's next `git status`, outside the sandbox, in the
        // workspace and in the clone they keep.
        let status = user_git(&root, &["status", "--porcelain"]);
        if root.join("third_party/dep").is_dir() {
            user_git(&root.join("third_party/dep"), &["status", "--porcelain"]);
        }
        assert!(
            !root.join("PWNED").exists(),
            "{mechanism}: `{attack}` planted a program that git ran:\n{}\n{}",
            out.content,
            String::from_utf8_lossy(&status.stdout)
        );
        // The clone's own repository, wherever a rename took it.
        let kept = ["vendor/lib", "vendor/old"]
            .iter()
            .filter_map(|folder| std::fs::read(root.join(folder).join(".git/config")).ok())
            .any(|now| now == config);
        assert!(kept, "{mechanism}: `{attack}` changed vendor/lib's config");
    }
    assert_eq!(std::fs::read(root.join("mods/sub/.git")).unwrap(), sub_file);
    let _ = std::fs::remove_file(root.join("PWNED"));
}

#[tokio::test]
async fn commands_cannot_plant_a_program_in_a_gitlink_in_a_mount_namespace() {
    if let Some(mechanism) = namespace() {
        gitlink_attacks_change_nothing(mechanism).await;
    }
}

#[tokio::test]
async fn commands_cannot_plant_a_program_in_a_gitlink_with_the_landlock_fallback() {
    gitlink_attacks_change_nothing(per_entry()).await;
}

/// A gitlink folder's own files stay the command's to change.
#[tokio::test]
async fn commands_still_edit_files_in_a_gitlink_folder() {
    let Some(mechanism) = namespace() else {
        return;
    };
    let (_dir, env, root) = repository_with_gitlinks(mechanism);
    let out = call(
        &BashExec,
        &env,
        json!({"command": "echo b > vendor/lib/f && echo new > vendor/lib/g && git -C vendor/lib status --porcelain"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert!(out.content.contains(" M f"), "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(root.join("vendor/lib/g")).unwrap(),
        "new\n"
    );
}

/// Attacks on repositories that appear mid-session: `src/dep`, which the
/// user clones in another terminal after the session started, and
/// `src/own`, which an earlier command made.
const LATE_REPOSITORY_ATTACKS: &[&str] = &[
    "git -C src/dep config core.fsmonitor \"touch $PWD/PWNED\"",
    "printf '[core]\\n\\tfsmonitor = touch %s/PWNED\\n' \"$PWD\" >> src/dep/.git/config",
    "mv src/dep src/old && git init -q src/dep && git -C src/dep config core.fsmonitor \"touch $PWD/PWNED\"",
    "git -C src/own config core.fsmonitor \"touch $PWD/PWNED\"",
    "echo '#!/bin/sh' > src/own/.git/hooks/pre-commit",
];

async fn late_repositories_are_protected(mechanism: Mechanism) {
    let (dir, env) = repository(mechanism.clone());
    let root = std::fs::canonicalize(dir.path()).unwrap();
    // The session has started: its first command makes a repository.
    let out = call(&BashExec, &env, json!({"command": "git init -q src/own"})).await;
    assert!(out.ok, "{mechanism}: {}", out.content);
    // The user clones in another terminal.
    let dep = root.join("src/dep");
    std::fs::create_dir_all(&dep).unwrap();
    assert!(user_git(&dep, &["init", "-q"]).status.success());
    let config = std::fs::read(dep.join(".git/config")).unwrap();
    for attack in LATE_REPOSITORY_ATTACKS {
        let command = format!("echo started; {attack}");
        let out = call(&BashExec, &env, json!({ "command": command })).await;
        assert!(out.content.starts_with("started\n"), "{}", out.content);
        for repository in ["src/dep", "src/own"] {
            if root.join(repository).is_dir() {
                user_git(&root.join(repository), &["status", "--porcelain"]);
            }
        }
        assert!(
            !root.join("PWNED").exists(),
            "{mechanism}: `{attack}` planted a program that git ran:\n{}",
            out.content
        );
        let kept = ["src/dep", "src/old"]
            .iter()
            .filter_map(|folder| std::fs::read(root.join(folder).join(".git/config")).ok())
            .any(|now| now == config);
        assert!(kept, "{mechanism}: `{attack}` changed src/dep's config");
    }
    assert!(!root.join("src/own/.git/hooks/pre-commit").exists());
}

#[tokio::test]
async fn a_repository_that_appears_mid_session_is_protected_in_a_mount_namespace() {
    if let Some(mechanism) = namespace() {
        late_repositories_are_protected(mechanism).await;
    }
}

#[tokio::test]
async fn a_repository_that_appears_mid_session_is_protected_with_the_landlock_fallback() {
    late_repositories_are_protected(per_entry()).await;
}
