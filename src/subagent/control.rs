//! The control socket: how `fido agents` and `fido cancel`, run from
//! another terminal, reach the Fido sessions of a workspace.
//!
//! Each session listens on `<workspace>/.fido-state/run/<pid>.sock` (the
//! directory 0700, the socket 0600) and serves the JSON-lines protocol of
//! [`crate::protocol::control`]. On accept the peer's credentials
//! (`SO_PEERCRED`) are read, and a peer of another uid gets a `refused`
//! reply and nothing else ([`admit`]). A socket whose process is gone is
//! stale: the server removes such files when it starts, and the client
//! removes a socket nobody listens on.
//!
//! Everything runs on tokio; the few file operations (directory, stale
//! sweep, removal) run on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::protocol::control::{
    CONTROL_VERSION, ControlReply, ControlRequest, MAX_REQUEST_BYTES, RunningSubagent,
};
use crate::workspace::RUN_DIR;

/// How long one connection may take, either side.
const IO_TIMEOUT: Duration = Duration::from_secs(3);

/// What the socket serves: the session's engine, asked through its ops.
pub trait ControlTarget: Send + Sync {
    fn running(&self) -> BoxFuture<'_, Vec<RunningSubagent>>;
    /// Cancels `agent_id` (or every running subagent); the ids asked to stop.
    fn cancel<'a>(&'a self, agent_id: Option<&'a str>) -> BoxFuture<'a, Vec<String>>;
}

pub fn run_dir(workspace: &Path) -> PathBuf {
    workspace.join(RUN_DIR)
}

/// Why a peer may not use the socket; the message is what the peer reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "refused: this Fido control socket serves only uid {owner}, and the connecting process runs as uid {peer}"
    )]
    OtherUid { owner: u32, peer: u32 },
    #[error("refused: the peer's credentials could not be read")]
    NoCredentials,
}

/// Why the control socket could not be opened (one sentence).
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("cannot open the control socket: {0}")]
    Task(#[from] tokio::task::JoinError),
    #[error("cannot create {}: {source}", .path.display())]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot restrict {}: {source}", .path.display())]
    Restrict {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on the control socket {}: {source}", .path.display())]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot set up the control socket: {0}")]
    SetUp(#[source] std::io::Error),
}

