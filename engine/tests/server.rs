//! The real server (all shards, real sockets) driven by a blocking client speaking through `wire`.

use bytes::{Bytes, BytesMut};
use engine::config::Config;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use wire::codec::{decode_response, encode_request};
use wire::{Request, RequestHeader, Response};

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<std::alloc::System> =
    wire::alloc::GuardedAlloc(std::alloc::System);

struct TestServer {
    handle: Option<engine::runtime::server::ServerHandle>,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl TestServer {
    fn start(tag: &str, cores: usize, sets: &[&str]) -> Self {
        let dir = std::env::temp_dir().join(format!("rl-it-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self::start_in(dir, cores, sets)
    }

    fn start_in(dir: std::path::PathBuf, cores: usize, sets: &[&str]) -> Self {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let config = Config::load(None, &sets).unwrap();
        let listeners =
            engine::runtime::server::bind_listeners("127.0.0.1:0".parse().unwrap(), cores).unwrap();
        let addr = listeners.addr();
        let broker = engine::open_broker(config, &dir, addr).unwrap();
        let handle = engine::start(broker, listeners).unwrap();
        Self {
            handle: Some(handle),
            addr,
            dir,
        }
    }

    fn stop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            h.join().unwrap();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Client {
    sock: TcpStream,
    next_cid: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Self {
        let sock = TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self { sock, next_cid: 1 }
    }

    fn frame(&mut self, version: i16, req: &Request) -> (i32, BytesMut) {
        let cid = self.next_cid;
        self.next_cid += 1;
        let header = RequestHeader {
            api_key: req.api_key(),
            api_version: version,
            correlation_id: cid,
            client_id: Some("it".into()),
        };
        let mut buf = BytesMut::new();
        encode_request(&header, req, &mut buf).unwrap();
        (cid, buf)
    }

    fn read_frame(&mut self) -> Option<Bytes> {
        let mut len = [0u8; 4];
        self.sock.read_exact(&mut len).ok()?;
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        self.sock.read_exact(&mut body).ok()?;
        Some(Bytes::from(body))
    }

    fn call(&mut self, version: i16, req: Request) -> Response {
        let (cid, buf) = self.frame(version, &req);
        self.sock.write_all(&buf).unwrap();
        let frame = self.read_frame().expect("response");
        let (got, resp) = decode_response(req.api_key(), version, &frame).unwrap();
        assert_eq!(got, cid);
        resp
    }

    /// True when the server closed the connection (read returns EOF or reset).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.sock.read(&mut b), Ok(0) | Err(_))
    }
}

fn topic_req(name: &str) -> metadata_request::MetadataRequestTopic {
    metadata_request::MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

fn create(name: &str, partitions: i32, rf: i16) -> Request {
    Request::CreateTopics(CreateTopicsRequest::default().with_topics(
        vec![create_topics_request::CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(rf)],
    ))
}

#[test]
fn api_versions_every_version_and_the_too_new_fallback() {
    let server = TestServer::start("apiv", 2, &[]);
    let mut c = Client::connect(server.addr);
    for v in 0..=4 {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("it"))
            .with_client_software_version(StrBytes::from_static_str("1.0"));
        let Response::ApiVersions(r) = c.call(v, Request::ApiVersions(req)) else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let keys: Vec<i16> = r.api_keys.iter().map(|k| k.api_key).collect();
        assert_eq!(
            keys,
            wire::versions::SERVED
                .iter()
                .map(|r| r.api_key)
                .collect::<Vec<_>>()
                .tap_sorted()
        );
    }
    // Version 9: answered as v0 with UNSUPPORTED_VERSION and only ApiVersions' own range.
    let (cid, mut buf) = c.frame(0, &Request::ApiVersions(Default::default()));
    buf[4 + 2..4 + 4].copy_from_slice(&9i16.to_be_bytes());
    c.sock.write_all(&buf).unwrap();
    let frame = c.read_frame().unwrap();
    let (got, Response::ApiVersions(r)) = decode_response(18, 0, &frame).unwrap() else {
        panic!()
    };
    assert_eq!(got, cid);
    assert_eq!(r.error_code, 35);
    assert_eq!(r.api_keys.len(), 1);
    assert_eq!(
        (
            r.api_keys[0].api_key,
            r.api_keys[0].min_version,
            r.api_keys[0].max_version
        ),
        (18, 0, 4)
    );
}

trait TapSorted {
    fn tap_sorted(self) -> Self;
}
impl TapSorted for Vec<i16> {
    fn tap_sorted(mut self) -> Self {
        self.sort();
        self
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let server = TestServer::start("pipe", 2, &[]);
    let mut c = Client::connect(server.addr);
    // Mix slow (topic creation fsyncs) and fast requests in one write.
    let mut all = BytesMut::new();
    let mut expected = Vec::new();
    for i in 0..40 {
        let req = if i % 5 == 0 {
            create(&format!("pipe-{i}"), 1, 1)
        } else {
            Request::Metadata(MetadataRequest::default())
        };
        let (cid, buf) = c.frame(if i % 5 == 0 { 7 } else { 12 }, &req);
        expected.push((cid, req.api_key(), if i % 5 == 0 { 7 } else { 12 }));
        all.extend_from_slice(&buf);
    }
    c.sock.write_all(&all).unwrap();
    for (cid, key, version) in expected {
        let frame = c.read_frame().unwrap();
        let (got, resp) = decode_response(key, version, &frame).unwrap();
        assert_eq!(got, cid, "responses out of order");
        if let Response::CreateTopics(r) = resp {
            assert_eq!(r.topics[0].error_code, 0);
        }
    }
}

/// More request bytes pipelined than a connection may hold in flight
/// (`conn::MAX_IN_FLIGHT_BYTES`, 1 MiB): the reader stops reading the socket until responses go
/// out, then goes on; every request is answered, in order.
#[test]
fn pipelined_requests_past_the_byte_bound_wait_in_the_socket_and_are_all_answered() {
    let server = TestServer::start("pipe-bytes", 2, &[]);
    let mut c = Client::connect(server.addr);
    // ~100 KB Metadata requests (2,000 unknown topic names), with a topic creation (which waits
    // for its fsync) every fifth: ~2.4 MB in all.
    let names: Vec<_> = (0..2000)
        .map(|i| topic_req(&format!("no-such-topic-with-a-long-name-{i:08}")))
        .collect();
    let mut all = BytesMut::new();
    let mut expected = Vec::new();
    for i in 0..24 {
        let (req, version) = if i % 5 == 0 {
            (create(&format!("pipe-bytes-{i}"), 1, 1), 7)
        } else {
            let m = MetadataRequest::default()
                .with_topics(Some(names.clone()))
                .with_allow_auto_topic_creation(false);
            (Request::Metadata(m), 12)
        };
        let (cid, buf) = c.frame(version, &req);
        expected.push((cid, req.api_key(), version));
        all.extend_from_slice(&buf);
    }
    assert!(
        all.len() > 2 << 20,
        "more than the bound: {} bytes",
        all.len()
    );
    // Written from another thread: the broker stops reading while its responses wait to be
    // read here.
    let mut writer = c.sock.try_clone().unwrap();
    let sent = std::thread::spawn(move || writer.write_all(&all));
    for (cid, key, version) in expected {
        let frame = c.read_frame().unwrap();
        let (got, resp) = decode_response(key, version, &frame).unwrap();
        assert_eq!(got, cid, "responses out of order");
        match resp {
            Response::CreateTopics(r) => assert_eq!(r.topics[0].error_code, 0),
            Response::Metadata(m) => {
                assert_eq!(m.topics.len(), 2000);
                assert!(
                    m.topics.iter().all(|t| t.error_code == 3),
                    "UNKNOWN_TOPIC_OR_PARTITION"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    sent.join().unwrap().unwrap();
}

#[test]
fn topics_lifecycle_and_errors() {
    let mut server = TestServer::start("topics", 2, &[]);
    let mut c = Client::connect(server.addr);
    let Response::CreateTopics(r) = c.call(7, create("orders", 6, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    assert_eq!(r.topics[0].num_partitions, 6);
    let id = r.topics[0].topic_id;
    assert!(!id.is_nil());
    let Response::CreateTopics(r) = c.call(7, create("orders", 6, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 36);
    let Response::CreateTopics(r) = c.call(7, create("rf2", 1, 2)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 38);
    let Response::CreateTopics(r) = c.call(7, create("bad name!", 1, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 17);
    let Response::CreateTopics(r) = c.call(2, create("zero", 0, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 37);

    // Metadata by name and by id; internal topic flagged.
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![topic_req("orders")]))),
    ) else {
        panic!()
    };
    assert_eq!(m.topics.len(), 1);
    assert_eq!(m.topics[0].partitions.len(), 6);
    assert_eq!(m.topics[0].topic_id, id);
    assert_eq!(m.brokers[0].port, server.addr.port() as i32);
    let by_id = metadata_request::MetadataRequestTopic::default().with_topic_id(id);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![by_id]))),
    ) else {
        panic!()
    };
    assert_eq!(
        m.topics[0]
            .name
            .as_ref()
            .map(|n| n.0.to_string())
            .as_deref(),
        Some("orders")
    );
    let Response::Metadata(all) = c.call(
        1,
        Request::Metadata(MetadataRequest::default().with_topics(None)),
    ) else {
        panic!()
    };
    let offsets = all
        .topics
        .iter()
        .find(|t| t.name.as_ref().unwrap().0.as_str() == "__consumer_offsets")
        .unwrap();
    assert!(offsets.is_internal);
    assert_eq!(offsets.partitions.len(), 50);

    // Restart: same id.
    let dir = server.dir.clone();
    server.stop();
    let server2 = TestServer::start_in(dir, 2, &[]);
    let mut c = Client::connect(server2.addr);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![topic_req("orders")]))),
    ) else {
        panic!()
    };
    assert_eq!(m.topics[0].topic_id, id);

    // Delete, then it is gone; the internal topic cannot be deleted.
    let del = DeleteTopicsRequest::default().with_topic_names(vec![
        TopicName(StrBytes::from_static_str("orders")),
        TopicName(StrBytes::from_static_str("__consumer_offsets")),
    ]);
    let Response::DeleteTopics(d) = c.call(5, Request::DeleteTopics(del)) else {
        panic!()
    };
    assert_eq!(d.responses[0].error_code, 0);
    assert_eq!(d.responses[1].error_code, 42);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![topic_req("orders")]))
                .with_allow_auto_topic_creation(false),
        ),
    ) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
}

