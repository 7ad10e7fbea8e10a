//! Persistence of the plan in `.fido-plan.json` (config `PLAN_FILE`).
//!
//! Every change happens under an exclusive advisory lock on a file under
//! the workspace's `.fido-state/locks/` (never beside the plan, in the
//! user's checkout), reads the current file afresh (another Fido process may have
//! written it), and replaces it atomically: temp file in the same directory,
//! fsync, rename, fsync of the directory. A crash leaves either the old or
//! the new file, never a torn one. A corrupt file is never overwritten
//! silently: it is moved aside to `<file>.corrupt-<timestamp>` and reported.

use std::convert::Infallible;
use std::path::{Path, PathBuf};

use super::model::{PlanItem, PlanState};

/// The reason of a plan started anew by the user.
pub const CLEARED_REASON: &str = "Plan cleared by the user.";
use crate::store::state_file::{Contents, StateFile, StateLock};

/// Errors of the plan file (lock, read, write).
use crate::store::state_file::StateFileError;

/// The result of reading the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub state: PlanState,
    /// Set when the file was corrupt and has been moved aside.
    pub warning: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PlanStore {
    file: StateFile,
}

impl PlanStore {
    /// The plan file `path` of the workspace at `workspace`.
    pub fn new(workspace: &Path, path: PathBuf) -> Self {
        PlanStore {
            file: StateFile::in_workspace(workspace, path, "plan"),
        }
    }

    /// A plan kept in this process's memory: a subagent's own, which
    /// lives as long as it does and is never the workspace's.
    pub fn in_memory() -> Self {
        PlanStore {
            file: StateFile::in_memory("the subagent's plan", "plan"),
        }
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Reads the plan (empty when there is no file).
    pub fn load(&self) -> Result<Loaded, StateFileError> {
        let lock = self.file.lock()?;
        self.read(&lock)
    }

    /// Applies `change` to the current state and saves the result, all under
    /// the lock. When `change` fails nothing is written.
    pub fn update<E>(
        &self,
        change: impl FnOnce(&PlanState) -> Result<PlanState, E>,
    ) -> Result<Result<(PlanState, Option<String>), E>, StateFileError> {
        let lock = self.file.lock()?;
        let current = self.read(&lock)?;
        let next = match change(&current.state) {
            Ok(next) => next,
            Err(err) => return Ok(Err(err)),
        };
        self.file.write(&lock, &next)?;
        Ok(Ok((next, current.warning)))
    }

    /// Replaces the plan with `items` as the next version, stamped now.
    /// Returns the new state and the warning of a corrupt file set aside.
    pub fn replace(
        &self,
        reason: String,
        items: Vec<PlanItem>,
    ) -> Result<(PlanState, Option<String>), StateFileError> {
        let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
        match self.update(|current| {
            Ok::<_, std::convert::Infallible>(current.successor(reason, items, now))
        })? {
            Ok(saved) => Ok(saved),
            Err(never) => match never {},
        }
    }

    /// Starts a new, empty plan (`/plan clear`, `fido plan clear`); the
    /// version keeps counting.
    pub fn clear(&self) -> Result<(PlanState, Option<String>), StateFileError> {
        self.replace(CLEARED_REASON.into(), Vec::new())
    }

    fn read(&self, lock: &StateLock) -> Result<Loaded, StateFileError> {
        Ok(
            match self.file.read::<PlanState, Infallible>(lock, |_| Ok(()))? {
                Contents::Missing => Loaded {
                    state: PlanState::empty(),
                    warning: None,
                },
                Contents::Valid(state) => Loaded {
                    state,
                    warning: None,
                },
                Contents::SetAside { warning } => Loaded {
                    state: PlanState::empty(),
                    warning: Some(warning),
                },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::fs;
    use std::sync::{Arc, Barrier};
    use std::thread;
    use std::time::Duration;

    use proptest::prelude::*;
    use proptest::test_runner::Config;
    use serde_json::json;

    use super::*;
    use crate::plan::model::{self, PlanItem, Status};

    const NOW: &str = "2025-01-01T00:00:00.000Z";

    fn setup() -> (tempfile::TempDir, PlanStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = PlanStore::new(dir.path(), dir.path().join(".fido-plan.json"));
        (dir, store)
    }

    /// Another store of the same plan file (in its folder's workspace).
    fn same_file(store: &PlanStore) -> PlanStore {
        let path = store.path().to_path_buf();
        PlanStore::new(path.parent().unwrap(), path.clone())
    }

    fn items(spec: &[(&str, Status)]) -> Vec<PlanItem> {
        spec.iter()
            .map(|&(id, status)| PlanItem {
                id: id.into(),
                title: format!("Do {id}"),
                status,
                details: Some(format!("details of {id}")),
                dependencies: Vec::new(),
                next_action: (status != Status::Done).then(|| format!("start {id}")),
                evidence: if status == Status::Done {
                    vec!["cargo test: 1 passed".into()]
                } else {
                    Vec::new()
                },
            })
            .collect()
    }

    /// Replaces the plan with `items`, as `update_plan` does.
    fn save(store: &PlanStore, reason: &str, items: Vec<PlanItem>) -> PlanState {
        let saved = store
            .update(|current| Ok::<_, String>(current.successor(reason.into(), items, NOW.into())))
            .unwrap();
        saved.unwrap().0
    }

    fn file_names(dir: &Path) -> BTreeSet<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn asides(dir: &Path) -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".fido-plan.json.corrupt-")
            })
            .collect();
        found.sort();
        found
    }

