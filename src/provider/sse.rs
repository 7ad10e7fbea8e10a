//! Incremental Server-Sent-Events decoder, shared by the HTTP providers.
//!
//! Network chunks arrive at arbitrary byte boundaries; the decoder buffers
//! bytes until a line end, so a line (or a multi-byte UTF-8 character) split
//! across chunks decodes exactly as if it had arrived whole.
//!
//! Invariants:
//! - Feeding a stream in any chunking yields the same events in the same order.
//! - Line ends are `\n`, `\r\n` or a lone `\r` (also when `\r` and `\n` arrive in
//!   different chunks).
//! - Comment lines (`:`), `id:`, `retry:` and unknown fields are ignored; a blank
//!   line dispatches the pending event if it has at least one `data:` line.
//! - Memory is bounded: one pending event (its partial line plus its data) may
//!   not exceed the limit ([`DEFAULT_EVENT_LIMIT`] unless set otherwise); past
//!   it the decoder returns [`SseError::EventTooLarge`] instead of growing.

use std::borrow::Cow;

/// Largest pending event the decoder accepts by default (16 MiB).
pub const DEFAULT_EVENT_LIMIT: usize = 16 * 1024 * 1024;

/// One dispatched event: the `event:` name, if any, and its `data:` lines
/// joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// The stream broke the decoder's limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("a single stream event grew past {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// Turns a byte stream into [`SseEvent`]s; feed it chunks as they arrive and
/// call [`SseDecoder::finish`] once the stream has ended.
#[derive(Debug)]
pub struct SseDecoder {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a UTF-8 BOM is skipped there).
    at_start: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    limit: usize,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_limit(DEFAULT_EVENT_LIMIT)
    }
}