#[test]
fn auto_creation_follows_config_and_request_flag() {
    let server = TestServer::start("auto", 1, &["num.partitions=3"]);
    let mut c = Client::connect(server.addr);
    let req = |allow| {
        Request::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![topic_req("auto-t")]))
                .with_allow_auto_topic_creation(allow),
        )
    };
    let Response::Metadata(m) = c.call(12, req(false)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
    let Response::Metadata(m) = c.call(12, req(true)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 0);
    assert_eq!(m.topics[0].partitions.len(), 3);
    drop(server);

    let server = TestServer::start("noauto", 1, &["auto.create.topics.enable=false"]);
    let mut c = Client::connect(server.addr);
    let Response::Metadata(m) = c.call(12, req(true)) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 3);
}

#[test]
fn find_coordinator_single_and_batched() {
    let server = TestServer::start("fc", 2, &[]);
    let mut c = Client::connect(server.addr);
    let Response::FindCoordinator(r) = c.call(
        2,
        Request::FindCoordinator(
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g1")),
        ),
    ) else {
        panic!()
    };
    assert_eq!(
        (r.error_code, r.node_id.0, r.port),
        (0, 1, server.addr.port() as i32)
    );
    let req = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![StrBytes::from_static_str("txn-a")]);
    let Response::FindCoordinator(r) = c.call(4, Request::FindCoordinator(req)) else {
        panic!()
    };
    // This node is the transaction coordinator too.
    assert_eq!(
        (r.coordinators[0].error_code, r.coordinators[0].node_id.0),
        (0, 1)
    );
    let req = FindCoordinatorRequest::default().with_coordinator_keys(vec![
        StrBytes::from_static_str("a"),
        StrBytes::from_static_str("b"),
    ]);
    let Response::FindCoordinator(r) = c.call(6, Request::FindCoordinator(req)) else {
        panic!()
    };
    assert_eq!(r.coordinators.len(), 2);
    assert!(r
        .coordinators
        .iter()
        .all(|c| c.error_code == 0 && c.node_id.0 == 1));
}

