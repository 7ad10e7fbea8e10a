//! The run's plumbing: the model gateway task, the frame reader and writer
//! tasks, the stderr logger and small helpers.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;

use interprocess::local_socket::tokio::Stream;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use crate::protocol::ipc::{ChildFrame, ParentFrame};
use crate::protocol::{Identity, Message};
use crate::provider::gateway::Gateway;
use crate::provider::{ChatRequest, ProviderNotice, ToolChoice};
use crate::subagent::ipc::{IpcError, MAX_CHILD_FRAME, read_frame, write_encoded, write_frame};
use crate::text;
use crate::tools::ToolCatalog;

use super::*;

/// What a gateway task reports back to the run loop: the frame that answers
/// the request, and its usage.
pub(super) struct GatewayOutcome {
    pub(super) frame: ParentFrame,
    /// The request's messages, handed back for the next request.
    pub(super) messages: Vec<Message>,
    pub(super) usage: Option<crate::protocol::Usage>,
}

/// Who a child's model request is for: its identity (for usage), the
/// model its profile names, if any, what the child's loop asked of the
/// answer, and where its text goes as it streams.
pub(super) struct Requester {
    pub identity: Identity,
    pub model: Option<String>,
    pub shape: RequestShape,
    pub events: EventSink,
    /// Calls written into the text are run (`tool_call_fallback`): its
    /// streamed words hold them back, as the parent's own do.
    pub hold_text_calls: bool,
}

/// What the child's loop asked of one answer: its output cap (from the
/// window) and whether it may call tools. Both only narrow the request.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestShape {
    pub max_output_tokens: Option<u32>,
    pub tool_choice: ToolChoice,
}

/// Performs one model request for the child with the parent's provider;
/// the answer goes back to the run loop, which writes it. Nothing is
/// streamed to the child (it shows no text, so chunks would only cost it
/// a frame each); its text and reasoning stream to the parent's front
/// ends as live-only events ([`stream_notices`]).
pub(super) async fn gateway(
    request_id: u64,
    requester: Requester,
    messages: Vec<Message>,
    provider: Arc<Gateway>,
    catalog: Arc<ToolCatalog>,
    done: mpsc::UnboundedSender<GatewayOutcome>,
) {
    let Requester {
        identity,
        model,
        shape,
        events,
        hold_text_calls,
    } = requester;
    let words = ChildWords::new(&identity, events, hold_text_calls);
    let notices = |notice| words.notice(notice);
    let request = ChatRequest {
        messages: &messages,
        tools: catalog.specs(),
        // A cap only ever lowers the provider's own max_output_tokens; a
        // zero from the (untrusted) child asks for nothing and is ignored.
        max_output_tokens: shape.max_output_tokens.filter(|&cap| cap > 0),
        tool_choice: shape.tool_choice,
    };
    let completion = provider
        .complete_with(&identity, model.as_deref(), request, &notices)
        .await;
    if let Ok(completion) = &completion {
        words.answered(&completion.message, catalog.specs());
    }
    let (frame, usage) = match completion {
        Ok(completion) => (
            ParentFrame::ModelDone {
                request_id,
                message: completion.message,
                finish_reason: completion.finish_reason,
                usage: completion.usage,
            },
            Some(completion.usage),
        ),
        Err(err) => (
            ParentFrame::ModelError {
                request_id,
                message: err.to_string(),
            },
            None,
        ),
    };
    let _ = done.send(GatewayOutcome {
        frame,
        messages,
        usage,
    });
}

/// What the parent's front ends see of a child's answer as it streams:
/// its text and reasoning fragments, under its agent id. With the
/// fallback, its text is held from where a call written into it could
/// start, and the whole answer then says what of it was text.
struct ChildWords {
    agent_id: String,
    events: EventSink,
    text: std::sync::Mutex<crate::agent::streamed_text::StreamedText>,
}

impl ChildWords {
    fn new(identity: &Identity, events: EventSink, hold_text_calls: bool) -> ChildWords {
        ChildWords {
            agent_id: identity.label().to_string(),
            events,
            text: std::sync::Mutex::new(crate::agent::streamed_text::StreamedText::new(
                hold_text_calls,
            )),
        }
    }

    fn notice(&self, notice: ProviderNotice) {
        match notice {
            ProviderNotice::TextDelta(fragment) => {
                let sendable = self.with_text(|text| text.fragment(&fragment));
                self.said(sendable);
            }
            ProviderNotice::ReasoningDelta(text) => {
                self.events.emit(EventKind::SubagentReasoningDelta {
                    agent_id: self.agent_id.clone(),
                    text,
                })
            }
            ProviderNotice::ToolCallStarted { .. } | ProviderNotice::Retrying { .. } => {}
        }
    }

    /// The answer is whole: what was held of its text and is text goes out.
    fn answered(&self, message: &Message, tools: &[crate::protocol::ToolSpec]) {
        let Message::Assistant {
            content,
            tool_calls,
            ..
        } = message
        else {
            return;
        };
        let content = content.as_deref().unwrap_or_default();
        let rest = self.with_text(|text| text.answer(content, !tool_calls.is_empty(), tools));
        self.said(rest);
    }

