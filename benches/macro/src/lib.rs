//! What the macro benchmark clients (`hbflood`, `offsets-history`) share: framing a request with
//! the wire crate's encoder and reading one response frame from a blocking socket.
//!
//! Owns nothing else: each tool keeps its own protocol logic. It must not grow into a client
//! library; the real-client tests use real client libraries.

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use std::io::Read;
use std::net::TcpStream;
use wire::codec::encode_request;
use wire::{Request, RequestHeader};

/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: the coordinator
/// errors a client answers by asking again (a broker still loading, or moving a partition).
pub const NOT_YET: [i16; 3] = [14, 15, 16];

/// A protocol string from a Rust one.
pub fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// One request frame (length prefix, header, body) ready to write.
pub fn frame(client_id: &str, key: i16, version: i16, corr: i32, req: &Request) -> BytesMut {
    let mut out = BytesMut::with_capacity(256);
    let h = RequestHeader {
        api_key: key,
        api_version: version,
        correlation_id: corr,
        client_id: Some(client_id.to_string()),
    };
    encode_request(&h, req, &mut out).expect("request encodes");
    out
}

/// One response frame without its length prefix; a length outside `4..=max_len` is an error
/// (a broken stream, not a response to wait for).
pub fn read_frame(st: &mut TcpStream, max_len: i32) -> anyhow::Result<Bytes> {
    let mut len = [0u8; 4];
    st.read_exact(&mut len)?;
    let len = i32::from_be_bytes(len);
    anyhow::ensure!((4..=max_len).contains(&len), "bad response length {len}");
    let mut b = vec![0u8; len as usize];
    st.read_exact(&mut b)?;
    Ok(Bytes::from(b))
}
