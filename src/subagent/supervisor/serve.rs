//! Running, then cancelling: the child is served until it sends `Final`,
//! fails, or is stopped. Its model requests go to the parent's gateway one
//! at a time, its MCP calls to the parent's servers, its lifecycle frames
//! become sanitised `subagent` events.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::protocol::ipc::{ChildFrame, ParentFrame, catalog_fingerprint};
use crate::protocol::plan::PlanSnapshot;
use crate::protocol::{EventKind, Identity, Message};
use crate::subagent::ipc::IpcError;

use super::child::ChildLink;
use super::io::*;
use super::progress::{Ending, Progress, Stage, StopReason, Stops};
use super::*;

/// MCP and browse calls of one subagent running at once.
const MAX_MCP_CALLS: usize = 16;

/// What the loop decides after an event: go on, or end the run.
type Flow = Result<(), Ending>;

/// The serve loop's state besides the child link.
struct Serving {
    /// The child's conversation while no request runs (the fork, then the
    /// fork's kept prefix and the child's tail); with the gateway while one
    /// does.
    history: Option<Vec<Message>>,
    fork_len: usize,
    /// Leading fork messages still in `history`.
    intact: usize,
    inflight: Option<tokio::task::JoinHandle<()>>,
    answers: mpsc::UnboundedSender<GatewayOutcome>,
    frames_seen: u32,
    requests: u32,
    last_lifecycle: Option<(SubagentPhase, Instant)>,
    /// What the child does now, for the usage events between phases.
    phase_now: SubagentPhase,
    /// The child's MCP and browse calls, run here and ended with the run.
    mcp_cancel: CancellationToken,
    mcp_calls: Vec<tokio::task::JoinHandle<()>>,
}

impl ChildLink {
    /// Serves the child until it sends `Final`, fails, or is stopped; a
    /// stop sends `Cancel` and gives the child the grace to answer.
    pub(super) async fn serve(
        &mut self,
        history: Vec<Message>,
        progress: &mut Progress<'_>,
        stops: &Stops<'_>,
    ) -> Ending {
        progress.enter(Stage::Running);
        let grace_period = progress.shared().settings.limits.grace;
        let deadline = tokio::time::sleep_until(stops.deadline);
        tokio::pin!(deadline);
        let grace = tokio::time::sleep(Duration::MAX / 4);
        tokio::pin!(grace);
        let (answers, mut done) = mpsc::unbounded_channel::<GatewayOutcome>();
        let mut serving = Serving::new(history, answers);
        let _mcp_guard = serving.mcp_cancel.clone().drop_guard();
        let budget_spent = &progress.shared().session_budget_spent;
        let ending = loop {
            // A stop asks the child for its partial; the grace starts then.
            let stop = tokio::select! {
                frame = self.frames.recv() => match self.on_frame(frame, &mut serving, progress).await {
                    Ok(()) => None,
                    Err(ending) => break ending,
                },
                Some(outcome) = done.recv() => match self.on_answer(outcome, &mut serving, progress) {
                    Ok(stop) => stop,
                    Err(ending) => break ending,
                },
                _ = &mut deadline, if progress.stop.is_none() => Some(StopReason::Timeout),
                _ = budget_spent.cancelled(), if progress.stop.is_none() => Some(StopReason::Budget),
                _ = stops.cancel.cancelled(), if progress.stop.is_none() => Some(StopReason::Cancelled),
                _ = &mut grace => break Ending::failed(DelegateErrorCode::Timeout, "no partial result within the grace period"),
                _ = stops.turn_cancel.cancelled() => {
                    // The whole turn is interrupted: nobody waits for a partial.
                    progress.stopped(StopReason::Cancelled);
                    break Ending::failed(DelegateErrorCode::Cancelled, "the turn was interrupted");
                }
                _ = stops.kill_now.cancelled() => {
                    progress.stopped(StopReason::Cancelled);
                    break Ending::failed(DelegateErrorCode::Cancelled, "Fido is shutting down");
                }
                status = self.group.wait(), if self.exit.is_none() => {
                    self.exit = status.ok();
                    break self.after_exit().await;
                }
            };
            if let Some(reason) = stop {
                if let Err(ending) = self.ask_for_partial(reason, progress) {
                    break ending;
                }
                grace
                    .as_mut()
                    .reset(tokio::time::Instant::now() + grace_period);
            }
        };
        serving.end();
        ending
    }

