//! Frame codec for the parent ↔ subagent socket: a 4-byte big-endian length,
//! then that many bytes of JSON. Reads are bounded by a maximum frame size,
//! so a misbehaving peer cannot make the other side allocate without limit.

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest parent → child frame: the fork of a very long session.
pub const MAX_PARENT_FRAME: usize = 256 << 20;
/// Largest child → parent frame: a model request's tail or the final text.
pub const MAX_CHILD_FRAME: usize = 32 << 20;

#[derive(Debug, thiserror::Error)]
pub enum IpcError {
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {len} bytes is larger than the limit of {max}")]
    TooLarge { len: usize, max: usize },
    #[error("malformed frame: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("the peer closed the connection in the middle of a frame")]
    Truncated,
}

/// Writes one frame and flushes it.
pub async fn write_frame<W, T>(writer: &mut W, frame: &T) -> Result<(), IpcError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    write_encoded(writer, &encode_frame(frame)?).await
}

/// One frame as bytes: the length prefix and the JSON.
pub fn encode_frame<T: Serialize>(frame: &T) -> Result<Vec<u8>, IpcError> {
    encode_frame_in(Vec::new(), frame)
}

/// [`encode_frame`] into `bytes` (emptied first), whose capacity a caller
/// that knows the size sets, so a large frame is not copied as it grows.
pub fn encode_frame_in<T: Serialize>(mut bytes: Vec<u8>, frame: &T) -> Result<Vec<u8>, IpcError> {
    bytes.clear();
    bytes.extend_from_slice(&[0u8; 4]);
    serde_json::to_writer(&mut bytes, frame).map_err(IpcError::Malformed)?;
    let len = bytes.len() - 4;
    let len = u32::try_from(len).map_err(|_| IpcError::TooLarge {
        len,
        max: u32::MAX as usize,
    })?;
    bytes[..4].copy_from_slice(&len.to_be_bytes());
    Ok(bytes)
}

/// Writes a frame made by [`encode_frame`] and flushes it.
pub async fn write_encoded<W>(writer: &mut W, bytes: &[u8]) -> Result<(), IpcError>
where
    W: AsyncWrite + Unpin,
{
    writer.write_all(bytes).await?;
    writer.flush().await?;
    Ok(())
}

/// Reads one frame; `Ok(None)` when the peer closed the connection cleanly
/// between frames.
pub async fn read_frame<R, T>(reader: &mut R, max: usize) -> Result<Option<T>, IpcError>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut header = [0u8; 4];
    let mut filled = 0;
    while filled < header.len() {
        let n = reader.read(&mut header[filled..]).await?;
        if n == 0 {
            return if filled == 0 {
                Ok(None)
            } else {
                Err(IpcError::Truncated)
            };
        }
        filled += n;
    }
    let len = u32::from_be_bytes(header) as usize;
    if len > max {
        return Err(IpcError::TooLarge { len, max });
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).await.map_err(|err| {
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            IpcError::Truncated
        } else {
            IpcError::Io(err)
        }
    })?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(IpcError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ipc::{ChildFrame, ParentFrame};

    #[tokio::test]
    async fn frames_round_trip_and_eof_is_clean() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        let frame = ChildFrame::Lifecycle {
            phase: "read_file".into(),
            detail: "src/lib.rs".into(),
        };
        write_frame(&mut a, &frame).await.unwrap();
        write_frame(
            &mut a,
            &ParentFrame::Cancel {
                reason: "timeout".into(),
            },
        )
        .await
        .unwrap();
        drop(a);
        let got: ChildFrame = read_frame(&mut b, 1024).await.unwrap().unwrap();
        assert_eq!(got, frame);
        let got: ParentFrame = read_frame(&mut b, 1024).await.unwrap().unwrap();
        assert_eq!(
            got,
            ParentFrame::Cancel {
                reason: "timeout".into()
            }
        );
        assert!(
            read_frame::<_, ParentFrame>(&mut b, 1024)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn oversized_malformed_and_truncated_frames_are_errors() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&(2000u32).to_be_bytes()).await.unwrap();
        assert!(matches!(
            read_frame::<_, ChildFrame>(&mut b, 1000).await,
            Err(IpcError::TooLarge {
                len: 2000,
                max: 1000
            })
        ));

        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&5u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{nope").await.unwrap();
        assert!(matches!(
            read_frame::<_, ChildFrame>(&mut b, 1000).await,
            Err(IpcError::Malformed(_))
        ));

        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{\"ty").await.unwrap();
        drop(a);
        assert!(matches!(
            read_frame::<_, ChildFrame>(&mut b, 1000).await,
            Err(IpcError::Truncated)
        ));
    }
}
