//! `ringleader groups` end to end: against scripted in-process brokers (modern, old and minimal
//! version tables, a mute one) and against the real server; `ringleader transactions
//! --describe-producers` against the real broker binary.

mod common;

use bytes::{Bytes, BytesMut};
use clap::Parser;
use engine::config::Config;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tools::groups::{self as admin_cli, GroupsArgs};
use wire::codec::{decode_response, encode_request};
use wire::{ApiRange, Request, RequestHeader, Response, Versions};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: GroupsArgs,
}

/// Run `ringleader groups` with `argv` against `addr`; returns (exit code, output).
fn groups(addr: SocketAddr, argv: &[&str]) -> (i32, String) {
    let bootstrap = addr.to_string();
    let argv: Vec<&str> = ["groups", "--bootstrap", &bootstrap]
        .into_iter()
        .chain(argv.iter().copied())
        .collect();
    let args = Cli::try_parse_from(argv).unwrap().args;
    let mut out = Vec::new();
    let code = admin_cli::run(&args, &mut out);
    (code, String::from_utf8(out).unwrap())
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tps(entries: &[(&str, &[i32])]) -> admin_cli::TopicPartitions {
    entries
        .iter()
        .map(|(t, ps)| (t.to_string(), ps.to_vec()))
        .collect()
}

// ------------------------------------------------------------------------------------------------
// A scripted broker: real sockets and the real `wire` codec, canned group data.
// ------------------------------------------------------------------------------------------------

const fn r(api_key: i16, min: i16, max: i16) -> ApiRange {
    ApiRange { api_key, min, max }
}

/// What a current Kafka (4.1) advertises for the APIs the admin client uses.
const MODERN: &[ApiRange] = &[
    r(2, 1, 10),
    r(9, 1, 9),
    r(10, 0, 6),
    r(15, 0, 5),
    r(16, 0, 5),
    r(18, 0, 4),
    r(42, 0, 2),
    r(69, 0, 1),
];

/// An old broker: ApiVersions ≤2 (so v3 gets the KIP-511 fallback), no batching anywhere, no
/// ListGroups state/type, no ConsumerGroupDescribe.
const OLD: &[ApiRange] = &[
    r(2, 1, 1),
    r(9, 1, 7),
    r(10, 0, 3),
    r(15, 0, 3),
    r(16, 0, 3),
    r(18, 0, 2),
    r(42, 0, 0),
];

/// OffsetFetch v1 only: topics must be listed (no "all topics").
const OFFSET_FETCH_V1: &[ApiRange] = &[
    r(9, 1, 1),
    r(10, 0, 3),
    r(15, 0, 3),
    r(16, 0, 2),
    r(18, 0, 2),
];

/// Like Ringleader before the group APIs: coordinator lookup only.
const NO_GROUP_APIS: &[ApiRange] = &[r(3, 0, 13), r(10, 0, 6), r(18, 0, 4)];

struct Mock {
    addr: SocketAddr,
    /// (api key, version) of every request received, in order.
    log: Arc<Mutex<Vec<(i16, i16)>>>,
}

impl Mock {
    fn versions_of(&self, key: i16) -> Vec<i16> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .collect()
    }
}

/// Start a scripted broker. `mute`: accept and read, never answer. The threads are left running
/// (blocked in accept) until the test process exits.
fn start_mock(ranges: &'static [ApiRange], mute: bool) -> Mock {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let find_calls = Arc::new(AtomicUsize::new(0));
    let log2 = log.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(sock) = sock else { continue };
            let log = log2.clone();
            let find_calls = find_calls.clone();
            std::thread::spawn(move || serve_mock(sock, ranges, addr, mute, &log, &find_calls));
        }
    });
    Mock { addr, log }
}

fn serve_mock(
    mut sock: TcpStream,
    ranges: &'static [ApiRange],
    addr: SocketAddr,
    mute: bool,
    log: &Mutex<Vec<(i16, i16)>>,
    find_calls: &AtomicUsize,
) {
    let versions = Versions::new(ranges);
    loop {
        let mut len = [0u8; 4];
        if sock.read_exact(&mut len).is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        if sock.read_exact(&mut frame).is_err() {
            return;
        }
        let frame = Bytes::from(frame);
        let (key, version, cid) = RequestHeader::peek_prefix(&frame).unwrap();
        log.lock().unwrap().push((key, version));
        if mute {
            continue;
        }
        let range = versions.get(18).unwrap();
        if key == 18 && version > range.max {
            let out = wire::api_versions::unsupported_version_frame(cid, &versions);
            let _ = sock.write_all(&out);
            continue;
        }
        // Like Kafka: anything not advertised closes the connection.
        let Ok((header, req)) = wire::decode_request(&frame, &versions) else {
            return;
        };
        let resp = mock_response(&req, header.api_version, addr, &versions, find_calls);
        let mut out = BytesMut::new();
        wire::encode_response(cid, header.api_version, &resp, &mut out).unwrap();
        if sock.write_all(&out).is_err() {
            return;
        }
    }
}

fn assignment_bytes(entries: &[(&str, &[i32])]) -> Bytes {
    admin_cli::encode_consumer_assignment(&tps(entries), 1)
}

/// Committed offsets of orders 0..5 (reference §10 Example 4) and log-end offsets.
const COMMITTED: [i64; 6] = [10, 9, 13, 6, 14, 8];
const LOG_END: [i64; 6] = [12, 9, 13, 6, 20, 8];