    /// Cancelling: `Cancel` with the reason, which the child answers with
    /// what it has.
    fn ask_for_partial(&self, reason: StopReason, progress: &mut Progress<'_>) -> Flow {
        progress.stopped(reason);
        progress.enter(Stage::Cancelling(reason));
        let cancel = ParentFrame::Cancel {
            reason: reason.code().as_str().into(),
        };
        self.write(Outgoing::Frame(cancel))
    }

    /// Queues a frame; a child that stopped reading its socket fails.
    fn write(&self, outgoing: Outgoing) -> Flow {
        match self.writer.send(outgoing) {
            Ok(()) | Err(Refused::Closed) => Ok(()),
            Err(Refused::Backlog) => Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!(
                    "the subagent stopped reading its socket ({WRITER_QUEUE} frames are waiting for it)"
                ),
            )),
        }
    }

    /// The child exited; a `Final` it sent may still be queued, behind
    /// the lifecycle frames it sent before (the exit and the frames race
    /// to this loop: under load either may come first).
    async fn after_exit(&mut self) -> Ending {
        let deadline = tokio::time::Instant::now() + FINAL_AFTER_EXIT;
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, self.frames.recv()).await
        {
            if let ChildFrame::Final { status, text } = frame {
                return Ending::Final { status, text };
            }
        }
        let status = describe_exit(self.exit);
        Ending::failed(
            DelegateErrorCode::SubagentCrashed,
            format!("the subagent exited without a result ({status})"),
        )
    }

    async fn on_frame(
        &mut self,
        frame: Option<Result<ChildFrame, IpcError>>,
        serving: &mut Serving,
        progress: &mut Progress<'_>,
    ) -> Flow {
        serving.frames_seen += 1;
        if serving.frames_seen > MAX_FRAMES {
            return Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!("the subagent flooded the parent with more than {MAX_FRAMES} frames"),
            ));
        }
        match frame {
            Some(Ok(ChildFrame::ModelRequest {
                request_id,
                fork_prefix,
                tail,
                catalog,
                max_output_tokens,
                tool_choice,
            })) => {
                let request = ChildRequest {
                    request_id,
                    fork_prefix,
                    tail,
                    catalog,
                    shape: RequestShape {
                        max_output_tokens,
                        tool_choice,
                    },
                };
                self.on_model_request(request, serving, progress)
            }
            Some(Ok(ChildFrame::Lifecycle { phase, detail })) => {
                serving.on_lifecycle(&phase, &detail, progress);
                Ok(())
            }
            Some(Ok(ChildFrame::Plan { plan })) => {
                show_plan(plan, progress);
                Ok(())
            }
            Some(Ok(ChildFrame::Final { status, text })) => Err(Ending::Final { status, text }),
            Some(Ok(ChildFrame::McpCall {
                call_id,
                tool,
                arguments,
            })) => serving.on_mcp_call(call_id, tool, arguments, &self.writer, progress),
            Some(Ok(ChildFrame::Browse {
                call_id,
                url,
                max_bytes,
            })) => {
                let request = crate::tools::web::BrowseRequest {
                    url,
                    // The child is not trusted with the bound.
                    max_bytes: max_bytes.clamp(1, crate::tools::browse_url::HARD_MAX_BYTES),
                };
                serving.on_browse(call_id, request, &self.writer, progress)
            }
            Some(Ok(other @ ChildFrame::Hello { .. })) => Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!(
                    "out-of-order {} frame from the subagent",
                    frame_name(&other)
                ),
            )),
            Some(Err(e)) => Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!("bad frame from the subagent: {e}"),
            )),
            None => {
                let status = self.reap_quickly().await;
                Err(Ending::failed(
                    DelegateErrorCode::SubagentCrashed,
                    format!("the subagent exited without a result ({status})"),
                ))
            }
        }
    }

    /// A model request: checked against the fork and the budget of steps
    /// (the gateway holds the credentials, so it keeps the budget: the
    /// child's own loop is not trusted), then sent to the gateway.
    fn on_model_request(
        &self,
        request: ChildRequest,
        serving: &mut Serving,
        progress: &mut Progress<'_>,
    ) -> Flow {
        let (job, shared) = (progress.job, progress.shared());
        serving.check_request(&request, &shared.catalog)?;
        if progress.stop.is_some() {
            let refusal = ParentFrame::ModelError {
                request_id: request.request_id,
                message: "cancelled".into(),
            };
            return self.write(Outgoing::Frame(refusal));
        }
        serving.check_steps(job)?;
        serving.requests += 1;
        serving.phase_now = SubagentPhase::Reasoning;
        progress.emit(
            SubagentPhase::Reasoning,
            &format!("model request {}", serving.requests),
        );
        // The child's conversation is the fork's first `fork_prefix`
        // messages and its tail: rebuilt in place, so a large fork is never
        // copied again.
        let Some(mut messages) = serving.history.take() else {
            return Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                "the subagent sent a model request while another was running",
            ));
        };
        messages.truncate(request.fork_prefix);
        serving.intact = request.fork_prefix;
        messages.extend(request.tail);
        let requester = Requester {
            identity: Identity::subagent(job.agent_id.clone()),
            model: job.model.clone(),
            shape: request.shape,
            events: shared.events.clone(),
            hold_text_calls: shared.settings.tool_call_fallback,
        };
        serving.inflight = Some(tokio::spawn(gateway(
            request.request_id,
            requester,
            messages,
            shared.provider.clone(),
            shared.catalog.clone(),
            serving.answers.clone(),
        )));
        Ok(())
    }

    /// The gateway answered: the answer goes to the child, the usage is
    /// counted, and a crossed budget is a stop.
    fn on_answer(
        &self,
        outcome: GatewayOutcome,
        serving: &mut Serving,
        progress: &mut Progress<'_>,
    ) -> Result<Option<StopReason>, Ending> {
        // Written from here, after the request is marked done, so the
        // child's next request can never arrive while this one still
        // counts as running.
        serving.inflight = None;
        serving.history = Some(outcome.messages);
        self.write(Outgoing::Frame(outcome.frame))?;
        let Some(usage) = outcome.usage else {
            return Ok(None);
        };
        let spent = progress.charge(&usage);
        let job = progress.job;
        let tokens = progress.usage.budget_tokens();
        progress.emit(serving.phase_now.clone(), &format!("{tokens} tokens"));
        progress.shared().events.emit(EventKind::Usage {
            identity: Identity::subagent(job.agent_id.clone()),
            prompt_tokens: usage.prompt_tokens,
            cached_tokens: usage.cached_tokens,
            completion_tokens: usage.completion_tokens,
        });
        if spent && progress.stop.is_none() {
            info!(agent_id = %job.agent_id, tokens, "the subagent crossed its token budget; cancelling it");
            return Ok(Some(StopReason::Budget));
        }
        Ok(None)
    }
}