#[test]
fn bad_input_closes_only_that_connection() {
    let server = TestServer::start("garbage", 2, &["socket.request.max.bytes=1048576"]);
    let cases: Vec<Vec<u8>> = vec![
        (-5i32).to_be_bytes().to_vec(),                   // negative length
        (100_000_000i32).to_be_bytes().to_vec(),          // above socket.request.max.bytes
        [&12i32.to_be_bytes()[..], &[0xff; 12]].concat(), // unknown api key -1
        {
            // Metadata v99
            let mut v = 10i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 3, 0, 99, 0, 0, 0, 1, 0xff, 0xff]);
            v
        },
        {
            // CreateTopics v2 whose topics array claims i32::MAX entries.
            let mut v = 14i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 19, 0, 2, 0, 0, 0, 1, 0xff, 0xff]);
            v.extend_from_slice(&i32::MAX.to_be_bytes());
            v
        },
        {
            // Metadata v1 with a string length pointing past the frame.
            let mut v = 20i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[
                0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0, 0, 0, 1, 0x7f, 0xff, b'a', b'b', b'c', b'd',
            ]);
            v
        },
        {
            // A client id claiming more bytes than the frame holds.
            let mut v = 10i32.to_be_bytes().to_vec();
            v.extend_from_slice(&[0, 18, 0, 0, 0, 0, 0, 1, 0x10, 0x00]);
            v
        },
    ];
    for (i, bytes) in cases.iter().enumerate() {
        let mut c = Client::connect(server.addr);
        c.sock.write_all(bytes).unwrap();
        assert!(c.closed(), "case {i} did not close the connection");
    }
    // A truncated frame, then the client goes away.
    let mut c = Client::connect(server.addr);
    c.sock.write_all(&[0, 0, 0, 50, 0, 3]).unwrap();
    drop(c);
    // The server still serves.
    let mut c = Client::connect(server.addr);
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(None)),
    ) else {
        panic!()
    };
    assert_eq!(m.brokers.len(), 1);
}

