//! Typed requests and responses, and the functions that turn frames into them and back.
//!
//! The message structs are the `kafka-protocol` crate's. What is ours: which APIs exist in the
//! enums (everything the broker serves or will serve), the version checks against our own table,
//! containment of decoder failures, and the exact framing of what goes back on the socket.

use crate::error::DecodeError;
use crate::header::{
    encode_response_header, request_header_version, response_header_version, RequestHeader,
    RequestHeaderRef,
};
use crate::versions::Versions;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable};

macro_rules! apis {
    ($( $variant:ident = $key:literal : $req:ident, $resp:ident; )*) => {
        /// A decoded request body of one of the APIs Ringleader knows.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $( $variant($req), )*
        }

        /// A response body, tagged with its API.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $( $variant($resp), )*
        }

        impl Request {
            pub fn api_key(&self) -> i16 {
                match self { $( Request::$variant(_) => $key, )* }
            }
            fn decode_body(api_key: i16, version: i16, body: &mut Bytes) -> Option<anyhow::Result<Request>> {
                match api_key {
                    $( $key => Some($req::decode(body, version).map(Request::$variant)), )*
                    _ => None,
                }
            }
            /// Encode the body alone (clients: loadgen, the admin CLI, tests).
            pub fn encode_body(&self, version: i16, out: &mut BytesMut) -> anyhow::Result<()> {
                match self { $( Request::$variant(m) => m.encode(out, version), )* }
            }
        }

        impl Response {
            pub fn api_key(&self) -> i16 {
                match self { $( Response::$variant(_) => $key, )* }
            }
            fn encode_body(&self, version: i16, out: &mut BytesMut) -> anyhow::Result<()> {
                match self { $( Response::$variant(m) => m.encode(out, version), )* }
            }
            /// Decode a response body (clients and tests).
            pub fn decode_body(api_key: i16, version: i16, body: &mut Bytes) -> anyhow::Result<Response> {
                match api_key {
                    $( $key => Ok(Response::$variant($resp::decode(body, version)?)), )*
                    _ => anyhow::bail!("unknown api key {api_key}"),
                }
            }
            /// The default (all-zero) response for an api key: the starting point a handler fills.
            pub fn default_for(api_key: i16) -> Option<Response> {
                match api_key {
                    $( $key => Some(Response::$variant($resp::default())), )*
                    _ => None,
                }
            }
        }

        /// Every api key the enums know, for tests that sweep all of them.
        pub const KNOWN_API_KEYS: &[i16] = &[$( $key, )*];
    };
}

apis! {
    Produce = 0: ProduceRequest, ProduceResponse;
    Fetch = 1: FetchRequest, FetchResponse;
    ListOffsets = 2: ListOffsetsRequest, ListOffsetsResponse;
    Metadata = 3: MetadataRequest, MetadataResponse;
    OffsetCommit = 8: OffsetCommitRequest, OffsetCommitResponse;
    OffsetFetch = 9: OffsetFetchRequest, OffsetFetchResponse;
    FindCoordinator = 10: FindCoordinatorRequest, FindCoordinatorResponse;
    JoinGroup = 11: JoinGroupRequest, JoinGroupResponse;
    Heartbeat = 12: HeartbeatRequest, HeartbeatResponse;
    LeaveGroup = 13: LeaveGroupRequest, LeaveGroupResponse;
    SyncGroup = 14: SyncGroupRequest, SyncGroupResponse;
    DescribeGroups = 15: DescribeGroupsRequest, DescribeGroupsResponse;
    ListGroups = 16: ListGroupsRequest, ListGroupsResponse;
    ApiVersions = 18: ApiVersionsRequest, ApiVersionsResponse;
    CreateTopics = 19: CreateTopicsRequest, CreateTopicsResponse;
    DeleteTopics = 20: DeleteTopicsRequest, DeleteTopicsResponse;
    DeleteRecords = 21: DeleteRecordsRequest, DeleteRecordsResponse;
    InitProducerId = 22: InitProducerIdRequest, InitProducerIdResponse;
    OffsetForLeaderEpoch = 23: OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse;
    AddPartitionsToTxn = 24: AddPartitionsToTxnRequest, AddPartitionsToTxnResponse;
    AddOffsetsToTxn = 25: AddOffsetsToTxnRequest, AddOffsetsToTxnResponse;
    EndTxn = 26: EndTxnRequest, EndTxnResponse;
    TxnOffsetCommit = 28: TxnOffsetCommitRequest, TxnOffsetCommitResponse;
    DescribeAcls = 29: DescribeAclsRequest, DescribeAclsResponse;
    CreateAcls = 30: CreateAclsRequest, CreateAclsResponse;
    DeleteAcls = 31: DeleteAclsRequest, DeleteAclsResponse;
    DescribeConfigs = 32: DescribeConfigsRequest, DescribeConfigsResponse;
    AlterConfigs = 33: AlterConfigsRequest, AlterConfigsResponse;
    CreatePartitions = 37: CreatePartitionsRequest, CreatePartitionsResponse;
    DeleteGroups = 42: DeleteGroupsRequest, DeleteGroupsResponse;
    IncrementalAlterConfigs = 44: IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse;
    OffsetDelete = 47: OffsetDeleteRequest, OffsetDeleteResponse;
    DescribeClientQuotas = 48: DescribeClientQuotasRequest, DescribeClientQuotasResponse;
    DescribeUserScramCredentials = 50: DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse;
    AlterUserScramCredentials = 51: AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse;
    UpdateFeatures = 57: UpdateFeaturesRequest, UpdateFeaturesResponse;
    DescribeCluster = 60: DescribeClusterRequest, DescribeClusterResponse;
    DescribeProducers = 61: DescribeProducersRequest, DescribeProducersResponse;
    DescribeTransactions = 65: DescribeTransactionsRequest, DescribeTransactionsResponse;
    ListTransactions = 66: ListTransactionsRequest, ListTransactionsResponse;
    ConsumerGroupHeartbeat = 68: ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse;
    ConsumerGroupDescribe = 69: ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse;
    SaslHandshake = 17: SaslHandshakeRequest, SaslHandshakeResponse;
    SaslAuthenticate = 36: SaslAuthenticateRequest, SaslAuthenticateResponse;
    DescribeQuorum = 55: DescribeQuorumRequest, DescribeQuorumResponse;
    RemoveRaftVoter = 81: RemoveRaftVoterRequest, RemoveRaftVoterResponse;
    AddRaftVoter = 80: AddRaftVoterRequest, AddRaftVoterResponse;
    ElectLeaders = 43: ElectLeadersRequest, ElectLeadersResponse;
    DescribeLogDirs = 35: DescribeLogDirsRequest, DescribeLogDirsResponse;
    AlterPartitionReassignments = 45: AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse;
    ListPartitionReassignments = 46: ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse;
}

