//! `.fido-todo.json`: lock + atomic write, writes only on change, corrupt
//! files set aside, restore after a restart.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::thread;

use serde_json::{Value, json};

use crate::plan::todo::reminder::{RESTORE_ARGUMENTS, restore};
use crate::plan::todo::state::TodoState;
use crate::plan::todo::{TodoStore, run_call};
use crate::protocol::Message;
use crate::workspace::{STATE_DIR, TODO_FILE};

fn setup() -> (tempfile::TempDir, TodoStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = TodoStore::in_workspace(dir.path());
    (dir, store)
}

fn run(store: &TodoStore, args: Value) -> crate::plan::todo::CallOutput {
    run_call(store, &args).unwrap()
}

fn names(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn state_persists_between_calls_in_the_reference_shape() {
    let (_dir, store) = setup();
    run(&store, json!({"action": "create", "subject": "a"}));
    let out = run(
        &store,
        json!({"action": "create", "subject": "b", "blockedBy": [1]}),
    );
    assert_eq!(out.content, "Created #2: b (pending)");
    let saved: Value = serde_json::from_str(&fs::read_to_string(store.path()).unwrap()).unwrap();
    assert_eq!(
        saved,
        json!({"tasks": [{"id": 1, "subject": "a", "status": "pending"},
                         {"id": 2, "subject": "b", "status": "pending", "blockedBy": [1]}],
               "nextId": 3})
    );
    assert_eq!(
        saved["tasks"],
        serde_json::to_value(&out.details.tasks).unwrap()
    );
}

#[test]
fn reads_no_ops_and_rejections_never_write() {
    let (dir, store) = setup();
    run(&store, json!({"action": "list"}));
    assert!(!store.path().exists(), "a read creates no state file");
    run(&store, json!({"action": "create", "subject": "a"}));
    run(
        &store,
        json!({"action": "update", "id": 1, "status": "in_progress"}),
    );
    let before = fs::read(store.path()).unwrap();
    let modified = fs::metadata(store.path()).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    for args in [
        json!({"action": "list"}),
        json!({"action": "get", "id": 1}),
        json!({"action": "update", "id": 1, "status": "in_progress"}),
        json!({"action": "update", "id": 1, "status": "completed"}),
        json!({"ops": [{"action": "create", "subject": "x"}, {"action": "delete", "id": 7}]}),
    ] {
        run(&store, args);
    }
    assert_eq!(fs::read(store.path()).unwrap(), before);
    assert_eq!(
        fs::metadata(store.path()).unwrap().modified().unwrap(),
        modified
    );
    assert_eq!(
        names(dir.path()),
        // The lock is under .fido-state/, never beside the file.
        [TODO_FILE.to_string(), STATE_DIR.to_string()]
            .into_iter()
            .collect(),
        "no temp files left behind"
    );
}

#[test]
fn a_corrupt_or_invalid_file_is_kept_aside_and_reported() {
    for bad in [
        "{\"tasks\": [tor",
        r#"{"tasks": [{"id": 1, "subject": "a", "status": "pending"}, {"id": 1, "subject": "b", "status": "pending"}], "nextId": 3}"#,
        r#"{"tasks": [{"id": 5, "subject": "a", "status": "pending"}], "nextId": 2}"#,
        r#"{"tasks": [{"id": 1, "subject": "a", "status": "pending", "blockedBy": [9]}], "nextId": 2}"#,
        r#"{"tasks": [{"id": 1, "subject": "a", "status": "finished"}], "nextId": 2}"#,
        r#"{"tasks": [], "nextId": 0}"#,
    ] {
        let (dir, store) = setup();
        fs::write(store.path(), bad).unwrap();
        let out = run(&store, json!({"action": "create", "subject": "fresh"}));
        assert_eq!(out.content, "Created #1: fresh (pending)", "{bad}");
        assert!(
            out.warning
                .as_deref()
                .is_some_and(|w| w.contains("corrupt")),
            "{bad}"
        );
        let aside: Vec<String> = names(dir.path())
            .into_iter()
            .filter(|n| n.starts_with(&format!("{TODO_FILE}.corrupt-")))
            .collect();
        assert_eq!(aside.len(), 1, "{bad}");
        assert_eq!(fs::read_to_string(dir.path().join(&aside[0])).unwrap(), bad);
    }
}

#[test]
fn historical_completed_tasks_without_evidence_stay_readable() {
    let (_dir, store) = setup();
    fs::write(
        store.path(),
        r#"{"tasks": [{"id": 1, "subject": "old", "status": "completed"}], "nextId": 2, "plan": {"id": "p", "title": "T"}}"#,
    )
    .unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded.warning, None);
    assert!(loaded.saved);
    assert_eq!(
        run(&store, json!({"action": "list"})).content,
        "[completed] #1 old"
    );
}