fn mock_response(
    req: &Request,
    v: i16,
    addr: SocketAddr,
    versions: &Versions,
    find_calls: &AtomicUsize,
) -> Response {
    match req {
        Request::ApiVersions(q) => {
            Response::ApiVersions(wire::api_versions::response(q, v, versions))
        }
        Request::FindCoordinator(q) => {
            // The first lookup finds the coordinator still loading: the client must retry.
            let unavailable = find_calls.fetch_add(1, Ordering::SeqCst) == 0;
            let code = if unavailable { 15 } else { 0 };
            let mut resp = FindCoordinatorResponse::default();
            if v >= 4 {
                resp.coordinators = q
                    .coordinator_keys
                    .iter()
                    .map(|k| {
                        let c = find_coordinator_response::Coordinator::default()
                            .with_key(k.clone())
                            .with_error_code(code);
                        if unavailable {
                            c.with_node_id(BrokerId(-1)).with_port(-1)
                        } else {
                            c.with_node_id(BrokerId(7))
                                .with_host(s("127.0.0.1"))
                                .with_port(addr.port() as i32)
                        }
                    })
                    .collect();
            } else {
                resp.error_code = code;
                if unavailable {
                    resp.node_id = BrokerId(-1);
                    resp.port = -1;
                } else {
                    resp.node_id = BrokerId(7);
                    resp.host = s("127.0.0.1");
                    resp.port = addr.port() as i32;
                }
            }
            Response::FindCoordinator(resp)
        }
        Request::ListGroups(_) => {
            let g = |id: &str, pt: &str, state: &str, ty: &str| {
                let mut l = list_groups_response::ListedGroup::default()
                    .with_group_id(GroupId(s(id)))
                    .with_protocol_type(s(pt));
                if v >= 4 {
                    l.group_state = s(state);
                }
                if v >= 5 {
                    l.group_type = s(ty);
                }
                l
            };
            Response::ListGroups(ListGroupsResponse::default().with_groups(vec![
                g("g-empty", "consumer", "Empty", "classic"),
                g("g-connect", "connect", "Stable", "classic"),
                g("g-classic", "consumer", "Stable", "classic"),
                g("g-consumer", "consumer", "Stable", "consumer"),
            ]))
        }
        Request::DescribeGroups(q) => {
            let groups = q
                .groups
                .iter()
                .map(|id| {
                    let d = describe_groups_response::DescribedGroup::default()
                        .with_group_id(id.clone());
                    let member = |mid: &str, cid: &str, a: Bytes| {
                        describe_groups_response::DescribedGroupMember::default()
                            .with_member_id(s(mid))
                            .with_client_id(s(cid))
                            .with_client_host(s("/127.0.0.1"))
                            .with_member_assignment(a)
                    };
                    match id.0.as_str() {
                        "g-classic" => d
                            .with_group_state(s("Stable"))
                            .with_protocol_type(s("consumer"))
                            .with_protocol_data(s("range"))
                            .with_members(vec![
                                member("A-1", "A", assignment_bytes(&[("orders", &[0, 1, 2])])),
                                member("B-2", "B", assignment_bytes(&[("orders", &[3, 4, 5])])),
                            ]),
                        "g-empty" => d
                            .with_group_state(s("Empty"))
                            .with_protocol_type(s("consumer")),
                        // Kafka before DescribeGroups v6: unknown groups are "Dead", error 0.
                        _ => d.with_group_state(s("Dead")),
                    }
                })
                .collect();
            Response::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
        }
        Request::ConsumerGroupDescribe(q) => {
            use consumer_group_describe_response as cgd;
            let assignment = |ps: &[i32]| {
                cgd::Assignment::default().with_topic_partitions(vec![
                    cgd::TopicPartitions::default()
                        .with_topic_name(TopicName(s("orders")))
                        .with_partitions(ps.to_vec()),
                ])
            };
            let member = |mid: &str, cid: &str, ps: &[i32]| {
                cgd::Member::default()
                    .with_member_id(s(mid))
                    .with_client_id(s(cid))
                    .with_client_host(s("/127.0.0.1"))
                    .with_member_epoch(3)
                    .with_assignment(assignment(ps))
                    .with_target_assignment(assignment(ps))
            };
            let groups = q
                .group_ids
                .iter()
                .map(|id| {
                    let d = cgd::DescribedGroup::default().with_group_id(id.clone());
                    if id.0.as_str() == "g-consumer" {
                        d.with_group_state(s("Stable"))
                            .with_group_epoch(3)
                            .with_assignment_epoch(3)
                            .with_assignor_name(s("uniform"))
                            .with_members(vec![
                                member("A-id", "A", &[0, 1, 2]),
                                member("B-id", "B", &[3, 4, 5]),
                            ])
                    } else {
                        d.with_error_code(69)
                    }
                })
                .collect();
            Response::ConsumerGroupDescribe(
                ConsumerGroupDescribeResponse::default().with_groups(groups),
            )
        }
        Request::OffsetFetch(q) => {
            let known = |g: &str| g == "g-classic" || g == "g-consumer";
            let wanted = |t: &str, p: i32| -> bool {
                // v1 lists topics and partitions; later versions ask for everything (null).
                match &q.topics {
                    Some(ts) if v < 8 => ts
                        .iter()
                        .any(|x| x.name.0.as_str() == t && x.partition_indexes.contains(&p)),
                    _ => true,
                }
            };
            let mut parts: Vec<(i32, i64)> = (0..6)
                .filter(|p| wanted("orders", *p))
                .map(|p| (p, COMMITTED[p as usize]))
                .collect();
            // A partition without a committed offset is reported as -1 and must not show up.
            parts.push((6, -1));
            if v >= 8 {
                use offset_fetch_response as of;
                let groups = q
                    .groups
                    .iter()
                    .map(|g| {
                        let mut out = of::OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone());
                        if known(g.group_id.0.as_str()) {
                            out.topics = vec![of::OffsetFetchResponseTopics::default()
                                .with_name(TopicName(s("orders")))
                                .with_partitions(
                                    parts
                                        .iter()
                                        .map(|(p, o)| {
                                            of::OffsetFetchResponsePartitions::default()
                                                .with_partition_index(*p)
                                                .with_committed_offset(*o)
                                                .with_metadata(Some(s("")))
                                        })
                                        .collect(),
                                )];
                        }
                        out
                    })
                    .collect();
                Response::OffsetFetch(OffsetFetchResponse::default().with_groups(groups))
            } else {
                use offset_fetch_response as of;
                let mut resp = OffsetFetchResponse::default();
                if known(q.group_id.0.as_str()) {
                    resp.topics = vec![of::OffsetFetchResponseTopic::default()
                        .with_name(TopicName(s("orders")))
                        .with_partitions(
                            parts
                                .iter()
                                .map(|(p, o)| {
                                    of::OffsetFetchResponsePartition::default()
                                        .with_partition_index(*p)
                                        .with_committed_offset(*o)
                                        .with_metadata(Some(s("")))
                                })
                                .collect(),
                        )];
                }
                Response::OffsetFetch(resp)
            }
        }
        Request::ListOffsets(q) => {
            use list_offsets_response as lo;
            let topics = q
                .topics
                .iter()
                .map(|t| {
                    lo::ListOffsetsTopicResponse::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    let i = p.partition_index as usize;
                                    let part = lo::ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p.partition_index);
                                    if t.name.0.as_str() == "orders" && i < 6 {
                                        part.with_offset(LOG_END[i]).with_timestamp(-1)
                                    } else {
                                        part.with_error_code(3)
                                    }
                                })
                                .collect(),
                        )
                })
                .collect();
            Response::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
        }
        Request::DeleteGroups(q) => Response::DeleteGroups(
            DeleteGroupsResponse::default().with_results(
                q.groups_names
                    .iter()
                    .map(|g| {
                        let code = match g.0.as_str() {
                            "g-classic" | "g-consumer" => 68, // NON_EMPTY_GROUP
                            "g-empty" => 0,
                            _ => 69, // GROUP_ID_NOT_FOUND
                        };
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        other => panic!("the mock broker does not script {other:?}"),
    }
}

/// The offsets view of g-classic: reference §10 Example 2 with the offsets of Example 4.
const CLASSIC_OFFSETS: &str = "
GROUP     TOPIC  PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST       CLIENT-ID
g-classic orders 0         10             12             2   A-1         /127.0.0.1 A
g-classic orders 1         9              9              0   A-1         /127.0.0.1 A
g-classic orders 2         13             13             0   A-1         /127.0.0.1 A
g-classic orders 3         6              6              0   B-2         /127.0.0.1 B
g-classic orders 4         14             20             6   B-2         /127.0.0.1 B
g-classic orders 5         8              8              0   B-2         /127.0.0.1 B
";

#[test]
fn modern_broker_list_describe_delete() {
    let mock = start_mock(MODERN, false);

    let (code, out) = groups(mock.addr, &["--list"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "g-classic\ng-consumer\ng-empty\n")
    );
    let (code, out) = groups(mock.addr, &["--list", "--state"]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "GROUP      STATE\ng-classic  Stable\ng-consumer Stable\ng-empty    Empty\n"
        )
    );

    let (code, out) = groups(mock.addr, &["--describe", "--group", "g-classic"]);
    assert_eq!((code, out.as_str()), (0, CLASSIC_OFFSETS));

    let (code, out) = groups(
        mock.addr,
        &[
            "--describe",
            "--group",
            "g-consumer",
            "--members",
            "--verbose",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "
GROUP      CONSUMER-ID HOST       CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT
g-consumer A-id        /127.0.0.1 A         3           3             orders(0,1,2)      3            orders(0,1,2)
g-consumer B-id        /127.0.0.1 B         3           3             orders(3,4,5)      3            orders(3,4,5)
"
    );

    let (code, out) = groups(
        mock.addr,
        &["--describe", "--group", "g-consumer", "--state"],
    );
    assert_eq!(code, 0, "{out}");
    let port = mock.addr.port();
    let coord = format!("127.0.0.1:{port} (7)");
    let pad = " ".repeat(coord.len() - "COORDINATOR (ID)".len());
    assert_eq!(
        out,
        format!(
            "
GROUP      COORDINATOR (ID){pad} ASSIGNMENT-STRATEGY STATE  GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
g-consumer {coord} uniform             Stable 3           3                       2
"
        )
    );

    let (code, out) = groups(
        mock.addr,
        &["--describe", "--group", "g-classic", "--members"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("\ng-classic A-1         /127.0.0.1 A         3\n"),
        "{out}"
    );

    // Unknown group, then an empty group with offsets, in one run: exit 1, the rest still shown.
    let (code, out) = groups(
        mock.addr,
        &["--describe", "--group", "nope", "--group", "g-empty"],
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Error: Consumer group 'nope' does not exist.\n\nConsumer group 'g-empty' has no active members.\n"
    );

    let (code, out) = groups(mock.addr, &["--describe", "--all-groups", "--state"]);
    assert_eq!(code, 0, "{out}");
    for g in ["g-classic", "g-consumer", "g-empty"] {
        assert!(out.contains(&format!("\n{g} ")), "{g} missing from {out}");
    }
    assert!(!out.contains("g-connect"), "{out}");

    let (code, out) = groups(mock.addr, &["--delete", "--group", "g-empty"]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "Deletion of requested consumer groups ('g-empty') was successful.\n"
        )
    );
    let (code, out) = groups(
        mock.addr,
        &["--delete", "--group", "g-classic", "--group", "g-empty"],
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Deletion of some consumer groups failed:\n\
         * Group 'g-classic' could not be deleted due to: NON_EMPTY_GROUP\n\
         \n\
         These consumer groups were deleted successfully: 'g-empty'\n"
    );

    // Highest common versions, batched FindCoordinator, retry after COORDINATOR_NOT_AVAILABLE.
    assert!(mock.versions_of(18).iter().all(|v| *v == 3));
    assert!(mock.versions_of(10).iter().all(|v| *v == 6));
    assert!(mock.versions_of(10).len() >= 2, "no retry after error 15");
    assert!(mock.versions_of(9).iter().all(|v| *v == 9));
    assert!(mock.versions_of(2).iter().all(|v| *v == 10));
    assert!(mock.versions_of(15).iter().all(|v| *v == 5));
    assert!(mock.versions_of(16).iter().all(|v| *v == 5));
    assert!(mock.versions_of(42).iter().all(|v| *v == 2));
    assert!(mock.versions_of(69).len() >= 2);
    assert!(mock.versions_of(69).iter().all(|v| *v == 1));
}

#[test]
fn old_broker_same_output_through_old_versions() {
    let mock = start_mock(OLD, false);
    let (code, out) = groups(mock.addr, &["--describe", "--group", "g-classic"]);
    assert_eq!((code, out.as_str()), (0, CLASSIC_OFFSETS));
    // ApiVersions v3 is answered with UNSUPPORTED_VERSION; the client retries at v2.
    assert_eq!(mock.versions_of(18), vec![3, 2]);
    assert_eq!(mock.versions_of(10), vec![3, 3]); // one retry after error 15
    assert_eq!(mock.versions_of(9), vec![7]);
    assert_eq!(mock.versions_of(2), vec![1]);

    // No state in ListGroups v3.
    let (code, out) = groups(mock.addr, &["--list", "--state"]);
    assert_eq!(code, 0);
    assert!(out.contains("g-classic  Unknown\n"), "{out}");
    // Without ConsumerGroupDescribe a consumer group is looked up with DescribeGroups.
    let (code, out) = groups(mock.addr, &["--describe", "--group", "g-consumer"]);
    assert_eq!(code, 1);
    assert_eq!(out, "Error: Consumer group 'g-consumer' does not exist.\n");
    let (code, out) = groups(mock.addr, &["--delete", "--group", "g-classic"]);
    assert_eq!(code, 1);
    assert!(out.contains("due to: NON_EMPTY_GROUP"), "{out}");
    assert_eq!(mock.versions_of(42), vec![0]);
}

#[test]
fn offset_fetch_v1_lists_the_assigned_partitions() {
    let mock = start_mock(OFFSET_FETCH_V1, false);
    let (code, out) = groups(mock.addr, &["--describe", "--group", "g-classic"]);
    assert_eq!(code, 0, "{out}");
    // No ListOffsets: log-end offsets and lag are unknown.
    assert!(
        out.contains("\ng-classic orders 0         10             -              -   A-1 "),
        "{out}"
    );
    assert_eq!(out.lines().count(), 2 + 6, "{out}");
    assert_eq!(mock.versions_of(9), vec![1]);
}

#[test]
fn broker_without_group_apis_is_reported_not_panicked() {
    let mock = start_mock(NO_GROUP_APIS, false);
    let (code, out) = groups(mock.addr, &["--list"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Error: broker does not support ListGroups"),
        "{out}"
    );
    let (code, out) = groups(mock.addr, &["--describe", "--group", "g"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Error: broker does not support DescribeGroups"),
        "{out}"
    );
    let (code, out) = groups(mock.addr, &["--delete", "--group", "g"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Error: broker does not support DeleteGroups"),
        "{out}"
    );
}

#[test]
fn silent_broker_times_out() {
    let mock = start_mock(MODERN, true);
    let started = Instant::now();
    let (code, out) = groups(mock.addr, &["--list", "--timeout-ms", "300"]);
    assert_eq!(code, 1);
    assert!(out.contains("timed out after 300 ms"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

// ------------------------------------------------------------------------------------------------
// The real server
// ------------------------------------------------------------------------------------------------

struct TestServer {
    handle: Option<engine::runtime::server::ServerHandle>,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl TestServer {
    fn start(tag: &str, sets: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("rl-admin-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let config = Config::load(None, &sets).unwrap();
        let listeners =
            engine::runtime::server::bind_listeners("127.0.0.1:0".parse().unwrap(), 2).unwrap();
        let addr = listeners.addr();
        let broker = engine::open_broker(config, &dir, addr).unwrap();
        let handle = engine::start(broker, listeners).unwrap();
        Self {
            handle: Some(handle),
            addr,
            dir,
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            let _ = h.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A raw blocking client for setting up state.
struct Client {
    sock: TcpStream,
    next_cid: i32,
    ranges: Vec<(i16, i16, i16)>,
}

impl Client {
    fn connect(addr: SocketAddr) -> Self {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut c = Client {
            sock,
            next_cid: 1,
            ranges: Vec::new(),
        };
        let Response::ApiVersions(r) = c.call(0, Request::ApiVersions(Default::default())) else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        c.ranges = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        c
    }

    /// Highest common version with a client speaking `max` (None when not served).
    fn version(&self, key: i16, max: i16) -> Option<i16> {
        let &(_, lo, hi) = self.ranges.iter().find(|(k, _, _)| *k == key)?;
        let v = hi.min(max);
        (v >= lo).then_some(v)
    }

    fn call(&mut self, version: i16, req: Request) -> Response {
        let cid = self.next_cid;
        self.next_cid += 1;
        let header = RequestHeader {
            api_key: req.api_key(),
            api_version: version,
            correlation_id: cid,
            client_id: Some("admin-it".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, &req, &mut buf).unwrap();
        self.sock.write_all(&buf).unwrap();
        let mut len = [0u8; 4];
        self.sock.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.sock.read_exact(&mut body).unwrap();
        let (got, resp) = decode_response(req.api_key(), version, &Bytes::from(body)).unwrap();
        assert_eq!(got, cid);
        resp
    }
}

#[test]
fn list_against_the_real_broker() {
    let server = TestServer::start("list", &[]);
    let served = Client::connect(server.addr).version(16, 5).is_some();
    let (code, out) = groups(server.addr, &["--list"]);
    if served {
        assert_eq!((code, out.as_str()), (0, ""), "no groups yet");
    } else {
        assert_eq!(code, 1);
        assert!(
            out.starts_with("Error: broker does not support ListGroups"),
            "{out}"
        );
    }
}

#[test]
fn unreachable_bootstrap_fails_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let (code, out) = groups(SocketAddr::from(([127, 0, 0, 1], port)), &["--list"]);
    assert_eq!(code, 1);
    assert!(out.starts_with("Error: cannot connect to broker"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Join a classic group over the wire (JoinGroup, SyncGroup assigning orders 0-5 to itself,
/// OffsetCommit), then describe it. Runs fully once the broker serves the classic group APIs;
/// until then the CLI must report the missing API.
#[test]
fn describe_a_group_made_over_the_wire() {
    let server = TestServer::start("describe", &["group.initial.rebalance.delay.ms=0"]);
    let mut c = Client::connect(server.addr);
    let needed = [(11, 9), (14, 5), (8, 9), (15, 5), (9, 9), (16, 5)];
    let versions: Vec<Option<i16>> = needed.iter().map(|(k, m)| c.version(*k, *m)).collect();
    if versions.iter().any(Option::is_none) {
        let (code, out) = groups(server.addr, &["--describe", "--group", "g-wire"]);
        assert_eq!(code, 1);
        assert!(out.contains("broker does not support"), "{out}");
        eprintln!("classic group APIs not served yet: only the error path was checked");
        return;
    }
    let [join_v, sync_v, commit_v, ..] =
        [versions[0], versions[1], versions[2]].map(Option::unwrap);

    // Topic to consume.
    let create = Request::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s("orders")))
            .with_num_partitions(6)
            .with_replication_factor(1),
    ]));
    let Response::CreateTopics(ct) = c.call(c.version(19, 7).unwrap(), create) else {
        panic!()
    };
    assert_eq!(ct.topics[0].error_code, 0);

    // JoinGroup (a second time with the assigned id after MEMBER_ID_REQUIRED).
    let mut subscription = BytesMut::new();
    subscription.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s("orders")])
        .encode(&mut subscription, 0)
        .unwrap();
    let subscription = subscription.freeze();
    let mut member_id = String::new();
    let joined = loop {
        let req = JoinGroupRequest::default()
            .with_group_id(GroupId(s("g-wire")))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(s(&member_id))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(subscription.clone())]);
        let Response::JoinGroup(j) = c.call(join_v, Request::JoinGroup(req)) else {
            panic!()
        };
        if j.error_code == 79 && member_id.is_empty() {
            member_id = j.member_id.to_string();
            continue;
        }
        assert_eq!(j.error_code, 0, "JoinGroup");
        break j;
    };
    member_id = joined.member_id.to_string();
    assert_eq!(joined.leader.as_str(), member_id, "sole member leads");

    let assignment =
        admin_cli::encode_consumer_assignment(&tps(&[("orders", &[0, 1, 2, 3, 4, 5])]), 0);
    let mut sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g-wire")))
        .with_generation_id(joined.generation_id)
        .with_member_id(s(&member_id))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(&member_id))
                .with_assignment(assignment.clone()),
        ]);
    if sync_v >= 5 {
        sync.protocol_type = Some(s("consumer"));
        sync.protocol_name = Some(s("range"));
    }
    let Response::SyncGroup(sg) = c.call(sync_v, Request::SyncGroup(sync)) else {
        panic!()
    };
    assert_eq!(sg.error_code, 0, "SyncGroup");
    assert_eq!(sg.assignment, assignment);

    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g-wire")))
        .with_generation_id_or_member_epoch(joined.generation_id)
        .with_member_id(s(&member_id))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(
                    COMMITTED
                        .iter()
                        .enumerate()
                        .map(|(p, o)| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(p as i32)
                                .with_committed_offset(*o)
                                .with_committed_metadata(Some(s("")))
                        })
                        .collect(),
                ),
        ]);
    let Response::OffsetCommit(oc) = c.call(commit_v, Request::OffsetCommit(commit)) else {
        panic!()
    };
    for p in &oc.topics[0].partitions {
        assert_eq!(
            p.error_code, 0,
            "OffsetCommit partition {}",
            p.partition_index
        );
    }

    let (code, out) = groups(server.addr, &["--list"]);
    assert_eq!((code, out.as_str()), (0, "g-wire\n"));

    let (code, out) = groups(server.addr, &["--describe", "--group", "g-wire"]);
    assert_eq!(code, 0, "{out}");
    let rows: Vec<Vec<&str>> = out
        .lines()
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 6, "{out}");
    for (p, row) in rows.iter().enumerate() {
        assert_eq!(
            row[..4],
            [
                "g-wire",
                "orders",
                p.to_string().as_str(),
                COMMITTED[p].to_string().as_str()
            ]
        );
        assert_eq!(row[6], member_id, "{out}");
        assert_eq!(row[8], "admin-it", "{out}");
    }

    let (code, out) = groups(
        server.addr,
        &["--describe", "--group", "g-wire", "--members", "--verbose"],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(" 6 "), "{out}");
    assert!(out.trim_end().ends_with("orders(0,1,2,3,4,5)"), "{out}");

    let (code, out) = groups(server.addr, &["--describe", "--group", "g-wire", "--state"]);
    assert_eq!(code, 0, "{out}");
    let last: Vec<&str> = out.lines().last().unwrap().split_whitespace().collect();
    assert_eq!(last[0], "g-wire");
    assert_eq!(&last[last.len() - 3..], ["range", "Stable", "1"], "{out}");

    let (Some(leave_v), Some(_)) = (c.version(13, 5), c.version(42, 2)) else {
        eprintln!("LeaveGroup/DeleteGroups not served yet: deletion not checked");
        return;
    };
    let (code, out) = groups(server.addr, &["--delete", "--group", "g-wire"]);
    assert_eq!(code, 1);
    assert!(out.contains("due to: NON_EMPTY_GROUP"), "{out}");

    // Leave: the group is Empty, its offsets remain, then it can be deleted.
    let mut leave = LeaveGroupRequest::default().with_group_id(GroupId(s("g-wire")));
    if leave_v >= 3 {
        leave.members =
            vec![leave_group_request::MemberIdentity::default().with_member_id(s(&member_id))];
    } else {
        leave.member_id = s(&member_id);
    }
    let Response::LeaveGroup(lg) = c.call(leave_v, Request::LeaveGroup(leave)) else {
        panic!()
    };
    assert_eq!(lg.error_code, 0, "LeaveGroup");
    let (code, out) = groups(server.addr, &["--describe", "--group", "g-wire"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.starts_with("\nConsumer group 'g-wire' has no active members.\n\nGROUP "),
        "{out}"
    );
    assert_eq!(out.lines().count(), 4 + 6, "{out}");
    // Committed offsets stay; no member owns the partitions now.
    let last: Vec<&str> = out.lines().last().unwrap().split_whitespace().collect();
    assert_eq!(last[..4], ["g-wire", "orders", "5", "8"], "{out}");
    assert_eq!(last[last.len() - 3..], ["-", "-", "-"], "{out}");

    let (code, out) = groups(server.addr, &["--delete", "--group", "g-wire"]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "Deletion of requested consumer groups ('g-wire') was successful.\n"
        )
    );
    let (code, out) = groups(server.addr, &["--describe", "--group", "g-wire"]);
    assert_eq!(
        (code, out.as_str()),
        (1, "Error: Consumer group 'g-wire' does not exist.\n")
    );
    let (code, out) = groups(server.addr, &["--list"]);
    assert_eq!((code, out.as_str()), (0, ""));
}

// ------------------------------------------------------------------------------------------------
// --reset-offsets and --delete-offsets against the real broker
// ------------------------------------------------------------------------------------------------

/// 2023-11-14T22:13:20Z and 2023-11-14T22:15:00Z.
const T1: i64 = 1_700_000_000_000;
const T2: i64 = 1_700_000_100_000;

fn create_topic(c: &mut Client, name: &str, partitions: i32) {
    let create = Request::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(1),
    ]));
    let Response::CreateTopics(ct) = c.call(c.version(19, 7).unwrap(), create) else {
        panic!()
    };
    assert_eq!(ct.topics[0].error_code, 0, "CreateTopics {name}");
}