    /// The file holds exactly the state the model was given.
    fn assert_file_holds(store: &PlanStore, state: &PlanState) {
        let text = fs::read_to_string(store.path()).unwrap();
        assert_eq!(text.trim_end(), state.to_json_text());
        let parsed: PlanState = serde_json::from_str(&text).unwrap();
        assert_eq!(&parsed, state);
    }

    /// The sentence every caller shows for a plan file linked out of the
    /// workspace.
    fn outside_link(store: &PlanStore) -> String {
        format!(
            "`{}` is a symlink to a path outside the workspace; Fido does not follow it: remove the link",
            store.path().display()
        )
    }

    /// A subagent's own plan: kept in memory, each version after the one
    /// before, shared by the store's clones (the tool environment's and
    /// the loop's), gone with the process; no file is made.
    #[test]
    fn a_plan_in_memory_keeps_its_versions_for_its_clones_and_writes_no_file() {
        let store = PlanStore::in_memory();
        let same = store.clone();
        assert_eq!(store.load().unwrap().state, PlanState::empty());
        save(&store, "first", items(&[("a", Status::InProgress)]));
        let second = save(&same, "second", items(&[("a", Status::Done)]));
        assert_eq!(second.version, 2);
        assert_eq!(store.load().unwrap().state, second);
        assert!(!store.path().exists(), "{}", store.path().display());
        // Another in-memory plan is another subagent's.
        assert_eq!(
            PlanStore::in_memory().load().unwrap().state,
            PlanState::empty()
        );
    }