/// A `ModelRequest` frame's fields.
struct ChildRequest {
    request_id: u64,
    fork_prefix: usize,
    tail: Vec<Message>,
    catalog: String,
    shape: RequestShape,
}

impl Serving {
    fn new(history: Vec<Message>, answers: mpsc::UnboundedSender<GatewayOutcome>) -> Serving {
        let fork_len = history.len();
        Serving {
            history: Some(history),
            fork_len,
            intact: fork_len,
            inflight: None,
            answers,
            frames_seen: 0,
            requests: 0,
            last_lifecycle: None,
            phase_now: SubagentPhase::Reasoning,
            mcp_cancel: CancellationToken::new(),
            mcp_calls: Vec::new(),
        }
    }

    /// A request the parent must refuse ends the run.
    fn check_request(&self, request: &ChildRequest, catalog: &crate::tools::ToolCatalog) -> Flow {
        let fail = |message: String| Err(Ending::failed(DelegateErrorCode::ProtocolError, message));
        let ours = catalog_fingerprint(catalog.specs());
        let (prefix, fork_len, intact) = (request.fork_prefix, self.fork_len, self.intact);
        // A request without a fingerprint is refused too: a missing field
        // must not skip the one check that the child advertises our tools.
        if request.catalog.is_empty() {
            return fail(format!(
                "the subagent sent no tool catalog fingerprint; the parent's is {ours}"
            ));
        }
        if request.catalog != ours {
            return fail(format!(
                "the subagent's tool catalog ({}) is not the parent's ({ours}): its requests would not share the cached prefix",
                request.catalog
            ));
        }
        if self.inflight.is_some() {
            return fail("the subagent sent a model request while another was running".into());
        }
        if prefix > fork_len {
            return fail(format!(
                "the subagent referred to {prefix} fork messages; the fork has {fork_len}"
            ));
        }
        if prefix > intact {
            return fail(format!(
                "the subagent referred to {prefix} fork messages after it had dropped all but {intact}"
            ));
        }
        Ok(())
    }

