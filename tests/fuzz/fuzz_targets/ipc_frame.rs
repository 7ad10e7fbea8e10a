//! The parent <-> subagent frame codec: the input is a byte stream read as
//! frames (the first byte picks parent or child frames). Reading never
//! panics; every frame read encodes to a frame that reads back equal, and
//! encoding is stable (the re-read frame encodes to the same bytes).
#![no_main]

use fido::protocol::ipc::{ChildFrame, ParentFrame};
use fido::subagent::ipc::{IpcError, MAX_CHILD_FRAME, MAX_PARENT_FRAME, encode_frame, read_frame};
use futures_util::FutureExt;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Reads one frame from a byte slice (always ready: one poll finishes it).
fn read<T: DeserializeOwned>(bytes: &mut &[u8], max: usize) -> Result<Option<T>, IpcError> {
    match read_frame(bytes, max).now_or_never() {
        Some(result) => result,
        None => panic!("read_frame on a slice did not finish in one poll"),
    }
}

fn frames<T>(mut bytes: &[u8], max: usize)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    // A handful of frames is plenty; each read consumes at least 4 bytes.
    for _ in 0..64 {
        let before = bytes.len();
        match read::<T>(&mut bytes, max) {
            Ok(None) => {
                assert_eq!(before, 0, "a clean end only between frames");
                return;
            }
            Ok(Some(frame)) => round_trip(&frame, max),
            Err(IpcError::TooLarge { len, max: limit }) => {
                assert!(len > limit);
                return;
            }
            Err(IpcError::Io(err)) => panic!("an I/O error from a slice: {err}"),
            Err(IpcError::Malformed(_) | IpcError::Truncated) => return,
        }
    }
}

fn round_trip<T>(frame: &T, max: usize)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let encoded = match encode_frame(frame) {
        Ok(encoded) => encoded,
        Err(err) => panic!("a frame read could not be encoded: {err}"),
    };
    let mut slice = encoded.as_slice();
    let again: T = match read(&mut slice, max.max(encoded.len())) {
        Ok(Some(again)) => again,
        other => panic!("an encoded frame did not read back: {other:?}"),
    };
    assert!(
        slice.is_empty(),
        "the encoding read back with bytes left over"
    );
    assert_eq!(&again, frame);
    match encode_frame(&again) {
        Ok(bytes) => assert_eq!(bytes, encoded, "encoding is not stable"),
        Err(err) => panic!("{err}"),
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((selector, bytes)) = input.split_first() else {
        return;
    };
    if selector & 1 == 0 {
        frames::<ParentFrame>(bytes, MAX_PARENT_FRAME);
    } else {
        frames::<ChildFrame>(bytes, MAX_CHILD_FRAME);
    }
});
