//! One client connection: read frames, decode, dispatch, and write responses in request order.
//!
//! Each request runs as its own task so a slow one (a cross-shard call, a topic creation that
//! fsyncs) does not stop the next from being decoded, but responses leave in the order requests
//! arrived, because Kafka clients match them by position as much as by correlation id. The queue
//! between reader and writer is bounded (`MAX_IN_FLIGHT`), which bounds memory per connection and
//! pushes back on a client that pipelines without reading.
//!
//! Bad input closes the connection with one log line (Kafka closes on a bad frame or an
//! unsupported version too), after the responses to earlier requests have been written.

use crate::shard::Shard;
use crate::{broker, data, groups_api};
use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use std::rc::Rc;
use wire::{api_versions, decode_request, encode_response, Request, RequestHeader, Response};

/// Requests decoded but not yet answered on one connection.
pub const MAX_IN_FLIGHT: usize = 64;

/// Bytes read per system call. Kept small because every connection owns one such buffer (plus
/// its frame buffer): at 10,000 connections 64 KiB each was most of the broker's memory.
const READ_CHUNK: usize = 16 * 1024;

/// What the writer does with one slot of the ordered queue.
enum Outcome {
    Frame(BytesMut),
    /// The request needs no response (Produce with acks=0).
    Nothing,
    Close,
}

/// Bad-input warnings a shard logs per second; the rest are counted and reported with the next
/// one, so a flood of garbage connections cannot turn into a flood of log lines.
const WARNINGS_PER_SECOND: u32 = 10;

thread_local! {
    static WARN_WINDOW: std::cell::Cell<(u64, u32, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
}

/// `Some(suppressed since the last logged line)` when this warning may be logged.
fn warn_budget() -> Option<u64> {
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    WARN_WINDOW.with(|w| {
        let (sec, logged, suppressed) = w.get();
        let (logged, suppressed) = if sec == second {
            (logged, suppressed)
        } else {
            (0, suppressed)
        };
        if logged < WARNINGS_PER_SECOND {
            w.set((second, logged + 1, 0));
            Some(suppressed)
        } else {
            w.set((second, logged, suppressed + 1));
            None
        }
    })
}

/// Largest buffer growth reserved ahead of the bytes of a frame: a client that announces a large
/// frame and sends it slowly gets memory as its bytes arrive, not all at once.
const MAX_RESERVE: usize = 1 << 20;

/// Serve one connection until the peer closes, a bad frame arrives, or it has sent no complete
/// request for `connections.max.idle.ms`. `_slot` holds its place under the connection limits.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream, _slot: crate::limits::Slot) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_nodelay(true);
    let registration = shard.conns.register(&stream);
    let (mut rd, mut wr) = futures_lite::io::split(stream);
    let (tx, rx) =
        glommio::channels::local_channel::new_bounded::<glommio::Task<Outcome>>(MAX_IN_FLIGHT);

    let writer_peer = peer.clone();
    let writer = glommio::spawn_local(async move {
        while let Some(task) = rx.recv().await {
            match task.await {
                Outcome::Frame(bytes) => {
                    if let Err(e) = wr.write_all(&bytes).await {
                        tracing::debug!(peer = %writer_peer, error = %e, "write failed; closing");
                        break;
                    }
                }
                Outcome::Nothing => {}
                Outcome::Close => break,
            }
        }
        let _ = wr.close().await;
    });

    let frames = wire::FrameDecoder::new(shard.broker.config.socket_request_max_bytes);
    let idle = std::time::Duration::from_millis(shard.broker.config.connections_max_idle_ms as u64);
    let mut last_request = std::time::Instant::now();
    let mut buf = BytesMut::with_capacity(4096);
    let mut scratch = vec![0u8; READ_CHUNK];
    'read: loop {
        loop {
            let frame = match frames.decode(&mut buf) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    if let Some(suppressed) = warn_budget() {
                        tracing::warn!(%peer, error = %e, suppressed, "closing connection: bad frame");
                    }
                    let _ = tx
                        .send(glommio::spawn_local(async { Outcome::Close }))
                        .await;
                    break 'read;
                }
            };
            let task = match request_task(&shard, &peer, frame) {
                Some(t) => t,
                None => {
                    let _ = tx
                        .send(glommio::spawn_local(async { Outcome::Close }))
                        .await;
                    break 'read;
                }
            };
            if tx.send(task).await.is_err() {
                break 'read; // writer gone: the peer stopped reading
            }
            last_request = std::time::Instant::now();
        }
        if let Ok(needed) = frames.bytes_needed(&buf) {
            buf.reserve(
                needed
                    .saturating_sub(buf.len())
                    .min(frames.max_frame_bytes() as usize)
                    .min(MAX_RESERVE),
            );
        }
        let Some(left) = idle.checked_sub(last_request.elapsed()) else {
            tracing::debug!(%peer, "closing connection: idle for connections.max.idle.ms");
            break;
        };
        let read = async { Some(rd.read(&mut scratch).await) };
        let timeout = async {
            glommio::timer::sleep(left).await;
            None
        };
        match futures_lite::future::or(read, timeout).await {
            None => continue, // re-check the idle deadline
            Some(Ok(0)) => break,
            Some(Ok(n)) => buf.extend_from_slice(&scratch[..n]),
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "read failed; closing");
                break;
            }
        }
    }
    drop(tx);
    writer.await;
    drop(registration);
}

