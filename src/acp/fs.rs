//! The client's file system (`fs/read_text_file`), for a client that
//! advertised `clientCapabilities.fs.readTextFile`: the editor's unsaved
//! buffers are the truth, so `read_file` reads through it once Fido's own
//! checks passed on the disk (`tools::editor`).

use std::path::Path;
use std::sync::OnceLock;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::ReadTextFileRequest;

use crate::tools::editor::{EditorFiles, EditorRead};

/// The client's files for one session.
pub struct ClientFiles {
    client: ConnectionTo<Client>,
    /// The session's id, known once its journal is open (no file is read
    /// before: the first turn comes after).
    session: OnceLock<String>,
}

impl ClientFiles {
    pub fn new(client: ConnectionTo<Client>) -> ClientFiles {
        ClientFiles {
            client,
            session: OnceLock::new(),
        }
    }

    /// The session whose files these are.
    pub fn belong_to(&self, session: &str) {
        let _ = self.session.set(session.to_string());
    }
}

impl EditorFiles for ClientFiles {
    fn read_text<'a>(&'a self, path: &'a Path) -> EditorRead<'a> {
        Box::pin(async move {
            let session = self.session.get().ok_or("the session has no id yet")?;
            let request = ReadTextFileRequest::new(session.clone(), path.to_path_buf());
            let answer = self.client.send_request(request).block_task().await;
            answer
                .map(|read| read.content)
                .map_err(|err| format!("fs/read_text_file: {err}"))
        })
    }
}