    fn with_text(
        &self,
        f: impl FnOnce(&mut crate::agent::streamed_text::StreamedText) -> String,
    ) -> String {
        // A poisoned lock only means an earlier notice panicked: its text
        // is still whole.
        let mut text = self.text.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut text)
    }

    fn said(&self, text: String) {
        if !text.is_empty() {
            self.events.emit(EventKind::SubagentTextDelta {
                agent_id: self.agent_id.clone(),
                text,
            });
        }
    }
}

/// Runs a subagent's MCP call with the parent's connections (the hub
/// refuses the tools of servers that are not read-only) and writes the
/// result back to the child.
pub(super) async fn mcp_call(
    catalog: Arc<ToolCatalog>,
    call_id: u64,
    tool: String,
    arguments: String,
    writer: Writer,
    cancel: tokio_util::sync::CancellationToken,
) {
    let cap = crate::tools::ToolLimits::default().bash_output_cap;
    let output = match catalog.mcp() {
        Some(hub) => hub.call_for_subagent(&tool, &arguments, &cancel, cap).await,
        None => crate::tools::ToolOutput::error("this session has no MCP servers"),
    };
    let result = ParentFrame::McpResult {
        call_id,
        ok: output.ok,
        content: output.content,
    };
    // Waits for room: a child that does not read its results holds its own
    // calls, and the run fails at MAX_MCP_CALLS.
    let _ = writer.0.send(Outgoing::Frame(result)).await;
}

/// Runs a subagent's `browse_url` with the parent's web access (its host
/// lists and approval policy) and writes the result back to the child.
pub(super) async fn browse_call(
    web: Option<Arc<dyn crate::tools::web::Web>>,
    call_id: u64,
    request: crate::tools::web::BrowseRequest,
    writer: Writer,
    cancel: tokio_util::sync::CancellationToken,
) {
    let output = match web {
        Some(web) => web.browse(request, &cancel).await,
        None => crate::tools::ToolOutput::error("browse_url is not available in this session"),
    };
    let result = ParentFrame::BrowseResult {
        call_id,
        ok: output.ok,
        content: output.content,
    };
    // As for MCP calls: waits for room in the child's queue.
    let _ = writer.0.send(Outgoing::Frame(result)).await;
}

/// A frame for the writer task: most are encoded there; the fork is
/// encoded once from borrowed parts by its sender.
pub(super) enum Outgoing {
    Frame(ParentFrame),
    Encoded(Vec<u8>),
}

/// Reads frames in a task of its own (a frame read is not cancel safe).
pub(super) fn spawn_reader(stream: Arc<Stream>) -> mpsc::Receiver<Result<ChildFrame, IpcError>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(async move {
        let mut receive = &*stream;
        loop {
            match read_frame::<_, ChildFrame>(&mut receive, MAX_CHILD_FRAME).await {
                Ok(Some(frame)) => {
                    if sender.send(Ok(frame)).await.is_err() {
                        return;
                    }
                }
                Ok(None) => return,
                Err(err) => {
                    let _ = sender.send(Err(err)).await;
                    return;
                }
            }
        }
    });
    receiver
}

/// Frames the writer may hold for the child. The protocol queues at most
/// the fork, one answer, one `Cancel` and an MCP result per call in flight
/// (16) at once; more means the child stopped reading its socket.
pub(super) const WRITER_QUEUE: usize = 32;

/// The queue to the writer task.
#[derive(Clone)]
pub(super) struct Writer(mpsc::Sender<Outgoing>);

/// Why a frame was not queued.
pub(super) enum Refused {
    /// The writer is gone: the socket failed, which the reader reports.
    Closed,
    /// [`WRITER_QUEUE`] frames are waiting for the child.
    Backlog,
}

impl Writer {
    /// Queues `outgoing` without waiting.
    pub(super) fn send(&self, outgoing: Outgoing) -> Result<(), Refused> {
        self.0.try_send(outgoing).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => Refused::Backlog,
            mpsc::error::TrySendError::Closed(_) => Refused::Closed,
        })
    }
}

/// Writes frames in order from a task of its own.
pub(super) fn spawn_writer(stream: Arc<Stream>) -> Writer {
    let (sender, mut receiver) = mpsc::channel::<Outgoing>(WRITER_QUEUE);
    tokio::spawn(async move {
        let mut send = &*stream;
        while let Some(outgoing) = receiver.recv().await {
            let written = match outgoing {
                Outgoing::Frame(frame) => write_frame(&mut send, &frame).await,
                Outgoing::Encoded(bytes) => write_encoded(&mut send, &bytes).await,
            };
            if let Err(err) = written {
                debug!(error = %err, "writing to the subagent failed");
                return;
            }
        }
    });
    Writer(sender)
}

