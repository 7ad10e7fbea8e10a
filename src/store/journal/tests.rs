use super::*;
use crate::protocol::{Message, ToolCall, TurnStatus};

fn info() -> SessionInfo {
    SessionInfo {
        workspace: "/w".into(),
        provider: "script".into(),
        model: "m".into(),
    }
}

fn conversation() -> Vec<Message> {
    vec![
        Message::System {
            content: "system".into(),
        },
        Message::user("read the parser"),
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"src/lib.rs"}"#.into(),
            }],
        },
        Message::Tool {
            tool_call_id: "c1".into(),
            name: "read_file".into(),
            content: "fn main() {}\n".into(),
            is_error: false,
        },
    ]
}

/// A dropped journal's writer thread closes the file (and its lock) as
/// it ends, a moment later.
fn wait_released(path: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while is_running(path) {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock outlived the journal"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn read(path: &Path) -> Replayed {
    replay("t", &fs::read(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn steps_are_appended_and_replay_to_the_same_messages() {
    let dir = tempfile::tempdir().unwrap();
    let journal = tokio::task::block_in_place(|| create(dir.path(), &info(), None)).unwrap();
    let messages = conversation();
    journal.record(0, &messages[..2]).await;
    journal
        .turn_ended(
            0,
            &messages,
            1,
            TurnStatus::Completed,
            UsageTotals::default(),
        )
        .await;
    let text = fs::read_to_string(journal.path()).unwrap();
    let types: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
        .collect();
    assert_eq!(
        types,
        [
            "\"session\"",
            "\"message\"",
            "\"message\"",
            "\"message\"",
            "\"message\"",
            "\"turn\""
        ],
        "only what was added since the last step is written"
    );
    let replayed = read(journal.path());
    assert_eq!(replayed.messages, messages);
    assert_eq!(replayed.turns, 1);
    assert_eq!(replayed.id, journal.id());
    assert!(!replayed.ended);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_history_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let journal = tokio::task::block_in_place(|| create(dir.path(), &info(), None)).unwrap();
    let messages = conversation();
    journal.record(0, &messages).await;
    let compacted = vec![messages[0].clone(), Message::user("summary")];
    journal.record(1, &compacted).await;
    journal.record(1, &compacted).await;
    let text = fs::read_to_string(journal.path()).unwrap();
    assert_eq!(text.matches("\"type\":\"history\"").count(), 1);
    assert_eq!(read(journal.path()).messages, compacted);
}

#[tokio::test(flavor = "multi_thread")]
async fn resume_drops_a_torn_line_and_appends_after_the_last_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let journal = tokio::task::block_in_place(|| create(dir.path(), &info(), None)).unwrap();
    let messages = conversation();
    journal.record(0, &messages).await;
    let path = journal.path().to_path_buf();
    let id = journal.id().to_string();
    drop(journal);
    wait_released(&path);
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    io::Write::write_all(&mut file, br#"{"type":"message","message":{"role":"us"#).unwrap();

    let (journal, replayed) =
        tokio::task::block_in_place(|| resume(dir.path(), Pick::Id(&id[..10]))).unwrap();
    assert_eq!(replayed.messages, messages);
    assert!(
        replayed.note.as_deref().unwrap().contains("torn line 6"),
        "{:?}",
        replayed.note
    );
    let mut more = messages.clone();
    more.push(Message::user("next"));
    journal.record(0, &more).await;
    let again = read(&path);
    assert_eq!(again.messages, more, "the torn bytes are gone, not merged");
    assert!(again.note.is_none());
}

#[test]
fn a_corrupt_line_in_the_middle_is_an_error_naming_it() {
    let header = r#"{"type":"session","version":1,"id":"x","started_at":"t","workspace":"/w","provider":"p","model":"m"}"#;
    let system = r#"{"type":"message","message":{"role":"system","content":"s"}}"#;
    let text = format!("{header}\n{system}\nnot json\n{system}\n");
    let err = replay("x", text.as_bytes()).unwrap_err();
    assert!(matches!(err, ReplayError::Corrupt { line: 3, .. }), "{err}");
    assert!(err.to_string().contains("corrupt at line 3"), "{err}");
    let err = replay("x", system.as_bytes()).unwrap_err();
    assert!(
        matches!(err, ReplayError::HeaderNotFirst { line: 1, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the journal of session x does not start with a session header (line 1)"
    );
    let future = header.replace("\"version\":1", "\"version\":99");
    let err = replay("x", format!("{future}\n{system}\n").as_bytes()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the journal of session x has format version 99; this Fido reads up to 1"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_session_is_listed_as_running_and_cannot_be_resumed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let live = tokio::task::block_in_place(|| create(dir.path(), &info(), None)).unwrap();
    live.record(0, &conversation()).await;
    let done = tokio::task::block_in_place(|| create(dir.path(), &info(), None)).unwrap();
    done.record(0, &conversation()[..2]).await;
    done.close().await;
    let done_id = done.id().to_string();

    let err = tokio::task::block_in_place(|| resume(dir.path(), Pick::Id(live.id())))
        .err()
        .unwrap();
    assert!(matches!(err, JournalError::InUse { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "session {} is in use by another Fido process; end that one first",
            live.id()
        )
    );
    let last = tokio::task::block_in_place(|| find(dir.path(), Pick::Last)).unwrap();
    assert_eq!(id_of(&last), done_id, "--last skips the running session");

    let listed = tokio::task::block_in_place(|| list(dir.path())).unwrap();
    let status = |id: &str| {
        listed
            .iter()
            .find(|s| s.id == id)
            .map(|s| s.status)
            .unwrap()
    };
    assert_eq!(status(live.id()), SessionStatus::Running);
    assert_eq!(status(&done_id), SessionStatus::Ended);
    assert!(listed.iter().all(|s| s.first_prompt == "read the parser"));
    let live_path = live.path().to_path_buf();
    drop(live);
    // The writer thread closes the file (and its lock) as it ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while is_running(&live_path) {
        assert!(
            std::time::Instant::now() < deadline,
            "the lock outlived the journal"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let listed = tokio::task::block_in_place(|| list(dir.path())).unwrap();
    assert!(
        listed
            .iter()
            .any(|s| s.status == SessionStatus::Interrupted),
        "a session whose process is gone without `ended`: {listed:?}"
    );
}

#[test]
fn ids_are_checked_and_prefixes_must_be_unique() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = super::dir(dir.path());
    fs::create_dir_all(&sessions).unwrap();
    for name in ["20261201T100000-aaaa", "20261201T100000-aaab"] {
        fs::write(sessions.join(format!("{name}.jsonl")), "").unwrap();
    }
    let refused = |id| find(dir.path(), Pick::Id(id)).unwrap_err().to_string();
    assert_eq!(refused("../x"), r#""../x" is not a session id"#);
    assert_eq!(
        refused("2026"),
        "2026 matches 2 sessions; give more of the id"
    );
    assert_eq!(
        refused("nope"),
        "no session nope in this workspace (`fido sessions` lists them)"
    );
    assert!(find(dir.path(), Pick::Id("20261201T100000-aaab")).is_ok());
}

#[test]
fn prune_removes_only_old_journals() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = super::dir(dir.path());
    fs::create_dir_all(&sessions).unwrap();
    let old = sessions.join("old.jsonl");
    let new = sessions.join("new.jsonl");
    fs::write(&old, "").unwrap();
    fs::write(&new, "").unwrap();
    let long_ago = SystemTime::now() - Duration::from_secs(40 * 24 * 3600);
    File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    assert_eq!(prune(dir.path(), 30).unwrap(), 1);
    assert!(!old.exists());
    assert!(new.exists());
}