#[test]
fn config_describe_and_cluster() {
    let server = TestServer::start("cfg", 1, &["group.max.size=10"]);
    let mut c = Client::connect(server.addr);
    let res = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(4)
        .with_resource_name(StrBytes::from_static_str("1"))
        .with_configuration_keys(Some(vec![
            StrBytes::from_static_str("group.max.size"),
            StrBytes::from_static_str("num.partitions"),
        ]));
    let Response::DescribeConfigs(r) = c.call(
        4,
        Request::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![res])),
    ) else {
        panic!()
    };
    let got: Vec<(String, Option<String>, i8)> = r.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_ref().map(|v| v.to_string()),
                e.config_source,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("group.max.size".into(), Some("10".into()), 4),
            ("num.partitions".into(), Some("1".into()), 5)
        ]
    );
    let Response::DescribeCluster(d) = c.call(
        1,
        Request::DescribeCluster(DescribeClusterRequest::default().with_endpoint_type(1)),
    ) else {
        panic!()
    };
    assert_eq!(d.brokers.len(), 1);
    assert_eq!(d.controller_id.0, 1);
    assert_eq!(d.cluster_id.len(), 22);
}

fn grow(topics: &[(&str, i32)], validate_only: bool) -> Request {
    Request::CreatePartitions(
        CreatePartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|(n, c)| {
                        create_partitions_request::CreatePartitionsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(n.to_string())))
                            .with_count(*c)
                            .with_assignments(None)
                    })
                    .collect(),
            )
            .with_validate_only(validate_only)
            .with_timeout_ms(5000),
    )
}

fn partitions_of(c: &mut Client, topic: &str) -> usize {
    let Response::Metadata(m) = c.call(
        12,
        Request::Metadata(MetadataRequest::default().with_topics(Some(vec![topic_req(topic)]))),
    ) else {
        panic!()
    };
    assert_eq!(m.topics[0].error_code, 0);
    m.topics[0].partitions.len()
}