    #[test]
    fn a_plan_file_linked_out_of_the_workspace_is_refused_and_its_target_kept() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("notes.json");
        fs::write(&target, b"{\"mine\": true}\n").unwrap();
        // Absolute, relative and dangling links alike.
        let relative = PathBuf::from("..")
            .join(outside.path().file_name().unwrap())
            .join("notes.json");
        let dangling = outside.path().join("gone.json");
        for link in [target.clone(), relative, dangling] {
            let (dir, store) = setup();
            std::os::unix::fs::symlink(&link, store.path()).unwrap();
            let expected = outside_link(&store);
            assert_eq!(store.load().unwrap_err().to_string(), expected);
            let saved = store.update(|current| {
                Ok::<_, String>(current.successor("new".into(), Vec::new(), NOW.into()))
            });
            assert_eq!(saved.unwrap_err().to_string(), expected);
            assert_eq!(store.clear().unwrap_err().to_string(), expected);
            assert_eq!(fs::read_link(store.path()).unwrap(), link);
            assert!(asides(dir.path()).is_empty());
        }
        assert_eq!(fs::read(&target).unwrap(), b"{\"mine\": true}\n");
        assert!(!outside.path().join("gone.json").exists());
    }

    #[test]
    fn a_plan_file_linked_inside_the_workspace_is_followed() {
        let (dir, store) = setup();
        let first = save(&store, "one", items(&[("a", Status::Pending)]));
        fs::rename(store.path(), dir.path().join("plan.json")).unwrap();
        std::os::unix::fs::symlink("plan.json", store.path()).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.state, first);
        assert_eq!(loaded.warning, None);
    }

    #[test]
    fn a_missing_file_loads_as_the_empty_plan_version_zero() {
        let (_dir, store) = setup();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.state, PlanState::empty());
        assert_eq!(loaded.state.version, 0);
        assert_eq!(loaded.warning, None);
        assert!(!store.path().exists(), "load must not create the plan file");
    }

    #[test]
    fn an_update_writes_a_file_that_round_trips_exactly() {
        let (_dir, store) = setup();
        let state = save(
            &store,
            "first plan",
            items(&[("inspect", Status::Done), ("implement", Status::InProgress)]),
        );
        assert_eq!(state.version, 1);
        assert_file_holds(&store, &state);
        let loaded = store.load().unwrap();
        assert_eq!(loaded.state, state);
        assert_eq!(loaded.warning, None);
    }

    #[test]
    fn each_update_sees_the_saved_state_and_bumps_the_version() {
        let (_dir, store) = setup();
        let first = save(&store, "one", items(&[("a", Status::Pending)]));
        let saved = store
            .update(|current| {
                assert_eq!(current, &first);
                Ok::<_, String>(current.successor(
                    "two".into(),
                    items(&[("a", Status::Done), ("b", Status::Pending)]),
                    NOW.into(),
                ))
            })
            .unwrap();
        let (second, warning) = saved.unwrap();
        assert_eq!(warning, None);
        assert_eq!(second.version, 2);
        assert_eq!(second.changes.added, ["b"]);
        assert_eq!(second.changes.status_changed.len(), 1);
        assert_file_holds(&store, &second);
        // A fresh store on the same path reads what the first one wrote.
        let other = same_file(&store);
        assert_eq!(other.load().unwrap().state, second);
    }

    #[test]
    fn a_rejected_change_leaves_the_file_byte_identical() {
        let (dir, store) = setup();
        save(&store, "keep me", items(&[("a", Status::Pending)]));
        let before = fs::read(store.path()).unwrap();
        let names_before = file_names(dir.path());
        let result = store
            .update(|_| Err::<PlanState, _>("invalid plan".to_string()))
            .unwrap();
        assert_eq!(result, Err("invalid plan".to_string()));
        assert_eq!(fs::read(store.path()).unwrap(), before);
        assert_eq!(file_names(dir.path()), names_before);
    }

    #[test]
    fn a_rejected_first_change_creates_no_plan_file() {
        let (_dir, store) = setup();
        let result = store.update(|_| Err::<PlanState, _>(())).unwrap();
        assert_eq!(result, Err(()));
        assert!(!store.path().exists());
        assert_eq!(store.load().unwrap().state.version, 0);
    }

    #[test]
    fn a_validation_failure_through_the_tool_flow_keeps_the_file() {
        let (_dir, store) = setup();
        save(&store, "keep me", items(&[("a", Status::Pending)]));
        let before = fs::read(store.path()).unwrap();
        let bad = json!({"reason": "r", "items": [
            {"id": "a", "title": "A", "status": "in_progress", "next_action": "x"},
            {"id": "b", "title": "B", "status": "in_progress", "next_action": "y"}
        ]});
        let result = store
            .update(|current| {
                let (reason, items) = model::validate(&bad).map_err(|r| r.0)?;
                Ok::<_, String>(current.successor(reason, items, NOW.into()))
            })
            .unwrap();
        assert!(result.is_err());
        assert_eq!(fs::read(store.path()).unwrap(), before);
    }

    fn assert_set_aside(original: &[u8]) {
        let (dir, store) = setup();
        fs::write(store.path(), original).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.state, PlanState::empty());
        let warning = loaded.warning.expect("a corrupt file must be reported");
        let kept = asides(dir.path());
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(fs::read(&kept[0]).unwrap(), original, "aside changed bytes");
        assert!(!store.path().exists(), "corrupt file left in place");
        assert!(
            warning.contains(&store.path().display().to_string()),
            "{warning}"
        );
        assert!(
            warning.contains(&kept[0].display().to_string()),
            "{warning}"
        );
        // The store starts afresh, and the kept file is never overwritten.
        let state = save(&store, "fresh", items(&[("a", Status::Pending)]));
        assert_eq!(state.version, 1);
        assert_file_holds(&store, &state);
        assert_eq!(asides(dir.path()), kept);
        assert_eq!(fs::read(&kept[0]).unwrap(), original);
    }

    #[test]
    fn corrupt_json_is_moved_aside_and_the_store_starts_empty() {
        assert_set_aside(b"{\"version\": 3, \"items\": [");
    }

    #[test]
    fn a_non_utf8_file_is_moved_aside_and_the_store_starts_empty() {
        assert_set_aside(&[0xff, 0xfe, b'{', 0x80, b'}', b'\n']);
    }

    #[test]
    fn json_of_the_wrong_shape_is_moved_aside() {
        for text in [
            "[]",
            "null",
            "",
            r#"{"version": -1, "updatedAt": null, "reason": "", "items": []}"#,
            r#"{"version": 1, "updatedAt": null, "reason": "", "items": [{"id": "a"}]}"#,
        ] {
            assert_set_aside(text.as_bytes());
        }
    }

    #[test]
    fn an_update_over_a_corrupt_file_reports_it_and_saves() {
        let (dir, store) = setup();
        fs::write(store.path(), "garbage").unwrap();
        let (state, warning) = store
            .update(|current| {
                assert_eq!(current, &PlanState::empty());
                Ok::<_, String>(current.successor(
                    "new".into(),
                    items(&[("a", Status::Pending)]),
                    NOW.into(),
                ))
            })
            .unwrap()
            .unwrap();
        assert_eq!(state.version, 1);
        assert!(warning.is_some_and(|w| w.contains("corrupt")));
        assert_file_holds(&store, &state);
        let kept = asides(dir.path());
        assert_eq!(kept.len(), 1);
        assert_eq!(fs::read(&kept[0]).unwrap(), b"garbage");
    }

    #[test]
    fn corrupt_files_set_aside_in_quick_succession_are_all_kept() {
        let (dir, store) = setup();
        for i in 0..5 {
            fs::write(store.path(), format!("corrupt {i}")).unwrap();
            assert!(store.load().unwrap().warning.is_some());
        }
        let kept: BTreeSet<Vec<u8>> = asides(dir.path())
            .iter()
            .map(|path| fs::read(path).unwrap())
            .collect();
        let expected: BTreeSet<Vec<u8>> = (0..5)
            .map(|i| format!("corrupt {i}").into_bytes())
            .collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn a_file_in_the_seed_shape_loads() {
        let (_dir, store) = setup();
        let seed = r#"{
  "version": 1,
  "updatedAt": "2025-01-01T00:00:00.000Z",
  "reason": "Current task plan",
  "items": []
}"#;
        fs::write(store.path(), seed).unwrap();
        let loaded = store.load().unwrap();
        assert_eq!(loaded.warning, None);
        assert_eq!(loaded.state.version, 1);
        assert_eq!(loaded.state.reason, "Current task plan");
        let next = save(&store, "more", items(&[("a", Status::Pending)]));
        assert_eq!(next.version, 2);
    }

    #[test]
    fn a_missing_directory_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let plan = dir.path().join("nested/deeper/.fido-plan.json");
        let store = PlanStore::new(dir.path(), plan);
        assert_eq!(store.load().unwrap().state.version, 0);
        let state = save(&store, "r", items(&[("a", Status::Pending)]));
        assert_file_holds(&store, &state);
    }

    #[test]
    fn no_temp_files_are_left_behind() {
        let (dir, store) = setup();
        for i in 0..10 {
            save(
                &store,
                &format!("update {i}"),
                items(&[("a", Status::Pending)]),
            );
        }
        store.update(|_| Err::<PlanState, _>(())).unwrap().ok();
        store.load().unwrap();
        // The lock is under .fido-state/, never beside the plan.
        let expected: BTreeSet<String> = [".fido-plan.json", ".fido-state"]
            .into_iter()
            .map(String::from)
            .collect();
        assert_eq!(file_names(dir.path()), expected);
    }

    #[test]
    fn an_update_waits_for_the_lock() {
        let (_dir, store) = setup();
        let held = store.file.lock().unwrap();
        let writer = {
            let store = same_file(&store);
            thread::spawn(move || save(&store, "late", items(&[("a", Status::Pending)])))
        };
        thread::sleep(Duration::from_millis(200));
        assert!(!store.path().exists(), "wrote while another held the lock");
        assert!(!writer.is_finished());
        drop(held);
        let state = writer.join().unwrap();
        assert_eq!(state.version, 1);
        assert_file_holds(&store, &state);
    }

    #[test]
    fn concurrent_writers_never_lose_an_update() {
        const PER_THREAD: usize = 50;
        let (dir, store) = setup();
        let start = Arc::new(Barrier::new(2));
        let writers: Vec<_> = ["left", "right"]
            .into_iter()
            .map(|name| {
                let store = same_file(&store);
                let start = Arc::clone(&start);
                thread::spawn(move || {
                    start.wait();
                    (0..PER_THREAD)
                        .map(|i| {
                            let id = format!("{name}-{i}");
                            save(&store, &id, items(&[(&id, Status::Pending)])).version
                        })
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let mut versions: Vec<u64> = writers
            .into_iter()
            .flat_map(|writer| writer.join().unwrap())
            .collect();
        versions.sort_unstable();
        // Every update saw its predecessor: each version was produced once.
        assert_eq!(versions, (1..=2 * PER_THREAD as u64).collect::<Vec<_>>());
        let loaded = store.load().unwrap();
        assert_eq!(loaded.warning, None);
        assert_eq!(loaded.state.version, 2 * PER_THREAD as u64);
        assert_file_holds(&store, &loaded.state);
        assert_eq!(
            file_names(dir.path()).len(),
            2,
            "temp files left: {:?}",
            file_names(dir.path())
        );
    }

    proptest! {
        #![proptest_config(Config {
            cases: 48,
            failure_persistence: None,
            ..Config::default()
        })]

        /// Every plan `validate` accepts round-trips through the file.
        #[test]
        fn accepted_plans_round_trip_through_the_file(
            args in model::tests::almost_valid_plan(),
        ) {
            let (_dir, store) = setup();
            let result = store
                .update(|current| {
                    let (reason, items) = model::validate(&args).map_err(|r| r.0)?;
                    Ok::<_, String>(current.successor(reason, items, NOW.into()))
                })
                .unwrap();
            match result {
                Ok((state, _)) => {
                    prop_assert_eq!(&store.load().unwrap().state, &state);
                    let text = fs::read_to_string(store.path()).unwrap();
                    prop_assert_eq!(text.trim_end(), state.to_json_text());
                }
                Err(_) => prop_assert!(!store.path().exists()),
            }
        }
    }
}