fn produce(c: &mut Client, topic: &str, partition: i32, count: usize, timestamp: i64) {
    let values: Vec<String> = (0..count).map(|i| format!("v{i}")).collect();
    let recs: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    let mut batch = Vec::new();
    storage::batch::encode_batch(0, timestamp, &recs, &mut batch);
    let req = Request::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![produce_request::TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![
                    produce_request::PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(Bytes::from(batch))),
                ])]),
    );
    let Response::Produce(r) = c.call(c.version(0, 9).unwrap(), req) else {
        panic!()
    };
    assert_eq!(
        r.responses[0].partition_responses[0].error_code, 0,
        "Produce"
    );
}

/// Commit offsets as an admin (generation -1, no member id).
fn admin_commit(c: &mut Client, group: &str, topic: &str, offsets: &[(i32, i64)]) {
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(
                    offsets
                        .iter()
                        .map(|(p, o)| {
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*o)
                                .with_committed_metadata(Some(s("")))
                        })
                        .collect(),
                ),
        ]);
    let Response::OffsetCommit(oc) =
        c.call(c.version(8, 9).unwrap(), Request::OffsetCommit(commit))
    else {
        panic!()
    };
    for p in &oc.topics[0].partitions {
        assert_eq!(p.error_code, 0, "OffsetCommit {}", p.partition_index);
    }
}

