use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::*;
use crate::store::journal::replay;
use crate::store::journal::{Journal, SessionInfo, create};

fn info() -> SessionInfo {
    SessionInfo {
        workspace: "/w".into(),
        provider: "script".into(),
        model: "m".into(),
    }
}

fn system() -> Message {
    Message::System {
        content: "system".into(),
    }
}

fn new_journal(workspace: &Path) -> Journal {
    tokio::task::block_in_place(|| create(workspace, &info(), None)).unwrap()
}

fn bytes(journal: &Journal) -> Vec<u8> {
    fs::read(journal.path()).unwrap()
}

/// Marks `path` as written `age` ago, so "newest first" is not a race of
/// clocks.
fn age(path: &Path, age: Duration) {
    let when = SystemTime::now() - age;
    let file = File::options().write(true).open(path).unwrap();
    file.set_modified(when).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bookmark_replays_the_conversation_as_it_was_when_it_was_set() {
    let dir = tempfile::tempdir().unwrap();
    let journal = new_journal(dir.path());
    let first = vec![system(), Message::user("one")];
    journal.record(0, &first[..1]).await;
    // The bookmark brings the journal up to the conversation first.
    journal.bookmark(0, &first, "first").await.unwrap();
    let mut later = first.clone();
    later.push(Message::user("two"));
    journal.record(0, &later).await;

    let all = bytes(&journal);
    let at_first = replay_to_bookmark("t", &all, "first").unwrap().unwrap();
    assert_eq!(at_first.messages, first);
    let whole = replay("t", &all).unwrap();
    assert_eq!(whole.messages, later, "a bookmark adds no message");
    let names: Vec<&str> = whole.bookmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["first"]);
    let text = String::from_utf8(all).unwrap();
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
            "\"bookmark\"",
            "\"message\""
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bookmark_after_a_compaction_replays_the_compacted_history() {
    let dir = tempfile::tempdir().unwrap();
    let journal = new_journal(dir.path());
    let long = vec![system(), Message::user("a"), Message::user("b")];
    journal.record(0, &long).await;
    journal.bookmark(0, &long, "before").await.unwrap();
    let compacted = vec![system(), Message::user("summary")];
    journal.record(1, &compacted).await;
    journal.bookmark(1, &compacted, "after").await.unwrap();
    let mut more = compacted.clone();
    more.push(Message::user("c"));
    journal.record(1, &more).await;

    let all = bytes(&journal);
    let after = replay_to_bookmark("t", &all, "after").unwrap().unwrap();
    assert_eq!(after.messages, compacted);
    let before = replay_to_bookmark("t", &all, "before").unwrap().unwrap();
    assert_eq!(before.messages, long);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_or_torn_bookmark_is_not_found_and_a_torn_tail_after_one_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let journal = new_journal(dir.path());
    let messages = vec![system(), Message::user("one")];
    journal.bookmark(0, &messages, "kept").await.unwrap();
    let mut all = bytes(&journal);
    assert_eq!(replay_to_bookmark("t", &all, "nope").unwrap(), None);

    // A torn line after the bookmark does not matter to it.
    let mut torn_after = all.clone();
    torn_after.extend_from_slice(br#"{"type":"message","message":{"ro"#);
    let kept = replay_to_bookmark("t", &torn_after, "kept")
        .unwrap()
        .unwrap();
    assert_eq!(kept.messages, messages);

    // A bookmark whose own line is torn was never set.
    all.extend_from_slice(br#"{"type":"bookmark","name":"late","at":"2026"#);
    assert_eq!(replay_to_bookmark("t", &all, "late").unwrap(), None);
    assert!(replay_to_bookmark("t", &all, "kept").unwrap().is_some());
}

#[test]
fn an_old_journal_without_bookmarks_still_replays() {
    let old = concat!(
        r#"{"type":"session","version":1,"id":"x","started_at":"2026-01-01T00:00:00.000Z","workspace":"/w","provider":"p","model":"m","saved_from":"y"}"#,
        "\n",
        r#"{"type":"history","messages":[{"role":"system","content":"system"}]}"#,
        "\n",
        r#"{"type":"ended","at":"2026-01-01T00:00:01.000Z"}"#,
        "\n",
    );
    let replayed = replay("x", old.as_bytes()).unwrap();
    assert_eq!(replayed.messages, [system()]);
    assert!(replayed.bookmarks.is_empty());
    assert!(replayed.ended);
    assert_eq!(
        replay_to_bookmark("x", old.as_bytes(), "any").unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn find_takes_the_newest_session_with_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let older = new_journal(dir.path());
    older
        .bookmark(0, &[system(), Message::user("old")], "same")
        .await
        .unwrap();
    let newer = new_journal(dir.path());
    newer
        .bookmark(0, &[system(), Message::user("new")], "same")
        .await
        .unwrap();
    age(older.path(), Duration::from_secs(3600));

    let found = find(dir.path(), "same").unwrap().unwrap();
    assert_eq!(found.session, newer.id());
    assert_eq!(found.messages[1], Message::user("new"));
    assert_eq!(find(dir.path(), "other").unwrap(), None);
    assert_eq!(find(dir.path(), "not a name").unwrap(), None);

    age(newer.path(), Duration::from_secs(7200));
    let found = find(dir.path(), "same").unwrap().unwrap();
    assert_eq!(found.session, older.id());
}

#[tokio::test(flavor = "multi_thread")]
async fn names_are_checked_refused_when_taken_and_generated_unique() {
    let dir = tempfile::tempdir().unwrap();
    let journal = new_journal(dir.path());
    let path = journal.path().to_path_buf();
    let names = |requested| tokio::task::block_in_place(|| name_for(&path, requested));
    assert_eq!(names(Some("v1.2_ok-x")).unwrap(), "v1.2_ok-x");
    let too_long = "x".repeat(41);
    for bad in ["", "has space", "a/b", "ünïcode", too_long.as_str()] {
        let refused = names(Some(bad)).unwrap_err();
        assert!(
            matches!(refused, JournalError::BookmarkName(_)),
            "{bad:?}: {refused}"
        );
        assert!(
            refused.to_string().starts_with("a bookmark name is")
                || refused.to_string().starts_with("a bookmark name has"),
            "{refused}"
        );
    }
    journal.bookmark(0, &[system()], "taken").await.unwrap();
    let refused = names(Some("taken")).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "this session already has a bookmark named taken; choose another name"
    );

    let mut seen = vec!["taken".to_string()];
    for _ in 0..20 {
        let name = names(None).unwrap();
        check_name(&name).unwrap();
        assert!(!seen.contains(&name), "{name} was generated twice");
        journal.bookmark(0, &[system()], &name).await.unwrap();
        seen.push(name);
    }
}

#[test]
fn the_generated_name_falls_back_to_numbers_once_every_pair_is_taken() {
    let name = generated(|name| !name.starts_with("mark-") || name == "mark-2");
    assert_eq!(name, "mark-3");
}

#[test]
fn the_marker_is_the_start_of_the_written_record() {
    let record = JournalRecord::Bookmark {
        name: "a\"b".into(),
        at: "2026-01-01T00:00:00.000Z".into(),
    };
    let written = serde_json::to_vec(&record).unwrap();
    let marker = marker("a\"b").unwrap();
    assert!(written.starts_with(&marker));
    assert!(marker.ends_with(br#""a\"b""#));
    let mut file = Vec::new();
    file.write_all(&written).unwrap();
    assert!(contains(&file, &marker));
}
