//! Request framing on top of `wire`'s codecs, and a blocking frame reader for start-up.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::io::Read;
use wire::header::request_header_version;
use wire::Request;

/// Largest response frame accepted (a JoinGroup response to the leader of a huge group carries
/// every member's metadata).
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// Byte offset of the correlation id inside an encoded request frame (after the 4-byte length,
/// api key and api version).
pub const CORRELATION_OFFSET: usize = 8;

/// Append one request frame: length, header v1/v2 (client id as a classic string), body. The
/// header is written here rather than through `wire::RequestHeader` to avoid allocating the client
/// id for every request on the hot path.
pub fn encode_frame(
    out: &mut BytesMut,
    api_key: i16,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    req: &Request,
) -> anyhow::Result<()> {
    let start = out.len();
    out.put_i32(0);
    out.put_i16(api_key);
    out.put_i16(version);
    out.put_i32(correlation_id);
    out.put_i16(client_id.len() as i16);
    out.put_slice(client_id.as_bytes());
    if request_header_version(api_key, version) >= 2 {
        out.put_u8(0); // no tagged fields
    }
    if let Err(e) = req.encode_body(version, out) {
        out.truncate(start);
        return Err(e);
    }
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Take the next complete response frame (without its length prefix) from `buf`, if one is
/// there. (`wire::FrameDecoder` is for requests: it rejects frames shorter than a request header,
/// but a Heartbeat v0 response is only six bytes.) Errors on a length below the 4-byte
/// correlation id or above `MAX_RESPONSE_BYTES`.
pub fn split_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
    if buf.len() < 4 {
        return Ok(None);
    }
    let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if len < 4 || len as usize > MAX_RESPONSE_BYTES {
        return Err(format!("bad response frame length {len}"));
    }
    let len = len as usize;
    if buf.len() < 4 + len {
        buf.reserve(4 + len - buf.len());
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Read one whole frame (without its length) from a blocking stream.
pub fn read_frame(stream: &mut impl Read, buf: &mut BytesMut) -> anyhow::Result<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    anyhow::ensure!(
        len >= 4 && (len as usize) <= MAX_RESPONSE_BYTES,
        "bad response frame length {len}"
    );
    buf.clear();
    buf.resize(len as usize, 0);
    stream.read_exact(&mut buf[..])?;
    Ok(buf.split().freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{GroupId, HeartbeatRequest};
    use kafka_protocol::protocol::StrBytes;

    #[test]
    fn frames_decode_with_the_broker_decoder() {
        let req = Request::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id(3)
                .with_member_id(StrBytes::from_static_str("m-1")),
        );
        for v in [0i16, 3, 4] {
            let mut out = BytesMut::new();
            encode_frame(&mut out, 12, v, 77, "loadgen", &req).unwrap();
            assert_eq!(
                &out[CORRELATION_OFFSET..CORRELATION_OFFSET + 4],
                &77i32.to_be_bytes()
            );
            let frame = out.split_off(4).freeze();
            let (h, back) =
                wire::decode_request(&frame, &wire::Versions::default()).expect("decodes");
            assert_eq!(h.correlation_id, 77);
            assert_eq!(h.client_id.as_deref(), Some("loadgen"));
            assert_eq!(back, req);
        }
    }

    #[test]
    fn splits_response_frames_of_any_valid_size() {
        let mut all = Vec::new();
        for body in [&[0u8, 0, 0, 7, 0, 0x19][..], &[0, 0, 0, 8], &[1; 300]] {
            all.extend_from_slice(&(body.len() as i32).to_be_bytes());
            all.extend_from_slice(body);
        }
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in all {
            buf.extend_from_slice(&[b]);
            while let Some(f) = split_frame(&mut buf).unwrap() {
                got.push(f.len());
            }
        }
        assert_eq!(got, vec![6, 4, 300]);
        assert!(buf.is_empty());
        let mut bad = BytesMut::from(&3i32.to_be_bytes()[..]);
        assert!(split_frame(&mut bad).is_err());
        let mut bad = BytesMut::from(&(-1i32).to_be_bytes()[..]);
        assert!(split_frame(&mut bad).is_err());
    }

    #[test]
    fn reads_frames_from_a_stream() {
        let mut data = Vec::new();
        data.extend_from_slice(&6i32.to_be_bytes());
        data.extend_from_slice(b"abcdef");
        data.extend_from_slice(&(-1i32).to_be_bytes());
        let mut cur = std::io::Cursor::new(data);
        let mut buf = BytesMut::new();
        assert_eq!(&read_frame(&mut cur, &mut buf).unwrap()[..], b"abcdef");
        assert!(read_frame(&mut cur, &mut buf).is_err());
    }
}