/// Committed offsets of `group` read back with OffsetFetch (all topics).
fn fetch_committed(c: &mut Client, group: &str) -> Vec<(String, i32, i64)> {
    let v = c.version(9, 7).unwrap();
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(None);
    let Response::OffsetFetch(r) = c.call(v, Request::OffsetFetch(req)) else {
        panic!()
    };
    assert_eq!(r.error_code, 0, "OffsetFetch");
    let mut out: Vec<(String, i32, i64)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.committed_offset >= 0)
                .map(|p| (t.name.0.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    out.sort();
    out
}

/// (partition, NEW-OFFSET) rows of a --reset-offsets table, checking the GROUP/TOPIC columns.
fn reset_rows(out: &str, group: &str, topic: &str) -> Vec<(i32, i64)> {
    assert!(out.starts_with('\n'), "{out:?}");
    let mut lines = out.lines().skip(1);
    assert_eq!(
        lines.next(),
        Some("GROUP           TOPIC           PARTITION  NEW-OFFSET"),
        "{out}"
    );
    lines
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(cols.len(), 4, "{out}");
            assert_eq!((cols[0], cols[1]), (group, topic), "{out}");
            (cols[2].parse().unwrap(), cols[3].parse().unwrap())
        })
        .collect()
}

/// Join `group` as its sole classic member, assigning every partition of `topic` to itself.
fn join_classic(c: &mut Client, group: &str, topic: &str, partitions: &[i32]) -> String {
    let (join_v, sync_v) = (c.version(11, 9).unwrap(), c.version(14, 5).unwrap());
    let mut subscription = BytesMut::new();
    subscription.extend_from_slice(&0i16.to_be_bytes());
    ConsumerProtocolSubscription::default()
        .with_topics(vec![s(topic)])
        .encode(&mut subscription, 0)
        .unwrap();
    let subscription = subscription.freeze();
    let mut member_id = String::new();
    let joined = loop {
        let req = JoinGroupRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_session_timeout_ms(30_000)
            .with_rebalance_timeout_ms(30_000)
            .with_member_id(s(&member_id))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(s("range"))
            .with_metadata(subscription.clone())]);
        let Response::JoinGroup(j) = c.call(join_v, Request::JoinGroup(req)) else {
            panic!()
        };
        if j.error_code == kafka_protocol::ResponseError::MemberIdRequired.code()
            && member_id.is_empty()
        {
            member_id = j.member_id.to_string();
            continue;
        }
        assert_eq!(j.error_code, 0, "JoinGroup");
        break j;
    };
    member_id = joined.member_id.to_string();
    let assignment = admin_cli::encode_consumer_assignment(&tps(&[(topic, partitions)]), 0);
    let mut sync = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id(joined.generation_id)
        .with_member_id(s(&member_id))
        .with_assignments(vec![
            sync_group_request::SyncGroupRequestAssignment::default()
                .with_member_id(s(&member_id))
                .with_assignment(assignment),
        ]);
    if sync_v >= 5 {
        sync.protocol_type = Some(s("consumer"));
        sync.protocol_name = Some(s("range"));
    }
    let Response::SyncGroup(sg) = c.call(sync_v, Request::SyncGroup(sync)) else {
        panic!()
    };
    assert_eq!(sg.error_code, 0, "SyncGroup");
    member_id
}

