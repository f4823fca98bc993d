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

/// COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15) and NOT_COORDINATOR (16):
/// the coordinator could not answer, and a Kafka client finds the coordinator again and retries
/// (the same request is fine once it can). Every client here (admin tool, load generator,
/// simulator) reacts to these three alike.
pub fn is_coordinator_unavailable(code: i16) -> bool {
    use kafka_protocol::ResponseError;
    matches!(
        ResponseError::try_from_code(code),
        Some(
            ResponseError::CoordinatorLoadInProgress
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::NotCoordinator
        )
    )
}

#[cfg(test)]
mod coordinator_tests {
    use super::is_coordinator_unavailable;
    use kafka_protocol::ResponseError;

    #[test]
    fn the_three_coordinator_codes_and_no_other() {
        for e in [
            ResponseError::CoordinatorLoadInProgress,
            ResponseError::CoordinatorNotAvailable,
            ResponseError::NotCoordinator,
        ] {
            assert!(is_coordinator_unavailable(e.code()), "{e:?}");
        }
        for code in [-1, 0, 13, 17, 25, 27, 69] {
            assert!(!is_coordinator_unavailable(code), "{code}");
        }
    }
}