/// Decode one frame and start the task that answers it. `None` means: close the connection.
fn request_task(
    shard: &Rc<Shard>,
    peer: &str,
    frame: bytes::Bytes,
) -> Option<glommio::Task<Outcome>> {
    let versions = &shard.broker.versions;
    // ApiVersions of a version we do not know is answered, not closed (KIP-511): v0 body with
    // UNSUPPORTED_VERSION so the client can retry with a version we list.
    if let Ok((api_key, version, correlation_id)) = RequestHeader::peek_prefix(&frame) {
        if api_key == api_versions::API_VERSIONS_KEY
            && !versions.supports(api_key, version)
            && version >= 0
        {
            let out = api_versions::unsupported_version_frame(correlation_id, versions);
            return Some(glommio::spawn_local(async move { Outcome::Frame(out) }));
        }
    }
    let (header, request) = match decode_request(&frame, versions) {
        Ok(ok) => ok,
        Err((header, e)) => {
            let cid = header.map(|h| h.correlation_id);
            if let Some(suppressed) = warn_budget() {
                tracing::warn!(%peer, correlation_id = ?cid, error = %e, suppressed, "closing connection: undecodable request");
            }
            return None;
        }
    };
    let shard = shard.clone();
    let peer = peer.to_string();
    let peer_ip = peer
        .rsplit_once(':')
        .map(|(ip, _)| ip.trim_matches(|c| c == '[' || c == ']').to_string())
        .unwrap_or_default();
    let decoded_at = std::time::Instant::now();
    // Kafka sends nothing back for a Produce with acks=0 (the client does not read).
    let silent = matches!(&request, Request::Produce(r) if r.acks == 0);
    Some(glommio::spawn_local(async move {
        let version = header.api_version;
        let api_key = header.api_key;
        let started = std::time::Instant::now();
        match dispatch(&shard, &peer_ip, &header, request).await {
            Ok(_) if silent => Outcome::Nothing,
            Ok(resp) => {
                let ready = std::time::Instant::now();
                let mut out = BytesMut::with_capacity(256);
                match encode_response(header.correlation_id, version, &resp, &mut out) {
                    Ok(()) => {
                        let us = |d: std::time::Duration| d.as_micros() as u64;
                        shard.table.metrics.borrow_mut().record_request(
                            api_key,
                            error_code(&resp),
                            us(started - decoded_at),
                            us(ready - started),
                            us(decoded_at.elapsed()),
                        );
                        Outcome::Frame(out)
                    }
                    Err(e) => {
                        tracing::error!(%peer, api_key, version, error = %e, "could not encode response; closing");
                        Outcome::Close
                    }
                }
            }
            Err(reason) => {
                tracing::warn!(%peer, api_key, version, %reason, "closing connection");
                Outcome::Close
            }
        }
    }))
}

