//! Size-prefixed framing: every Kafka request and response is an `int32` length followed by that
//! many bytes. The decoder is incremental (feed it whatever the socket produced) and bounded: a
//! length above `socket.request.max.bytes` is rejected before a single byte of it is buffered,
//! which is what Kafka's `NetworkReceive` does with `InvalidReceiveException`.

use crate::error::FrameError;
use bytes::{Buf, Bytes, BytesMut};

pub const FRAME_LEN_BYTES: usize = 4;

/// The smallest request header: api_key(2) + api_version(2) + correlation_id(4) + client_id len(2).
pub const MIN_REQUEST_LEN: i32 = 10;

#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_bytes: i32,
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: i32) -> Self {
        Self {
            max_frame_bytes: max_frame_bytes.max(MIN_REQUEST_LEN),
        }
    }

    pub fn max_frame_bytes(&self) -> i32 {
        self.max_frame_bytes
    }

    /// Check a length prefix without consuming anything, so a caller can reject it (and close the
    /// connection) before reserving buffer space for it.
    pub fn check_len(&self, len: i32) -> Result<usize, FrameError> {
        if len < 0 {
            Err(FrameError::NegativeLength { len })
        } else if len > self.max_frame_bytes {
            Err(FrameError::TooLarge {
                len,
                max: self.max_frame_bytes,
            })
        } else if len < MIN_REQUEST_LEN {
            Err(FrameError::TooShort { len })
        } else {
            Ok(len as usize)
        }
    }

    /// How many bytes the buffer must hold before `decode` can return the next frame. Lets a reader
    /// reserve exactly once for a large frame instead of growing the buffer repeatedly.
    pub fn bytes_needed(&self, buf: &[u8]) -> Result<usize, FrameError> {
        if buf.len() < FRAME_LEN_BYTES {
            return Ok(FRAME_LEN_BYTES);
        }
        let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        Ok(FRAME_LEN_BYTES + self.check_len(len)?)
    }

    /// Take the next complete frame (without its length prefix) from `buf`, if one is there.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let needed = self.bytes_needed(buf)?;
        if buf.len() < needed || needed == FRAME_LEN_BYTES {
            return Ok(None);
        }
        buf.advance(FRAME_LEN_BYTES);
        Ok(Some(buf.split_to(needed - FRAME_LEN_BYTES).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(body: &[u8]) -> Vec<u8> {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn splits_frames_fed_byte_by_byte() {
        let d = FrameDecoder::new(1024);
        let a = [1u8; 12];
        let b = [2u8; 20];
        let mut all = framed(&a);
        all.extend(framed(&b));
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for byte in all {
            buf.extend_from_slice(&[byte]);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out.len(), 2);
        assert_eq!(&out[0][..], &a[..]);
        assert_eq!(&out[1][..], &b[..]);
        assert!(buf.is_empty());
    }

    #[test]
    fn rejects_bad_lengths_before_buffering() {
        let d = FrameDecoder::new(100);
        let mut buf = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert_eq!(
            d.decode(&mut buf),
            Err(FrameError::NegativeLength { len: -1 })
        );
        let mut buf = BytesMut::from(&101i32.to_be_bytes()[..]);
        assert_eq!(
            d.decode(&mut buf),
            Err(FrameError::TooLarge { len: 101, max: 100 })
        );
        let mut buf = BytesMut::from(&3i32.to_be_bytes()[..]);
        assert_eq!(d.decode(&mut buf), Err(FrameError::TooShort { len: 3 }));
    }

    #[test]
    fn waits_for_the_whole_frame() {
        let d = FrameDecoder::new(100);
        let mut buf = BytesMut::from(&framed(&[7u8; 30])[..20]);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        assert_eq!(d.bytes_needed(&buf).unwrap(), 34);
    }
}
