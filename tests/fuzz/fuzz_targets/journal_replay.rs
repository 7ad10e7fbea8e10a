//! The session journal loader: any bytes replay to a session or an `Err`
//! naming the problem, never a panic. A replayed session starts with a
//! system prompt, and `valid_len` (where appending goes on) is honest: the
//! journal cut there replays to the same session, with no torn-line note.
#![no_main]

use fido::protocol::Message;
use fido::store::journal::replay;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let replayed = match replay("fuzz", bytes) {
        Ok(replayed) => replayed,
        Err(message) => {
            assert!(
                message.to_string().contains("fuzz"),
                "an error that does not name the session"
            );
            return;
        }
    };
    assert!(matches!(
        replayed.messages.first(),
        Some(Message::System { .. })
    ));
    let Ok(valid_len) = usize::try_from(replayed.valid_len) else {
        panic!("valid_len past usize");
    };
    assert!(valid_len <= bytes.len());
    assert_eq!(replayed.note.is_some(), valid_len < bytes.len());
    let cut = match replay("fuzz", &bytes[..valid_len]) {
        Ok(cut) => cut,
        Err(message) => panic!("the journal cut at valid_len does not replay: {message}"),
    };
    assert_eq!(cut.note, None);
    assert_eq!(cut.valid_len, replayed.valid_len);
    let mut expected = replayed;
    expected.note = None;
    assert_eq!(cut, expected);
});
