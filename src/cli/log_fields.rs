//! How a log line writes its fields: every value escaped (no control
//! character reaches the terminal or the log file, no value starts a line
//! of its own) and capped, since values quote the model's and the
//! repository's text (5 MB of invalid tool-call arguments are one warning).

use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::debug_fn;

/// Longest message a log line shows, in characters.
const MESSAGE_CHARS: usize = 1000;
/// Longest value of any other field, in characters: a backstop above the
/// 200 that a site quoting the model caps at itself.
const VALUE_CHARS: usize = 300;

/// The field formatter of every log Fido writes.
pub fn escaped() -> impl for<'writer> FormatFields<'writer> + 'static {
    debug_fn(|writer, field, value| {
        let value = format!("{value:?}");
        if field.name() == "message" {
            write!(writer, "{}", crate::text::for_log(&value, MESSAGE_CHARS))
        } else {
            let value = crate::text::for_log(&value, VALUE_CHARS);
            write!(writer, "{field}={value}")
        }
    })
    .delimited(" ")
}
