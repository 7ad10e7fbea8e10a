//! `fido acp`: Fido as an Agent Client Protocol agent (protocol version 1)
//! on stdio, for editors. JSON-RPC comes in on stdin and goes out on
//! stdout through the official SDK (`agent-client-protocol`); logs go to
//! stderr. Each ACP session is one Fido session in the client's `cwd`,
//! journaled as any other (its id is the journal's), driven through
//! [`engine`], the one file that touches the engine.
//!
//! Handlers answer at once or move their work to a task of its own: the
//! SDK's dispatch loop waits for each handler, and a turn asks the client
//! for permissions while it runs.

mod children;
mod commands;
mod engine;
mod fs;
mod models;
mod modes;
mod permission;
mod prompt;
mod session;
mod stdio;
mod unified;
mod updates;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    PromptRequest, SessionCapabilities, SessionInfo, SessionListCapabilities,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error, ErrorCode};
use serde_json::json;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::config::Overrides;
use engine::{ClientMcpServer, Engine, SessionStart};
use session::Session;

pub use stdio::{ProtocolPipes, claim as claim_stdio};

/// The agent's sessions, by ACP session id.
struct Server {
    overrides: Overrides,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The client advertised `subagents`: it shows each subagent as a
    /// child session.
    subagent_sessions: AtomicBool,
    /// The client advertised `fs.readTextFile`: `read_file` reads its
    /// buffers.
    read_client_files: AtomicBool,
    /// The client advertised `fs.writeTextFile`: `patch` edits its
    /// buffers.
    write_client_files: AtomicBool,
}

impl Server {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, Error> {
        self.sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| Error::new(ErrorCode::INVALID_PARAMS, format!("unknown session: {id}")))
    }

    /// `session/cancel`: a session's turn, or one subagent (a child
    /// session) alone.
    fn cancel(&self, id: &str) {
        if let Ok(session) = self.session(id) {
            session.cancel();
            return;
        }
        let parent = self.sessions().values().find(|s| s.owns_child(id)).cloned();
        match parent {
            Some(parent) => parent.cancel_child(id),
            None => {
                tracing::info!(session = %crate::text::escape(id), "session/cancel of an unknown session ignored")
            }
        }
    }
}

/// Serves the client on `pipes` until it closes them or a signal comes,
/// then interrupts every running turn and reaps every session's children.
pub async fn serve(overrides: Overrides, pipes: ProtocolPipes) -> Result<(), Error> {
    let server = Arc::new(Server {
        overrides,
        sessions: Mutex::new(HashMap::new()),
        subagent_sessions: AtomicBool::new(false),
        read_client_files: AtomicBool::new(false),
        write_client_files: AtomicBool::new(false),
    });
    let transport = ByteStreams::new(
        tokio::fs::File::from_std(pipes.output).compat_write(),
        tokio::fs::File::from_std(pipes.input).compat(),
    );
    let connection = agent(server.clone()).connect_to(transport);
    let ended = tokio::select! {
        ended = connection => ended,
        signal = termination() => {
            tracing::info!("{signal}: ending the ACP connection");
            Ok(())
        }
    };
    let sessions: Vec<_> = server.sessions().drain().map(|(_, s)| s).collect();
    for session in sessions {
        session.shutdown().await;
    }
    ended
}

/// The first SIGINT or SIGTERM (an editor that quits may send either).
async fn termination() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => "SIGINT",
        _ = terminate.recv() => "SIGTERM",
    }
}

