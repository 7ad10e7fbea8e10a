//! The client's file system (`fs/read_text_file`, `fs/write_text_file`),
//! for a client that advertised `clientCapabilities.fs.readTextFile` or
//! `writeTextFile`: the editor's unsaved buffers are the truth, so
//! `read_file` reads through it and `patch` edits through it once Fido's
//! own checks passed on the disk (`tools::editor`).

use std::path::Path;
use std::sync::OnceLock;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};

use crate::tools::editor::{EditorError, EditorFiles, EditorRead, EditorWrite};

/// The client's files for one session.
pub struct ClientFiles {
    client: ConnectionTo<Client>,
    /// What the client advertised: `fs.readTextFile`, `fs.writeTextFile`.
    reads: bool,
    writes: bool,
    /// The session's id, known once its journal is open (no file is read
    /// before: the first turn comes after).
    session: OnceLock<String>,
}

impl ClientFiles {
    /// The files of a client that reads (`reads`) or writes (`writes`)
    /// them; `None` for a client that does neither.
    pub fn offered(client: ConnectionTo<Client>, reads: bool, writes: bool) -> Option<ClientFiles> {
        (reads || writes).then(|| ClientFiles {
            client,
            reads,
            writes,
            session: OnceLock::new(),
        })
    }

    /// The session whose files these are.
    pub fn belong_to(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }
}

impl EditorFiles for ClientFiles {
    fn reads(&self) -> bool {
        self.reads
    }

    fn writes(&self) -> bool {
        self.writes
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> EditorRead<'a> {
        Box::pin(async move {
            let session = self.session.get().ok_or(EditorError::NoSession)?;
            let request = ReadTextFileRequest::new(session.clone(), path.to_path_buf());
            let answer = self.client.send_request(request).block_task().await;
            answer
                .map(|read| read.content)
                .map_err(|err| EditorError::Refused {
                    request: "fs/read_text_file",
                    reason: err.to_string(),
                })
        })
    }

    fn write_text<'a>(&'a self, path: &'a Path, text: &'a str) -> EditorWrite<'a> {
        Box::pin(async move {
            let session = self.session.get().ok_or(EditorError::NoSession)?;
            let request = WriteTextFileRequest::new(session.clone(), path.to_path_buf(), text);
            let answer = self.client.send_request(request).block_task().await;
            answer.map(|_| ()).map_err(|err| EditorError::Refused {
                request: "fs/write_text_file",
                reason: err.to_string(),
            })
        })
    }
}
