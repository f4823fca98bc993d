//! Request header v1/v2 and response header v0/v1.
//!
//! Request header v1: api_key i16, api_version i16, correlation_id i32, client_id nullable
//! int16-length string. v2 (flexible request versions) adds a tagged-field section; client_id
//! stays a classic string (`RequestHeader.json` "flexibleVersions": "none" for ClientId).
//! Header v0 (no client_id) was removed in Kafka 4.0 and is not accepted.
//! Response header v0 is the correlation id, v1 adds tagged fields, except that ApiVersions
//! responses always use v0 so a client that does not yet know our versions can read them
//! (`ApiMessageTypeGenerator.generateHeaderVersion`).

use crate::error::DecodeError;
use bytes::{BufMut, Bytes};
use kafka_protocol::messages::ApiKey;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

/// A request header read in place: the client id borrows the frame, so the broker decodes a
/// request without allocating for it ([`RequestHeader`] is the owned form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeaderRef<'a> {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
}

impl RequestHeaderRef<'_> {
    pub fn to_owned(&self) -> RequestHeader {
        RequestHeader {
            api_key: self.api_key,
            api_version: self.api_version,
            correlation_id: self.correlation_id,
            client_id: self.client_id.map(str::to_owned),
        }
    }
}

/// Header version a request of this key and version uses (1 or 2). Unknown keys are treated as
/// v1: we still want to read the correlation id to log it before closing.
pub fn request_header_version(api_key: i16, api_version: i16) -> i16 {
    match ApiKey::try_from(api_key) {
        Ok(k) => k.request_header_version(api_version).max(1),
        Err(_) => 1,
    }
}