/// Route a decoded request to its handler.
async fn dispatch(
    shard: &Rc<Shard>,
    peer_ip: &str,
    header: &RequestHeader,
    request: Request,
) -> Result<Response, String> {
    let b = &shard.broker;
    let v = header.api_version;
    let caller = || groups_api::Caller {
        client_id: header.client_id.clone().unwrap_or_default(),
        client_host: format!("/{peer_ip}"),
    };
    Ok(match request {
        Request::JoinGroup(r) => {
            Response::JoinGroup(groups_api::join_group(shard, &caller(), r, v).await)
        }
        Request::SyncGroup(r) => {
            Response::SyncGroup(groups_api::sync_group(shard, &caller(), r, v).await)
        }
        Request::Heartbeat(r) => {
            Response::Heartbeat(groups_api::heartbeat(shard, &caller(), r, v).await)
        }
        Request::LeaveGroup(r) => {
            Response::LeaveGroup(groups_api::leave_group(shard, &caller(), r, v).await)
        }
        Request::OffsetCommit(r) => {
            Response::OffsetCommit(groups_api::offset_commit(shard, &caller(), r, v).await)
        }
        Request::OffsetFetch(r) => {
            Response::OffsetFetch(groups_api::offset_fetch(shard, &caller(), r, v).await)
        }
        Request::OffsetDelete(r) => {
            Response::OffsetDelete(groups_api::offset_delete(shard, &caller(), r, v).await)
        }
        Request::DescribeGroups(r) => {
            Response::DescribeGroups(groups_api::describe_groups(shard, &caller(), r, v).await)
        }
        Request::ListGroups(r) => {
            Response::ListGroups(groups_api::list_groups(shard, &caller(), r, v).await)
        }
        Request::DeleteGroups(r) => {
            Response::DeleteGroups(groups_api::delete_groups(shard, &caller(), r, v).await)
        }
        Request::ConsumerGroupHeartbeat(r) => Response::ConsumerGroupHeartbeat(
            groups_api::consumer_group_heartbeat(shard, &caller(), r, v).await,
        ),
        Request::ConsumerGroupDescribe(r) => Response::ConsumerGroupDescribe(
            groups_api::consumer_group_describe(shard, &caller(), r, v).await,
        ),
        Request::Produce(r) => Response::Produce(data::produce(shard, r, v).await),
        Request::ListOffsets(r) => Response::ListOffsets(data::list_offsets(shard, r, v).await),
        Request::Fetch(r) => Response::Fetch(data::fetch(shard, r, v).await),
        Request::DeleteRecords(r) => {
            Response::DeleteRecords(data::delete_records(shard, r, v).await)
        }
        Request::InitProducerId(r) => {
            Response::InitProducerId(data::init_producer_id(shard, r, v).await)
        }
        Request::ApiVersions(r) => {
            Response::ApiVersions(api_versions::response(&r, v, &b.versions))
        }
        Request::Metadata(r) => Response::Metadata(broker::metadata(b, r, v).await),
        Request::CreateTopics(r) => Response::CreateTopics(broker::create_topics(b, r, v).await),
        Request::DeleteTopics(r) => {
            let resp = broker::delete_topics(b, r, v).await;
            // Close the deleted topics' partitions on every shard, then free their directories.
            for s in 0..shard.router.shards() {
                let op = crate::partition::PartitionOp::Data(crate::topic_data::DataOp::Forget);
                shard.router.call(s as i32, op).await;
            }
            if let Some(dir) = &b.data_dir {
                crate::topic_data::sweep_deleted_topics(dir, b);
            }
            Response::DeleteTopics(resp)
        }
        Request::FindCoordinator(r) => Response::FindCoordinator(broker::find_coordinator(b, r, v)),
        Request::DescribeConfigs(r) => Response::DescribeConfigs(broker::describe_configs(b, r, v)),
        Request::DescribeCluster(r) => Response::DescribeCluster(broker::describe_cluster(b, r, v)),
        // The version table only admits the APIs above; anything else reaching here is a bug in
        // that table, answered the way Kafka answers an API it does not serve.
        other => {
            return Err(format!(
                "api key {} is advertised but has no handler",
                other.api_key()
            ))
        }
    })
}

/// The top-level (or first) error code of a response, for the per-API error counters.
fn error_code(resp: &Response) -> i16 {
    match resp {
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
