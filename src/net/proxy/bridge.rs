//! The bridge: a UNIX datagram socket pair over which connected client
//! sockets arrive as descriptors (`SCM_RIGHTS`, one per message with a
//! one-byte payload). The proxy reads its end; the other end is the
//! route's, for the commands.

use std::io::IoSliceMut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::socket::{
    AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, SockaddrLike,
    SockaddrStorage, getsockname, recvmsg, socketpair,
};
use tokio::io::unix::AsyncFd;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::serve::{Client, spawn_client};

/// The proxy's end (non-blocking) and the commands' end. Both are
/// close-on-exec: no process gets the commands' end but by the sandbox
/// handing it on deliberately.
pub(super) fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Datagram,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    fcntl(&ours, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok((ours, theirs))
}

/// Takes descriptors from the bridge and serves each as a client, until
/// `stop`.
pub(super) async fn receive_loop(ours: OwnedFd, shared: Arc<Shared>, stop: CancellationToken) {
    // SAFETY: the descriptor is owned by the AsyncFd from here on, and is
    // neither replaced nor closed while registered.
    let bridge = match unsafe { AsyncFd::register(ours) } {
        Ok(bridge) => bridge,
        Err(err) => {
            tracing::warn!(error = %err, "the proxy cannot read its bridge");
            return;
        }
    };
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return,
            received = receive(&bridge) => received,
        };
        match received {
            Ok(Some(fd)) => match client_of(fd) {
                Ok(client) => spawn_client(client, &shared, &stop),
                Err(err) => {
                    tracing::warn!(error = %err, "a descriptor on the proxy bridge is not a stream socket")
                }
            },
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(error = %err, "reading the proxy bridge failed");
                return;
            }
        }
    }
}

/// The next message's descriptor (`None`: a message without one).
async fn receive(bridge: &AsyncFd<OwnedFd>) -> std::io::Result<Option<OwnedFd>> {
    loop {
        let mut ready = bridge.readable().await?;
        match ready.try_io(|fd| receive_now(fd.as_raw_fd()).map_err(std::io::Error::from)) {
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(received) => return received,
            Err(_would_block) => continue,
        }
    }
}

fn receive_now(fd: RawFd) -> nix::Result<Option<OwnedFd>> {
    let mut byte = [0u8; 1];
    let mut payload = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let message = recvmsg::<()>(
        fd,
        &mut payload,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_DONTWAIT,
    )?;
    let mut received = None;
    for control in message.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = control {
            for raw in fds {
                // SAFETY: the kernel has just installed `raw` in this
                // process for this message; nothing else owns it.
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                // One descriptor per message: any other is closed here.
                if received.is_none() {
                    received = Some(owned);
                }
            }
        }
    }
    Ok(received)
}

/// A received descriptor as a client: a TCP or a UNIX stream socket.
fn client_of(fd: OwnedFd) -> std::io::Result<Client> {
    let address: SockaddrStorage = getsockname(fd.as_raw_fd())?;
    match address.family() {
        Some(AddressFamily::Inet | AddressFamily::Inet6) => {
            let stream = std::net::TcpStream::from(fd);
            stream.set_nonblocking(true)?;
            Ok(Client::Tcp(tokio::net::TcpStream::from_std(stream)?))
        }
        Some(AddressFamily::Unix) => {
            let stream = std::os::unix::net::UnixStream::from(fd);
            stream.set_nonblocking(true)?;
            Ok(Client::Unix(tokio::net::UnixStream::from_std(stream)?))
        }
        other => Err(std::io::Error::other(format!("address family {other:?}"))),
    }
}