/// Decode one request frame (without its length prefix).
///
/// Returns the header whenever it could be read, so a caller can log the correlation id of a
/// request it is about to reject. A key or version outside `versions` is an error here: the
/// caller closes the connection, as Kafka does. ApiVersions with a too-new version is the one
/// exception and is handled by the caller before calling this (see `api_versions`).
pub fn decode_request(
    frame: &Bytes,
    versions: &Versions,
) -> Result<(RequestHeader, Request), (Option<RequestHeader>, DecodeError)> {
    decode_request_ref(frame, versions).map(|(h, r)| (h.to_owned(), r))
}

/// [`decode_request`] with the header read in place (the broker's path: no allocation for the
/// client id of every request).
pub fn decode_request_ref<'a>(
    frame: &'a Bytes,
    versions: &Versions,
) -> Result<(RequestHeaderRef<'a>, Request), (Option<RequestHeader>, DecodeError)> {
    let (api_key, api_version, correlation_id) =
        RequestHeader::peek_prefix(frame).map_err(|e| (None, e))?;
    // Check key and version before reading the rest of the header: its layout depends on them.
    let prefix_only = || {
        Some(RequestHeader {
            api_key,
            api_version,
            correlation_id,
            client_id: None,
        })
    };
    let Some(range) = versions.get(api_key) else {
        let err = if kafka_protocol::messages::ApiKey::try_from(api_key).is_ok() {
            DecodeError::NotServed { api_key }
        } else {
            DecodeError::UnknownApiKey { api_key }
        };
        return Err((prefix_only(), err));
    };
    if api_version < range.min || api_version > range.max {
        let err = DecodeError::UnsupportedVersion {
            api_key,
            version: api_version,
            min: range.min,
            max: range.max,
        };
        return Err((prefix_only(), err));
    }
    let (header, mut body) =
        RequestHeader::decode_ref(frame, request_header_version(api_key, api_version))
            .map_err(|e| (prefix_only(), e))?;
    let body_len = body.len();
    // The generated decoders trust array lengths (`Vec::with_capacity(n)`); a lie larger than
    // isize::MAX panics with "capacity overflow". Contain that here so one bad frame costs one
    // connection, never the process. (Huge-but-representable claims are handled by `alloc`.)
    let decoded = crate::guard::contain(|| Request::decode_body(api_key, api_version, &mut body));
    let body_err = |reason: String| DecodeError::Body {
        api_key,
        version: api_version,
        body_len,
        reason,
    };
    match decoded {
        Ok(Some(Ok(req))) => Ok((header, req)),
        Ok(Some(Err(e))) => Err((Some(header.to_owned()), body_err(format!("{e:#}")))),
        Ok(None) => Err((Some(header.to_owned()), DecodeError::NotServed { api_key })),
        Err(_) => Err((
            Some(header.to_owned()),
            body_err("decoder panicked (impossible length)".into()),
        )),
    }
}