#[test]
fn reset_offsets_every_mode_dry_run_and_execute() {
    let server = TestServer::start("reset", &["group.initial.rebalance.delay.ms=0"]);
    let mut c = Client::connect(server.addr);
    let needed = [
        (0, 9),
        (2, 10),
        (3, 12),
        (8, 9),
        (9, 9),
        (11, 9),
        (14, 5),
        (15, 5),
    ];
    if needed.iter().any(|(k, m)| c.version(*k, *m).is_none()) {
        eprintln!("group/offset APIs not all served: reset-offsets not checked");
        return;
    }
    create_topic(&mut c, "events", 2);
    // events-0: offsets 0-4 at T1, 5-9 at T2 (latest 10); events-1: 0-2 at T1 (latest 3).
    produce(&mut c, "events", 0, 5, T1);
    produce(&mut c, "events", 0, 5, T2);
    produce(&mut c, "events", 1, 3, T1);
    admin_commit(&mut c, "g-reset", "events", &[(0, 4), (1, 2)]);
    let before = fetch_committed(&mut c, "g-reset");
    assert_eq!(
        before,
        [("events".to_string(), 0, 4), ("events".to_string(), 1, 2)]
    );

    let dry = |scenario: &[&str]| -> Vec<(i32, i64)> {
        let mut argv = vec!["--reset-offsets", "--group", "g-reset", "--all-topics"];
        argv.extend_from_slice(scenario);
        let (code, out) = groups(server.addr, &argv);
        assert_eq!(code, 0, "{scenario:?}: {out}");
        reset_rows(&out, "g-reset", "events")
    };
    assert_eq!(dry(&["--to-earliest"]), [(0, 0), (1, 0)]);
    assert_eq!(dry(&["--to-latest", "--dry-run"]), [(0, 10), (1, 3)]);
    assert_eq!(dry(&["--to-current"]), [(0, 4), (1, 2)]);
    // Out of range: clamped to [earliest, latest].
    assert_eq!(dry(&["--to-offset", "7"]), [(0, 7), (1, 3)]);
    assert_eq!(dry(&["--to-offset", "-5"]), [(0, 0), (1, 0)]);
    assert_eq!(dry(&["--shift-by", "3"]), [(0, 7), (1, 3)]);
    assert_eq!(dry(&["--shift-by", "-3"]), [(0, 1), (1, 0)]);
    // Ten years back (before T1): every partition's first offset.
    assert_eq!(dry(&["--by-duration", "P3650DT1H"]), [(0, 0), (1, 0)]);
    // Between T1 and T2: events-0 moves to the T2 batch; events-1 has nothing that late and
    // falls back to its latest offset, with Kafka's warning.
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--all-topics",
            "--to-datetime",
            "2023-11-14T22:14:00.000",
        ],
    );
    assert_eq!(code, 0, "{out}");
    let warn =
        "\nWarn: Partition 1 from topic events is empty. Falling back to latest known offset.\n";
    assert!(out.starts_with(warn), "{out}");
    assert_eq!(
        reset_rows(&out[warn.len()..], "g-reset", "events"),
        [(0, 5), (1, 3)]
    );
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--all-topics",
            "--to-datetime",
            "2023-11-14T22:13:20.000Z",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(reset_rows(&out, "g-reset", "events"), [(0, 0), (1, 0)]);
    // --topic scopes: one partition, or a whole topic.
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--topic",
            "events:1",
            "--to-latest",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\ng-reset         events          1          3\n"
    );
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--topic",
            "events",
            "--to-earliest",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(reset_rows(&out, "g-reset", "events"), [(0, 0), (1, 0)]);

    // None of the dry runs changed anything.
    assert_eq!(fetch_committed(&mut c, "g-reset"), before);

    // --execute commits.
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--topic",
            "events:0",
            "--to-offset",
            "6",
            "--execute",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(reset_rows(&out, "g-reset", "events"), [(0, 6)]);
    assert_eq!(
        fetch_committed(&mut c, "g-reset"),
        [("events".to_string(), 0, 6), ("events".to_string(), 1, 2)]
    );
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-reset",
            "--all-topics",
            "--shift-by",
            "-1",
            "--execute",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(reset_rows(&out, "g-reset", "events"), [(0, 5), (1, 1)]);
    let (code, out) = groups(server.addr, &["--describe", "--group", "g-reset"]);
    assert_eq!(code, 0, "{out}");
    let current: Vec<(String, String)> = out
        .lines()
        .filter(|l| l.starts_with("g-reset "))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols[2].to_string(), cols[3].to_string())
        })
        .collect();
    assert_eq!(
        current,
        [("0".into(), "5".into()), ("1".into(), "1".into())],
        "{out}"
    );
    // A group nobody ever used is Dead: it can be reset (and so created).
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-new",
            "--topic",
            "events",
            "--to-latest",
            "--execute",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(reset_rows(&out, "g-new", "events"), [(0, 10), (1, 3)]);
    assert_eq!(
        fetch_committed(&mut c, "g-new"),
        [("events".to_string(), 0, 10), ("events".to_string(), 1, 3)]
    );

    // A live group is refused, and nothing is committed.
    let member = join_classic(&mut c, "g-live", "events", &[0, 1]);
    assert!(!member.is_empty());
    let (code, out) = groups(
        server.addr,
        &[
            "--reset-offsets",
            "--group",
            "g-live",
            "--all-topics",
            "--to-earliest",
            "--execute",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        "\nError: Assignments can only be reset if the group 'g-live' is inactive, but the current state is Stable.\n\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"
    );
    assert_eq!(fetch_committed(&mut c, "g-live"), []);

    // Bad arguments exit 2 before connecting.
    for argv in [
        &["--reset-offsets", "--group", "g", "--all-topics"][..],
        &["--reset-offsets", "--group", "g", "--to-earliest"],
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-earliest",
            "--to-latest",
        ],
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--topic",
            "t:x",
            "--to-earliest",
        ],
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--to-datetime",
            "yesterday",
        ],
        &[
            "--reset-offsets",
            "--group",
            "g",
            "--all-topics",
            "--by-duration",
            "1d",
        ],
        &["--describe", "--group", "g", "--to-earliest"],
    ] {
        let (code, out) = groups(server.addr, argv);
        assert_eq!(code, 2, "{argv:?}: {out}");
        assert!(out.starts_with("Error: "), "{out}");
    }
}

