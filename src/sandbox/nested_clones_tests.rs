use super::*;

/// A watched list of `root`, its first walk done.
fn watched(root: &Path) -> NestedClones {
    let clones = NestedClones::new(root);
    clones.current();
    clones
}

fn sorted(mut folders: Vec<PathBuf>) -> Vec<PathBuf> {
    folders.sort();
    folders
}

fn paths(names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(PathBuf::from).collect()
}

#[test]
fn nested_repositories_are_found_in_ignored_folders_too_but_not_inside_a_git() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in [
        ".git/modules/inside/.git",
        "third_party/lib/.git",
        "ignored/deep/clone/.git",
        "src",
        ".fido-state/set-aside/x/.git",
    ] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    std::fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
    // A submodule's `.git` is a file.
    std::fs::create_dir_all(root.join("mods/sub")).unwrap();
    std::fs::write(
        root.join("mods/sub/.git"),
        "gitdir: ../../.git/modules/sub\n",
    )
    .unwrap();
    let expected = paths(&["ignored/deep/clone", "mods/sub", "third_party/lib"]);
    assert_eq!(sorted(NestedClones::new(root).current()), expected);
    assert_eq!(sorted(NestedClones::unwatched(root).current()), expected);
}

#[test]
fn a_workspace_with_none_has_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
    std::fs::create_dir_all(dir.path().join("src/a")).unwrap();
    assert!(NestedClones::new(dir.path()).current().is_empty());
}

/// What the user clones in another terminal mid-session is on the list
/// the next command reads, however it got there: no waiting involved,
/// the queued events are read before the list is.
#[test]
fn a_repository_made_after_the_start_is_listed_at_the_next_look() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    let clones = watched(&root);
    assert!(clones.current().is_empty());
    // A whole path made at once, faster than a watch could be added.
    std::fs::create_dir_all(root.join("late/deep/clone/.git/hooks")).unwrap();
    // A `.git` file in a folder that was there.
    std::fs::write(root.join("src/.git"), "gitdir: /elsewhere\n").unwrap();
    // A clone made outside and moved in.
    std::fs::create_dir_all(dir.path().join("outside/repo/.git")).unwrap();
    std::fs::rename(dir.path().join("outside"), root.join("moved")).unwrap();
    assert_eq!(
        sorted(clones.current()),
        paths(&["late/deep/clone", "moved/repo", "src"])
    );
}

/// A folder that held a repository stays listed when its `.git` goes, so
/// that a `.git` made there later is still caught.
#[test]
fn a_folder_once_found_stays_listed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("lib/.git")).unwrap();
    let clones = watched(dir.path());
    std::fs::remove_dir(dir.path().join("lib/.git")).unwrap();
    std::fs::rename(dir.path().join("lib"), dir.path().join("old")).unwrap();
    assert_eq!(clones.current(), paths(&["lib"]));
}

/// When the kernel's queue overflows, the events lost with it are made
/// up for by a new walk.
#[test]
fn lost_events_mean_a_new_walk() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("busy")).unwrap();
    let clones = watched(dir.path());
    let queue: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(16_384);
    {
        // Nobody reads the events meanwhile: the queue fills, then the
        // repository's own events are lost.
        let _held = clones.shared().lock();
        for n in 0..queue + 10 {
            std::fs::write(dir.path().join(format!("busy/{n}")), "").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("busy/clone/.git")).unwrap();
    }
    assert_eq!(clones.current(), paths(&["busy/clone"]));
}

/// Where nothing can be watched, each look walks.
#[test]
fn unwatched_each_look_walks() {
    let dir = tempfile::tempdir().unwrap();
    let clones = NestedClones::unwatched(dir.path());
    assert!(clones.current().is_empty());
    std::fs::create_dir_all(dir.path().join("a/b/.git")).unwrap();
    assert_eq!(clones.current(), paths(&["a/b"]));
}

/// Repositories a command makes cannot push the user's off the list.
#[test]
fn the_users_repositories_come_first_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("first/.git")).unwrap();
    let clones = watched(dir.path());
    let running = clones.command_started();
    for n in 0..MAX_CLONES + 6 {
        std::fs::create_dir_all(dir.path().join(format!("made/{n}/.git"))).unwrap();
    }
    assert_eq!(clones.current().len(), MAX_CLONES);
    drop(running);
    std::fs::create_dir_all(dir.path().join("zz/user/.git")).unwrap();
    let listed = clones.current();
    assert_eq!(listed.len(), MAX_CLONES);
    assert_eq!(listed[..2], paths(&["first", "zz/user"]));
}