#[test]
fn concurrent_writers_never_lose_an_update() {
    const PER_THREAD: usize = 25;
    let (_dir, store) = setup();
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = ["left", "right"]
        .into_iter()
        .map(|name| {
            let store = store.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for i in 0..PER_THREAD {
                    let out = run_call(
                        &store,
                        &json!({"action": "create", "subject": format!("{name} {i}")}),
                    )
                    .unwrap();
                    assert!(out.ok);
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let state = store.load().unwrap().state;
    assert_eq!(state.tasks.len(), 2 * PER_THREAD);
    let ids: BTreeSet<i64> = state.tasks.iter().map(|t| t.id).collect();
    assert_eq!(ids, (1..=(2 * PER_THREAD) as i64).collect());
    assert_eq!(state.next_id, 2 * PER_THREAD as i64 + 1);
}

#[test]
fn restore_is_a_list_call_and_its_exact_result() {
    let (_dir, store) = setup();
    assert!(restore(&store.load().unwrap()).messages.is_empty());
    run(&store, json!({"action": "create", "subject": "a"}));
    let restored = restore(&store.load().unwrap());
    let [
        Message::Assistant {
            content: None,
            tool_calls,
        },
        Message::Tool {
            tool_call_id,
            name,
            content,
            is_error: false,
        },
    ] = restored.messages.as_slice()
    else {
        panic!("unexpected restore: {:?}", restored.messages);
    };
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(&tool_calls[0].id, tool_call_id);
    assert_eq!(tool_calls[0].name, "todo");
    assert_eq!(name, "todo");
    assert_eq!(tool_calls[0].arguments, RESTORE_ARGUMENTS);
    let listed = run(&store, serde_json::from_str(RESTORE_ARGUMENTS).unwrap());
    assert_eq!(content, &listed.content);
    assert_eq!(restored.details, Some(listed.details));
    // A list emptied by `clear` is still restored: the model must learn it.
    run(&store, json!({"action": "clear"}));
    let restored = restore(&store.load().unwrap());
    assert_eq!(restored.messages.len(), 2);
    assert!(
        matches!(&restored.messages[1], Message::Tool { content, .. } if content == "No tasks")
    );
    assert_eq!(store.load().unwrap().state, TodoState::empty());
}

/// A `.fido-todo.json` linked out of the workspace: every call says what it
/// is, and neither the link nor the file it points to changes.
#[test]
fn a_todo_file_linked_out_of_the_workspace_is_refused_and_its_target_kept() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("tasks.json");
    let original = br#"{"tasks": [], "nextId": 1}"#;
    fs::write(&target, original).unwrap();
    let (dir, store) = setup();
    std::os::unix::fs::symlink(&target, store.path()).unwrap();
    let expected = format!(
        "`{}` is a symlink to a path outside the workspace; Fido does not follow it: remove the link",
        store.path().display()
    );
    assert_eq!(store.load().unwrap_err().to_string(), expected);
    let created = run_call(&store, &json!({"action": "create", "subject": "a"}));
    assert_eq!(created.unwrap_err().to_string(), expected);
    assert_eq!(fs::read(&target).unwrap(), original);
    assert!(fs::symlink_metadata(store.path()).unwrap().is_symlink());
    assert_eq!(
        names(dir.path()),
        BTreeSet::from([TODO_FILE.to_owned(), STATE_DIR.to_owned()])
    );
}

/// A link that stays in the workspace is followed, as before.
#[test]
fn a_todo_file_linked_inside_the_workspace_is_read() {
    let (dir, store) = setup();
    fs::write(
        dir.path().join("tasks.json"),
        r#"{"tasks": [{"id": 1, "subject": "a", "status": "pending"}], "nextId": 2}"#,
    )
    .unwrap();
    std::os::unix::fs::symlink("tasks.json", store.path()).unwrap();
    let loaded = store.load().unwrap();
    assert_eq!(loaded.state.tasks.len(), 1);
    assert_eq!(loaded.warning, None);
}