#[test]
fn delete_offsets_output_and_effect() {
    let server = TestServer::start("deloffsets", &["group.initial.rebalance.delay.ms=0"]);
    let mut c = Client::connect(server.addr);
    let needed = [(3, 12), (8, 9), (9, 9), (11, 9), (14, 5), (15, 5), (47, 0)];
    if needed.iter().any(|(k, m)| c.version(*k, *m).is_none()) {
        eprintln!("group/offset APIs not all served: delete-offsets not checked");
        return;
    }
    create_topic(&mut c, "orders", 3);
    create_topic(&mut c, "audit", 1);
    admin_commit(&mut c, "g-del", "orders", &[(0, 1), (1, 2), (2, 3)]);
    admin_commit(&mut c, "g-del", "audit", &[(0, 7)]);

    let (code, out) = groups(
        server.addr,
        &[
            "--delete-offsets",
            "--group",
            "g-del",
            "--topic",
            "orders:0,2",
        ],
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "Request succeeded for deleting offsets from group g-del.\n\n\
         TOPIC           PARTITION  STATUS         \n\
         orders          0          Successful     \n\
         orders          2          Successful     \n"
    );
    assert_eq!(
        fetch_committed(&mut c, "g-del"),
        [("audit".to_string(), 0, 7), ("orders".to_string(), 1, 2)]
    );

    // A whole topic, plus one that does not exist.
    let (code, out) = groups(
        server.addr,
        &[
            "--delete-offsets",
            "--group",
            "g-del",
            "--topic",
            "audit",
            "--topic",
            "nope",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        "Request succeeded for deleting offsets from group g-del.\n\n\
         TOPIC           PARTITION  STATUS         \n\
         audit           0          Successful     \n\
         nope            -          Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition.\n"
    );
    assert_eq!(
        fetch_committed(&mut c, "g-del"),
        [("orders".to_string(), 1, 2)]
    );

    // A group that does not exist.
    let (code, out) = groups(
        server.addr,
        &[
            "--delete-offsets",
            "--group",
            "g-none",
            "--topic",
            "orders:1",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        "\nError: The group id does not exist.\n\n\
         TOPIC           PARTITION  STATUS         \n\
         orders          1          Error: org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.\n"
    );

    // A live group subscribed to the topic keeps its offsets.
    join_classic(&mut c, "g-live", "orders", &[0, 1, 2]);
    let (code, out) = groups(
        server.addr,
        &[
            "--delete-offsets",
            "--group",
            "g-live",
            "--topic",
            "orders:1",
        ],
    );
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out,
        "\nError: Encountered some partition-level error, see the follow-up details.\n\n\
         TOPIC           PARTITION  STATUS         \n\
         orders          1          Error: org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.\n"
    );

    // Bad arguments.
    for argv in [
        &["--delete-offsets", "--group", "g-del"][..],
        &["--delete-offsets", "--topic", "orders"],
        &["--delete-offsets", "--all-groups", "--topic", "orders"],
        &["--delete-offsets", "--group", "g-del", "--topic", "orders:"],
    ] {
        let (code, out) = groups(server.addr, argv);
        assert_eq!(code, 2, "{argv:?}: {out}");
    }
}

// ------------------------------------------------------------------------------------------------
// `ringleader transactions --describe-producers` against the broker binary
// ------------------------------------------------------------------------------------------------

/// InitProducerId: (producer id, epoch) for `transactional_id`, or an idempotent producer's.
fn init_producer(c: &mut Client, transactional_id: Option<&str>) -> (i64, i16) {
    let Response::InitProducerId(r) = c.call(
        4,
        Request::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
    ) else {
        panic!("InitProducerId")
    };
    assert_eq!(r.error_code, 0, "InitProducerId");
    (r.producer_id.0, r.producer_epoch)
}

/// A batch of `count` records stamped `timestamp` from producer `pid` (base sequence `seq`),
/// transactional when `transactional_id` is given; the partition's error code.
#[allow(clippy::too_many_arguments)]
fn produce_as(
    c: &mut Client,
    topic: &str,
    transactional_id: Option<&str>,
    pid: i64,
    epoch: i16,
    seq: i32,
    count: usize,
    timestamp: i64,
) -> i16 {
    let values: Vec<String> = (0..count).map(|i| format!("p{pid}-{seq}-{i}")).collect();
    let recs: Vec<_> = values.iter().map(|v| (None, Some(v.as_bytes()))).collect();
    let mut batch = Vec::new();
    storage::batch::encode_batch(0, timestamp, &recs, &mut batch);
    storage::batch::stamp_producer(&mut batch, pid, epoch, seq, transactional_id.is_some());
    let Response::Produce(r) = c.call(
        9,
        Request::Produce(
            ProduceRequest::default()
                .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from(batch))),
                    ])]),
        ),
    ) else {
        panic!("Produce")
    };
    r.responses[0].partition_responses[0].error_code
}

