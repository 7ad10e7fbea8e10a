//! One client, from its request head to the end of its tunnel or of the
//! origin's answer.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio_util::sync::CancellationToken;

use super::http::{self, HeadError, Refusal, Request};
use super::{Shared, blocked_line};
use crate::net::Target;
use crate::net::fetch::{HopRefused, Reach};
use crate::net::resolve::{keep_reachable, refusal_message};

/// A client connection: accepted on the port, or received on the bridge.
pub(super) enum Client {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// Accepts clients on the port until `stop`.
pub(super) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => spawn_client(Client::Tcp(stream), &shared, &stop),
            // Out of descriptors, or a connection reset before it was
            // accepted: the next one may well do.
            Err(err) => {
                tracing::warn!(error = %err, "the proxy could not accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Serves `client` in a task of its own, or answers `503` when as many
/// clients as allowed are being served already.
pub(super) fn spawn_client(client: Client, shared: &Arc<Shared>, stop: &CancellationToken) {
    let Ok(slot) = Arc::clone(&shared.slots).try_acquire_owned() else {
        let busy =
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        // Never waits: a client that does not read the answer just loses it.
        let _ = match &client {
            Client::Tcp(stream) => stream.try_write(busy),
            Client::Unix(stream) => stream.try_write(busy),
        };
        return;
    };
    let shared = Arc::clone(shared);
    let stop = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = serve_client(client, &shared) => {}
        }
        drop(slot);
    });
}

async fn serve_client(client: Client, shared: &Shared) {
    match client {
        Client::Tcp(stream) => serve(stream, shared).await,
        Client::Unix(stream) => serve(stream, shared).await,
    }
}

async fn serve<C: AsyncRead + AsyncWrite + Unpin>(mut client: C, shared: &Shared) {
    let limits = &shared.limits;
    let read = http::read_head(&mut client, limits.max_head);
    let (head, rest) = match tokio::time::timeout(limits.head, read).await {
        Ok(Ok(read)) => read,
        // Silent or gone: nothing to answer.
        Err(_) | Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::TooLarge)) => {
            let text = format!("the request head is over {} bytes", limits.max_head);
            return http::answer(&mut client, &Refusal::new(431, text)).await;
        }
    };
    let request = match http::parse(&head) {
        Ok(request) => request,
        Err(refusal) => return http::answer(&mut client, &refusal).await,
    };
    let origin = match open(shared, &request).await {
        Ok(origin) => origin,
        Err(refusal) => return http::answer(&mut client, &refusal).await,
    };
    match request {
        Request::Connect { .. } => tunnel(client, origin, &rest).await,
        Request::Forward { head, .. } => forward(client, origin, &head, &rest).await,
    }
}

/// A connection to the request's target, if it may be reached.
async fn open(shared: &Shared, request: &Request) -> Result<TcpStream, Refusal> {
    let target = request.target();
    let reach = match shared.admit(target, &request.url()).await {
        Ok(reach) => reach,
        Err(HopRefused(why)) => return Err(blocked(shared, target, &why)),
    };
    let addresses = match addresses(target, reach).await {
        Ok(addresses) => addresses,
        Err(Unreachable::Refused(why)) => return Err(blocked(shared, target, &why)),
        Err(Unreachable::Unknown(why)) => return Err(Refusal::new(502, why)),
    };
    connect(&addresses, target, shared.limits.connect).await
}

/// A refusal by the allowlist: logged, kept for the command's output, and
/// answered `403`.
fn blocked(shared: &Shared, target: &Target, why: &str) -> Refusal {
    let line = blocked_line(target);
    tracing::warn!(reason = why, "{line}");
    shared.blocks.record(line.clone());
    Refusal::new(403, line)
}

enum Unreachable {
    /// Only private addresses, for a host that is not listed.
    Refused(String),
    /// No address at all.
    Unknown(String),
}

/// The addresses to try: the listed address itself, or what the name
/// resolves to, checked here and connected to as checked (no second
/// lookup).
async fn addresses(target: &Target, reach: Reach) -> Result<Vec<SocketAddr>, Unreachable> {
    if let Some(ip) = target.ip() {
        // The gate admits an address only when it is listed; a private
        // one is refused here too, whatever the gate said (0.0.0.0 and
        // :: reach this machine).
        let address = SocketAddr::new(ip, target.port);
        let (kept, refused) = keep_reachable(vec![address], reach == Reach::Listed);
        if kept.is_empty() {
            return Err(Unreachable::Refused(refusal_message(
                &target.host,
                &refused,
            )));
        }
        return Ok(kept);
    }
    let resolved = match tokio::net::lookup_host((target.host.as_str(), target.port)).await {
        Ok(resolved) => resolved.collect(),
        Err(err) => {
            return Err(Unreachable::Unknown(format!(
                "cannot resolve {target}: {err}"
            )));
        }
    };
    let (kept, refused) = keep_reachable(resolved, reach == Reach::Listed);
    if kept.is_empty() {
        let why = refusal_message(&target.host, &refused);
        return Err(if refused.is_empty() {
            Unreachable::Unknown(why)
        } else {
            Unreachable::Refused(why)
        });
    }
    Ok(kept)
}

/// The first of `addresses` that accepts within `limit` in all.
async fn connect(
    addresses: &[SocketAddr],
    target: &Target,
    limit: std::time::Duration,
) -> Result<TcpStream, Refusal> {
    let attempt = async {
        let mut last = None;
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok(stream),
                Err(err) => last = Some(err),
            }
        }
        Err(last.map_or_else(|| "no address".to_string(), |err| err.to_string()))
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok(stream)
        }
        Ok(Err(err)) => Err(Refusal::new(
            502,
            format!("cannot connect to {target}: {err}"),
        )),
        Err(_) => Err(Refusal::new(
            504,
            format!("{target} did not accept within {} s", limit.as_secs_f32()),
        )),
    }
}

/// A CONNECT tunnel: bytes both ways until either side closes.
async fn tunnel<C: AsyncRead + AsyncWrite + Unpin>(
    mut client: C,
    mut origin: TcpStream,
    early: &[u8],
) {
    if client.write_all(http::ESTABLISHED).await.is_err() || origin.write_all(early).await.is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut origin).await;
}

/// A forwarded request: the head, then the body as the client sends it;
/// done when the origin has answered and closed (it was asked to).
async fn forward<C: AsyncRead + AsyncWrite + Unpin>(
    client: C,
    mut origin: TcpStream,
    head: &[u8],
    early: &[u8],
) {
    if origin.write_all(head).await.is_err() || origin.write_all(early).await.is_err() {
        return;
    }
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut origin_read, mut origin_write) = origin.split();
    let download = async {
        let _ = tokio::io::copy(&mut origin_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    // The client's side ending (a half-close after the body) is not the
    // end: the answer may still be on its way.
    let upload = async {
        let _ = tokio::io::copy(&mut client_read, &mut origin_write).await;
        let _ = origin_write.shutdown().await;
        std::future::pending::<()>().await;
    };
    tokio::select! {
        () = download => {}
        () = upload => {}
    }
}