fn results(resp: Response) -> Vec<(String, i16, Option<String>)> {
    let Response::CreatePartitions(r) = resp else {
        panic!("{resp:?}")
    };
    r.results
        .into_iter()
        .map(|r| {
            (
                r.name.0.to_string(),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect()
}

#[test]
fn create_partitions_grows_topics_like_kafka_and_survives_a_restart() {
    use kafka_protocol::ResponseError as E;
    let mut server = TestServer::start("grow", 2, &["group.consumer.assignment.interval.ms=0"]);
    let mut c = Client::connect(server.addr);
    for (name, n) in [("orders", 2), ("other", 1)] {
        let Response::CreateTopics(r) = c.call(7, create(name, n, 1)) else {
            panic!()
        };
        assert_eq!(r.topics[0].error_code, 0);
    }
    // A KIP-848 member owning both partitions of "orders".
    let hb = |c: &mut Client, member: &str, epoch: i32, owned: Option<Vec<i32>>, id| {
        let mut r = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("grower")))
            .with_member_id(StrBytes::from_string(member.to_string()))
            .with_member_epoch(epoch)
            .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 })
            .with_subscribed_topic_names(
                (epoch == 0).then(|| vec![TopicName(StrBytes::from_static_str("orders"))]),
            );
        r.topic_partitions = owned.map(|ps| {
            vec![consumer_group_heartbeat_request::TopicPartitions::default()
                .with_topic_id(id)
                .with_partitions(ps)]
        });
        if epoch == 0 {
            r.topic_partitions = Some(vec![]);
        }
        let Response::ConsumerGroupHeartbeat(resp) = c.call(1, Request::ConsumerGroupHeartbeat(r))
        else {
            panic!()
        };
        assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
        let mut got: Vec<i32> = resp
            .assignment
            .map(|a| {
                a.topic_partitions
                    .into_iter()
                    .flat_map(|t| t.partitions)
                    .collect()
            })
            .unwrap_or_default();
        got.sort();
        (resp.member_epoch, got)
    };
    let topic_id = {
        let Response::Metadata(m) = c.call(
            12,
            Request::Metadata(
                MetadataRequest::default().with_topics(Some(vec![topic_req("orders")])),
            ),
        ) else {
            panic!()
        };
        m.topics[0].topic_id
    };
    let member = "m-grow-0000000000001";
    let (epoch, got) = hb(&mut c, member, 0, None, topic_id);
    assert_eq!(got, vec![0, 1]);

    // validate_only answers as the change would and changes nothing.
    assert_eq!(
        results(c.call(3, grow(&[("orders", 4)], true))),
        [("orders".into(), 0, None)]
    );
    assert_eq!(partitions_of(&mut c, "orders"), 2);

    // Kafka's errors, each topic answered on its own.
    let got = results(c.call(
        3,
        grow(
            &[
                ("orders", 2),
                ("other", 0),
                ("ghost", 3),
                ("dup", 2),
                ("dup", 3),
                ("__consumer_offsets", 60),
            ],
            false,
        ),
    ));
    let code = |n: &str| {
        got.iter()
            .find(|r| r.0 == n)
            .map(|r| (r.1, r.2.clone()))
            .unwrap()
    };
    assert_eq!(
        got.iter().filter(|r| r.0 == "dup").count(),
        1,
        "a duplicate is answered once"
    );
    assert_eq!(
        code("dup"),
        (
            E::InvalidRequest.code(),
            Some("Duplicate topic name.".into())
        )
    );
    assert_eq!(
        code("orders"),
        (
            E::InvalidPartitions.code(),
            Some("Topic already has 2 partition(s).".into())
        )
    );
    assert_eq!(
        code("other"),
        (
            E::InvalidPartitions.code(),
            Some(
                "The topic other currently has 1 partition(s); 0 would not be an increase.".into()
            )
        )
    );
    assert_eq!(code("ghost"), (E::UnknownTopicOrPartition.code(), None));
    assert_eq!(code("__consumer_offsets").0, E::InvalidPartitions.code());
    // Manual assignments must name this broker, one per new partition.
    let mut req = grow(&[("other", 3)], false);
    if let Request::CreatePartitions(r) = &mut req {
        r.topics[0].assignments = Some(vec![
            create_partitions_request::CreatePartitionsAssignment::default()
                .with_broker_ids(vec![BrokerId(1)]),
        ]);
    }
    let got = results(c.call(3, req));
    assert_eq!(got[0].1, E::InvalidReplicaAssignment.code());
    assert_eq!(
        got[0].2.as_deref(),
        Some(
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
        )
    );
    // Too many new partitions in one request fails it whole.
    let got = results(c.call(3, grow(&[("orders", 3), ("other", 10_002)], false)));
    assert!(
        got.iter().all(|r| r.1 == E::PolicyViolation.code()),
        "{got:?}"
    );
    assert_eq!(partitions_of(&mut c, "other"), 1);

    // The change itself: Metadata shows it at once, and the group's next heartbeat sees the
    // subscribed topic's metadata change and hands the member the new partitions.
    assert_eq!(
        results(c.call(3, grow(&[("orders", 4)], false))),
        [("orders".into(), 0, None)]
    );
    assert_eq!(partitions_of(&mut c, "orders"), 4);
    let (next_epoch, got) = hb(&mut c, member, epoch, Some(vec![0, 1]), topic_id);
    assert!(next_epoch > epoch, "{next_epoch} > {epoch}");
    assert_eq!(got, vec![0, 1, 2, 3]);
    drop(c);

    // The new count is durable.
    let dir = server.dir.clone();
    server.stop();
    let server2 = TestServer::start_in(dir, 2, &[]);
    let mut c = Client::connect(server2.addr);
    assert_eq!(partitions_of(&mut c, "orders"), 4);
}