/// Run `ringleader transactions --bootstrap ADDR ARGS...` (the binary); (exit code, stdout).
fn transactions_cli(addr: SocketAddr, args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ringleader"))
        .arg("transactions")
        .args(["--bootstrap", &addr.to_string()])
        .args(args)
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// The table `--describe-producers` printed, as words per line.
fn producer_rows(addr: SocketAddr, topic: &str) -> Vec<Vec<String>> {
    let (code, out) = transactions_cli(
        addr,
        &["--describe-producers", "--topic", topic, "--partition", "0"],
    );
    assert_eq!(code, Some(0), "{out}");
    out.lines()
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect()
}

fn words(v: &[&str]) -> Vec<String> {
    v.iter().map(|w| w.to_string()).collect()
}

#[test]
fn describe_producers_cli_shows_idempotent_and_transactional_producers_across_a_restart() {
    const TOPIC: &str = "dp-cli";
    let dir = common::data_dir("dp-cli");
    let mut broker = common::Broker::start(&dir, &[]);
    let mut c = Client::connect(broker.addr);
    create_topic(&mut c, TOPIC, 1);
    let header = words(&[
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]);
    assert_eq!(producer_rows(broker.addr, TOPIC), vec![header.clone()]);

    // An idempotent producer: two batches, sequences 0..=2 and 3..=4, at offsets 0..=4.
    let (idem, idem_epoch) = init_producer(&mut c, None);
    assert_eq!(
        produce_as(&mut c, TOPIC, None, idem, idem_epoch, 0, 3, T1),
        0
    );
    assert_eq!(
        produce_as(&mut c, TOPIC, None, idem, idem_epoch, 3, 2, T1 + 5),
        0
    );
    // A transactional producer with an open transaction from offset 5.
    let (txn, txn_epoch) = init_producer(&mut c, Some("dp-tx"));
    let Response::AddPartitionsToTxn(r) = c.call(
        3,
        Request::AddPartitionsToTxn(
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(TransactionalId(s("dp-tx")))
                .with_v3_and_below_producer_id(ProducerId(txn))
                .with_v3_and_below_producer_epoch(txn_epoch)
                .with_v3_and_below_topics(vec![
                    add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partitions(vec![0]),
                ]),
        ),
    ) else {
        panic!("AddPartitionsToTxn")
    };
    assert_eq!(
        r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
    assert_eq!(
        produce_as(&mut c, TOPIC, Some("dp-tx"), txn, txn_epoch, 0, 2, T2),
        0
    );
    let idem_row = words(&[
        &idem.to_string(),
        &idem_epoch.to_string(),
        "-1",
        "4",
        &(T1 + 5).to_string(),
        "None",
    ]);
    let open_row = words(&[
        &txn.to_string(),
        &txn_epoch.to_string(),
        "-1",
        "1",
        &T2.to_string(),
        "5",
    ]);
    let mut want = vec![header.clone(), idem_row.clone(), open_row];
    // Kafka's table has no defined row order; the broker answers by producer id.
    want[1..].sort_by_key(|r| r[0].parse::<i64>().unwrap());
    assert_eq!(producer_rows(broker.addr, TOPIC), want);

    // The commit: the marker (offset 7) ends the transaction and carries the coordinator's
    // epoch and its own timestamp.
    let Response::EndTxn(r) = c.call(
        3,
        Request::EndTxn(
            EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("dp-tx")))
                .with_producer_id(ProducerId(txn))
                .with_producer_epoch(txn_epoch)
                .with_committed(true),
        ),
    ) else {
        panic!("EndTxn")
    };
    assert_eq!(r.error_code, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let committed = loop {
        let rows = producer_rows(broker.addr, TOPIC);
        let row = rows
            .iter()
            .find(|r| r[0] == txn.to_string())
            .unwrap()
            .clone();
        if row[5] == "None" {
            break row;
        }
        assert!(Instant::now() < deadline, "the commit marker: {rows:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        committed[..4],
        words(&[&txn.to_string(), &txn_epoch.to_string(), "0", "1"])[..]
    );
    let marker_ts: i64 = committed[4].parse().unwrap();
    assert!(
        marker_ts > T2,
        "the marker's own timestamp, not the batch's: {committed:?}"
    );
    let after = producer_rows(broker.addr, TOPIC);

    // After a crash the log is recovered from disk: the same producers, the same fields.
    broker.kill9();
    let broker = common::Broker::start(&dir, &[]);
    assert_eq!(producer_rows(broker.addr, TOPIC), after);

    // Errors, as Kafka words the ones it words.
    let (code, out) = transactions_cli(
        broker.addr,
        &[
            "--describe-producers",
            "--topic",
            "nope",
            "--partition",
            "0",
        ],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out.trim(),
        "Error: Failed to describe producers for partition nope-0 on leader: \
         UNKNOWN_TOPIC_OR_PARTITION (This server does not host this topic-partition.)"
    );
    let (code, out) = transactions_cli(
        broker.addr,
        &["--describe-producers", "--topic", TOPIC, "--partition", "3"],
    );
    assert_eq!(code, Some(1));
    assert_eq!(
        out.trim(),
        "Error: Failed to describe producers for partition dp-cli-3 on leader: \
         UNKNOWN_TOPIC_OR_PARTITION"
    );
    let (code, out) = transactions_cli(broker.addr, &["--describe-producers", "--topic", TOPIC]);
    assert_eq!(code, Some(2), "--partition is required: {out}");
    let _ = std::fs::remove_dir_all(&dir);
}
