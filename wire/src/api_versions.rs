//! ApiVersions: the first request every client sends, and the one that must work whatever version
//! the client guesses (KIP-511, reference §1.3).

use crate::codec::{encode_response, Response};
use crate::versions::Versions;
use bytes::BytesMut;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::ResponseError;

pub const API_VERSIONS_KEY: i16 = 18;

/// Kafka's rule for ClientSoftwareName/Version (v3+): `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`
/// (`ApiVersionsRequest.isValid`). An invalid value gets INVALID_REQUEST.
fn valid_software_field(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: &u8| c.is_ascii_alphanumeric();
    match b {
        [] => false,
        [one] => alnum(one),
        [first, mid @ .., last] => {
            alnum(first) && alnum(last) && mid.iter().all(|c| alnum(c) || *c == b'-' || *c == b'.')
        }
    }
}

/// The full answer to a well-formed ApiVersions request of a supported version.
pub fn response(
    req: &ApiVersionsRequest,
    version: i16,
    versions: &Versions,
) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default();
    if version >= 3
        && !(valid_software_field(&req.client_software_name)
            && valid_software_field(&req.client_software_version))
    {
        resp.error_code = ResponseError::InvalidRequest.code();
        return resp;
    }
    resp.api_keys = versions
        .list()
        .iter()
        .map(|r| {
            ApiVersion::default()
                .with_api_key(r.api_key)
                .with_min_version(advertised_min(r))
                .with_max_version(r.max)
        })
        .collect();
    resp
}

/// Kafka advertises Produce with min version 0 although it rejects v0–2, because librdkafka
/// would otherwise refuse to produce (KAFKA-18659; `ApiKeys.java`
/// `PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION`). Requests below 3 are still closed.
fn advertised_min(r: &crate::versions::ApiRange) -> i16 {
    if r.api_key == PRODUCE_KEY {
        0
    } else {
        r.min
    }
}

const PRODUCE_KEY: i16 = 0;

/// The answer to an ApiVersions request whose version we do not know: a v0 response with
/// UNSUPPORTED_VERSION listing only ApiVersions' own range, without parsing the body (the client
/// retries with a version from that range). Returns the whole frame, length prefix included.
pub fn unsupported_version_frame(correlation_id: i32, versions: &Versions) -> BytesMut {
    let mut resp =
        ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code());
    if let Some(r) = versions.get(API_VERSIONS_KEY) {
        resp.api_keys.push(
            ApiVersion::default()
                .with_api_key(r.api_key)
                .with_min_version(r.min)
                .with_max_version(r.max),
        );
    }
    let mut out = BytesMut::with_capacity(32);
    encode_response(correlation_id, 0, &Response::ApiVersions(resp), &mut out)
        .expect("a v0 ApiVersions response always encodes");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_frame_bytes() {
        let v = Versions::default();
        let frame = unsupported_version_frame(0x01020304, &v);
        let range = v.get(18).unwrap();
        let mut expect = Vec::new();
        expect.extend_from_slice(&16i32.to_be_bytes()); // length
        expect.extend_from_slice(&[1, 2, 3, 4]); // correlation id, header v0
        expect.extend_from_slice(&ResponseError::UnsupportedVersion.code().to_be_bytes());
        expect.extend_from_slice(&1i32.to_be_bytes()); // one api key
        expect.extend_from_slice(&18i16.to_be_bytes());
        expect.extend_from_slice(&range.min.to_be_bytes());
        expect.extend_from_slice(&range.max.to_be_bytes());
        assert_eq!(&frame[..], &expect[..]);
    }

    #[test]
    fn software_name_rule() {
        assert!(valid_software_field("librdkafka"));
        assert!(valid_software_field("2.16.0"));
        assert!(valid_software_field("a"));
        assert!(!valid_software_field(""));
        assert!(!valid_software_field("-x"));
        assert!(!valid_software_field("x."));
        assert!(!valid_software_field("a b"));
        let req = ApiVersionsRequest::default()
            .with_client_software_name("bad name".into())
            .with_client_software_version("1".into());
        assert_eq!(
            response(&req, 3, &Versions::default()).error_code,
            ResponseError::InvalidRequest.code()
        );
        assert_eq!(response(&req, 2, &Versions::default()).error_code, 0);
    }
}
