//! Start-up over one blocking connection to the bootstrap broker: negotiate versions
//! (ApiVersions), make sure the topics exist (Metadata, CreateTopics), and find every group's
//! coordinator (FindCoordinator, batched from v4). Members then only talk to coordinators.

use crate::api::{Api, Versions};
use crate::assign::TopicInfo;
use crate::net::{encode_frame, read_frame};
use crate::tls::{BlockingStream, TlsClient};
use anyhow::{anyhow, bail, Context};
use bytes::BytesMut;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};
use wire::{Request, Response};

/// Keys per batched FindCoordinator request.
const FIND_COORDINATOR_BATCH: usize = 500;

/// A blocking request/response client.
pub struct Client {
    stream: BlockingStream,
    client_id: String,
    next_corr: i32,
    buf: BytesMut,
}

impl Client {
    pub fn connect(addr: &str, client_id: &str, tls: Option<&TlsClient>) -> anyhow::Result<Client> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .with_context(|| format!("resolving {addr}"))?
            .collect();
        let mut last = None;
        for a in &addrs {
            if let Some(tls) = tls {
                // A TLS failure is final: another address of the host would fail the same way.
                let s = tls
                    .connect_blocking(a, Duration::from_secs(10))
                    .with_context(|| format!("connecting to {a} with TLS"))?;
                s.sock.set_read_timeout(Some(Duration::from_secs(60)))?;
                return Ok(Client {
                    stream: BlockingStream::Tls(Box::new(s)),
                    client_id: client_id.to_string(),
                    next_corr: 1,
                    buf: BytesMut::with_capacity(64 * 1024),
                });
            }
            match TcpStream::connect_timeout(a, Duration::from_secs(10)) {
                Ok(stream) => {
                    stream.set_nodelay(true)?;
                    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
                    let stream = BlockingStream::Plain(stream);
                    return Ok(Client {
                        stream,
                        client_id: client_id.to_string(),
                        next_corr: 1,
                        buf: BytesMut::with_capacity(64 * 1024),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => anyhow!("cannot connect to {addr}: {e}"),
            None => anyhow!("{addr} resolves to no address"),
        })
    }

    /// Send one request and wait for its response frame; checks the correlation id.
    fn call_raw(&mut self, api: Api, version: i16, req: &Request) -> anyhow::Result<bytes::Bytes> {
        let corr = self.next_corr;
        self.next_corr += 1;
        let mut out = BytesMut::new();
        encode_frame(&mut out, api.key(), version, corr, &self.client_id, req)
            .with_context(|| format!("encoding {} v{version}", api.name()))?;
        self.stream.write_all(&out)?;
        let frame = read_frame(&mut self.stream, &mut self.buf)
            .with_context(|| format!("waiting for the {} v{version} response", api.name()))?;
        let cid = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        if cid != corr {
            bail!(
                "{} response has correlation id {cid}, expected {corr}",
                api.name()
            );
        }
        Ok(frame)
    }

    /// Send one request and wait for its response.
    pub fn call(&mut self, api: Api, version: i16, req: &Request) -> anyhow::Result<Response> {
        let frame = self.call_raw(api, version, req)?;
        let (_, resp) = wire::codec::decode_response(api.key(), version, &frame)
            .with_context(|| format!("decoding the {} v{version} response", api.name()))?;
        Ok(resp)
    }
}

/// ApiVersions at v3 (as librdkafka starts), falling back to the version the broker names
/// (KIP-511) or v0.
pub fn api_versions(client: &mut Client) -> anyhow::Result<ApiVersionsResponse> {
    let mut version = Api::ApiVersions.implemented().1;
    for _ in 0..3 {
        let mut req = ApiVersionsRequest::default();
        if version >= 3 {
            req = req
                .with_client_software_name(StrBytes::from_static_str("ringleader-loadgen"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        }
        let frame = client.call_raw(Api::ApiVersions, version, &Request::ApiVersions(req))?;
        // A broker that does not know this version answers with a v0 body (KIP-511); like the
        // Java client, fall back to reading v0 when the requested version does not parse.
        let decoded = wire::codec::decode_response(Api::ApiVersions.key(), version, &frame)
            .or_else(|e| {
                wire::codec::decode_response(Api::ApiVersions.key(), 0, &frame).map_err(|_| e)
            })
            .with_context(|| format!("decoding the ApiVersions v{version} response"))?;
        let Response::ApiVersions(r) = decoded.1 else {
            bail!("unexpected response type to ApiVersions");
        };
        if r.error_code == ResponseError::UnsupportedVersion.code() {
            let theirs = r
                .api_keys
                .iter()
                .find(|k| k.api_key == Api::ApiVersions.key())
                .map(|k| k.max_version)
                .unwrap_or(0);
            version = theirs.min(version - 1).max(0);
            continue;
        }
        if r.error_code != 0 {
            bail!(
                "ApiVersions failed: {}",
                crate::api::error_name(r.error_code)
            );
        }
        return Ok(r);
    }
    bail!("ApiVersions: no version both sides support")
}

/// Look up topics; returns (partition count, topic id) for those that exist (the id is nil
/// before Metadata v10).
fn topic_partitions(
    client: &mut Client,
    v: &Versions,
    names: &[String],
) -> anyhow::Result<Vec<Option<(i32, uuid::Uuid)>>> {
    let version = v
        .get(Api::Metadata)
        .ok_or_else(|| anyhow!("broker serves no usable Metadata version"))?;
    let mut req = MetadataRequest::default().with_topics(Some(
        names
            .iter()
            .map(|n| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
            })
            .collect(),
    ));
    if version >= 4 {
        req = req.with_allow_auto_topic_creation(false);
    }
    let Response::Metadata(r) = client.call(Api::Metadata, version, &Request::Metadata(req))?
    else {
        bail!("unexpected response type to Metadata");
    };
    Ok(names
        .iter()
        .map(|n| {
            r.topics
                .iter()
                .find(|t| t.name.as_ref().map(|x| x.0.as_str()) == Some(n.as_str()))
                .filter(|t| t.error_code == 0 && !t.partitions.is_empty())
                .map(|t| (t.partitions.len() as i32, t.topic_id))
        })
        .collect())
}

/// Make sure `count` topics named `{prefix}{i}` exist; create the missing ones with
/// `partitions` partitions. Returns the topics with their real partition counts.
pub fn ensure_topics(
    client: &mut Client,
    v: &Versions,
    prefix: &str,
    count: usize,
    partitions: i32,
) -> anyhow::Result<Vec<TopicInfo>> {
    let names: Vec<String> = (0..count).map(|i| format!("{prefix}{i}")).collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    // Metadata before v4 cannot say "do not auto-create": asking about a missing topic would
    // create it with the broker's default partition count. Create first in that case.
    let metadata_auto_creates = v.get(Api::Metadata).is_some_and(|m| m < 4);
    let existing = if metadata_auto_creates {
        vec![None; names.len()]
    } else {
        topic_partitions(client, v, &names)?
    };
    let missing: Vec<&String> = names
        .iter()
        .zip(&existing)
        .filter(|(_, p)| p.is_none())
        .map(|(n, _)| n)
        .collect();
    if !missing.is_empty() {
        let version = v
            .get(Api::CreateTopics)
            .ok_or_else(|| anyhow!("topics {missing:?} are missing and the broker serves no usable CreateTopics version"))?;
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(
                missing
                    .iter()
                    .map(|n| {
                        CreatableTopic::default()
                            .with_name(TopicName(StrBytes::from_string((*n).clone())))
                            .with_num_partitions(partitions)
                            .with_replication_factor(if version >= 4 { -1 } else { 1 })
                    })
                    .collect(),
            );
        let Response::CreateTopics(r) =
            client.call(Api::CreateTopics, version, &Request::CreateTopics(req))?
        else {
            bail!("unexpected response type to CreateTopics");
        };
        for t in &r.topics {
            if t.error_code != 0 && t.error_code != ResponseError::TopicAlreadyExists.code() {
                bail!(
                    "creating topic {}: {} {}",
                    t.name.0.as_str(),
                    crate::api::error_name(t.error_code),
                    t.error_message.as_deref().unwrap_or("")
                );
            }
        }
    }
    // Wait until the metadata shows every topic (a multi-broker cluster propagates it).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counts = topic_partitions(client, v, &names)?;
        if counts.iter().all(Option::is_some) {
            return Ok(names
                .into_iter()
                .zip(counts)
                .map(|(n, p)| TopicInfo {
                    name: StrBytes::from_string(n),
                    partitions: p.map_or(partitions, |p| p.0),
                    id: p.map_or(uuid::Uuid::nil(), |p| p.1),
                })
                .collect());
        }
        if Instant::now() > deadline {
            let missing: Vec<_> = names
                .iter()
                .zip(&counts)
                .filter(|(_, c)| c.is_none())
                .map(|(n, _)| n.as_str())
                .collect();
            bail!(
                "topics still missing from metadata after creation: {missing:?} (error {})",
                ResponseError::UnknownTopicOrPartition.code()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Find the coordinator of every group. Returns, per group, an index into the returned list of
/// distinct coordinator addresses.
pub fn find_coordinators(
    client: &mut Client,
    v: &Versions,
    groups: &[String],
) -> anyhow::Result<(Vec<u16>, Vec<SocketAddr>)> {
    let version = v
        .get(Api::FindCoordinator)
        .ok_or_else(|| anyhow!("broker serves no usable FindCoordinator version"))?;
    let mut addrs: Vec<SocketAddr> = Vec::new();
    let mut by_group: Vec<Option<u16>> = vec![None; groups.len()];
    let mut pending: Vec<usize> = (0..groups.len()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last_error = String::new();
    while !pending.is_empty() {
        let mut retry = Vec::new();
        let chunk_size = if version >= 4 {
            FIND_COORDINATOR_BATCH
        } else {
            1
        };
        for chunk in pending.chunks(chunk_size) {
            // (group index, error, host, port)
            let mut answers: Vec<(usize, i16, String, i32)> = Vec::new();
            if version >= 4 {
                let req = FindCoordinatorRequest::default().with_coordinator_keys(
                    chunk
                        .iter()
                        .map(|&g| StrBytes::from_string(groups[g].clone()))
                        .collect(),
                );
                let Response::FindCoordinator(r) = client.call(
                    Api::FindCoordinator,
                    version,
                    &Request::FindCoordinator(req),
                )?
                else {
                    bail!("unexpected response type to FindCoordinator");
                };
                for c in r.coordinators {
                    if let Some(&g) = chunk.iter().find(|&&g| groups[g] == c.key.as_str()) {
                        answers.push((g, c.error_code, c.host.to_string(), c.port));
                    }
                }
                for &g in chunk {
                    if !answers.iter().any(|a| a.0 == g) {
                        answers.push((
                            g,
                            ResponseError::CoordinatorNotAvailable.code(),
                            String::new(),
                            -1,
                        ));
                    }
                }
            } else {
                let g = chunk[0];
                let req = FindCoordinatorRequest::default()
                    .with_key(StrBytes::from_string(groups[g].clone()));
                let Response::FindCoordinator(r) = client.call(
                    Api::FindCoordinator,
                    version,
                    &Request::FindCoordinator(req),
                )?
                else {
                    bail!("unexpected response type to FindCoordinator");
                };
                answers.push((g, r.error_code, r.host.to_string(), r.port));
            }
            for (g, err, host, port) in answers {
                match err {
                    0 => {
                        let addr = (host.as_str(), port as u16)
                            .to_socket_addrs()
                            .with_context(|| format!("resolving coordinator {host}:{port}"))?
                            .next()
                            .ok_or_else(|| anyhow!("coordinator {host}:{port} has no address"))?;
                        let idx = match addrs.iter().position(|a| *a == addr) {
                            Some(i) => i,
                            None => {
                                addrs.push(addr);
                                addrs.len() - 1
                            }
                        };
                        by_group[g] = Some(idx as u16);
                    }
                    c if wire::error::is_coordinator_unavailable(c) => {
                        last_error = crate::api::error_name(err);
                        retry.push(g);
                    }
                    e => bail!(
                        "FindCoordinator for group {}: {}",
                        groups[g],
                        crate::api::error_name(e)
                    ),
                }
            }
        }
        pending = retry;
        if !pending.is_empty() {
            if Instant::now() > deadline {
                bail!(
                    "no coordinator for {} groups after 60 s (last error {last_error})",
                    pending.len()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok((
        by_group.into_iter().map(|g| g.unwrap_or(0)).collect(),
        addrs,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use std::net::TcpListener;

    /// A broker that only knows ApiVersions v0-2: it answers v3 with UNSUPPORTED_VERSION in a v0
    /// body (KIP-511), then serves v2.
    #[test]
    fn api_versions_falls_back_to_what_the_broker_names() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = BytesMut::new();
            let mut seen = Vec::new();
            for _ in 0..2 {
                let frame = read_frame(&mut s, &mut buf).unwrap();
                let (key, version, corr) = wire::RequestHeader::peek_prefix(&frame).unwrap();
                assert_eq!(key, 18);
                seen.push(version);
                let mut r = ApiVersionsResponse::default();
                let body_version = if version > 2 {
                    r.error_code = ResponseError::UnsupportedVersion.code();
                    r.api_keys.push(
                        ApiVersion::default()
                            .with_api_key(18)
                            .with_min_version(0)
                            .with_max_version(2),
                    );
                    0
                } else {
                    for (k, max) in [(18, 2), (11, 5), (12, 3)] {
                        r.api_keys
                            .push(ApiVersion::default().with_api_key(k).with_max_version(max));
                    }
                    version
                };
                let mut out = BytesMut::new();
                wire::encode_response(corr, body_version, &Response::ApiVersions(r), &mut out)
                    .unwrap();
                s.write_all(&out).unwrap();
            }
            seen
        });
        let mut c = Client::connect(&addr.to_string(), "t", None).unwrap();
        let r = api_versions(&mut c).unwrap();
        assert_eq!(server.join().unwrap(), vec![3, 2]);
        let v = Versions::negotiate(&r, &[]);
        assert_eq!(v.get(Api::JoinGroup), Some(5));
        assert_eq!(v.get(Api::Heartbeat), Some(3));
        assert_eq!(v.get(Api::SyncGroup), None);
    }
}