/// Response header version (0 or 1) for a request of this key and version.
pub fn response_header_version(api_key: i16, api_version: i16) -> i16 {
    if api_key == ApiKey::ApiVersions as i16 {
        return 0;
    }
    match ApiKey::try_from(api_key) {
        Ok(k) => k.response_header_version(api_version),
        Err(_) => 0,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(DecodeError::HeaderTruncated {
                offset: self.pos,
                needed: n,
                len: self.buf.len(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::HeaderInvalid {
            offset: self.pos,
            what: "unsigned varint longer than 5 bytes",
        })
    }
}

impl RequestHeader {
    /// Read only the fixed prefix (api key, version, correlation id). Used when the full header
    /// cannot be trusted, e.g. to answer an ApiVersions request of a version we do not know.
    pub fn peek_prefix(frame: &[u8]) -> Result<(i16, i16, i32), DecodeError> {
        let mut r = Reader { buf: frame, pos: 0 };
        Ok((r.i16()?, r.i16()?, r.i32()?))
    }

    /// Decode the header at the start of `frame`; returns it with the body that follows.
    ///
    /// `header_version` comes from [`request_header_version`]. Tagged header fields are skipped:
    /// Kafka defines none that a broker must act on.
    pub fn decode(
        frame: &Bytes,
        header_version: i16,
    ) -> Result<(RequestHeader, Bytes), DecodeError> {
        Self::decode_ref(frame, header_version).map(|(h, body)| (h.to_owned(), body))
    }

    /// [`RequestHeader::decode`] without copying the client id out of the frame.
    pub fn decode_ref(
        frame: &Bytes,
        header_version: i16,
    ) -> Result<(RequestHeaderRef<'_>, Bytes), DecodeError> {
        let mut r = Reader { buf: frame, pos: 0 };
        let api_key = r.i16()?;
        let api_version = r.i16()?;
        let correlation_id = r.i32()?;
        let client_id = match r.i16()? {
            -1 => None,
            n if n < 0 => {
                return Err(DecodeError::HeaderInvalid {
                    offset: 8,
                    what: "negative client_id length",
                });
            }
            n => {
                let start = r.pos;
                let raw = r.take(n as usize)?;
                Some(
                    std::str::from_utf8(raw).map_err(|_| DecodeError::HeaderInvalid {
                        offset: start,
                        what: "client_id is not UTF-8",
                    })?,
                )
            }
        };
        if header_version >= 2 {
            r.pos = skip_tagged_fields(frame, r.pos)?;
        }
        let body = frame.slice(r.pos..);
        Ok((
            RequestHeaderRef {
                api_key,
                api_version,
                correlation_id,
                client_id,
            },
            body,
        ))
    }

    /// Encode this header (for clients such as loadgen and the admin CLI, and for tests).
    pub fn encode(&self, header_version: i16, out: &mut impl BufMut) {
        out.put_i16(self.api_key);
        out.put_i16(self.api_version);
        out.put_i32(self.correlation_id);
        match &self.client_id {
            None => out.put_i16(-1),
            Some(s) => {
                out.put_i16(s.len() as i16);
                out.put_slice(s.as_bytes());
            }
        }
        if header_version >= 2 {
            out.put_u8(0); // no tagged fields
        }
    }
}

/// Skip a tagged-field section (count, then tag/size/bytes entries) starting at `pos`; returns the
/// offset just past it.
pub(crate) fn skip_tagged_fields(buf: &[u8], pos: usize) -> Result<usize, DecodeError> {
    let mut r = Reader { buf, pos };
    let fields = r.uvarint()?;
    for _ in 0..fields {
        let _tag = r.uvarint()?;
        let size = r.uvarint()? as usize;
        r.take(size)?;
    }
    Ok(r.pos)
}

/// Write a response header of the given version.
pub fn encode_response_header(correlation_id: i32, header_version: i16, out: &mut impl BufMut) {
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0); // no tagged fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_v1_and_v2() {
        for hv in [1, 2] {
            let h = RequestHeader {
                api_key: 3,
                api_version: 12,
                correlation_id: 77,
                client_id: Some("rdkafka".into()),
            };
            let mut buf = Vec::new();
            h.encode(hv, &mut buf);
            buf.extend_from_slice(b"body");
            let (back, body) = RequestHeader::decode(&Bytes::from(buf), hv).unwrap();
            assert_eq!(back, h);
            assert_eq!(&body[..], b"body");
        }
    }

    #[test]
    fn decode_ref_reads_the_client_id_in_place() {
        let h = RequestHeader {
            api_key: 12,
            api_version: 4,
            correlation_id: 9,
            client_id: Some("consumer-1".into()),
        };
        let mut buf = Vec::new();
        h.encode(2, &mut buf);
        buf.extend_from_slice(b"body");
        let frame = Bytes::from(buf);
        let (back, body) = RequestHeader::decode_ref(&frame, 2).unwrap();
        assert_eq!(back.to_owned(), h);
        assert_eq!(&body[..], b"body");
        // The client id is a view of the frame, not a copy of it.
        let id = back.client_id.unwrap().as_ptr() as usize;
        let start = frame.as_ptr() as usize;
        assert!((start..start + frame.len()).contains(&id));
    }

    #[test]
    fn null_client_id_and_truncation() {
        let h = RequestHeader {
            api_key: 18,
            api_version: 0,
            correlation_id: 1,
            client_id: None,
        };
        let mut buf = Vec::new();
        h.encode(1, &mut buf);
        let (back, body) = RequestHeader::decode(&Bytes::from(buf.clone()), 1).unwrap();
        assert_eq!(back.client_id, None);
        assert!(body.is_empty());
        // Claim a 300-byte client id that is not there.
        let mut bad = buf[..8].to_vec();
        bad.extend_from_slice(&300i16.to_be_bytes());
        assert!(matches!(
            RequestHeader::decode(&Bytes::from(bad), 1),
            Err(DecodeError::HeaderTruncated { .. })
        ));
    }

    #[test]
    fn api_versions_response_header_is_always_v0() {
        assert_eq!(response_header_version(18, 3), 0);
        assert_eq!(response_header_version(3, 9), 1);
        assert_eq!(response_header_version(3, 8), 0);
        assert_eq!(request_header_version(3, 9), 2);
        assert_eq!(request_header_version(3, 8), 1);
    }
}