    /// More requests than `max_steps` end the run.
    fn check_steps(&self, job: &Job) -> Flow {
        if self.requests >= job.max_steps {
            return Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!(
                    "the subagent asked for more than {} model requests (max_steps)",
                    job.max_steps
                ),
            ));
        }
        Ok(())
    }

    /// A lifecycle frame becomes a sanitised event, at most one per phase
    /// change or per interval.
    fn on_lifecycle(&mut self, phase: &SubagentPhase, detail: &str, progress: &Progress<'_>) {
        let phase = sanitize_phase(phase.as_str());
        self.phase_now.clone_from(&phase);
        let due = match &self.last_lifecycle {
            Some((last, at)) => *last != phase || at.elapsed() >= LIFECYCLE_INTERVAL,
            None => true,
        };
        if due {
            progress.emit(phase.clone(), detail);
            self.last_lifecycle = Some((phase, Instant::now()));
        }
    }

    /// A child's `browse_url`: run here, counted with its MCP calls.
    fn on_browse(
        &mut self,
        call_id: u64,
        request: crate::tools::web::BrowseRequest,
        writer: &Writer,
        progress: &Progress<'_>,
    ) -> Flow {
        self.check_proxied_calls()?;
        let web = progress.shared().web.clone();
        let call = browse_call(
            web,
            call_id,
            request,
            writer.clone(),
            self.mcp_cancel.clone(),
        );
        self.mcp_calls.push(tokio::spawn(call));
        Ok(())
    }

    /// Too many MCP and browse calls at once end the run.
    fn check_proxied_calls(&mut self) -> Flow {
        self.mcp_calls.retain(|call| !call.is_finished());
        if self.mcp_calls.len() >= MAX_MCP_CALLS {
            return Err(Ending::failed(
                DelegateErrorCode::ProtocolError,
                format!("the subagent ran more than {MAX_MCP_CALLS} MCP or browse calls at once"),
            ));
        }
        Ok(())
    }

    fn on_mcp_call(
        &mut self,
        call_id: u64,
        tool: String,
        arguments: String,
        writer: &Writer,
        progress: &Progress<'_>,
    ) -> Flow {
        self.check_proxied_calls()?;
        let catalog = progress.shared().catalog.clone();
        let call = mcp_call(
            catalog,
            call_id,
            tool,
            arguments,
            writer.clone(),
            self.mcp_cancel.clone(),
        );
        self.mcp_calls.push(tokio::spawn(call));
        Ok(())
    }

    /// Ends what the run still has running.
    fn end(self) {
        if let Some(task) = self.inflight {
            task.abort();
        }
        for call in self.mcp_calls {
            call.abort();
        }
    }
}

/// Bytes of a subagent's own plan that the parent passes on at most.
const MAX_CHILD_PLAN_BYTES: usize = 64 * 1024;

/// A subagent's own plan (kept in its memory), shown under its id:
/// bounded, since the child is not trusted with its size; a todo list
/// goes without the raw arguments of the call that made it.
fn show_plan(plan: PlanSnapshot, progress: &Progress<'_>) {
    let plan = match plan {
        PlanSnapshot::Todo(mut todo) => {
            todo.params = serde_json::Value::Object(Default::default());
            PlanSnapshot::Todo(todo)
        }
        state @ PlanSnapshot::UpdatePlan(_) => state,
    };
    let size = serde_json::to_vec(&plan).map_or(usize::MAX, |bytes| bytes.len());
    let agent_id = progress.job.agent_id.clone();
    if size > MAX_CHILD_PLAN_BYTES {
        warn!(%agent_id, size, "a subagent's plan over {MAX_CHILD_PLAN_BYTES} bytes; not shown");
        return;
    }
    progress
        .shared()
        .events
        .emit(EventKind::SubagentPlan { agent_id, plan });
}
