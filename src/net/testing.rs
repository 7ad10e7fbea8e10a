//! A tiny web server on 127.0.0.1 for the fetcher's and `browse_url`'s
//! tests: each path has a scripted answer, every request head is logged.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server answers one path.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// A complete response with these headers and body.
    Page {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// `200 text/plain` headers, then one byte every `every`, forever.
    Trickle { every: Duration },
    /// Accepts and reads the request, never answers.
    Silent,
}

impl Answer {
    pub(crate) fn page(content_type: &str, body: impl Into<Vec<u8>>) -> Answer {
        Answer::Page {
            status: 200,
            headers: vec![("Content-Type".into(), content_type.into())],
            body: body.into(),
        }
    }

    pub(crate) fn redirect(status: u16, location: &str) -> Answer {
        Answer::Page {
            status,
            headers: vec![("Location".into(), location.into())],
            body: Vec::new(),
        }
    }
}

/// The server; it stops when dropped.
pub(crate) struct TestServer {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Serves `answers` (path → answer; others get 404) in this runtime.
    pub(crate) async fn start(answers: Vec<(&str, Answer)>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answers: Arc<HashMap<String, Answer>> = Arc::new(
            answers
                .into_iter()
                .map(|(path, answer)| (path.to_string(), answer))
                .collect(),
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let logged = log.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, answers.clone(), logged.clone()));
            }
        });
        TestServer { addr, log, task }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Each request's head (request line and headers), in arrival order.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    answers: Arc<HashMap<String, Answer>>,
    log: Arc<Mutex<Vec<String>>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
    log.lock().unwrap().push(head);
    match answers.get(&path).cloned() {
        Some(Answer::Page {
            status,
            headers,
            body,
        }) => write_page(&mut stream, status, &headers, &body).await,
        Some(Answer::Trickle { every }) => {
            let start = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n";
            let _ = stream.write_all(start.as_bytes()).await;
            while stream.write_all(b"x").await.is_ok() {
                tokio::time::sleep(every).await;
            }
        }
        Some(Answer::Silent) => std::future::pending::<()>().await,
        None => write_page(&mut stream, 404, &[], b"not found").await,
    }
}

async fn write_page(
    stream: &mut TcpStream,
    status: u16,
    headers: &[(String, String)],
    body: &[u8],
) {
    let mut response = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    response.push_str("\r\n");
    let mut bytes = response.into_bytes();
    bytes.extend_from_slice(body);
    let _ = stream.write_all(&bytes).await;
    let _ = stream.shutdown().await;
}