/// Append one complete response frame (length prefix, header, body) to `out`.
///
/// The header version follows the request's key and version (ApiVersions: always v0).
pub fn encode_response(
    correlation_id: i32,
    api_version: i16,
    response: &Response,
    out: &mut BytesMut,
) -> anyhow::Result<()> {
    let start = out.len();
    out.put_i32(0); // patched below
    encode_response_header(
        correlation_id,
        response_header_version(response.api_key(), api_version),
        out,
    );
    if let Err(e) = response.encode_body(api_version, out) {
        out.truncate(start);
        return Err(e);
    }
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Append one complete request frame (clients: loadgen, the admin CLI, tests).
pub fn encode_request(
    header: &RequestHeader,
    request: &Request,
    out: &mut BytesMut,
) -> anyhow::Result<()> {
    debug_assert_eq!(header.api_key, request.api_key());
    let start = out.len();
    out.put_i32(0);
    header.encode(
        request_header_version(header.api_key, header.api_version),
        out,
    );
    if let Err(e) = request.encode_body(header.api_version, out) {
        out.truncate(start);
        return Err(e);
    }
    let len = (out.len() - start - 4) as i32;
    out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Split a response frame (without length prefix) into correlation id and decoded body.
pub fn decode_response(
    api_key: i16,
    api_version: i16,
    frame: &Bytes,
) -> anyhow::Result<(i32, Response)> {
    anyhow::ensure!(
        frame.len() >= 4,
        "response frame of {} bytes has no correlation id",
        frame.len()
    );
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let mut pos = 4;
    if response_header_version(api_key, api_version) >= 1 {
        pos = crate::header::skip_tagged_fields(frame, pos)
            .map_err(|e| anyhow::anyhow!("response header: {e}"))?;
    }
    let mut body = frame.slice(pos..);
    let resp = crate::guard::contain(|| Response::decode_body(api_key, api_version, &mut body))
        .map_err(|_| anyhow::anyhow!("response decoder panicked"))??;
    Ok((correlation_id, resp))
}

impl Response {
    /// The top-level error code of a response, else its first non-zero partition or group
    /// error code (the per-API error counters count this).
    pub fn error_code(&self) -> i16 {
        match self {
            Response::JoinGroup(r) => r.error_code,
            Response::SyncGroup(r) => r.error_code,
            Response::Heartbeat(r) => r.error_code,
            Response::LeaveGroup(r) => r.error_code,
            Response::ConsumerGroupHeartbeat(r) => r.error_code,
            Response::OffsetCommit(r) => r
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| p.error_code)
                .find(|c| *c != 0)
                .unwrap_or(0),
            Response::OffsetFetch(r) => {
                if r.error_code != 0 {
                    r.error_code
                } else {
                    r.groups
                        .iter()
                        .map(|g| g.error_code)
                        .find(|c| *c != 0)
                        .unwrap_or(0)
                }
            }
            Response::ApiVersions(r) => r.error_code,
            Response::ListGroups(r) => r.error_code,
            Response::OffsetDelete(r) => r.error_code,
            Response::FindCoordinator(r) => r.error_code,
            Response::Produce(r) => r
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter())
                .map(|p| p.error_code)
                .find(|c| *c != 0)
                .unwrap_or(0),
            Response::Fetch(r) => {
                if r.error_code != 0 {
                    r.error_code
                } else {
                    r.responses
                        .iter()
                        .flat_map(|t| t.partitions.iter())
                        .map(|p| p.error_code)
                        .find(|c| *c != 0)
                        .unwrap_or(0)
                }
            }
            Response::InitProducerId(r) => r.error_code,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::versions::SERVED;

    #[test]
    fn every_served_version_encodes_and_decodes_default_messages() {
        // A stronger guard than the version table test: the crate's structs must really handle
        // every version we advertise, request and response alike.
        let versions = Versions::default();
        for r in SERVED {
            for v in r.min..=r.max {
                let mut resp_buf = BytesMut::new();
                let resp = Response::default_for(r.api_key).unwrap();
                encode_response(5, v, &resp, &mut resp_buf)
                    .unwrap_or_else(|e| panic!("key {} v{v}: {e}", r.api_key));
                let frame = resp_buf.split_off(4).freeze();
                let (cid, back) = decode_response(r.api_key, v, &frame).unwrap();
                assert_eq!(cid, 5);
                assert_eq!(back.api_key(), r.api_key);

                let req = request_default(r.api_key);
                let header = RequestHeader {
                    api_key: r.api_key,
                    api_version: v,
                    correlation_id: 9,
                    client_id: Some("t".into()),
                };
                let mut req_buf = BytesMut::new();
                encode_request(&header, &req, &mut req_buf)
                    .unwrap_or_else(|e| panic!("key {} v{v}: {e}", r.api_key));
                let frame = req_buf.split_off(4).freeze();
                let (h, back) = decode_request(&frame, &versions).unwrap();
                assert_eq!(h, header);
                assert_eq!(back, req);
            }
        }
    }

    fn request_default(api_key: i16) -> Request {
        match api_key {
            0 => Request::Produce(Default::default()),
            1 => Request::Fetch(Default::default()),
            2 => Request::ListOffsets(Default::default()),
            3 => Request::Metadata(Default::default()),
            8 => Request::OffsetCommit(Default::default()),
            9 => Request::OffsetFetch(Default::default()),
            11 => Request::JoinGroup(Default::default()),
            12 => Request::Heartbeat(Default::default()),
            13 => Request::LeaveGroup(Default::default()),
            14 => Request::SyncGroup(Default::default()),
            15 => Request::DescribeGroups(Default::default()),
            16 => Request::ListGroups(Default::default()),
            42 => Request::DeleteGroups(Default::default()),
            47 => Request::OffsetDelete(Default::default()),
            68 => Request::ConsumerGroupHeartbeat(Default::default()),
            69 => Request::ConsumerGroupDescribe(Default::default()),
            10 => Request::FindCoordinator(Default::default()),
            18 => Request::ApiVersions(Default::default()),
            19 => Request::CreateTopics(Default::default()),
            20 => Request::DeleteTopics(Default::default()),
            21 => Request::DeleteRecords(Default::default()),
            22 => Request::InitProducerId(Default::default()),
            32 => Request::DescribeConfigs(Default::default()),
            33 => Request::AlterConfigs(Default::default()),
            37 => Request::CreatePartitions(Default::default()),
            44 => Request::IncrementalAlterConfigs(Default::default()),
            60 => Request::DescribeCluster(Default::default()),
            61 => Request::DescribeProducers(Default::default()),
            57 => Request::UpdateFeatures(Default::default()),
            24 => Request::AddPartitionsToTxn(Default::default()),
            25 => Request::AddOffsetsToTxn(Default::default()),
            26 => Request::EndTxn(Default::default()),
            28 => Request::TxnOffsetCommit(Default::default()),
            65 => Request::DescribeTransactions(Default::default()),
            66 => Request::ListTransactions(Default::default()),
            50 => Request::DescribeUserScramCredentials(Default::default()),
            51 => Request::AlterUserScramCredentials(Default::default()),
            17 => Request::SaslHandshake(Default::default()),
            36 => Request::SaslAuthenticate(Default::default()),
            29 => Request::DescribeAcls(Default::default()),
            30 => Request::CreateAcls(Default::default()),
            31 => Request::DeleteAcls(Default::default()),
            48 => Request::DescribeClientQuotas(Default::default()),
            55 => Request::DescribeQuorum(Default::default()),
            81 => Request::RemoveRaftVoter(Default::default()),
            80 => Request::AddRaftVoter(Default::default()),
            43 => Request::ElectLeaders(Default::default()),
            35 => Request::DescribeLogDirs(Default::default()),
            45 => Request::AlterPartitionReassignments(Default::default()),
            46 => Request::ListPartitionReassignments(Default::default()),
            k => panic!("add a default request for key {k}"),
        }
    }

    #[test]
    fn rejects_unknown_key_and_unsupported_version() {
        let versions = Versions::default();
        for (key, ver) in [(999i16, 0i16), (3, 99), (11, 10), (68, 2)] {
            let header = RequestHeader {
                api_key: key,
                api_version: ver,
                correlation_id: 1,
                client_id: None,
            };
            let mut buf = BytesMut::new();
            header.encode(1, &mut buf);
            let (h, err) = decode_request(&buf.freeze(), &versions).unwrap_err();
            assert_eq!(
                h.unwrap_or_else(|| panic!("{key} {ver}: {err:?}"))
                    .correlation_id,
                1
            );
            assert!(
                matches!(
                    err,
                    DecodeError::UnknownApiKey { .. }
                        | DecodeError::UnsupportedVersion { .. }
                        | DecodeError::NotServed { .. }
                ),
                "{err:?}"
            );
        }
    }

    #[test]
    fn huge_array_claim_is_an_error_not_a_crash() {
        // CreateTopics v2 with a topics array claiming i32::MAX entries and nothing after it.
        let header = RequestHeader {
            api_key: 19,
            api_version: 2,
            correlation_id: 3,
            client_id: None,
        };
        let mut buf = BytesMut::new();
        header.encode(1, &mut buf);
        buf.put_i32(i32::MAX);
        let (_, err) = decode_request(&buf.freeze(), &Versions::default()).unwrap_err();
        assert!(
            matches!(err, DecodeError::Body { api_key: 19, .. }),
            "{err:?}"
        );
    }
}