/// The agent's handlers, one per method Fido serves; the SDK answers the
/// others with "method not found".
fn agent(
    server: Arc<Server>,
) -> agent_client_protocol::v1::Builder<Agent, impl agent_client_protocol::HandleDispatchFrom<Client>>
{
    let (init, new, load, list, prompt, cancel, mode, option) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server,
    );
    Agent
        .v1()
        .name("fido")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                let subagents = request.client_capabilities.subagents.is_some();
                init.subagent_sessions.store(subagents, Ordering::Relaxed);
                let fs = &request.client_capabilities.fs;
                init.read_client_files
                    .store(fs.read_text_file, Ordering::Relaxed);
                init.write_client_files
                    .store(fs.write_text_file, Ordering::Relaxed);
                responder.respond(initialize())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let start = SessionStart {
                    cwd: request.cwd,
                    mcp_servers: client_mcp_servers(request.mcp_servers),
                    resume: None,
                };
                tokio::spawn(open_session(new.clone(), start, responder, cx));
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                on_load(&load, request, responder, cx)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                on_list(&list, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, _cx| {
                on_prompt(&prompt, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                on_set_mode(&mode, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                on_set_config_option(&option, request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                cancel.cancel(&notification.session_id.0);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
}

/// `session/load`: refused for a session open already, else continued
/// in a task of its own.
fn on_load(
    server: &Arc<Server>,
    request: LoadSessionRequest,
    responder: Responder<LoadSessionResponse>,
    client: ConnectionTo<Client>,
) -> Result<(), Error> {
    let id = request.session_id.0.to_string();
    if server.sessions().contains_key(&id) {
        return responder.respond_with_error(Error::new(
            ErrorCode::INVALID_PARAMS,
            format!("session {id} is open already"),
        ));
    }
    let start = SessionStart {
        cwd: request.cwd,
        mcp_servers: client_mcp_servers(request.mcp_servers),
        resume: Some(id),
    };
    tokio::spawn(load_session(server.clone(), start, responder, client));
    Ok(())
}

/// `session/list` of the request's `cwd`, else of `-C`, else of the
/// current directory (read in a task of its own).
fn on_list(
    server: &Server,
    request: ListSessionsRequest,
    responder: Responder<ListSessionsResponse>,
) -> Result<(), Error> {
    let workspace = request
        .cwd
        .or_else(|| server.overrides.workspace.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    tokio::spawn(async move {
        let _ = responder.respond_with_result(list_sessions(&workspace).await);
    });
    Ok(())
}

/// `session/prompt`: the turn runs in a task of its own and answers when
/// it ends.
fn on_prompt(
    server: &Server,
    request: PromptRequest,
    responder: Responder<agent_client_protocol::v1::schema::PromptResponse>,
) -> Result<(), Error> {
    let session = match server.session(&request.session_id.0) {
        Ok(session) => session,
        Err(err) => return responder.respond_with_error(err),
    };
    let text = prompt::prompt_text(&request.prompt);
    tokio::spawn(async move {
        let _ = responder.respond_with_result(session.turn(text).await);
    });
    Ok(())
}

/// `session/set_mode`: switched in a task of its own (the sandbox is
/// rebuilt); the answer comes first, then the `current_mode_update`.
fn on_set_mode(
    server: &Server,
    request: SetSessionModeRequest,
    responder: Responder<SetSessionModeResponse>,
) -> Result<(), Error> {
    let session = match server.session(&request.session_id.0) {
        Ok(session) => session,
        Err(err) => return responder.respond_with_error(err),
    };
    tokio::spawn(async move {
        match session.switch_mode(&request.mode_id.0).await {
            Ok(mode) => {
                if responder.respond(SetSessionModeResponse::new()).is_ok() {
                    session.send(mode.update());
                }
            }
            Err(err) => {
                let _ = responder.respond_with_error(err);
            }
        }
    });
    Ok(())
}

/// `session/set_config_option` (the model): switched in a task of its
/// own, answered with every option as it is then.
fn on_set_config_option(
    server: &Server,
    request: SetSessionConfigOptionRequest,
    responder: Responder<SetSessionConfigOptionResponse>,
) -> Result<(), Error> {
    let session = match server.session(&request.session_id.0) {
        Ok(session) => session,
        Err(err) => return responder.respond_with_error(err),
    };
    tokio::spawn(async move {
        let options = session
            .set_config_option(&request.config_id.0, &request.value)
            .await;
        let _ = responder.respond_with_result(options.map(SetSessionConfigOptionResponse::new));
    });
    Ok(())
}

/// What Fido offers, and no more: sessions that load and list from the
/// journal, prompts with embedded text resources, stdio MCP servers.
fn initialize() -> InitializeResponse {
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
        .mcp_capabilities(McpCapabilities::new())
        .session_capabilities(SessionCapabilities::new().list(SessionListCapabilities::new()));
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("fido", env!("CARGO_PKG_VERSION")).title("Fido"))
}

/// The client's stdio MCP servers; HTTP and SSE ones (not advertised)
/// are left out with a log line.
fn client_mcp_servers(servers: Vec<McpServer>) -> Vec<ClientMcpServer> {
    servers
        .into_iter()
        .filter_map(|server| match server {
            McpServer::Stdio(stdio) => Some(ClientMcpServer {
                name: stdio.name,
                command: stdio.command,
                args: stdio.args,
                env: stdio.env.into_iter().map(|v| (v.name, v.value)).collect(),
            }),
            _ => {
                tracing::warn!("an MCP server that is not stdio was left out");
                None
            }
        })
        .collect()
}

/// Starts a Fido session for `session/new`; its updates start once the
/// client has its id.
async fn open_session(
    server: Arc<Server>,
    start: SessionStart,
    responder: Responder<NewSessionResponse>,
    client: ConnectionTo<Client>,
) {
    match start_session(&server, start, client).await {
        Ok((session, events)) => {
            let response = NewSessionResponse::new(session.id.clone())
                .modes(session.modes())
                .config_options(session.config_options());
            if responder.respond(response).is_ok() {
                session.send(commands::available());
                tokio::spawn(session.pump(events));
            }
        }
        Err(err) => {
            let _ = responder.respond_with_error(err);
        }
    }
}

/// Continues a journaled session for `session/load`: its history is sent
/// as updates before the answer, as ACP asks.
async fn load_session(
    server: Arc<Server>,
    start: SessionStart,
    responder: Responder<LoadSessionResponse>,
    client: ConnectionTo<Client>,
) {
    match start_session(&server, start, client).await {
        Ok((session, events)) => {
            let engine = session.engine();
            for update in updates::replay(&engine.history, &engine.workspace, &engine.tools) {
                session.send(update);
            }
            let response = LoadSessionResponse::new()
                .modes(session.modes())
                .config_options(session.config_options());
            if responder.respond(response).is_ok() {
                session.send(commands::available());
                tokio::spawn(session.pump(events));
            }
        }
        Err(err) => {
            let _ = responder.respond_with_error(err);
        }
    }
}

/// Starts the engine and registers the session under the journal's id.
async fn start_session(
    server: &Server,
    start: SessionStart,
    client: ConnectionTo<Client>,
) -> Result<(Arc<Session>, crate::protocol::event_queue::EventReceiver), Error> {
    if !start.cwd.is_absolute() {
        return Err(Error::new(
            ErrorCode::INVALID_PARAMS,
            "cwd must be an absolute path",
        ));
    }
    let resuming = start.resume.is_some();
    let files = fs::ClientFiles::offered(
        client.clone(),
        server.read_client_files.load(Ordering::Relaxed),
        server.write_client_files.load(Ordering::Relaxed),
    )
    .map(Arc::new);
    let editor = files.clone().map(|files| files as _);
    let (engine, events) = Engine::start(&server.overrides, start, editor)
        .await
        .map_err(|why| {
            let code = if resuming {
                ErrorCode::RESOURCE_NOT_FOUND
            } else {
                ErrorCode::INTERNAL_ERROR
            };
            Error::new(code, why.to_string())
        })?;
    for warning in &engine.warnings {
        tracing::warn!("{}", crate::text::escape(warning));
    }
    let id = engine.journal_id.clone().unwrap_or_else(unjournaled_id);
    if let Some(files) = &files {
        files.belong_to(&id);
    }
    let subagents = server.subagent_sessions.load(Ordering::Relaxed);
    let session = Session::new(id.clone(), engine, client, subagents);
    server.sessions().insert(id, session.clone());
    Ok((session, events))
}

/// An id for a session the journal could not hold, unique in this process.
fn unjournaled_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("unjournaled-{}-{n}", std::process::id())
}

/// `session/list`: the journaled sessions of `workspace`, newest first,
/// each titled by its first prompt, with Fido's status, turns and usage
/// in `_meta.fido`.
async fn list_sessions(workspace: &Path) -> Result<ListSessionsResponse, Error> {
    let (cwd, summaries) = engine::list_sessions(workspace)
        .await
        .map_err(|why| Error::new(ErrorCode::INTERNAL_ERROR, why.to_string()))?;
    let sessions = summaries
        .into_iter()
        .map(|summary| {
            SessionInfo::new(summary.id.clone(), cwd.clone())
                .title(summary.first_prompt.clone())
                .updated_at(summary.started_at.clone())
                .meta(updates::fido_meta(json!({
                    "status": summary.status,
                    "turns": summary.turns,
                    "usage": summary.usage,
                })))
        })
        .collect();
    Ok(ListSessionsResponse::new(sessions))
}