/// Copies the child's stderr into the log, tagged with its id, up to a cap;
/// the rest is drained to the end so the child never blocks on a full pipe
/// (nor fails writing to a closed one). Raw bytes are read in blocks: a line
/// is kept up to [`MAX_STDERR_LINE`] bytes, so neither a line without end
/// nor bytes that are not UTF-8 can make the parent buffer without limit or
/// stop reading.
pub(super) async fn log_stderr(agent_id: String, mut stderr: tokio::process::ChildStderr) {
    let mut block = vec![0u8; 16 * 1024];
    let mut log = StderrLog::default();
    loop {
        match stderr.read(&mut block).await {
            Ok(0) => break,
            Ok(n) => {
                let mut rest = &block[..n];
                while let Some(end) = rest.iter().position(|&b| b == b'\n') {
                    log.push(&rest[..end]);
                    log.end_line(&agent_id);
                    rest = &rest[end + 1..];
                }
                log.push(rest);
            }
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => {
                debug!(agent_id = %agent_id, error = %err, "reading the subagent's stderr failed");
                break;
            }
        }
    }
    log.end_line(&agent_id);
    if log.dropped > 0 {
        warn!(agent_id = %agent_id, dropped = log.dropped, "subagent stderr was too long; the rest was dropped");
    }
}

/// Longest piece of one stderr line kept for the log.
const MAX_STDERR_LINE: usize = 500;

/// The line being read from a child's stderr, and the budget so far.
#[derive(Default)]
pub(super) struct StderrLog {
    line: Vec<u8>,
    logged: usize,
    dropped: usize,
}

impl StderrLog {
    /// Adds bytes of the current line, beyond the caps only counted.
    fn push(&mut self, bytes: &[u8]) {
        let room = if self.logged < MAX_STDERR_LOGGED {
            MAX_STDERR_LINE.saturating_sub(self.line.len())
        } else {
            0
        };
        let kept = bytes.len().min(room);
        self.line.extend_from_slice(&bytes[..kept]);
        self.dropped += bytes.len() - kept;
    }

    /// Logs the current line, if any.
    fn end_line(&mut self, agent_id: &str) {
        if self.line.is_empty() {
            return;
        }
        self.logged += self.line.len();
        let line = String::from_utf8_lossy(&self.line);
        info!(agent_id = %agent_id, "subagent stderr: {}", text::sanitize(&line, true));
        self.line.clear();
    }
}

/// A phase of the child's, as the UI may show it: a tool name or
/// `working`. Escape sequences are removed whole first (so no parameter
/// bytes are left behind), then anything but `[A-Za-z0-9_]`.
pub(super) fn sanitize_phase(phase: &str) -> SubagentPhase {
    SubagentPhase::parse(&sanitized_phase_name(phase))
}

fn sanitized_phase_name(phase: &str) -> String {
    let clean: String = text::sanitize(phase, true)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(40)
        .collect();
    if clean.is_empty() {
        "working".into()
    } else {
        clean
    }
}

pub(super) fn frame_name(frame: &ChildFrame) -> &'static str {
    match frame {
        ChildFrame::Hello { .. } => "hello",
        ChildFrame::ModelRequest { .. } => "model_request",
        ChildFrame::Lifecycle { .. } => "lifecycle",
        ChildFrame::Plan { .. } => "plan",
        ChildFrame::Final { .. } => "final",
        ChildFrame::McpCall { .. } => "mcp_call",
        ChildFrame::Browse { .. } => "browse",
    }
}

pub(super) fn describe_exit(status: Option<ExitStatus>) -> String {
    match status {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => "unknown exit".into(),
        },
        None => "still running".into(),
    }
}

#[cfg(test)]
mod tests {
    use interprocess::local_socket::tokio::prelude::*;
    use interprocess::local_socket::{GenericNamespaced, ListenerOptions, ToNsName};

    use super::*;

    /// A child that connects and never reads: the writer's queue fills
    /// and further frames are refused at once, never waited on.
    #[tokio::test]
    async fn a_writer_to_a_child_that_never_reads_refuses_past_its_queue() {
        let socket = format!("fido-writer-test-{}", std::process::id());
        let name = socket.clone().to_ns_name::<GenericNamespaced>().unwrap();
        let listener = ListenerOptions::new().name(name).create_tokio().unwrap();
        let client_name = socket.to_ns_name::<GenericNamespaced>().unwrap();
        let deaf = tokio::spawn(async move { Stream::connect(client_name).await.unwrap() });
        let stream = listener.accept().await.unwrap();
        let _deaf = deaf.await.unwrap();
        let writer = spawn_writer(Arc::new(stream));
        let megabyte = || Outgoing::Encoded(vec![0u8; 1 << 20]);
        let mut queued = 0;
        let refused = loop {
            match writer.send(megabyte()) {
                Ok(()) => queued += 1,
                Err(refused) => break refused,
            }
            // Let the writer take what it can; a socket buffer is far
            // smaller than a megabyte, so it blocks on the first.
            tokio::task::yield_now().await;
            assert!(queued <= WRITER_QUEUE + 2, "never refused");
        };
        assert!(matches!(refused, Refused::Backlog));
        assert!(queued >= WRITER_QUEUE, "refused early, at {queued}");
    }
}