impl SseDecoder {
    /// A decoder that refuses pending events larger than `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        SseDecoder {
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            event: None,
            data: String::new(),
            has_data: false,
            limit,
        }
    }

    /// Consumes one chunk and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.push_line_bytes(&rest[..pos])?;
            self.end_line(&mut events);
            let is_cr = rest[pos] == b'\r';
            rest = &rest[pos + 1..];
            if is_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.push_line_bytes(rest)?;
        Ok(events)
    }

    /// The stream has ended: a last unterminated line is taken as a line and
    /// a pending event is dispatched (servers that close without the final
    /// blank line lose nothing).
    pub fn finish(&mut self) -> Result<Vec<SseEvent>, SseError> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut events);
        }
        self.dispatch(&mut events);
        self.after_cr = false;
        Ok(events)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.line.len() + bytes.len() + self.data.len() > self.limit {
            self.reset();
            return Err(SseError::EventTooLarge { limit: self.limit });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn reset(&mut self) {
        self.line.clear();
        self.event = None;
        self.data.clear();
        self.has_data = false;
    }

    /// Interprets the buffered line (complete now) and clears it.
    fn end_line(&mut self, events: &mut Vec<SseEvent>) {
        let mut bytes = std::mem::take(&mut self.line);
        if self.at_start {
            self.at_start = false;
            if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
                bytes.drain(..3);
            }
        }
        if bytes.is_empty() {
            self.dispatch(events);
            return;
        }
        let line = String::from_utf8_lossy(&bytes);
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            // `id`, `retry` and anything unknown carry nothing we use.
            _ => {}
        }
        // Keep the buffer's allocation for the next line.
        bytes.clear();
        self.line = bytes;
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        if self.has_data {
            events.push(SseEvent {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.reset();
    }
}

/// The JSON text of an event with every unpaired UTF-16 surrogate escape
/// (`\ud800` without its low half, a lone `\udc80`) made `\ufffd`: JSON
/// allows them, Rust strings cannot hold them, and serde_json refuses the
/// whole event. So a lone surrogate costs one character, as invalid UTF-8
/// does, not the turn. Outside strings valid JSON has no backslash, so
/// escapes are found without tracking strings.
pub fn repair_lone_surrogates(json: &str) -> Cow<'_, str> {
    let bytes = json.as_bytes();
    let mut repaired: Option<String> = None;
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            at += 1;
            continue;
        }
        let Some(unit) = escaped_unit(bytes, at) else {
            // `\"`, `\\` and the like: the escaped character is skipped.
            at += 2;
            continue;
        };
        let lone = match unit {
            0xd800..=0xdbff => !matches!(escaped_unit(bytes, at + 6), Some(0xdc00..=0xdfff)),
            0xdc00..=0xdfff => true,
            _ => false,
        };
        if !lone {
            // A pair is passed over whole, so its low half is not lone.
            at += if (0xd800..=0xdbff).contains(&unit) {
                12
            } else {
                6
            };
            continue;
        }
        let out = repaired.get_or_insert_with(|| String::with_capacity(json.len()));
        out.push_str(&json[copied..at]);
        out.push_str("\\ufffd");
        at += 6;
        copied = at;
    }
    match repaired {
        Some(mut out) => {
            out.push_str(&json[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(json),
    }
}

/// The code unit of a `\uXXXX` escape starting at `at`, if there is one.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if escape[0] != b'\\' || escape[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(decoder.feed(chunk).unwrap());
        }
        out.extend(decoder.finish().unwrap());
        out
    }

    const SAMPLE: &str = ": keep-alive\r\n\
        event: message_start\r\n\
        data: {\"a\":\"héllo wörld ✓ 🐕\"}\r\n\
        \r\n\
        data:no-space\n\
        data: second line\n\
        id: 7\n\
        retry: 100\n\
        \n\
        garbage line without colon\n\
        data: lone cr\r\r\
        data: [DONE]\n\n";

    fn sample_events() -> Vec<SseEvent> {
        vec![
            ev(Some("message_start"), "{\"a\":\"héllo wörld ✓ 🐕\"}"),
            ev(None, "no-space\nsecond line"),
            ev(None, "lone cr"),
            ev(None, "[DONE]"),
        ]
    }

    #[test]
    fn whole_sample_decodes() {
        assert_eq!(decode_all(&[SAMPLE.as_bytes()]), sample_events());
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        for i in 0..=bytes.len() {
            assert_eq!(
                decode_all(&[&bytes[..i], &bytes[i..]]),
                sample_events(),
                "split at {i}"
            );
        }
    }

    #[test]
    fn every_double_split_gives_the_same_events() {
        let bytes = SAMPLE.as_bytes();
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                assert_eq!(
                    decode_all(&[&bytes[..i], &bytes[i..j], &bytes[j..]]),
                    sample_events(),
                    "split at {i} and {j}"
                );
            }
        }
    }

    #[test]
    fn byte_by_byte_gives_the_same_events() {
        let chunks: Vec<&[u8]> = SAMPLE.as_bytes().chunks(1).collect();
        assert_eq!(decode_all(&chunks), sample_events());
    }

    #[test]
    fn multibyte_utf8_split_across_chunks() {
        let text = "data: 🐕é\n\n".as_bytes();
        // Split inside the four-byte dog and inside the two-byte é.
        let events = decode_all(&[&text[..8], &text[8..11], &text[11..]]);
        assert_eq!(events, vec![ev(None, "🐕é")]);
    }

    #[test]
    fn crlf_split_between_chunks_is_one_line_end() {
        let events = decode_all(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
        assert_eq!(events, vec![ev(None, "a\nb")]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events = decode_all(&[b": ping\nfoo: bar\nnonsense\n\ndata: x\nbogus: y\n\n"]);
        assert_eq!(events, vec![ev(None, "x")]);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_name_does_not_leak() {
        let events = decode_all(&[b"event: ping\n\ndata: x\n\n"]);
        assert_eq!(events, vec![ev(None, "x")]);
    }

    #[test]
    fn empty_data_line_dispatches_empty_event() {
        assert_eq!(decode_all(&[b"data:\n\n"]), vec![ev(None, "")]);
    }

    #[test]
    fn unterminated_event_is_flushed_by_finish() {
        assert_eq!(decode_all(&[b"data: [DONE]"]), vec![ev(None, "[DONE]")]);
        assert_eq!(decode_all(&[b"data: x\n"]), vec![ev(None, "x")]);
    }

    #[test]
    fn leading_bom_is_skipped() {
        let events = decode_all(&[b"\xEF\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(events, vec![ev(None, "x")]);
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut decoder = SseDecoder::with_limit(16);
        assert_eq!(decoder.feed(b"data: 0123456789\n").unwrap(), vec![]);
        assert_eq!(
            decoder.feed(b"data: 0123456789\n"),
            Err(SseError::EventTooLarge { limit: 16 })
        );
        // A line that never ends is caught too.
        let mut decoder = SseDecoder::with_limit(16);
        assert!(decoder.feed(&[b'x'; 10]).is_ok());
        assert!(decoder.feed(&[b'x'; 10]).is_err());
    }

    #[test]
    fn limit_is_per_event() {
        let mut decoder = SseDecoder::with_limit(16);
        for _ in 0..100 {
            assert_eq!(decoder.feed(b"data: 01234\n\n").unwrap().len(), 1);
        }
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        // (event, its text once repaired, whether serde_json refuses it as is)
        let cases = [
            (r#"{"t":"a\ud800b"}"#, "a\u{fffd}b", true),
            (r#"{"t":"a\udc80"}"#, "a\u{fffd}", true),
            (r#"{"t":"\uD83D\uDC15 \uDBFF"}"#, "🐕 \u{fffd}", true),
            (r#"{"t":"\ud800\ud800\udc00"}"#, "\u{fffd}𐀀", true),
            (r#"{"t":"\\ud800 \u00e9"}"#, "\\ud800 é", false),
        ];
        for (json, text, refused) in cases {
            let as_is = serde_json::from_str::<serde_json::Value>(json);
            assert_eq!(as_is.is_err(), refused, "{json}");
            let repaired = repair_lone_surrogates(json);
            let value: serde_json::Value = serde_json::from_str(&repaired).unwrap();
            assert_eq!(value["t"], text, "{json}");
        }
        assert!(matches!(
            repair_lone_surrogates(r#"{"t":"\ud83d\udc15"}"#),
            Cow::Borrowed(_)
        ));
    }
}
