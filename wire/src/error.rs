//! Errors the codec reports. Each says what was wrong and where, so a log line is enough to
//! understand why a connection was closed.

use thiserror::Error;

/// Problems with the outer framing. Every one of these closes the connection: after a bad length
/// the byte stream can no longer be trusted to line up with frame boundaries.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame length {len} is negative")]
    NegativeLength { len: i32 },
    #[error("frame length {len} exceeds socket.request.max.bytes ({max})")]
    TooLarge { len: i32, max: i32 },
    #[error("frame of {len} bytes is too short to hold a request header")]
    TooShort { len: i32 },
}

/// Problems inside one frame: the header or the body did not decode.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("request header truncated: needed {needed} bytes at offset {offset}, frame has {len}")]
    HeaderTruncated {
        offset: usize,
        needed: usize,
        len: usize,
    },
    #[error("request header: {what} at offset {offset}")]
    HeaderInvalid { offset: usize, what: &'static str },
    #[error("unknown api key {api_key}")]
    UnknownApiKey { api_key: i16 },
    #[error("api key {api_key} version {version} is not supported (we accept {min}..={max})")]
    UnsupportedVersion {
        api_key: i16,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("api key {api_key} is not served by this broker")]
    NotServed { api_key: i16 },
    #[error("malformed body of api key {api_key} v{version} ({body_len} bytes): {reason}")]
    Body {
        api_key: i16,
        version: i16,
        body_len: usize,
        reason: String,
    },
}