/// (name, value, source) of a topic's configs, as DescribeConfigs reports them.
fn topic_configs(c: &mut Client, topic: &str, keys: &[&str]) -> Vec<(String, Option<String>, i8)> {
    let res = describe_configs_request::DescribeConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_configuration_keys(Some(
            keys.iter()
                .map(|k| StrBytes::from_string(k.to_string()))
                .collect(),
        ));
    let Response::DescribeConfigs(r) = c.call(
        4,
        Request::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![res])),
    ) else {
        panic!()
    };
    assert_eq!(r.results[0].error_code, 0);
    let mut got: Vec<(String, Option<String>, i8)> = r.results[0]
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                e.value.as_ref().map(|v| v.to_string()),
                e.config_source,
            )
        })
        .collect();
    // In the order asked for.
    got.sort_by_key(|(name, _, _)| keys.iter().position(|k| k == name));
    got
}

fn incremental(
    resources: &[(i8, &str, &[(&str, i8, Option<&str>)])],
    validate_only: bool,
) -> Request {
    Request::IncrementalAlterConfigs(
        IncrementalAlterConfigsRequest::default()
            .with_validate_only(validate_only)
            .with_resources(
                resources
                    .iter()
                    .map(|(t, name, ops)| {
                        incremental_alter_configs_request::AlterConfigsResource::default()
                            .with_resource_type(*t)
                            .with_resource_name(StrBytes::from_string(name.to_string()))
                            .with_configs(
                                ops.iter()
                                    .map(|(k, op, v)| {
                                        incremental_alter_configs_request::AlterableConfig::default(
                                        )
                                        .with_name(StrBytes::from_string(k.to_string()))
                                        .with_config_operation(*op)
                                        .with_value(v.map(|v| StrBytes::from_string(v.into())))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
    )
}

fn alter_results(resp: Response) -> Vec<(String, i16, Option<String>)> {
    let out = match resp {
        Response::IncrementalAlterConfigs(r) => r
            .responses
            .into_iter()
            .map(|r| {
                (
                    r.resource_name.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                )
            })
            .collect(),
        Response::AlterConfigs(r) => r
            .responses
            .into_iter()
            .map(|r| {
                (
                    r.resource_name.to_string(),
                    r.error_code,
                    r.error_message.map(|m| m.to_string()),
                )
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    out
}

#[test]
fn topic_configs_are_altered_like_kafka_and_survive_a_restart() {
    use kafka_protocol::ResponseError as E;
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    let mut server = TestServer::start("alter", 1, &[]);
    let mut c = Client::connect(server.addr);
    let Response::CreateTopics(r) = c.call(7, create("events", 1, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0);
    let keys = ["retention.ms", "cleanup.policy"];
    let defaults = topic_configs(&mut c, "events", &keys);
    assert_eq!(
        defaults,
        [
            ("retention.ms".into(), Some("604800000".into()), 5),
            ("cleanup.policy".into(), Some("delete".into()), 5)
        ]
    );

    // validate_only changes nothing.
    let ok = alter_results(c.call(
        1,
        incremental(
            &[(2, "events", &[("retention.ms", SET, Some("1000"))])],
            true,
        ),
    ));
    assert_eq!(ok, [("events".into(), 0, None)]);
    assert_eq!(topic_configs(&mut c, "events", &keys), defaults);

    // SET and APPEND to a list; DescribeConfigs shows the topic's own values.
    let ok = alter_results(c.call(
        1,
        incremental(
            &[(
                2,
                "events",
                &[
                    ("retention.ms", SET, Some("1000")),
                    ("cleanup.policy", APPEND, Some("compact")),
                ],
            )],
            false,
        ),
    ));
    assert_eq!(ok, [("events".into(), 0, None)]);
    assert_eq!(
        topic_configs(&mut c, "events", &keys),
        [
            ("retention.ms".into(), Some("1000".into()), 1),
            ("cleanup.policy".into(), Some("delete,compact".into()), 1)
        ]
    );

    // Kafka's errors, one per resource.
    let got = alter_results(c.call(
        1,
        incremental(
            &[
                (2, "events", &[("retention.ms", APPEND, Some("5"))]),
                (2, "ghost", &[("retention.ms", SET, Some("5"))]),
                (2, "dup", &[("retention.ms", SET, Some("5"))]),
                (2, "dup", &[("retention.ms", SET, Some("6"))]),
            ],
            false,
        ),
    ));
    assert_eq!(
        got[0],
        (
            "events".into(),
            E::InvalidConfig.code(),
            Some("Can't APPEND to key retention.ms because its type is not LIST.".into())
        )
    );
    assert_eq!(
        got[1],
        (
            "ghost".into(),
            E::UnknownTopicOrPartition.code(),
            Some("The topic 'ghost' does not exist.".into())
        )
    );
    assert_eq!(got[2].1, E::InvalidRequest.code());
    assert_eq!(got[3].1, E::InvalidRequest.code());
    let got = alter_results(c.call(
        1,
        incremental(
            &[
                (2, "ghost", &[("no.such.config", SET, Some("1"))]),
                (2, "events", &[("retention.ms", SET, Some("soon"))]),
                (2, "events2", &[("retention.ms", SET, None)]),
            ],
            false,
        ),
    ));
    // Validation comes before the existence check, as in Kafka.
    assert_eq!(
        got[0],
        (
            "ghost".into(),
            E::InvalidConfig.code(),
            Some("Unknown topic config name: no.such.config".into())
        )
    );
    assert_eq!(got[1].1, E::InvalidConfig.code());
    assert!(
        got[1]
            .2
            .as_deref()
            .unwrap()
            .starts_with("Invalid value soon for configuration retention.ms"),
        "{got:?}"
    );
    assert_eq!(got[2].1, E::InvalidRequest.code());
    // Broker configs are read at start-up: refused with a message.
    let got = alter_results(c.call(
        1,
        incremental(&[(4, "1", &[("log.retention.ms", SET, Some("1"))])], false),
    ));
    assert_eq!(got[0].1, E::InvalidRequest.code());
    assert!(got[0].2.is_some());

    // DELETE goes back to the default; the legacy AlterConfigs replaces the whole set.
    let ok = alter_results(c.call(
        1,
        incremental(&[(2, "events", &[("retention.ms", DELETE, None)])], false),
    ));
    assert_eq!(ok, [("events".into(), 0, None)]);
    assert_eq!(topic_configs(&mut c, "events", &["retention.ms"])[0].2, 5);
    let legacy = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("events"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("2000")))]),
    ]);
    assert_eq!(
        alter_results(c.call(1, Request::AlterConfigs(legacy))),
        [("events".into(), 0, None)]
    );
    let after = topic_configs(&mut c, "events", &keys);
    assert_eq!(
        after,
        [
            ("retention.ms".into(), Some("2000".into()), 1),
            ("cleanup.policy".into(), Some("delete".into()), 5)
        ]
    );
    drop(c);

    // Durable.
    let dir = server.dir.clone();
    server.stop();
    let server2 = TestServer::start_in(dir, 1, &[]);
    let mut c = Client::connect(server2.addr);
    assert_eq!(topic_configs(&mut c, "events", &keys), after);
}

/// ElectLeaders on a single node (it leads every partition, each one's only replica), as
/// Kafka's controller answers (`ReplicationControlManager.electLeaders`): a named partition
/// needs no election (no message, as Kafka sends none), an unknown topic or partition is named
/// in the error, a null list answers every topic with no partition (those needing no election
/// are left out), an unclean election with a leader needs none either, and an unknown election
/// type is refused as a whole.
#[test]
fn elect_leaders_on_a_single_node() {
    use elect_leaders_request::TopicPartitions;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const INVALID_REQUEST: i16 = 42;
    const ELECTION_NOT_NEEDED: i16 = 84;
    let server = TestServer::start("elect", 2, &[]);
    let mut c = Client::connect(server.addr);
    let Response::CreateTopics(r) = c.call(5, create("votes", 3, 1)) else {
        panic!()
    };
    assert_eq!(r.topics[0].error_code, 0);
    let named = |topic: &str, partitions: Vec<i32>| {
        TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(partitions)
    };
    let elect = |c: &mut Client, v: i16, kind: i8, list: Option<Vec<TopicPartitions>>| {
        let req = ElectLeadersRequest::default()
            .with_election_type(kind)
            .with_topic_partitions(list)
            .with_timeout_ms(5_000);
        let Response::ElectLeaders(r) = c.call(v, Request::ElectLeaders(req)) else {
            panic!()
        };
        r
    };
    for v in 0..=2 {
        let r = elect(
            &mut c,
            v,
            0,
            Some(vec![named("votes", vec![0, 2, 7]), named("ghost", vec![0])]),
        );
        assert_eq!(r.error_code, 0, "v{v}");
        assert_eq!(r.replica_election_results.len(), 2);
        let votes = &r.replica_election_results[0];
        assert_eq!(votes.topic.as_str(), "votes");
        let codes: Vec<(i32, i16, Option<String>)> = votes
            .partition_result
            .iter()
            .map(|p| {
                (
                    p.partition_id,
                    p.error_code,
                    p.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        assert_eq!(
            codes,
            [
                (0, ELECTION_NOT_NEEDED, None),
                (2, ELECTION_NOT_NEEDED, None),
                (
                    7,
                    UNKNOWN_TOPIC_OR_PARTITION,
                    Some("No such partition as votes-7".into())
                ),
            ],
            "v{v}"
        );
        let ghost = &r.replica_election_results[1].partition_result[0];
        assert_eq!(ghost.error_code, UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(
            ghost.error_message.as_ref().map(|m| m.as_str()),
            Some("No such topic as ghost")
        );
    }
    // Every partition: every topic listed (the offsets topic too), none needing an election.
    let r = elect(&mut c, 2, 0, None);
    let mut topics: Vec<&str> = r
        .replica_election_results
        .iter()
        .map(|t| t.topic.as_str())
        .collect();
    topics.sort_unstable();
    assert_eq!(topics, ["__consumer_offsets", "votes"]);
    assert!(r
        .replica_election_results
        .iter()
        .all(|t| t.partition_result.is_empty()));
    // Unclean, with a leader: not needed.
    let r = elect(&mut c, 1, 1, Some(vec![named("votes", vec![1])]));
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code,
        ELECTION_NOT_NEEDED
    );
    // An unknown election type: refused as a whole.
    let r = elect(&mut c, 2, 9, Some(vec![named("votes", vec![1])]));
    assert_eq!(r.error_code, INVALID_REQUEST);
    let p = &r.replica_election_results[0].partition_result[0];
    assert_eq!(p.error_code, INVALID_REQUEST);
    assert_eq!(
        p.error_message.as_ref().map(|m| m.as_str()),
        Some("Unknown election type 9")
    );
    // An empty list: nothing to do.
    let r = elect(&mut c, 2, 0, Some(Vec::new()));
    assert_eq!((r.error_code, r.replica_election_results.len()), (0, 0));
}