/// Why a connection's request could not be read (its `error` reply).
#[derive(Debug, thiserror::Error)]
enum RequestError {
    #[error("cannot read the request: {0}")]
    Read(#[from] std::io::Error),
    #[error("the request is longer than {MAX_REQUEST_BYTES} bytes")]
    TooLong,
    #[error("not a control request: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Why a session's socket gave no reply.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("cannot connect: {0}")]
    Connect(#[source] std::io::Error),
    #[error("cannot send the request: {0}")]
    Send(#[source] std::io::Error),
    #[error("cannot read the reply: {0}")]
    Read(#[source] std::io::Error),
    #[error("not a control reply: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("no answer within 3 s")]
    NoAnswer,
}

/// Whether a peer of uid `peer` may use the socket of `owner`.
pub fn admit(peer: Option<u32>, owner: u32) -> Result<(), Refusal> {
    match peer {
        Some(uid) if uid == owner => Ok(()),
        Some(peer) => Err(Refusal::OtherUid { owner, peer }),
        None => Err(Refusal::NoCredentials),
    }
}

/// A listening control socket; [`ControlServer::stop`] removes it.
pub struct ControlServer {
    path: PathBuf,
    task: JoinHandle<()>,
}

impl ControlServer {
    /// Binds `<workspace>/.fido-state/run/<pid>.sock` after removing stale
    /// sockets of dead processes. Errors are one sentence.
    pub async fn start(
        workspace: &Path,
        target: Arc<dyn ControlTarget>,
    ) -> Result<ControlServer, SocketError> {
        Self::start_for(workspace, target, nix::unistd::geteuid().as_raw()).await
    }

    /// [`ControlServer::start`] serving uid `owner` (tests pretend to be
    /// another uid with it).
    async fn start_for(
        workspace: &Path,
        target: Arc<dyn ControlTarget>,
        owner: u32,
    ) -> Result<ControlServer, SocketError> {
        let dir = run_dir(workspace);
        let path = dir.join(format!("{}.sock", std::process::id()));
        let bind_path = path.clone();
        let listener = tokio::task::spawn_blocking(move || bind(&dir, &bind_path)).await??;
        info!(path = %path.display(), "control socket listening");
        let task = tokio::spawn(serve(listener, target, owner));
        Ok(ControlServer { path, task })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops listening and removes the socket file.
    pub async fn stop(self) {
        self.task.abort();
        let path = self.path.clone();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_file(path)).await;
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        // Dropped without `stop` (an error path): no more connections; the
        // file is stale and the next Fido or client removes it.
        self.task.abort();
    }
}

/// Blocking: the directory (0700), the stale sweep, the socket (0600).
fn bind(dir: &Path, path: &Path) -> Result<UnixListener, SocketError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let restrict = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|source| {
            SocketError::Restrict {
                path: path.to_path_buf(),
                source,
            }
        })
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| SocketError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
    // It may have existed with wider permissions.
    restrict(dir, 0o700)?;
    remove_dead_sockets(dir);
    // Our own pid's socket is a leftover of a process before us.
    let _ = std::fs::remove_file(path);
    let listener =
        std::os::unix::net::UnixListener::bind(path).map_err(|source| SocketError::Listen {
            path: path.to_path_buf(),
            source,
        })?;
    restrict(path, 0o600)?;
    listener.set_nonblocking(true).map_err(SocketError::SetUp)?;
    UnixListener::from_std(listener).map_err(SocketError::SetUp)
}

/// The pid a socket file is named after (`<pid>.sock`).
fn socket_pid(path: &Path) -> Option<i32> {
    let name = path.file_name()?.to_str()?;
    name.strip_suffix(".sock")?.parse().ok()
}

/// Blocking: removes the sockets whose process no longer exists.
fn remove_dead_sockets(dir: &Path) {
    for path in sockets(dir) {
        let Some(pid) = socket_pid(&path) else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone && std::fs::remove_file(&path).is_ok() {
            info!(path = %path.display(), "removed the stale control socket of a dead process");
        }
    }
}

/// Blocking: the `<pid>.sock` files of `dir`, by pid.
fn sockets(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| socket_pid(path).is_some())
        .collect();
    found.sort_by_key(|path| socket_pid(path));
    found
}

async fn serve(listener: UnixListener, target: Arc<dyn ControlTarget>, owner: u32) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let target = target.clone();
                tokio::spawn(async move {
                    if tokio::time::timeout(IO_TIMEOUT, answer(stream, &*target, owner))
                        .await
                        .is_err()
                    {
                        warn!("a control connection timed out");
                    }
                });
            }
            Err(err) => {
                warn!(%err, "the control socket cannot accept; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// One connection: check the peer, read one request, write one reply.
async fn answer(mut stream: UnixStream, target: &dyn ControlTarget, owner: u32) {
    let peer = stream.peer_cred().ok().map(|cred| cred.uid());
    let reply = match admit(peer, owner) {
        Err(refusal) => {
            warn!(?peer, "refused a control connection from another uid");
            ControlReply::Refused {
                message: refusal.to_string(),
            }
        }
        Ok(()) => match read_request(&mut stream).await {
            Ok(request) => handle(request, target).await,
            Err(err) => ControlReply::Error {
                message: err.to_string(),
            },
        },
    };
    let _ = write_line(&mut stream, &reply).await;
    let _ = stream.shutdown().await;
}

/// Answers one admitted request.
pub async fn handle(request: ControlRequest, target: &dyn ControlTarget) -> ControlReply {
    let parent_pid = std::process::id();
    match request {
        ControlRequest::ListSubagents => ControlReply::Subagents {
            version: CONTROL_VERSION,
            parent_pid,
            agents: target.running().await,
        },
        ControlRequest::Cancel { agent_id } => {
            let agent_ids = target.cancel(agent_id.as_deref()).await;
            info!(?agent_ids, "cancel asked through the control socket");
            ControlReply::Cancelled {
                version: CONTROL_VERSION,
                parent_pid,
                agent_ids,
            }
        }
    }
}

async fn read_request(stream: &mut UnixStream) -> Result<ControlRequest, RequestError> {
    let mut line = String::new();
    let mut reader = BufReader::new(stream.take(MAX_REQUEST_BYTES as u64 + 1));
    reader.read_line(&mut line).await?;
    if line.len() > MAX_REQUEST_BYTES {
        return Err(RequestError::TooLong);
    }
    Ok(serde_json::from_str(line.trim_end())?)
}

async fn write_line<T: serde::Serialize>(
    stream: &mut UnixStream,
    value: &T,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line).await
}

/// What one session's socket answered.
pub struct SessionReply {
    pub socket: PathBuf,
    pub reply: Result<ControlReply, AskError>,
}

/// Sends `request` to every live session of `workspace` (a socket nobody
/// listens on is removed as stale) and collects their replies, by pid.
pub async fn ask_all(workspace: &Path, request: &ControlRequest) -> Vec<SessionReply> {
    let dir = run_dir(workspace);
    let found = tokio::task::spawn_blocking(move || sockets(&dir))
        .await
        .unwrap_or_default();
    let mut replies = Vec::new();
    for socket in found {
        match tokio::time::timeout(IO_TIMEOUT, ask(&socket, request)).await {
            Ok(Ok(reply)) => replies.push(SessionReply {
                socket,
                reply: Ok(reply),
            }),
            Ok(Err(Asked::Stale)) => {
                let path = socket.clone();
                let _ = tokio::task::spawn_blocking(move || std::fs::remove_file(path)).await;
                info!(socket = %socket.display(), "removed a stale control socket");
            }
            Ok(Err(Asked::Failed(err))) => replies.push(SessionReply {
                socket,
                reply: Err(err),
            }),
            Err(_) => replies.push(SessionReply {
                socket,
                reply: Err(AskError::NoAnswer),
            }),
        }
    }
    replies
}

enum Asked {
    /// Nobody listens: the session is gone.
    Stale,
    Failed(AskError),
}

async fn ask(socket: &Path, request: &ControlRequest) -> Result<ControlReply, Asked> {
    let mut stream = match UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
            ) =>
        {
            return Err(Asked::Stale);
        }
        Err(err) => return Err(Asked::Failed(AskError::Connect(err))),
    };
    write_line(&mut stream, request)
        .await
        .map_err(|err| Asked::Failed(AskError::Send(err)))?;
    let mut line = String::new();
    BufReader::new(stream.take(1 << 20))
        .read_line(&mut line)
        .await
        .map_err(|err| Asked::Failed(AskError::Read(err)))?;
    serde_json::from_str(line.trim_end()).map_err(|err| Asked::Failed(AskError::Malformed(err)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn only_the_owner_uid_is_admitted() {
        assert_eq!(admit(Some(1000), 1000), Ok(()));
        let refused = admit(Some(1001), 1000).unwrap_err().to_string();
        assert!(refused.starts_with("refused:"), "{refused}");
        assert!(
            refused.contains("uid 1000") && refused.contains("uid 1001"),
            "{refused}"
        );
        assert!(admit(None, 1000).is_err());
        assert!(admit(Some(0), 1000).is_err(), "not even root");
    }

    /// An engine double: fixed running agents, records cancels.
    struct Fake {
        cancelled: Mutex<Vec<Option<String>>>,
    }

    impl ControlTarget for Fake {
        fn running(&self) -> BoxFuture<'_, Vec<RunningSubagent>> {
            Box::pin(async { self.listed() })
        }

        fn cancel<'a>(&'a self, agent_id: Option<&'a str>) -> BoxFuture<'a, Vec<String>> {
            Box::pin(async move { self.cancelled_now(agent_id) })
        }
    }

    impl Fake {
        fn listed(&self) -> Vec<RunningSubagent> {
            vec![RunningSubagent {
                agent_id: "subagent-00000001".into(),
                parent_pid: std::process::id(),
                child_pid: Some(42),
                phase: "reasoning".into(),
                elapsed_ms: 1500,
                tokens: 900,
                plan_item: None,
            }]
        }

        fn cancelled_now(&self, agent_id: Option<&str>) -> Vec<String> {
            self.cancelled
                .lock()
                .unwrap()
                .push(agent_id.map(String::from));
            agent_id
                .filter(|id| *id == "subagent-00000001")
                .map(String::from)
                .into_iter()
                .collect()
        }
    }

    #[tokio::test]
    async fn a_socket_lists_and_cancels_and_stale_ones_are_removed() {
        use std::os::unix::fs::PermissionsExt;
        let ws = tempfile::tempdir().unwrap();
        let dir = run_dir(ws.path());
        std::fs::create_dir_all(&dir).unwrap();
        // A stale socket: a pid that cannot exist, nobody listening.
        let stale = dir.join("2147483646.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let fake = Arc::new(Fake {
            cancelled: Mutex::new(Vec::new()),
        });
        let server = ControlServer::start(ws.path(), fake.clone()).await.unwrap();
        assert!(!stale.exists(), "the dead process's socket was removed");
        let mode = std::fs::metadata(server.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);

        // A socket of a live pid that nobody serves is removed by the client
        // (this process's parent: live, and never this server's pid).
        let orphan = dir.join(format!("{}.sock", std::os::unix::process::parent_id()));
        drop(std::os::unix::net::UnixListener::bind(&orphan).unwrap());
        let replies = ask_all(ws.path(), &ControlRequest::ListSubagents).await;
        assert!(!orphan.exists());
        assert_eq!(replies.len(), 1);
        let Ok(ControlReply::Subagents {
            agents, parent_pid, ..
        }) = &replies[0].reply
        else {
            panic!("{:?}", replies[0].reply);
        };
        assert_eq!(*parent_pid, std::process::id());
        assert_eq!(agents[0].agent_id, "subagent-00000001");

        let replies = ask_all(
            ws.path(),
            &ControlRequest::Cancel {
                agent_id: Some("subagent-00000001".into()),
            },
        )
        .await;
        let Ok(ControlReply::Cancelled { agent_ids, .. }) = &replies[0].reply else {
            panic!("{:?}", replies[0].reply);
        };
        assert_eq!(agent_ids, &["subagent-00000001"]);
        assert_eq!(
            *fake.cancelled.lock().unwrap(),
            [Some("subagent-00000001".to_string())]
        );

        // A request that is not JSON gets an error, not a crash.
        let mut raw = UnixStream::connect(server.path()).await.unwrap();
        raw.write_all(b"hello\n").await.unwrap();
        let mut line = String::new();
        BufReader::new(raw).read_line(&mut line).await.unwrap();
        assert!(line.contains("\"type\":\"error\""), "{line}");

        let path = server.path().to_path_buf();
        server.stop().await;
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn a_peer_of_another_uid_is_refused_before_its_request_is_read() {
        let ws = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            cancelled: Mutex::new(Vec::new()),
        });
        // The server believes it belongs to another uid than ours.
        let other = nix::unistd::geteuid().as_raw().wrapping_add(1);
        let server = ControlServer::start_for(ws.path(), fake.clone(), other)
            .await
            .unwrap();
        let replies = ask_all(ws.path(), &ControlRequest::Cancel { agent_id: None }).await;
        let Ok(ControlReply::Refused { message }) = &replies[0].reply else {
            panic!("{:?}", replies[0].reply);
        };
        assert!(
            message.contains(&format!("serves only uid {other}")),
            "{message}"
        );
        assert!(
            fake.cancelled.lock().unwrap().is_empty(),
            "nothing was cancelled"
        );
        server.stop().await;
    }
}
